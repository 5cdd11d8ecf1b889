"""A manager in a real browser adjudicates a disagreement: from the scenario page to its
review, the disputed task first, the two evaluators' answers and rationales side by side
(a script in a rationale shows as text), the adjudicated answer chosen and saved."""

from __future__ import annotations

import json

import pytest

from evalplatform.accounts.roles import Role
from evaluations.models import Adjudication, Judgment, RaterKind
from scenarios import services
from tests.helpers.browser import sign_in_as

SCRIPT = "<script>alert('xss')</script> A is kinder"


@pytest.fixture
def disputed(transactional_db, team_a, member):
    manager = member(team_a, Role.MANAGER, username="mara")
    rows = [
        {"item_id": item, "variant_id": v, "content": f"{item} answer {v}", "model": f"m-{v}"}
        for item in ("q1", "q2")
        for v in ("v1", "v2")
    ]
    scenario = services.scenario_from_upload(
        user=manager,
        team=team_a,
        data={
            "name": "Kindness (pairs)",
            "type": "comparison",
            "config": {"ties": True},
            "format": "jsonl",
        },
        raw="\n".join(json.dumps(r) for r in rows).encode(),
    )
    scenario = services.scenario_open(user=manager, scenario=scenario)
    first, second = scenario.tasks.order_by("position")
    ann = member(team_a, Role.EVALUATOR, username="ann")
    bob = member(team_a, Role.EVALUATOR, username="bob")
    for who, task, winner, why in (
        (ann, first, "A", SCRIPT),
        (bob, first, "B", "B answers the question"),
        (ann, second, "A", ""),
        (bob, second, "A", ""),
    ):
        Judgment.objects.create(
            scenario=scenario,
            task=task,
            rater_kind=RaterKind.HUMAN,
            evaluator=who,
            presented=[task.variant_a_id, task.variant_b_id],
            payload={"winner": winner},
            rationale=why,
        )
    return scenario, first


def test_a_manager_adjudicates_a_disagreement(page, disputed):
    scenario, task = disputed
    page.goto(f"/login/?next=/scenarios/{scenario.pk}")
    page.get_by_label("Username").fill("mara")
    page.get_by_label("Password").fill("pw-Secret-123")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"**/scenarios/{scenario.pk}")
    page.get_by_role("link", name="Review").click()
    page.wait_for_url(f"**/scenarios/{scenario.pk}/review")

    # The disputed task comes first; open it.
    rows = page.locator("details.review-task")
    assert rows.count() == 2
    first = rows.nth(0)
    assert first.get_attribute("id") == f"task-{task.pk}"
    assert first.locator(".disagreement").inner_text() == "0.50"
    first.locator(":scope > summary").click()
    answers = first.locator("table.answers")
    assert answers.is_visible()
    text = answers.inner_text()
    assert "ann" in text and "bob" in text and "B answers the question" in text
    assert SCRIPT in text  # the rationale's script is text, not an element
    assert page.locator("script", has_text="alert('xss')").count() == 0

    adjudicate = first.locator("form.adjudicate")
    adjudicate.get_by_label("B is better").check()
    adjudicate.get_by_label("Note (optional)").fill("B answers what was asked.")
    adjudicate.get_by_role("button", name="Set the adjudicated answer").click()
    page.wait_for_url(f"**/review#task-{task.pk}")
    # One number for the task everywhere: the message names it as its row does.
    number = page.locator(f"#task-{task.pk} > summary strong").inner_text()
    assert number == f"Task {task.position}"
    assert page.get_by_text(f"{number}: adjudicated answer saved").is_visible()
    assert "adjudicated: B" in page.locator(f"#task-{task.pk} > summary").inner_text()

    adjudication = Adjudication.objects.get()
    assert adjudication.task_id == task.pk
    assert adjudication.payload == {"winner": "B"}
    assert adjudication.note == "B answers what was asked."
    assert adjudication.set_by.username == "mara"


def test_a_manager_marks_gold_from_the_review(page, disputed):
    from playwright.sync_api import expect

    from scenarios.models import GoldTask

    scenario, task = disputed
    sign_in_as(page, "mara")
    page.goto(f"/scenarios/{scenario.pk}/review")
    row = page.locator(f"#task-{task.pk}")
    row.locator(":scope > summary").click()
    row.get_by_text("Quality control: gold answer, attention check").click()
    gold = row.locator("form.gold")
    gold.get_by_label("A is better").check()
    gold.get_by_role("button", name="Make this task gold with this answer").click()
    page.wait_for_url(f"**/review#task-{task.pk}")
    expect(page.get_by_text(f"Task {task.position}: gold answer saved")).to_be_visible()
    assert GoldTask.objects.get().answer == {"winner": "A"}
