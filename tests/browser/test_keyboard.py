"""The workspace by keyboard only, in a real browser: a rating, a labeling, a ranking and a
comparison task, each chosen with digits or letters and submitted with Enter; Backspace goes
back to the previous task, which is revised; F flags a task (given back, flag recorded);
``?`` shows the legend of the keys; keys do nothing while typing in a text field."""

from __future__ import annotations

import pytest

from evalplatform.accounts.roles import Role
from evaluations.models import Judgment, JudgmentRevision, TaskFlag
from tests.helpers.browser import open_scenario_of, sign_in


def rows(n=2):
    return [
        {
            "item_id": "q1",
            "variant_id": f"v{i}",
            "content": f"Answer number {i}.",
            "model": f"secret-model-{i}",
            "context": {"question": "Which answer is kinder?", "hidden_score": 99},
        }
        for i in range(1, n + 1)
    ]


@pytest.fixture
def scenarios(transactional_db, team_a, member):
    manager = member(team_a, Role.MANAGER)
    member(team_a, Role.EVALUATOR, username="eve")
    rubric = {
        "dimensions": [
            {"name": "clarity", "min": 1, "max": 5},
            {"name": "tone", "min": 1, "max": 3},
        ]
    }
    made = {
        "rating": open_scenario_of(team_a, manager, "rating", rubric, rows(), "K rating"),
        "labeling": open_scenario_of(
            team_a, manager, "labeling", {"labels": ["good", "bad"]}, rows(1), "K labeling"
        ),
        "ranking": open_scenario_of(team_a, manager, "ranking", {}, rows(), "K ranking"),
        "comparison": open_scenario_of(
            team_a, manager, "comparison", {"ties": True, "reverse_share": 0}, rows(), "K pairs"
        ),
    }
    return made


def start(page, scenario):
    page.goto(f"/evaluate/scenarios/{scenario.pk}")
    page.wait_for_url("**/evaluate/tasks/*")
    page.wait_for_load_state()


def test_four_task_types_by_keyboard_with_a_revision_and_a_flag(page, scenarios):
    sign_in(page, "eve")

    # Rating: a digit per dimension, Enter submits.
    start(page, scenarios["rating"])
    legend = page.locator("#shortcuts")
    assert legend.is_hidden()
    page.keyboard.press("?")
    assert legend.is_visible() and "Backspace" in legend.inner_text()
    page.keyboard.press("?")
    assert legend.is_hidden()
    assert page.locator("[data-back]").count() == 0  # nothing answered yet
    first_url = page.url
    page.keyboard.press("4")
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: url != first_url and "/evaluate/tasks/" in url)
    rated = Judgment.objects.get(scenario=scenarios["rating"])
    assert rated.payload["scores"] == {"clarity": 4, "tone": 2}

    # Typing in the comment field: digits and Enter are text there, not shortcuts.
    second_url = page.url
    page.locator('textarea[name="comment"]').focus()
    page.keyboard.type("S 5 ? a")
    page.keyboard.press("Escape")  # leaves the field: keys work again
    assert page.url == second_url
    assert page.locator('textarea[name="comment"]').input_value() == "S 5 ? a"

    # Backspace: back to the previous task, its answer filled in; revise it with Enter.
    page.keyboard.press("Backspace")
    page.wait_for_url(f"**/evaluate/judgments/{rated.pk}")
    assert page.locator('[data-dimension="0"] input[value="4"]').is_checked()
    page.keyboard.press("2")
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    page.wait_for_url("**/evaluate/tasks/*")
    assert page.url == second_url  # back to the task held
    rated.refresh_from_db()
    assert rated.payload["scores"] == {"clarity": 2, "tone": 3}
    assert JudgmentRevision.objects.get(judgment=rated).payload["scores"] == {
        "clarity": 4,
        "tone": 2,
    }

    # F flags the held task: choose the reason and send, by keyboard.
    page.keyboard.press("f")
    reason = page.locator('select[name="reason"]')
    assert reason.evaluate("el => el === document.activeElement")
    page.keyboard.press("ArrowDown")  # broken → unclear
    page.keyboard.press("Tab")
    page.keyboard.type("Two answers in one.")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    page.wait_for_url("**/evaluate/scenarios/*")  # nothing left in the rating: all done
    flag = TaskFlag.objects.get()
    assert (flag.reason, flag.note) == ("unclear", "Two answers in one.")
    assert Judgment.objects.filter(scenario=scenarios["rating"]).count() == 1

    # Labeling: a digit, Enter.
    start(page, scenarios["labeling"])
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    page.wait_for_url("**/evaluate/scenarios/*")
    assert Judgment.objects.get(scenario=scenarios["labeling"]).payload["labels"] == ["bad"]

    # Ranking: a digit selects the second entry, ↑ moves it first, Enter.
    start(page, scenarios["ranking"])
    page.keyboard.press("2")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    page.wait_for_url("**/evaluate/scenarios/*")
    ranked = Judgment.objects.get(scenario=scenarios["ranking"])
    assert ranked.payload["ranking"] == list(reversed(ranked.presented))

    # Comparison: B chooses, Enter submits the choice.
    start(page, scenarios["comparison"])
    page.keyboard.press("Enter")  # nothing chosen yet: nothing sent
    page.keyboard.press("b")
    assert page.locator('button[value="B"]').get_attribute("aria-pressed") == "true"
    assert not Judgment.objects.filter(scenario=scenarios["comparison"]).exists()
    page.keyboard.press("Enter")
    page.wait_for_url("**/evaluate/scenarios/*")
    assert Judgment.objects.get(scenario=scenarios["comparison"]).payload == {"winner": "B"}
