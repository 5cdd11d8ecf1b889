"""The generation pages through Django's test client: hub, wizard (with its estimate step),
job page, outputs table and actions; permissions, CSRF and escaping of model text."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from evalplatform.accounts.models import Notification
from evalplatform.accounts.roles import Role
from generation.models import GenerationJob, GenerationOutput, JobStatus
from tests.helpers.accounts import browser
from tests.helpers.generation import job_body, wizard_form

JOBS = "/api/generation/jobs"


def create(api, user, setup, **extra):
    response = api(user).post(JOBS, job_body(setup, **extra), format="json")
    assert response.status_code == 201, response.json()
    return GenerationJob.objects.get(pk=response.json()["id"])


@pytest.mark.django_db
def test_pages_need_a_signed_in_user(api, creator, setup):
    job = create(api, creator, setup)
    for url in ("/generation/", "/generation/new", f"/generation/jobs/{job.pk}"):
        response = Client().get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert Client().get("/generation").status_code == 302


@pytest.mark.django_db
def test_the_hub_lists_the_teams_jobs_only(api, creator, setup, team_b, member):
    mine = create(api, creator, setup, name="Mine")
    api(creator).post(f"{JOBS}/{mine.pk}/start")
    other = GenerationJob.objects.create(
        team=team_b, owner=member(team_b, Role.ADMIN), name="Theirs", source_kind="manual"
    )
    page = browser(creator).get("/generation/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Mine" in html and "Theirs" not in html
    assert f'data-socket="/ws/generation/jobs/{mine.pk}"' in html  # live progress card
    assert 'href="/generation/new"' in html
    assert f"/generation/jobs/{other.pk}" not in html


@pytest.mark.django_db
def test_a_viewer_sees_jobs_but_cannot_create_or_act(api, creator, setup, team_a, member):
    job = create(api, creator, setup)
    viewer = browser(member(team_a, Role.VIEWER))
    assert 'href="/generation/new"' not in viewer.get("/generation/").content.decode()
    assert viewer.get("/generation/new").status_code == 404
    page = viewer.get(f"/generation/jobs/{job.pk}").content.decode()
    assert "/start" not in page and "export/csv" not in page
    response = viewer.post(f"/generation/jobs/{job.pk}/start")
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.status == JobStatus.CREATED
    follow = viewer.get(response["Location"]).content.decode()
    assert "You do not have permission" in follow


@pytest.mark.django_db
def test_the_wizard_creates_and_starts_a_job(creator, setup):
    client = browser(creator)
    page = client.get("/generation/new").content.decode()
    for version in setup["prompts"]:
        assert f'value="{version.pk}"' in page
    assert "mock-small" not in page or "Small" in page
    assert "$1 / 1M input · $2 / 1M output" in page  # prices without trailing zeros
    response = client.post("/generation/new", wizard_form(setup, start="1"))
    assert response.status_code == 302
    job = GenerationJob.objects.get(name="From the wizard")
    assert response["Location"] == f"/generation/jobs/{job.pk}"
    # 2 items x 2 prompts x 2 models x 2 repetitions x 2 temperatures
    assert job.total_cells == 32 and job.temperatures == [0.0, 1.0]
    assert (job.repetitions, job.max_tokens, job.concurrency) == (2, 50, 4)
    assert job.status == JobStatus.RUNNING
    assert sorted(job.items.values_list("item_id", flat=True)) == ["w0", "w1"]


@pytest.mark.django_db
def test_wizard_errors_name_the_step_and_create_nothing(creator, setup):
    client = browser(creator)
    response = client.post(
        "/generation/new", wizard_form(setup, prompt_versions=[], temperatures="0, 3")
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert 'data-open-step="2"' in html  # the first step with an error opens
    assert "Choose at least one prompt template." in html
    assert "A list of temperatures, each from 0 to 2 or null (send none)." in html
    assert "From the wizard" in html  # what was typed is kept
    assert not GenerationJob.objects.exists()

    missing = client.post(
        "/generation/new", wizard_form(setup, content=json.dumps([{"id": "x1", "other": 1}]))
    )
    assert missing.status_code == 400
    assert "item x1" in missing.content.decode() and not GenerationJob.objects.exists()


@pytest.mark.django_db
def test_the_estimate_step_shows_size_and_cost(creator, setup):
    fragment = browser(creator).post("/generation/new/estimate", wizard_form(setup))
    html = fragment.content.decode()
    assert fragment.status_code == 200
    assert "<strong>32 outputs</strong>" in html
    assert "(2 \u00d7 2 \u00d7 2 \u00d7 2 \u00d7 2)" in html  # items x prompts x ...
    assert "Estimated total" in html and "Small" in html and "Large" in html
    bad = browser(creator).post("/generation/new/estimate", wizard_form(setup, models=[]))
    assert "Not ready yet" in bad.content.decode()
    assert not GenerationJob.objects.exists()


@pytest.mark.django_db
def test_model_text_is_escaped_on_the_job_page(api, creator, setup):
    job = create(api, creator, setup)
    payload = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    output = job.outputs.order_by("pk").last()  # the first page shows the newest
    GenerationOutput.objects.filter(pk=output.pk).update(
        status="completed", content=payload, error_message=payload
    )
    html = browser(creator).get(f"/generation/jobs/{job.pk}").content.decode()
    assert payload not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    scripts = re.findall(r"<script[^>]*>", html)
    assert all("src=" in tag for tag in scripts)  # only the project's own files


@pytest.mark.django_db
def test_the_job_page_filters_and_pages_outputs(api, creator, setup):
    job = create(api, creator, setup)
    client = browser(creator)
    page = client.get(f"/generation/jobs/{job.pk}").content.decode()
    assert "Page 1/2" in page  # 48 outputs, 25 a page
    assert f'data-socket="/ws/generation/jobs/{job.pk}"' in page
    first = job.outputs.order_by("pk").last()
    GenerationOutput.objects.filter(pk=first.pk).update(status="failed", error_message="boom")
    table = client.get(f"/generation/jobs/{job.pk}/outputs?status=failed").content.decode()
    assert table.count('<tr class="output-') == 1 and "boom" in table
    by_item = client.get(f"/generation/jobs/{job.pk}/outputs?item=s1").content.decode()
    assert by_item.count('<tr class="output-') == 16


@pytest.mark.django_db
def test_actions_change_the_job_and_need_csrf(api, creator, setup):
    job = create(api, creator, setup)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(creator)
    assert strict.post(f"/generation/jobs/{job.pk}/start").status_code == 403
    job.refresh_from_db()
    assert job.status == JobStatus.CREATED

    client = browser(creator)
    assert client.post(f"/generation/jobs/{job.pk}/start").status_code == 302
    client.post(f"/generation/jobs/{job.pk}/pause")
    job.refresh_from_db()
    assert job.status == JobStatus.PAUSED
    client.post(f"/generation/jobs/{job.pk}/budget", {"budget_usd": "2.5"})
    job.refresh_from_db()
    assert str(job.budget_usd) == "2.5000"
    bad = client.post(f"/generation/jobs/{job.pk}/budget", {"budget_usd": "-1"}, follow=True)
    assert "An amount in USD" in bad.content.decode()
    client.post(f"/generation/jobs/{job.pk}/cancel")
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    illegal = client.post(f"/generation/jobs/{job.pk}/pause", follow=True)
    assert "A cancelled job cannot pause" in illegal.content.decode()
    assert client.post(f"/generation/jobs/{job.pk}/explode").status_code == 404
    assert client.post(f"/generation/jobs/{job.pk}/delete").status_code == 302
    assert not GenerationJob.objects.filter(pk=job.pk).exists()


@pytest.mark.django_db
def test_another_teams_job_page_is_404(api, creator, setup, team_b, member):
    job = create(api, creator, setup)
    outsider = browser(member(team_b, Role.ADMIN))
    assert outsider.get(f"/generation/jobs/{job.pk}").status_code == 404
    assert outsider.get(f"/generation/jobs/{job.pk}/outputs").status_code == 404
    assert outsider.post(f"/generation/jobs/{job.pk}/cancel").status_code == 404


@pytest.mark.django_db
def test_notifications_show_on_home_and_can_be_dismissed(creator, team_a, member):
    other = member(team_a, Role.CREATOR)
    mine = Notification.objects.create(user=creator, team=team_a, kind="k", message="Yours")
    Notification.objects.create(user=other, team=team_a, kind="k", message="Not yours")
    client = browser(creator)
    home = client.get("/").content.decode()
    assert "Yours" in home and "Not yours" not in home
    response = client.post(
        "/notifications/dismiss", {"id": mine.pk, "next": "https://evil.example/"}
    )
    assert response["Location"] == "/"
    mine.refresh_from_db()
    assert mine.read_at is not None
    assert Notification.objects.filter(user=other, read_at__isnull=True).count() == 1


@pytest.mark.django_db(transaction=True)
def test_judge_runs_are_apart_from_generation_in_the_hub(api, people, team_a):
    from evalplatform.providers.models import LLMModel, ProviderConnection
    from tests.helpers.evaluations import create_judge, make_scenario, run

    connection = ProviderConnection.objects.create(team=team_a, name="m", kind="mock")
    model = LLMModel.objects.create(connection=connection, model_id="j", display_name="J")
    scenario = make_scenario(people, team_a, "rating", {"dimensions": [{"name": "q"}]})
    judge = create_judge(api, people["manager"], scenario, name="Rater", model=model.pk)
    job = api(people["manager"]).post(f"/api/judges/{judge['id']}/run", {}, format="json")
    run(job.json()["job"])
    page = browser(people["manager"]).get("/generation/?jobs=team").content.decode()
    others, judging = page.split('<section id="judging">')
    assert "Judge runs and judge files" in judging and "Judge run ·" in judging
    assert f"/generation/jobs/{job.json()['job']}" in judging
    assert f"/generation/jobs/{job.json()['job']}" not in others


@pytest.mark.django_db
def test_the_wizard_opens_on_a_team_with_work(creator, setup, team_a, member):
    """A first admin's empty "Default team" sorts first; the wizard opens on the team with
    prompts, then on the team of the user's latest job."""
    from evalplatform.accounts.models import Membership, Team

    empty = Team.objects.create(name="AAA empty", slug="aaa-empty")
    Membership.objects.create(user=creator, team=empty, role=Role.CREATOR)
    client = browser(creator)
    page = client.get("/generation/new").content.decode()
    assert 'value="team-a" selected' in page
    for version in setup["prompts"]:
        assert f'value="{version.pk}"' in page
    asked = client.get("/generation/new", {"team": "aaa-empty"}).content.decode()
    assert 'value="aaa-empty" selected' in asked


@pytest.mark.django_db
def test_the_wizards_own_errors_come_first_when_the_plan_also_fails(creator, setup):
    client = browser(creator)
    form = wizard_form(
        setup,
        content=json.dumps([{"id": "x1", "other": 1}]),  # lacks {{content}}
        models=[],
        model_configs="not json",
    )
    html = client.post("/generation/new", form).content.decode()
    assert "Extra configurations are a JSON list" in html
    assert not GenerationJob.objects.exists()
