"""Temperature left out: ``temperatures: [null]`` slots and ``params: {"temperature": null}``
model configurations send no temperature, from the plan to the request the provider gets,
through the outputs, statistics, exports, the estimate, the wizard and to-scenario."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from generation.models import GenerationJob, GenerationOutput
from tests.factories import ConnectionFactory, LLMModelFactory, PromptTemplateFactory, make_version
from tests.helpers.generation import create_job, job_body, run

JOBS = "/api/generation/jobs"
ESTIMATE = "/api/generation/estimate"


def sent_temperatures(fake_provider, kind):
    """The temperature of every request the fake provider received (None: none sent)."""
    found = []
    for _, raw in fake_provider.app.bodies:
        body = json.loads(raw)
        holder = body.get("generationConfig", {}) if kind == "gemini" else body
        found.append(holder.get("temperature"))
        if holder.get("temperature") is None:
            assert "temperature" not in holder, body  # left out, not sent as null
    return found


@pytest.mark.django_db
def test_a_null_slot_beside_a_number_is_its_own_cell_set(api, creator, setup):
    job = create_job(api, creator, job_body(setup, temperatures=[None, 0.7], repetitions=1))
    assert job.temperatures == [None, 0.7]
    assert job.total_cells == 3 * 2 * 2 * 2
    cells = job.outputs.order_by("pk")
    assert cells.filter(temperature__isnull=True).count() == 12
    assert cells.filter(temperature=0.7).count() == 12
    ids = set(cells.values_list("custom_id", flat=True))
    assert len(ids) == 24
    none_ids = cells.filter(temperature__isnull=True).values_list("custom_id", flat=True)
    assert all(i.endswith("-tn") for i in none_ids)
    assert all(
        i.endswith("-t1") for i in cells.filter(temperature=0.7).values_list("custom_id", flat=True)
    )
    listed = api(creator).get(f"{JOBS}/{job.pk}/outputs", {"page_size": 100}).json()["results"]
    assert {o["temperature"] for o in listed} == {None, 0.7}
    assert api(creator).get(f"{JOBS}/{job.pk}").json()["temperatures"] == [None, 0.7]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("temperatures", "message"),
    [
        ([], "Give at least one temperature; use [null] to send none."),
        ([None, None], "Each temperature once."),
        ([0.7, 0.7], "Each temperature once."),
        ([2.5], "each from 0 to 2 or null"),
        ([1e20], "each from 0 to 2 or null"),
        ([-0.1], "each from 0 to 2 or null"),
        (["0.7"], "each from 0 to 2 or null"),
        ([True], "each from 0 to 2 or null"),
        ([[None]], "each from 0 to 2 or null"),
        ("none", "each from 0 to 2 or null"),
    ],
)
def test_bad_temperatures_are_400s_that_create_nothing(api, creator, setup, temperatures, message):
    response = api(creator).post(JOBS, job_body(setup, temperatures=temperatures), format="json")
    assert response.status_code == 400
    assert message in response.json()["errors"]["temperatures"][0]
    assert not GenerationJob.objects.exists()


@pytest.mark.django_db
def test_nan_is_refused(api, creator, setup):
    body = json.dumps(job_body(setup)).replace(
        '"temperatures": [0.0, 1.0]', '"temperatures": [NaN]'
    )
    response = api(creator).post(JOBS, body, content_type="application/json")
    assert response.status_code == 400
    assert not GenerationJob.objects.exists()


@pytest.mark.django_db
def test_a_configuration_that_sends_no_temperature_has_one_slot(api, creator, setup):
    small, large = setup["models"]
    models = [
        small.pk,
        {"model": large.pk, "label": "Large, no temp", "params": {"temperature": None}},
    ]
    body = job_body(setup, models=models, temperatures=[0.0, 1.0], repetitions=1)
    estimate = api(creator).post(ESTIMATE, body, format="json").json()
    by_label = {m["label"]: m for m in estimate["per_model"]}
    assert by_label["Large, no temp"]["temperatures"] == [None]
    assert by_label["Large, no temp"]["temperature_labels"] == ["no temperature sent"]
    assert by_label["Small"]["temperatures"] == [0.0, 1.0]
    # 3 items x 2 prompts x (Small at 2 temperatures + Large at none)
    assert estimate["cells"] == 18
    assert by_label["Large, no temp"]["requests"] == 6 and by_label["Small"]["requests"] == 12
    job = create_job(api, creator, body)
    assert job.total_cells == 18 == job.outputs.count()
    large_cells = job.outputs.filter(model_config__label="Large, no temp")
    assert large_cells.count() == 6 and not large_cells.filter(temperature__isnull=False).exists()
    assert api(creator).get(f"{JOBS}/{job.pk}").json()["models"][1]["params"] == {
        "temperature": None
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    "params", [{"temperature": 0.5}, {"generationConfig": {"temperature": None}}]
)
def test_a_temperature_in_parameters_is_still_the_jobs(api, creator, setup, params):
    models = [{"model": setup["models"][0].pk, "params": params}]
    response = api(creator).post(JOBS, job_body(setup, models=models), format="json")
    assert response.status_code == 400
    assert (
        '"temperature": null sends no temperature'
        in response.json()["errors"]["models[0].params"][0]
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
def test_no_temperature_key_reaches_the_provider(api, creator, team_a, fake_provider, kind):
    connection = ConnectionFactory(team=team_a, kind=kind, base_url=fake_provider.url)
    model = LLMModelFactory(connection=connection, model_id=f"{kind}-fake")
    version = make_version(PromptTemplateFactory(team=team_a), [("", "Say {{content}}")])
    body = {
        "team": "team-a",
        "name": "No temperature",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [None, 0.7],
        "concurrency": 1,
        "source": {"type": "manual", "format": "json", "content": '[{"id": "a", "content": "hi"}]'},
    }
    job = create_job(api, creator, body)
    api(creator).post(f"{JOBS}/{job.pk}/start")
    run(job.pk)
    job.refresh_from_db()
    assert job.completed_cells == 2, list(job.outputs.values("error_message"))
    assert sorted(sent_temperatures(fake_provider, kind), key=str) == [0.7, None]


@pytest.mark.django_db(transaction=True)
def test_a_no_temperature_configuration_sends_none(api, creator, team_a, fake_provider):
    connection = ConnectionFactory(team=team_a, kind="anthropic", base_url=fake_provider.url)
    model = LLMModelFactory(connection=connection, model_id="claude-thinking")
    version = make_version(PromptTemplateFactory(team=team_a), [("", "Say {{content}}")])
    body = {
        "team": "team-a",
        "name": "Thinking",
        "prompt_versions": [version.pk],
        "models": [{"model": model.pk, "params": {"temperature": None}}],
        "temperatures": [0.0, 1.0],
        "source": {"type": "manual", "format": "json", "content": '[{"id": "a", "content": "hi"}]'},
    }
    job = create_job(api, creator, body)
    api(creator).post(f"{JOBS}/{job.pk}/start")
    run(job.pk)
    assert GenerationOutput.objects.get(job=job).status == "completed"
    assert sent_temperatures(fake_provider, "anthropic") == [None]


@pytest.mark.django_db(transaction=True)
def test_outputs_statistics_exports_and_scenarios_keep_no_temperature(api, creator, setup):
    job = create_job(api, creator, job_body(setup, temperatures=[None, 1.0], repetitions=1))
    api(creator).post(f"{JOBS}/{job.pk}/start")
    run(job.pk)
    stats = api(creator).get(f"{JOBS}/{job.pk}/statistics").json()
    assert {k: v["completed"] for k, v in stats["by_temperature"].items()} == {"none": 12, "1": 12}
    exported = json.loads(
        b"".join(api(creator).post(f"{JOBS}/{job.pk}/export/json").streaming_content)
    )
    assert exported["job"]["config"]["temperatures"] == [None, 1.0]
    page = Client()
    page.force_login(creator)
    html = page.get(f"/generation/jobs/{job.pk}").content.decode()
    assert "none (provider default), 1.0" in html
    # To a scenario: the cells without temperature are outputs like the others, and can be
    # chosen alone.
    convert = f"/api/generation/jobs/{job.pk}/to-scenario"
    body = {"name": "No temperature only", "type": "ranking", "outputs": {"temperatures": [None]}}
    response = api(creator).post(convert, body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["variants"] == 12
    response = api(creator).post(convert, {"name": "All", "type": "ranking"}, format="json")
    assert response.status_code == 201 and response.json()["variants"] == 24


@pytest.mark.django_db
def test_the_wizard_offers_no_temperature(creator, setup):
    from tests.helpers.accounts import browser
    from tests.helpers.generation import wizard_form

    client = browser(creator)
    page = client.get("/generation/new").content.decode()
    assert 'name="no_temperature"' in page and "none (provider default)" in page
    form = wizard_form(setup, temperatures="", no_temperature="1", repetitions="1")
    fragment = client.post("/generation/new/estimate", form).content.decode()
    assert "1 temperature (none (provider default))" in fragment
    assert "no temperature sent" in fragment
    mixed = client.post("/generation/new/estimate", form | {"temperatures": "0.5"}).content.decode()
    assert "(none (provider default), 0.5)" in mixed
    response = client.post("/generation/new", form)
    assert response.status_code == 302
    job = GenerationJob.objects.get()
    assert job.temperatures == [None]
    assert not job.outputs.filter(temperature__isnull=False).exists()
