"""Declared inputs (``evalplatform.inputs``): one declaration per use case that the API's
schema, the services and the pages share. The schema documents each use case's fields from
it; a service reports every problem at once, in the declared order; a page names a field
as its form does; an id past the largest key is refused, naming the field."""

from __future__ import annotations

import pytest
from django.test import Client

from evaluations.models import LLMJudge
from generation.models import GenerationJob
from tests.helpers.evaluations import make_scenario
from tests.helpers.fuzz import generated_schema
from tests.helpers.generation import job_body, wizard_form

JOBS = "/api/generation/jobs"
HUGE = 2**70  # past the largest key: a driver refuses to bind it


def _request_schema(schema, path, method="post"):
    content = schema["paths"][path][method]["requestBody"]["content"]["application/json"]
    ref = content["schema"]["$ref"].rsplit("/", 1)[-1]
    return schema["components"]["schemas"][ref]


def test_the_schema_documents_each_use_cases_fields_from_its_input():
    schema = generated_schema()
    job = _request_schema(schema, JOBS)["properties"]
    assert {"name", "mode", "models", "prompt_versions", "source", "start"} <= set(job)
    assert (job["repetitions"]["minimum"], job["repetitions"]["maximum"]) == (1, 100)
    assert job["prompt_versions"]["items"]["maximum"] == 2**63 - 1
    judge = _request_schema(schema, "/api/scenarios/{id}/judges")["properties"]
    assert (judge["repetitions"]["minimum"], judge["repetitions"]["maximum"]) == (1, 20)
    assert {"reply_format", "swap", "prompt_version"} <= set(judge)
    plan = _request_schema(schema, "/api/scenarios/{id}/plan")["properties"]
    assert plan["k"]["maximum"] == 99 and plan["tau"]["minimum"] == 0.5
    batch = _request_schema(schema, "/v1/batches")["properties"]
    assert {"input_file_id", "endpoint", "completion_window", "budget_usd", "judge"} <= set(batch)
    scenario = _request_schema(schema, "/api/generation/jobs/{id}/to-scenario")["properties"]
    assert {"overlap", "context_fields", "outputs", "preview"} <= set(scenario)


@pytest.mark.django_db
def test_a_job_request_names_every_problem_in_the_declared_order(api, creator, setup):
    body = job_body(
        setup,
        name="",
        repetitions=0,
        budget_usd="-1",
        prompt_versions=[HUGE],
        models=[{"model": HUGE}],
        source="not an object",
    )
    response = api(creator).post(JOBS, body, format="json")
    assert response.status_code == 400
    assert list(response.json()["errors"]) == [
        "name",
        "repetitions",
        "budget_usd",
        "prompt_versions",
        "models[0]",
        "source",
    ]
    assert not GenerationJob.objects.exists()


@pytest.mark.django_db
def test_ids_past_the_largest_key_are_refused_by_name(api, people, team_a, setup):
    mock_model = setup["models"][0]
    scenario = make_scenario(people, team_a, "comparison", {})
    judges = f"/api/scenarios/{scenario.pk}/judges"
    manager = api(people["manager"])
    for body, key in (
        ({"name": "J", "model": HUGE}, "model"),
        ({"name": "J", "model": mock_model.pk, "prompt_version": HUGE}, "prompt_version"),
        ({"name": "J", "model": True}, "model"),
    ):
        response = manager.post(judges, body, format="json")
        assert response.status_code == 400, body
        assert key in response.json()["errors"], body
    assert not LLMJudge.objects.exists()


@pytest.mark.django_db
def test_a_judge_update_keeps_what_it_leaves_out_and_lists_errors_in_order(
    api, people, team_a, setup
):
    mock_model = setup["models"][0]
    scenario = make_scenario(people, team_a, "comparison", {})
    manager = api(people["manager"])
    made = manager.post(
        f"/api/scenarios/{scenario.pk}/judges",
        {"name": "J", "model": mock_model.pk, "temperatures": [0.0, 1.0], "repetitions": 3},
        format="json",
    ).json()
    changed = manager.patch(f"/api/judges/{made['id']}", {"name": "K"}, format="json")
    assert changed.status_code == 200
    assert (changed.json()["temperatures"], changed.json()["repetitions"]) == ([0.0, 1.0], 3)
    bad = manager.patch(
        f"/api/judges/{made['id']}",
        {"mode": "bulk", "repetitions": 99, "name": "", "params": []},
        format="json",
    )
    assert bad.status_code == 400
    assert list(bad.json()["errors"]) == ["name", "params", "repetitions", "mode"]


@pytest.mark.django_db
def test_the_wizard_names_fields_as_its_form_does(creator, setup):
    client = Client()
    client.force_login(creator)
    page = client.post(
        "/generation/new", wizard_form(setup, max_tokens="0", budget_usd="-2", name="")
    )
    assert page.status_code == 400
    text = page.content.decode()
    for label in ("Job name", "Max tokens", "Budget limit (USD)"):
        assert f"<strong>{label}</strong>:" in text, label
    assert "<code>budget_usd</code>" not in text


@pytest.mark.django_db
def test_the_judge_form_and_the_plan_page_name_fields_as_their_forms_do(people, team_a, setup):
    mock_model = setup["models"][0]
    scenario = make_scenario(people, team_a, "comparison", {})
    client = Client()
    client.force_login(people["manager"])
    added = client.post(
        f"/scenarios/{scenario.pk}/judges",
        {"name": "J", "model": str(mock_model.pk), "budget_usd": "-1", "mode": "live"},
        follow=True,
    )
    assert "Budget (US$): An amount in USD" in added.content.decode()
    planned = client.post(
        f"/scenarios/{scenario.pk}/plan", {"question": "ranking", "budget_usd": "-5"}
    )
    assert planned.status_code == 400
    assert "<strong>Money (USD)</strong>" in planned.content.decode()
