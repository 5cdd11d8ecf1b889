"""An evaluator in a real browser: signs in, completes a comparison with the keyboard (B, then
Enter) and a rating with the mouse; the judgments are stored with the presented order. A
script / img onerror payload in model output renders as inert text; a blind scenario's page
source holds no model or prompt name."""

from __future__ import annotations

import json

import pytest

from evalplatform.accounts.roles import Role
from evaluations.models import Judgment
from scenarios import services
from scenarios.models import Task

PAYLOAD = "<script>alert('xss')</script><img src=x onerror=\"alert('img')\"> **bold**"


def _scenario(team, manager, kind, config, rows, name):
    raw = "\n".join(json.dumps(row) for row in rows).encode()
    scenario = services.scenario_from_upload(
        user=manager,
        team=team,
        data={"name": name, "type": kind, "config": config, "format": "jsonl"},
        raw=raw,
    )
    return services.scenario_open(user=manager, scenario=scenario)


@pytest.fixture
def setup(transactional_db, team_a, member):
    manager = member(team_a, Role.MANAGER)
    evaluator = member(team_a, Role.EVALUATOR, username="eve")
    rows = [
        {
            "item_id": "q1",
            "variant_id": "v1",
            "content": PAYLOAD,
            "model": "secret-model-alpha",
            "prompt": "secret-prompt-one",
            "context": {"question": "Which answer is kinder?"},
        },
        {
            "item_id": "q1",
            "variant_id": "v2",
            "content": "A plain *answer*.",
            "model": "secret-model-beta",
            "prompt": "secret-prompt-two",
            "context": {"question": "Which answer is kinder?"},
        },
    ]
    comparison = _scenario(team_a, manager, "comparison", {"ties": True}, rows, "Kindness (pairs)")
    rubric = {
        "dimensions": [
            {"name": "clarity", "min": 1, "max": 5, "anchors": {"1": "Muddled", "5": "Clear"}},
            {"name": "tone", "min": 1, "max": 3},
        ]
    }
    rating = _scenario(team_a, manager, "rating", rubric, rows[:1], "Clarity (rubric)")
    return {"evaluator": evaluator, "comparison": comparison, "rating": rating}


def sign_in(page, username):
    page.goto("/login/?next=/evaluate/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-Secret-123")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/evaluate/")


def test_an_evaluator_answers_a_comparison_by_keyboard_and_a_rating_by_mouse(page, setup):
    sign_in(page, "eve")
    page.locator("article", has_text="Kindness (pairs)").get_by_role("link", name="Start").click()
    page.wait_for_url("**/evaluate/tasks/*")
    html = page.content()
    # Blind: neither the page nor its source names a model or a prompt.
    for secret in ("secret-model", "secret-prompt"):
        assert secret not in html
    # The payload is shown as text; nothing of it became an element or ran.
    assert page.locator(".md script").count() == 0
    assert page.locator(".md img").count() == 0
    assert page.get_by_text("<script>alert('xss')</script>", exact=False).count() == 1
    assert page.locator(".md strong", has_text="bold").count() == 1

    page.wait_for_timeout(300)  # some time spent on the task
    page.keyboard.press("b")  # chooses B; Enter submits the choice
    page.keyboard.press("Enter")
    page.wait_for_url("**/evaluate/scenarios/*")  # the queue's "all done" page (1 task)
    judgment = Judgment.objects.get(scenario=setup["comparison"])
    task = Task.objects.get(pk=judgment.task_id)
    assert judgment.payload == {"winner": "B"}
    assert judgment.presented == [task.variant_a_id, task.variant_b_id]
    assert judgment.evaluator == setup["evaluator"] and judgment.time_spent_ms >= 300

    page.goto("/evaluate/")
    page.locator("article", has_text="Clarity (rubric)").get_by_role("link", name="Start").click()
    page.wait_for_url("**/evaluate/tasks/*")
    assert "secret-model" not in page.content()
    page.get_by_label("4").first.check()
    page.locator('[data-dimension="1"]').get_by_label("2").check()
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url("**/evaluate/scenarios/*")
    rated = Judgment.objects.get(scenario=setup["rating"])
    assert rated.payload["scores"] == {"clarity": 4, "tone": 2}
    assert rated.presented == [Task.objects.get(pk=rated.task_id).variant_a_id]
