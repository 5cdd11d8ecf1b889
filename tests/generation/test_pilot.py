"""The estimate calibrated by a pilot: a few real cells (mock and fake provider over HTTP)
give the typical (median) and high (p90) reply lengths."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from evalplatform.accounts.roles import Role
from generation.models import GenerationJob
from tests.factories import ConnectionFactory, LLMModelFactory, PromptTemplateFactory, make_version
from tests.helpers.generation import job_body

ESTIMATE = "/api/generation/estimate"


@pytest.mark.django_db(transaction=True)
def test_a_pilot_calibrates_the_estimate(api, creator, setup):
    body = job_body(setup, max_tokens=2000)
    plain = api(creator).post(ESTIMATE, body, format="json").json()
    piloted = api(creator).post(ESTIMATE, body | {"pilot": 4}, format="json").json()
    pilot = piloted["pilot"]
    assert pilot["cells"] == 4 and float(pilot["cost_usd"]) > 0 and pilot["errors"] == []
    for plain_model, model in zip(plain["per_model"], piloted["per_model"], strict=True):
        measured = pilot["per_model"][model["label"]]
        assert measured["samples"] == 2 and measured["failed"] == 0
        assert model["calibrated"] is True and plain_model["calibrated"] is False
        # The mock bills prompts by the same rule as the estimate: no input correction.
        assert measured["input_factor"] == 1.0
        assert model["output_tokens"] == round(measured["output_tokens_p50"]) * model["requests"]
        assert model["output_tokens_high"] == (
            round(measured["output_tokens_p90"]) * model["requests"]
        )
        assert model["output_tokens"] != plain_model["output_tokens"]  # 300 a reply assumed
    assert not GenerationJob.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_pilot_makes_exactly_its_calls(api, creator, team_a, fake_provider):
    connection = ConnectionFactory(team=team_a, kind="anthropic", base_url=fake_provider.url)
    model = LLMModelFactory(connection=connection, model_id="claude-fake")
    version = make_version(PromptTemplateFactory(team=team_a), [("", "Say {{content}}")])
    items = [{"id": str(n), "content": f"thing {n}"} for n in range(10)]
    body = {
        "team": "team-a",
        "name": "Pilot",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.0, 1.0],
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
    }
    for bad in (21, -1, "many", True):
        response = api(creator).post(ESTIMATE, body | {"pilot": bad}, format="json")
        assert response.status_code == 400 and "pilot" in response.json()["errors"]
    assert fake_provider.app.requests == 0
    response = api(creator).post(ESTIMATE, body | {"pilot": 5}, format="json")
    assert response.status_code == 200
    assert fake_provider.app.requests == 5
    assert response.json()["pilot"]["per_model"]["Claude-Fake"]["samples"] == 5


@pytest.mark.django_db(transaction=True)
def test_the_wizard_offers_the_pilot(creator, setup):
    browser = Client()
    browser.force_login(creator)
    form = {
        "team": "team-a",
        "source_type": "manual",
        "content": json.dumps([{"id": "a", "content": "x"}]),
        "prompt_versions": [str(p.pk) for p in setup["prompts"]],
        "models": [str(m.pk) for m in setup["models"]],
        "name": "Piloted",
        "temperatures": "0.7",
    }
    plain = browser.post("/generation/new/estimate", form).content.decode()
    assert "Calibrate with a pilot of 5 cells" in plain and "Calibrated by" not in plain
    assert "(≤ $" in plain  # replies at max tokens: an upper bound
    piloted = browser.post("/generation/new/estimate", form | {"pilot": "5"}).content.decode()
    assert "Calibrated by a pilot of" in piloted
    # The pilot's 90th percentile is a likely figure, never shown as a bound.
    assert "(≤ $" not in piloted and "(high ~$" in piloted and "not a bound" in piloted


@pytest.mark.django_db(transaction=True)
def test_a_pilot_makes_at_most_its_cells_calls_whatever_the_models_and_is_audited(
    api, creator, member, team_a, fake_provider
):
    connection = ConnectionFactory(team=team_a, kind="anthropic", base_url=fake_provider.url)
    model = LLMModelFactory(connection=connection, model_id="claude-fake")
    version = make_version(PromptTemplateFactory(team=team_a), [("", "Say {{content}}")])
    # Failed calls are reported, never retried: they count as calls all the same.
    items = [{"id": "ok", "content": "thing"}, {"id": "bad", "content": "x [[fault:503]]"}]
    configurations = [
        {"model": model.pk, "label": f"Config {n}", "params": {"top_k": n + 1}} for n in range(30)
    ]
    body = {
        "team": "team-a",
        "name": "Many models",
        "prompt_versions": [version.pk],
        "models": configurations,
        "temperatures": [0.0],
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
    }
    response = api(creator).post(ESTIMATE, body | {"pilot": 20}, format="json")
    assert response.status_code == 200, response.json()
    pilot = response.json()["pilot"]
    assert fake_provider.app.requests == 20 == pilot["cells"]
    assert sum(m["samples"] for m in pilot["per_model"].values()) == 20
    assert len(pilot["per_model"]) == 20  # a seeded choice of 20 of the 30, one call each
    failed = sum(m["failed"] for m in pilot["per_model"].values())
    assert 0 < failed < 20
    admin = member(team_a, Role.ADMIN)
    (entry,) = api(admin).get("/api/audit", {"action": "generation.pilot"}).json()["results"]
    assert entry["username"] == creator.username and entry["team"] == "team-a"
    assert entry["detail"]["calls"] == 20 and entry["detail"]["failed"] == failed
    assert entry["detail"]["cost_usd"] == pilot["cost_usd"] and float(pilot["cost_usd"]) > 0
    assert entry["detail"]["models"] == sorted(pilot["per_model"])
    # A plain estimate calls nothing and audits nothing.
    assert api(creator).post(ESTIMATE, body, format="json").status_code == 200
    assert fake_provider.app.requests == 20
    assert len(api(admin).get("/api/audit", {"action": "generation.pilot"}).json()["results"]) == 1
