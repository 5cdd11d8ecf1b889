"""Attention checks: made by a manager from an instruction and the answer it asks for
(checked by the scenario's type), shown with the instruction in place of the content, mixed
in at their own seeded rate apart from gold, reported per evaluator (passed, failed, pass
rate, a flag) and left out of the analytics, the review and the judges."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from evalplatform.accounts.models import AuditEvent
from evaluations.judges.services import task_ids_to_judge
from evaluations.models import Assignment, Judgment, LLMJudge
from scenarios import services as scenario_services
from scenarios.models import GoldKind, GoldTask, Task
from tests.helpers.evaluations import (
    EVAL,
    create_judge,
    labeling_scenario,
    make_scenario,
    post_file,
    work,
)

CHECK = "This is an attention check: choose the label bad."


def add_check(api, user, scenario, **body):
    return api(user).post(f"/api/scenarios/{scenario.pk}/attention", body, format="json")


def attentive(view):
    """Ann: "bad" where told so, else what the text says."""
    content = view["variants"][0]["content"]
    return "bad" if content == CHECK else content.split()[1]


@pytest.mark.django_db
def test_checks_are_mixed_in_reported_and_left_out_of_the_analytics(
    api, client, team_a, people_with_ann_and_bob, mock_judge
):
    manager = people_with_ann_and_bob["manager"]
    scenario = labeling_scenario(manager, team_a, tasks=20, overlap=2)
    first = Task.objects.filter(scenario=scenario).order_by("position").first()
    made = add_check(api, manager, scenario, instruction=CHECK, answer={"labels": ["bad"]})
    assert made.status_code == 201, made.json()
    assert made.json() | {"task": 0} == {
        "task": 0,
        "position": 20,  # after the scenario's tasks, reusing the first one's item
        "instruction": CHECK,
        "answer": {"labels": ["bad"], "text": ""},  # stored as an evaluator's answer is
    }
    again = add_check(
        api, manager, scenario, instruction=CHECK, answer={"labels": ["bad"]}, task=first.pk
    )
    assert again.status_code == 201, again.json()
    rate = api(manager).put(
        f"/api/scenarios/{scenario.pk}/attention", {"attention_rate": 0.5}, format="json"
    )
    assert rate.status_code == 200 and rate.json()["attention_rate"] == 0.5
    assert len(rate.json()["checks"]) == 2
    # Gold's contract is unchanged: checks are not gold.
    gold = api(manager).get(f"/api/scenarios/{scenario.pk}/gold").json()
    assert gold == {"gold_rate": 0.0, "tasks": []}
    # A check is no place of the work: the queue counts the 20 tasks.
    ann, bob = api(people_with_ann_and_bob["ann"]), api(people_with_ann_and_bob["bob"])
    assert ann.get(f"{EVAL}/scenarios").json()[0]["total"] == 20

    answered = work(ann, scenario, attentive)
    bob_seen = work(bob, scenario, lambda view: "good")
    shown = [v for v in answered if v["variants"][0]["content"] == CHECK]
    # Binomial draws at 0.5 over 21+ requests: both checks come (fewer fails about once in
    # 10^5 seeds); each is handed once and holds no place.
    assert len(shown) == 2 and len(answered) == 22 and len(bob_seen) == 22
    checks = Task.objects.filter(gold__kind=GoldKind.ATTENTION)
    assert all(t.taken == 0 for t in checks)
    assert Assignment.objects.filter(task__in=checks).count() == 4

    response = api(manager).get(f"/api/scenarios/{scenario.pk}/quality")
    assert response.status_code == 200
    body = response.json()
    assert body["attention_checks"] == 2 and body["gold_tasks"] == 0
    rows = {row["username"]: row for row in body["evaluators"]}
    assert (
        rows["ann"]["attention_passed"],
        rows["ann"]["attention_failed"],
        rows["ann"]["attention_pass_rate"],
    ) == (2, 0, 1.0)
    assert "failed-attention" not in rows["ann"]["flags"]
    assert rows["ann"]["gold"] == {"answered": 0, "correct": 0, "accuracy": None}
    assert (
        rows["bob"]["attention_passed"],
        rows["bob"]["attention_failed"],
        rows["bob"]["attention_pass_rate"],
    ) == (0, 2, 0.0)
    assert "failed-attention" in rows["bob"]["flags"]
    # Ann and Bob agree on the "good" half of the real tasks only: the checks do not count.
    assert rows["ann"]["agreement"] == {"tasks": 20, "value": 0.5}

    # Left out of the analytics, the review and the judges.
    analysis = api(manager).get(f"/api/scenarios/{scenario.pk}/analytics").json()
    assert analysis["raters"]["judgments"] == 40
    assert analysis["labels"]["overall"] == {"good": 30, "bad": 10}
    review = api(manager).get(f"/api/scenarios/{scenario.pk}/review").json()
    assert review["count"] == 20
    judge = create_judge(api, manager, scenario, name="Judge", model=mock_judge.pk)
    unjudged = task_ids_to_judge(LLMJudge.objects.get(pk=judge["id"]), "unjudged")
    assert len(unjudged) == 20 and set(unjudged).isdisjoint(c.pk for c in checks)

    # An answered check stays (its answers are the evaluators' record).
    refused = api(manager).delete(f"/api/scenarios/{scenario.pk}/attention/{checks[0].pk}")
    assert refused.status_code == 409 and checks.count() == 2

    # The scenario page shows the checks and the figures.
    client.force_login(manager)
    page = client.get(f"/scenarios/{scenario.pk}").content.decode()
    assert "Attention checks" in page and "0 passed, 2 failed" in page
    assert "failed-attention" in page


@pytest.mark.django_db
def test_a_check_shows_its_instruction_in_every_variant(api, team_a, people_with_ann_and_bob):
    scenario = make_scenario(people_with_ann_and_bob, team_a, "comparison", {"ties": True})
    scenario = scenario_services.scenario_open(
        user=people_with_ann_and_bob["manager"], scenario=scenario
    )
    api(people_with_ann_and_bob["manager"]).put(
        f"/api/scenarios/{scenario.pk}/attention", {"attention_rate": 0.5}, format="json"
    )
    asked = {"winner": "B"}
    instruction = "This is an attention check: choose B."
    made = add_check(
        api, people_with_ann_and_bob["manager"], scenario, instruction=instruction, answer=asked
    )
    assert made.status_code == 201, made.json()
    ann = api(people_with_ann_and_bob["ann"])
    for _ in range(20):
        view = ann.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()
        if view["variants"][0]["content"] == instruction:
            break
        ann.post(
            f"{EVAL}/assignments/{view['assignment']}/submit", {"answer": asked}, format="json"
        )
    else:
        pytest.fail("no attention check was handed")
    assert [v["content"] for v in view["variants"]] == [instruction, instruction]
    stored = ann.post(
        f"{EVAL}/assignments/{view['assignment']}/submit", {"answer": asked}, format="json"
    )
    assert stored.status_code == 201
    rows = (
        api(people_with_ann_and_bob["manager"]).get(f"/api/scenarios/{scenario.pk}/quality").json()
    )
    assert rows["evaluators"][0]["attention_passed"] == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"answer": {"labels": ["bad"]}}, "instruction"),
        ({"instruction": "   ", "answer": {"labels": ["bad"]}}, "instruction"),
        ({"instruction": "x" * 2001, "answer": {"labels": ["bad"]}}, "instruction"),
        ({"instruction": CHECK}, "answer"),
        ({"instruction": CHECK, "answer": {"labels": ["ugly"]}}, "answer.labels"),
        ({"instruction": CHECK, "answer": {"winner": "A"}}, "answer"),
        ({"instruction": CHECK, "answer": {"labels": ["bad"]}, "task": 10**9}, "task"),
        ({"instruction": CHECK, "answer": {"labels": ["bad"]}, "task": "t1"}, "task"),
        ({"instruction": CHECK, "answer": {"labels": ["bad"]}, "colour": 1}, "non_field_errors"),
    ],
)
def test_bad_checks_are_400_and_write_nothing(api, team_a, people_with_ann_and_bob, body, field):
    scenario = labeling_scenario(people_with_ann_and_bob["manager"], team_a, tasks=3)
    response = add_check(api, people_with_ann_and_bob["manager"], scenario, **body)
    assert response.status_code == 400, response.json()
    errors = response.json()["errors"]
    assert any(key == field or key.startswith(f"{field}.") for key in errors), errors
    assert not GoldTask.objects.exists() and Task.objects.count() == 3
    bad_rate = api(people_with_ann_and_bob["manager"]).put(
        f"/api/scenarios/{scenario.pk}/attention", {"attention_rate": 0.9}, format="json"
    )
    assert bad_rate.status_code == 400 and "attention_rate" in bad_rate.json()["errors"]


@pytest.mark.django_db
def test_who_may_manage_checks_and_removing_one(api, client, team_a, people_with_ann_and_bob):
    scenario = labeling_scenario(people_with_ann_and_bob["manager"], team_a, tasks=3)
    url = f"/api/scenarios/{scenario.pk}/attention"
    body = {"instruction": CHECK, "answer": {"labels": ["bad"]}}
    assert api(people_with_ann_and_bob["outsider"]).get(url).status_code == 404
    assert (
        api(people_with_ann_and_bob["outsider"]).post(url, body, format="json").status_code == 404
    )
    assert api(people_with_ann_and_bob["ann"]).post(url, body, format="json").status_code == 404
    assert api(people_with_ann_and_bob["viewer"]).post(url, body, format="json").status_code == 403
    assert not GoldTask.objects.exists()

    # The page adds one (the answer as JSON text) and removes it while nobody answered it.
    client.force_login(people_with_ann_and_bob["manager"])
    page = f"/scenarios/{scenario.pk}/attention"
    added = client.post(
        page, {"action": "add", "instruction": CHECK, "answer": '{"labels":["bad"]}'}
    )
    assert added.status_code == 302
    check = GoldTask.objects.get(kind=GoldKind.ATTENTION)
    bad = client.post(page, {"action": "add", "instruction": CHECK, "answer": "{"}, follow=True)
    assert "The expected answer as JSON" in bad.content.decode()
    assert (
        api(people_with_ann_and_bob["outsider"]).delete(f"{url}/{check.task_id}").status_code == 404
    )
    assert (
        api(people_with_ann_and_bob["manager"]).delete(f"{url}/{check.task_id}").status_code == 204
    )
    assert not GoldTask.objects.exists() and Task.objects.count() == 3
    assert (
        api(people_with_ann_and_bob["manager"]).delete(f"{url}/{check.task_id}").status_code == 404
    )
    assert list(
        AuditEvent.objects.filter(action__startswith="scenario.attention")
        .order_by("pk")
        .values_list("action", flat=True)
    ) == ["scenario.attention.add", "scenario.attention.remove"]


@pytest.mark.django_db
def test_a_check_held_or_badly_made_changes_nothing_and_imports_skip_checks(
    api, client, team_a, people_with_ann_and_bob
):
    manager = people_with_ann_and_bob["manager"]
    scenario = labeling_scenario(manager, team_a, tasks=1)
    real = Task.objects.get(scenario=scenario)
    made = add_check(api, manager, scenario, instruction=CHECK, answer={"labels": ["bad"]})
    assert made.status_code == 201, made.json()
    check = GoldTask.objects.get(kind=GoldKind.ATTENTION)

    # Imported answers go to the real task, never to the check that repeats its variant.
    line = {"item_id": "t0", "variant": "v", "rater": "panel", "labels": "bad"}
    imported = post_file(api, manager, scenario, "labels.jsonl", json.dumps(line))
    assert imported.status_code == 201, imported.json()
    assert list(Judgment.objects.values_list("task_id", flat=True)) == [real.pk]

    # A check an evaluator holds stays: removing it would take their answer with it.
    Assignment.objects.create(
        task=check.task,
        scenario=scenario,
        evaluator=people_with_ann_and_bob["ann"],
        expires_at=timezone.now() + timedelta(hours=1),
    )
    held = api(manager).delete(f"/api/scenarios/{scenario.pk}/attention/{check.task_id}")
    assert held.status_code == 409 and GoldTask.objects.filter(pk=check.pk).exists()

    # An answer nested past any depth is a form error on the page, not a server error.
    client.force_login(manager)
    deep = client.post(
        f"/scenarios/{scenario.pk}/attention",
        {"action": "add", "instruction": CHECK, "answer": "[" * 10_000},
        follow=True,
    )
    assert deep.status_code == 200 and "Nested more than" in deep.content.decode()
    assert GoldTask.objects.count() == 1
