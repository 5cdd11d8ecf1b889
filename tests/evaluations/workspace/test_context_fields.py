"""Blind mode shows only the context fields the manager chose (``context_fields``): set on
create (upload and conversion, where it defaults to the fields the job's prompts read), on a
draft's PATCH and in the scenario form; the evaluator's task view (API and page) follows it."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from generation.models import GenerationJob, GenerationOutput
from scenarios.models import Scenario
from tests.helpers.generation import job_body

EVAL = "/api/evaluations"
ROW = {
    "item_id": "q1",
    "content": "An answer.",
    "context": {"question": "Why?", "quality_score": 13, "source": "internal"},
}


def upload(api, user, **fields):
    rows = [ROW | {"variant_id": "v1"}, ROW | {"variant_id": "v2"}]
    body = {
        "team": "team-a",
        "name": "Blind",
        "type": "rating",
        "config": {"dimensions": [{"name": "Clarity", "min": 1, "max": 5}]},
        "format": "jsonl",
        "content": "\n".join(json.dumps(r) for r in rows),
    } | fields
    return api(user).post("/api/scenarios", body, format="json")


def first_task(api, user, scenario_id):
    assert api(user).post(f"/api/scenarios/{scenario_id}/open").status_code == 200
    return api(user).post(f"{EVAL}/scenarios/{scenario_id}/next")


@pytest.mark.django_db
def test_a_blind_scenario_shows_only_the_chosen_fields(api, people_manager_and_eve):
    created = upload(
        api, people_manager_and_eve["manager"], context_fields=["source", "question", "absent"]
    )
    assert created.status_code == 201, created.json()
    assert created.json()["context_fields"] == ["source", "question", "absent"]
    task = first_task(api, people_manager_and_eve["manager"], created.json()["id"]).json()
    eve_view = (
        api(people_manager_and_eve["eve"])
        .post(f"{EVAL}/scenarios/{created.json()['id']}/next")
        .json()
    )
    # The chosen fields, in the chosen order; a field the item lacks is left out.
    assert list(eve_view["context"].items()) == [("source", "internal"), ("question", "Why?")]
    assert task["context"] == eve_view["context"]
    client = Client()
    client.force_login(people_manager_and_eve["eve"])
    page = client.get(f"/evaluate/tasks/{eve_view['assignment']}").content.decode()
    assert "Why?" in page and "internal" in page
    assert "quality_score" not in page and ">13<" not in page


@pytest.mark.django_db
def test_null_shows_everything_and_so_does_a_scenario_that_is_not_blind(
    api, people_manager_and_eve
):
    every = upload(api, people_manager_and_eve["manager"]).json()
    assert every["context_fields"] is None
    view = first_task(api, people_manager_and_eve["manager"], every["id"]).json()
    assert view["context"] == ROW["context"]
    seen = upload(
        api,
        people_manager_and_eve["manager"],
        name="Open",
        blind=False,
        context_fields=["question"],
    )
    view = first_task(api, people_manager_and_eve["manager"], seen.json()["id"]).json()
    assert view["context"] == ROW["context"]


@pytest.mark.django_db
def test_bad_context_fields_are_refused(api, people_manager_and_eve):
    for bad in ("question", [1], [""], ["x" * 201], ["a\x00"], ["f"] * 201, {"a": 1}):
        response = upload(api, people_manager_and_eve["manager"], context_fields=bad)
        assert response.status_code == 400, bad
        assert any(key.startswith("context_fields") for key in response.json()["errors"]), bad
    assert not Scenario.objects.exists()
    # Names are trimmed and kept once each, 200 of them are fine.
    ok = upload(
        api,
        people_manager_and_eve["manager"],
        context_fields=[" question ", "question"] + ["f"] * 198,
    )
    assert ok.status_code == 201 and ok.json()["context_fields"] == ["question", "f"]


@pytest.mark.django_db
def test_a_draft_changes_them_by_patch_and_by_the_form(api, people_manager_and_eve):
    scenario = upload(api, people_manager_and_eve["manager"], type="ranking", config={}).json()
    url = f"/api/scenarios/{scenario['id']}"
    patched = api(people_manager_and_eve["manager"]).patch(
        url, {"context_fields": ["question"]}, format="json"
    )
    assert patched.status_code == 200 and patched.json()["context_fields"] == ["question"]
    refused = api(people_manager_and_eve["manager"]).patch(
        url, {"context_fields": [7]}, format="json"
    )
    assert refused.status_code == 400
    assert Scenario.objects.get(pk=scenario["id"]).context_fields == ["question"]

    client = Client()
    client.force_login(people_manager_and_eve["manager"])
    form = client.get(f"/scenarios/{scenario['id']}/edit").content.decode()
    assert 'name="context_fields" value="question"' in form
    fields = {
        "name": "Blind",
        "instructions": "",
        "blind": "1",
        "overlap": "1",
        "context_fields": "question, source",
    }
    saved = client.post(f"/scenarios/{scenario['id']}/edit", fields)
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert Scenario.objects.get(pk=scenario["id"]).context_fields == ["question", "source"]
    client.post(f"/scenarios/{scenario['id']}/edit", fields | {"context_fields": " "})
    assert Scenario.objects.get(pk=scenario["id"]).context_fields is None


@pytest.mark.django_db
def test_a_conversion_shows_what_the_prompts_read(api, creator, setup, people_manager_and_eve):
    items = [
        {"id": f"s{i}", "content": f"Text {i}.", "quality_score": 13 + i, "language": "en"}
        for i in range(2)
    ]
    source = {"type": "manual", "format": "json", "content": json.dumps(items)}
    made = api(creator).post("/api/generation/jobs", job_body(setup, source=source), format="json")
    assert made.status_code == 201, made.json()
    job = GenerationJob.objects.get(pk=made.json()["id"])
    for output in job.outputs.all():
        GenerationOutput.objects.filter(pk=output.pk).update(status="completed", content="out")
    url = f"/api/generation/jobs/{job.pk}/to-scenario"
    body = {"name": "Converted", "type": "ranking"}
    converted = api(creator).post(url, body, format="json")
    assert converted.status_code == 201, converted.json()
    # The prompts read {{content}}, {{input}} (an alias of content) and {{language}}.
    assert converted.json()["context_fields"] == ["content", "language"]
    view = first_task(api, people_manager_and_eve["manager"], converted.json()["id"]).json()
    assert set(view["context"]) == {"content", "language"}
    chosen = api(creator).post(
        url, body | {"name": "All fields", "context_fields": None}, format="json"
    )
    assert chosen.json()["context_fields"] is None
