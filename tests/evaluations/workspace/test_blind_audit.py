"""Blind stays blind everywhere an evaluator can look (issue 35): in a blind comparison of
two models' outputs, with a judge on it, nothing an evaluator can open (the workspace API
before and after answering, when flagging, skipping and revising, and the workspace pages)
names a model, a prompt, a judge or a variant id; the exports, the scenario's API, the job
and its live socket are closed to them."""

from __future__ import annotations

import asyncio
import re

import pytest
from django.test import Client

from evalplatform.providers.models import LLMModel
from scenarios.models import Scenario, Variant
from tests.helpers.evaluations import create_judge
from tests.helpers.live import Socket

EVAL = "/api/evaluations"
pytestmark = pytest.mark.django_db(transaction=True)


def _names(scenario: Scenario, judge_name: str) -> set[str]:
    """Every text that would give away who wrote a variant."""
    names = {judge_name}
    for variant in Variant.objects.filter(scenario=scenario):
        names |= {variant.variant_id, variant.model_label, variant.prompt_label}
        for value in (variant.meta or {}).values():
            if isinstance(value, str):
                names.add(value)
    for model in LLMModel.objects.all():
        names |= {model.model_id, model.display_name}
    names |= {"Summary", "Short"}  # the prompt templates' names
    return {n for n in names if n and len(n) >= 4}


def _leaks(text: str, names: set[str]) -> set[str]:
    return {n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)}


def test_nothing_an_evaluator_opens_names_a_model_prompt_judge_or_variant(
    api, creator, finished_job, people_crew_and_outsider, platform_server
):
    people = people_crew_and_outsider
    job = finished_job
    prompt = job.prompts.order_by("position").first().pk
    made = api(creator).post(
        f"/api/generation/jobs/{job.pk}/to-scenario",
        {"name": "Blind", "type": "comparison", "outputs": {"prompts": [prompt]}},
        format="json",
    )
    assert made.status_code == 201, made.json()
    scenario = Scenario.objects.get(pk=made.json()["id"])
    assert scenario.blind
    manager = people["manager"]
    judge = create_judge(
        api, manager, scenario, name="Strict grader", model=LLMModel.objects.first().pk
    )
    assert api(manager).post(f"/api/scenarios/{scenario.pk}/open").status_code == 200
    names = _names(scenario, judge["name"])
    assert len(names) > 10

    eve = api(people["eve"])
    seen: dict[str, str] = {}

    def look(label: str, response) -> dict:
        assert response.status_code < 400, (label, response.status_code, response.content[:300])
        seen[label] = response.content.decode()
        return response.json() if "json" in response.get("Content-Type", "") else {}

    look("queue", eve.get(f"{EVAL}/scenarios"))
    task = look("next", eve.post(f"{EVAL}/scenarios/{scenario.pk}/next"))
    look("assignment", eve.get(f"{EVAL}/assignments/{task['assignment']}"))
    done = look(
        "submit",
        eve.post(
            f"{EVAL}/assignments/{task['assignment']}/submit",
            {"answer": {"winner": "A"}},
            format="json",
        ),
    )
    second = look("next again", eve.post(f"{EVAL}/scenarios/{scenario.pk}/next"))
    look(
        "flag",
        eve.post(
            f"{EVAL}/assignments/{second['assignment']}/flag",
            {"reason": "unclear"},
            format="json",
        ),
    )
    third = look("next once more", eve.post(f"{EVAL}/scenarios/{scenario.pk}/next"))
    look("skip", eve.post(f"{EVAL}/assignments/{third['assignment']}/skip"))
    look("mine", eve.get(f"{EVAL}/scenarios/{scenario.pk}/mine"))
    look("judgments", eve.get(f"{EVAL}/judgments", {"scenario": scenario.pk}))
    look(
        "revise",
        eve.post(
            f"{EVAL}/judgments/{done['id']}/revise", {"answer": {"winner": "B"}}, format="json"
        ),
    )
    browser = Client()
    browser.force_login(people["eve"])
    for label, path in (
        ("queue page", "/evaluate/"),
        ("task page", f"/evaluate/tasks/{second['assignment']}"),
        ("revise page", f"/evaluate/judgments/{done['id']}"),
    ):
        page = browser.get(path, follow=True)
        assert page.status_code == 200, (label, page.status_code)
        seen[label] = page.content.decode()
    page = browser.get(f"/evaluate/scenarios/{scenario.pk}", follow=True)
    assert page.status_code == 200
    seen["next page"] = page.content.decode()

    leaks = {label: _leaks(text, names) for label, text in seen.items()}
    assert {label: found for label, found in leaks.items() if found} == {}

    for path in (
        f"/api/scenarios/{scenario.pk}/export/csv",
        f"/api/scenarios/{scenario.pk}/export/json",
    ):
        assert eve.post(path).status_code in (403, 404), path
    for path in (
        f"/api/scenarios/{scenario.pk}",
        f"/api/scenarios/{scenario.pk}/tasks",
        f"{EVAL}/scenarios/{scenario.pk}/flags",
        f"/api/generation/jobs/{job.pk}",
        f"/api/generation/jobs/{job.pk}/outputs",
        f"/api/judges/{judge['id']}",
    ):
        assert eve.get(path).status_code in (403, 404), path

    async def socket_code() -> int | None:
        from websockets.exceptions import ConnectionClosed

        try:
            async with Socket(
                platform_server, f"/ws/generation/jobs/{job.pk}", user=people["eve"]
            ) as ws:
                await ws.next()
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None
        return None

    assert asyncio.run(socket_code()) == 4404
