"""The scenario manager pages and the job page's conversion dialog."""

from __future__ import annotations

import pytest
from django.test import Client

from evalplatform.accounts.roles import Role
from scenarios.models import Scenario
from scenarios.types import registry
from tests.helpers.evaluations import open_scenario


def browser(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_job_page_converts_outputs_to_a_scenario(creator, finished_job):
    client = browser(creator)
    url = f"/generation/jobs/{finished_job.pk}/to-scenario"
    page = client.get(f"/generation/jobs/{finished_job.pk}").content.decode()
    # The main path to evaluation: a button at the top of the job, to the scenario form.
    assert f'href="{url}"' in page and "Evaluate these outputs" in page
    form = client.get(url).content.decode()
    # One form for uploads and conversions: every type, each type's own settings.
    assert 'class="card scenario-form"' in form and 'name="file"' not in form
    for kind in registry.every():
        assert f'<option value="{kind.value}"' in form
    for field in ('name="dim-0-name"', 'name="reverse_share"', 'name="ties"', 'name="labels"'):
        assert field in form
    assert f'value="{finished_job.name} evaluation"' in form and "Preview the design" in form
    first_model = finished_job.models.order_by("position").first()
    response = client.post(
        url,
        {
            "name": "From the form",
            "type": "rating",
            "dim-0-name": "Clarity",
            "dim-0-min": "1",
            "dim-0-max": "7",
            "dim-1-name": "Tone",
            "models": [str(first_model.pk)],
            "blind": "1",
            "overlap": "2",
        },
    )
    scenario = Scenario.objects.get(name="From the form")
    assert response["Location"] == f"/scenarios/{scenario.pk}"
    assert scenario.config["dimensions"][0] | {} == {
        "name": "Clarity",
        "description": "",
        "min": 1,
        "max": 7,
        "anchors": {},
        "justification": False,
    }
    assert scenario.config["dimensions"][1]["max"] == 5 and scenario.overlap == 2
    assert scenario.variants.count() == 24 and scenario.blind

    bad = client.post(url, {"name": "From the form", "type": "labeling", "labels": "one"})
    text = bad.content.decode()
    assert bad.status_code == 400
    assert "No scenario was created" in text and "already has a scenario" in text
    assert Scenario.objects.count() == 1


@pytest.mark.django_db
def test_a_refused_conversion_keeps_what_was_typed_and_names_the_fields(creator, finished_job):
    client = browser(creator)
    url = f"/generation/jobs/{finished_job.pk}/to-scenario"
    second = finished_job.models.order_by("position").last()
    typed = {
        "name": "Kept name",
        "type": "rating",
        "instructions": "Read *both* first.",
        "dim-0-name": "Clarity",
        "dim-0-min": "5",
        "dim-0-max": "1",
        "dim-1-name": "Tone",
        "dim-1-anchors": "1=Cold; 5=Warm",
        "models": [str(second.pk)],
        "overlap": "3",
        "seed": "42",
        "context_fields": "content, id",
    }
    refused = client.post(url, typed)
    page = refused.content.decode()
    assert refused.status_code == 400 and not Scenario.objects.exists()
    # The error names the rubric row by its name, in the form's words, with no API path.
    assert "Rubric row “Clarity”: min and max" in page
    assert "config." not in page and "dimensions[" not in page
    # Everything typed is still there, the chosen type first.
    for kept in (
        'value="Kept name"',
        "Read *both* first.",
        'value="Clarity"',
        'value="1=Cold; 5=Warm"',
        'value="3"',
        'value="42"',
        'value="content, id"',
        f'value="{second.pk}" checked',
        '<option value="rating" selected>',
    ):
        assert kept in page, kept
    # Beside the field too: the rubric's problem above the type's settings, the overlap's
    # under its box.
    assert '<p class="field-error" role="alert">Rubric row “Clarity”: min and max' in page
    odd = client.post(url, typed | {"overlap": "999", "dim-0-min": "1", "dim-0-max": "5"})
    beside = odd.content.decode().split('name="overlap"')[1].split("</label>")[0]
    assert 'class="field-error"' in beside and "1 to 50" in beside
    comparison = client.post(url, {"name": "Pairs", "type": "comparison", "sample": "0"})
    assert "How many pairs" in comparison.content.decode()
    assert "sample_count" not in comparison.content.decode()


@pytest.mark.django_db
def test_the_form_previews_its_design_and_filters_the_outputs(
    creator, finished_job, team_b, member
):
    client = browser(creator)
    url = f"/generation/jobs/{finished_job.pk}/to-scenario"
    page = client.get(url).content.decode()
    for field in ('name="sample"', 'name="max_pairs_per_item"', 'name="pairing"', 'name="seed"'):
        assert field in page
    assert 'name="repetitions" value="1"' in page and 'name="temperatures" value="1.0"' in page
    form = {
        "type": "comparison",
        "pairing": "within_item",
        "max_pairs_per_item": "4",
        "sample": "50%",
        "reverse_share": "0.5",
        "repetitions": ["0"],
        "temperatures": ["1.0"],
        "overlap": "2",
        "seed": "9",
    }
    # 3 items x 4 outputs (2 models x 2 prompts at one repetition and temperature): 6 pairs
    # an item, capped at 4, half of the 12 sampled, half of those also reversed.
    preview = client.post(f"{url}/preview", form).content.decode()
    assert "9 tasks" in preview and "12 outputs" in preview and "18 judgments" in preview
    assert not Scenario.objects.exists()
    made = client.post(url, form | {"name": "Previewed"})
    scenario = Scenario.objects.get(name="Previewed")
    assert made.status_code == 302 and scenario.tasks.count() == 9 and scenario.seed == 9
    outputs = {
        (v.source_output.repetition, v.source_output.temperature)
        for v in scenario.variants.select_related("source_output")
    }
    assert outputs == {(0, 1.0)}
    # Blind evaluators see the fields the job's prompts read unless told otherwise.
    assert scenario.context_fields == ["content"]
    for typed, shown in (("content, id", ["content", "id"]), ("*", None)):
        client.post(url, form | {"name": f"Shown {typed}", "context_fields": typed})
        assert Scenario.objects.get(name=f"Shown {typed}").context_fields == shown
    wrong = client.post(f"{url}/preview", form | {"max_pairs_per_item": "0"}).content.decode()
    assert "cannot be made" in wrong and "At most this many pairs of each item" in wrong
    outsider = browser(member(team_b, Role.ADMIN))
    assert outsider.post(f"{url}/preview", form).status_code == 404


@pytest.mark.django_db
def test_the_scenario_pages(api, creator, finished_job, team_a, team_b, member):
    manager = member(team_a, Role.MANAGER)
    scenario = open_scenario(api, creator, finished_job, manager)
    eve = member(team_a, Role.EVALUATOR)
    task = api(eve).post(f"/api/evaluations/scenarios/{scenario.pk}/next").json()
    api(eve).post(
        f"/api/evaluations/assignments/{task['assignment']}/submit",
        {"answer": {"winner": "A"}},
        format="json",
    )
    client = browser(manager)
    listing = client.get("/scenarios/").content.decode()
    assert "Eval" in listing and "<td>18</td><td>1</td>" in listing  # tasks, judgments
    open_scenario(api, creator, finished_job, manager, name="Untouched")
    listing = client.get("/scenarios/").content.decode()
    assert "<td>18</td><td>0</td>" in listing and "None" not in listing
    page = client.get(f"/scenarios/{scenario.pk}").content.decode()
    assert "1 of 18 judgments" in page and eve.username in page and "↓ CSV" in page
    assert "within each item" in page and "within_item" not in page  # words, not codes
    closed = client.post(f"/scenarios/{scenario.pk}/close", follow=True)
    assert "Scenario closed." in closed.content.decode()
    again = client.post(f"/scenarios/{scenario.pk}/close", follow=True)
    assert "cannot close" in again.content.decode()
    assert browser(member(team_b, Role.ADMIN)).get(f"/scenarios/{scenario.pk}").status_code == 404
    assert browser(eve).get(f"/scenarios/{scenario.pk}").status_code == 404  # evaluators: blind
    viewer = browser(member(team_a, Role.VIEWER))
    assert viewer.post(f"/scenarios/{scenario.pk}/open", follow=True).status_code == 200
    assert Scenario.objects.get(pk=scenario.pk).status == "closed"
