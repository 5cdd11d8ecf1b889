"""An evaluator in a real browser: signs in, completes a comparison with the keyboard (B, then
Enter) and a rating with the mouse; the judgments are stored with the presented order. A
script / img onerror payload in model output renders as inert text; a blind scenario's page
source holds no model or prompt name."""

from __future__ import annotations

from evaluations.models import Judgment
from scenarios.models import Task
from tests.helpers.browser import sign_in


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
