"""Quality control: gold tasks (set by the API or an upload, checked like answers, mixed in at
a seeded rate, indistinguishable to evaluators, left out of the analytics), each evaluator's
quality figures, and excluding an evaluator's judgments from the analytics (reversible,
audited, the stored analyses recomputed)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction

from evalplatform.accounts.models import AuditEvent
from evaluations.models import Assignment, Judgment, RaterExclusion
from scenarios.models import GoldTask, Scenario, Task
from tests.factories import RatingScenarioFactory, TeamFactory
from tests.helpers.accounts import api_client, four_evaluators_people
from tests.helpers.evaluations import EVAL, labeling_scenario, work


def task_of(scenario, n):
    return Task.objects.get(scenario=scenario, item__item_id=f"t{n}")


def truth(view):
    return view["variants"][0]["content"].split()[1]


def unmasked(page):
    """A page without its CSRF token (masked afresh on every response)."""
    page = re.sub(rb'name="csrfmiddlewaretoken" value="[^"]*"', b"", page)
    return re.sub(rb'"X-CSRFToken": "[^"]*"', b"", page)


def put_gold(api, user, scenario, body, **kwargs):
    return api(user).put(f"/api/scenarios/{scenario.pk}/gold", body, format="json", **kwargs)


def analytics(api, user, scenario):
    response = api(user).get(f"/api/scenarios/{scenario.pk}/analytics")
    assert response.status_code == 200, response.json()
    return response.json()


@pytest.mark.django_db
def test_gold_tasks_are_mixed_in_at_the_rate(api, team_a, people_with_four_evaluators):
    scenario = labeling_scenario(
        people_with_four_evaluators["manager"], team_a, tasks=150, overlap=2
    )
    gold = [
        {"task": task_of(scenario, n).pk, "answer": {"labels": ["bad"]}} for n in range(0, 100, 2)
    ]
    response = put_gold(
        api, people_with_four_evaluators["manager"], scenario, {"tasks": gold, "gold_rate": 0.25}
    )
    assert response.status_code == 200, response.json()
    assert response.json()["gold_rate"] == 0.25 and len(response.json()["tasks"]) == 50
    handed = work(api(people_with_four_evaluators["ann"]), scenario, truth, limit=80)
    assert len(handed) == 80
    mixed = Assignment.objects.filter(
        evaluator=people_with_four_evaluators["ann"], task__gold__isnull=False
    ).count()
    # Binomial(80, 0.25): 20 on average; outside 5 to 40 once in about 10^5 seeds.
    assert 5 <= mixed <= 40
    # Gold tasks hold no place: every evaluator may be handed each.
    assert all(t.taken == 0 for t in Task.objects.filter(gold__isnull=False))

    # At rate 0 no gold task is handed, and gold tasks are never handed as ordinary ones.
    put_gold(api, people_with_four_evaluators["manager"], scenario, {"gold_rate": 0})
    assert len(work(api(people_with_four_evaluators["bob"]), scenario, truth)) == 100
    assert not Assignment.objects.filter(
        evaluator=people_with_four_evaluators["bob"], task__gold__isnull=False
    )


@pytest.mark.django_db
def test_a_gold_task_looks_like_any_other(api, client, team_a, people_with_four_evaluators):
    scenario = labeling_scenario(people_with_four_evaluators["manager"], team_a, tasks=4)
    ann = api(people_with_four_evaluators["ann"])
    view = ann.post(f"{EVAL}/scenarios/{scenario.pk}/next")
    assignment = view.json()["assignment"]
    client.force_login(people_with_four_evaluators["ann"])
    page = client.get(f"/evaluate/tasks/{assignment}").content
    task = Assignment.objects.get(pk=assignment).task
    answer = {"labels": ["good"]}
    body = {"tasks": [{"task": task.pk, "answer": answer}], "gold_rate": 0.5}
    assert put_gold(api, people_with_four_evaluators["manager"], scenario, body).status_code == 200
    # The same task, now gold: the evaluator's view and page are byte for byte the same.
    assert ann.get(f"{EVAL}/assignments/{assignment}").content == view.content
    assert unmasked(client.get(f"/evaluate/tasks/{assignment}").content) == unmasked(page)
    assert b"gold" not in view.content.lower() and b"gold" not in page.lower()
    # Its judgment is stored like any other.
    stored = ann.post(
        f"{EVAL}/assignments/{assignment}/submit", {"answer": {"labels": ["bad"]}}, format="json"
    )
    assert stored.status_code == 201
    assert Judgment.objects.get().payload == {"labels": ["bad"], "text": ""}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"gold_rate": 0.6}, "gold_rate"),
        ({"gold_rate": -0.1}, "gold_rate"),
        ({"gold_rate": "NaN"}, "gold_rate"),
        ({"gold_rate": "Infinity"}, "gold_rate"),
        ({"gold_rate": True}, "gold_rate"),
        ({"tasks": [{"task": 10**15, "answer": {"labels": ["good"]}}]}, "tasks.0.task"),
        ({"tasks": [{"task": "@other", "answer": {"labels": ["good"]}}]}, "tasks.0.task"),
        ({"tasks": [{"task": "@t1", "answer": {"labels": ["meh"]}}]}, "tasks.0.answer.labels"),
        ({"tasks": [{"task": "@t1", "answer": "good"}]}, "tasks.0.answer"),
        ({"tasks": [{"task": "@t1"}]}, "tasks.0"),
        (
            {"tasks": [{"task": "@t1", "answer": {"labels": ["good"]}}] * 2},
            "tasks.1.task",
        ),
        ({"tasks": "all"}, "tasks"),
        ({"tasks": [], "rate": 0.1}, "non_field_errors"),
    ],
)
def test_bad_gold_is_400_and_changes_nothing(api, team_a, people_with_four_evaluators, body, field):
    scenario = labeling_scenario(people_with_four_evaluators["manager"], team_a, tasks=4)
    other = labeling_scenario(people_with_four_evaluators["manager"], team_a, tasks=2, name="Other")
    first = {"task": task_of(scenario, 0).pk, "answer": {"labels": ["bad"]}}
    put_gold(
        api, people_with_four_evaluators["manager"], scenario, {"tasks": [first], "gold_rate": 0.1}
    )
    for entry in body.get("tasks", []) if isinstance(body.get("tasks"), list) else []:
        if entry.get("task") == "@t1":
            entry["task"] = task_of(scenario, 1).pk
        elif entry.get("task") == "@other":
            entry["task"] = task_of(other, 1).pk
    response = put_gold(api, people_with_four_evaluators["manager"], scenario, body)
    assert response.status_code == 400, response.json()
    assert field in response.json()["errors"], response.json()
    assert list(GoldTask.objects.values_list("task_id", "answer")) == [
        (first["task"], {"labels": ["bad"], "text": ""})
    ]
    assert Scenario.objects.get(pk=scenario.pk).gold_rate == 0.1


@pytest.mark.django_db
def test_gold_from_an_upload_and_nan_in_json(api, team_a, people_with_four_evaluators):
    scenario = labeling_scenario(people_with_four_evaluators["manager"], team_a, tasks=4)
    lines = "\n".join(
        f'{{"task": {task_of(scenario, n).pk}, "answer": {{"labels": ["good"]}}}}' for n in (1, 3)
    )
    upload = SimpleUploadedFile("gold.jsonl", lines.encode(), content_type="application/jsonl")
    response = api(people_with_four_evaluators["manager"]).put(
        f"/api/scenarios/{scenario.pk}/gold",
        {"file": upload, "gold_rate": "0.2"},
        format="multipart",
    )
    assert response.status_code == 200, response.json()
    assert [t["task"] for t in response.json()["tasks"]] == [
        task_of(scenario, n).pk for n in (1, 3)
    ]
    assert response.json()["gold_rate"] == 0.2
    raw = api(people_with_four_evaluators["manager"]).put(
        f"/api/scenarios/{scenario.pk}/gold",
        '{"gold_rate": NaN}',
        content_type="application/json",
    )
    assert raw.status_code == 400
    assert Scenario.objects.get(pk=scenario.pk).gold_rate == 0.2
    assert (
        api(people_with_four_evaluators["viewer"])
        .get(f"/api/scenarios/{scenario.pk}/gold")
        .status_code
        == 403
    )
    assert (
        api(people_with_four_evaluators["outsider"])
        .get(f"/api/scenarios/{scenario.pk}/gold")
        .status_code
        == 404
    )


# Regular tasks t0..t23 (odd: good, even: bad), gold tasks t24..t29; dan calls t0 and t2
# good; cat calls everything good, quickly.
SLIPS = {"t0", "t2"}
ANSWERS = {
    "ann": (truth, 8000),
    "bob": (truth, 9000),
    "dan": (
        lambda v: "good" if v["variants"][0]["content"].split()[0] in SLIPS else truth(v),
        7000,
    ),
    "cat": (lambda v: "good", 1000),
}


@pytest.fixture(scope="class")
def judged_by_four(django_db_setup, django_db_blocker):
    """Four evaluators answered all 30 tasks (``ANSWERS``), built once for
    ``TestJudgedByFour`` in a transaction rolled back after it: the scenario's and the
    people's ids."""
    with django_db_blocker.unblock(), transaction.atomic():
        team_a = TeamFactory(name="Team A", slug="team-a")
        people_with_four_evaluators = four_evaluators_people(
            team_a, TeamFactory(name="Team B", slug="team-b")
        )
        scenario = labeling_scenario(
            people_with_four_evaluators["manager"], team_a, tasks=30, overlap=4
        )
        for name, (answer, ms) in ANSWERS.items():
            assert (
                len(
                    work(
                        api_client(people_with_four_evaluators[name]), scenario, answer, time_ms=ms
                    )
                )
                == 30
            )
        yield scenario.pk, {name: user.pk for name, user in people_with_four_evaluators.items()}
        transaction.set_rollback(True)


def gold_truth(api, manager, scenario):
    tasks = [
        {"task": task_of(scenario, n).pk, "answer": {"labels": ["good" if n % 2 else "bad"]}}
        for n in range(24, 30)
    ]
    response = put_gold(api, manager, scenario, {"tasks": tasks})
    assert response.status_code == 200, response.json()


def figures(api, user, scenario):
    response = api(user).get(f"/api/scenarios/{scenario.pk}/quality")
    assert response.status_code == 200, response.json()
    return {row["username"]: row for row in response.json()["evaluators"]}


@pytest.mark.django_db
class TestJudgedByFour:
    """The tests of one scenario four evaluators answered (``judged_by_four``), each in a
    transaction rolled back after it, its people and scenario read afresh; t24..t29 become
    gold (``gold_truth``) in the tests that need it."""

    @pytest.fixture
    def people_with_four_evaluators(self, judged_by_four):
        User = get_user_model()
        return {name: User.objects.get(pk=pk) for name, pk in judged_by_four[1].items()}

    @pytest.fixture
    def judged(self, judged_by_four):
        return Scenario.objects.get(pk=judged_by_four[0])

    def test_quality_figures_and_gold_left_out_of_the_analytics(
        self, api, judged, people_with_four_evaluators
    ):
        scenario, manager = judged, people_with_four_evaluators["manager"]
        before = analytics(api, manager, scenario)
        assert before["raters"]["judgments"] == 120
        gold_truth(api, manager, scenario)
        # The stored analysis is stale once tasks are gold: gold judgments are left out.
        after = analytics(api, manager, scenario)
        assert after["raters"]["judgments"] == 96
        assert after["labels"]["overall"] == {"good": 62, "bad": 34}

        rows = figures(api, manager, scenario)
        assert set(rows) == {"ann", "bob", "cat", "dan"}
        ann, cat, dan = rows["ann"], rows["cat"], rows["dan"]
        assert ann["judgments"] == 30 and ann["median_seconds"] == 8.0
        assert ann["gold"] == {"answered": 6, "correct": 6, "accuracy": 1.0}
        # t0 and t2: dan and cat outvote ann and bob, so ann and bob miss the majority there.
        assert ann["agreement"] == {"tasks": 24, "value": round(22 / 24, 4)}
        assert dan["agreement"] == {"tasks": 24, "value": round(22 / 24, 4)}
        assert ann["flags"] == [] and dan["flags"] == [] and rows["bob"]["median_seconds"] == 9.0
        assert cat["gold"] == {"answered": 6, "correct": 3, "accuracy": 0.5}
        assert cat["agreement"] == {"tasks": 24, "value": 0.5}
        assert cat["flags"] == ["straight-lining", "fast"] and cat["median_seconds"] == 1.0
        assert not any(row["excluded"] for row in rows.values())

    def test_excluding_an_evaluator_is_reversible_audited_and_changes_the_analytics(
        self, api, client, judged, people_with_four_evaluators
    ):
        scenario, manager = judged, people_with_four_evaluators["manager"]
        gold_truth(api, manager, scenario)
        assert analytics(api, manager, scenario)["raters"]["by_rater"]["cat"] == 24
        url = f"/api/scenarios/{scenario.pk}/excluded"

        response = api(manager).post(f"{url}/cat", {"reason": "always good"}, format="json")
        assert response.status_code == 201, response.json()
        assert (
            api(manager).post(f"{url}/{people_with_four_evaluators['cat'].pk}").status_code == 200
        )  # already
        excluded = analytics(api, manager, scenario)
        assert "cat" not in excluded["raters"]["by_rater"]
        assert excluded["raters"]["judgments"] == 72
        assert excluded["labels"]["overall"] == {"good": 38, "bad": 34}
        rows = figures(api, manager, scenario)
        assert rows["cat"]["excluded"] and rows["cat"]["judgments"] == 30  # still shown
        # The others agree with the raters kept: on t0 and t2 bob and dan now tie.
        assert rows["ann"]["agreement"] == {"tasks": 22, "value": 1.0}
        assert (
            Judgment.objects.filter(evaluator=people_with_four_evaluators["cat"]).count() == 30
        )  # kept

        assert api(manager).delete(f"{url}/cat").status_code == 204
        assert not RaterExclusion.objects.exists()
        assert analytics(api, manager, scenario)["raters"]["by_rater"]["cat"] == 24
        actions = list(
            AuditEvent.objects.filter(action__startswith="scenario.rater.")
            .order_by("pk")
            .values_list("action", "detail")
        )
        assert actions == [
            ("scenario.rater.exclude", {"evaluator": "cat", "reason": "always good"}),
            ("scenario.rater.include", {"evaluator": "cat"}),
        ]

        # The scenario page: the quality table, and its exclude button.
        client.force_login(manager)
        page = client.get(f"/scenarios/{scenario.pk}").content.decode()
        assert "straight-lining" in page and "Exclude from analytics" in page
        back = client.post(f"/scenarios/{scenario.pk}/excluded/cat", {"action": "exclude"})
        assert (
            back.status_code == 302
            and RaterExclusion.objects.get().evaluator == people_with_four_evaluators["cat"]
        )
        assert "Include in analytics" in client.get(f"/scenarios/{scenario.pk}").content.decode()

    def test_who_sees_quality_and_may_exclude(self, api, judged, people_with_four_evaluators):
        scenario = judged
        url = f"/api/scenarios/{scenario.pk}"
        assert api(people_with_four_evaluators["viewer"]).get(f"{url}/quality").status_code == 403
        assert api(people_with_four_evaluators["outsider"]).get(f"{url}/quality").status_code == 404
        assert api(people_with_four_evaluators["ann"]).get(f"{url}/quality").status_code == 404
        assert (
            api(people_with_four_evaluators["viewer"]).post(f"{url}/excluded/cat").status_code
            == 403
        )
        assert (
            api(people_with_four_evaluators["outsider"]).post(f"{url}/excluded/cat").status_code
            == 404
        )
        assert (
            api(people_with_four_evaluators["manager"]).post(f"{url}/excluded/outsider").status_code
            == 404
        )
        assert (
            api(people_with_four_evaluators["manager"]).post(f"{url}/excluded/nobody").status_code
            == 404
        )
        assert (
            api(people_with_four_evaluators["manager"])
            .post(f"{url}/excluded/{'9' * 5000}")
            .status_code
            == 404
        )
        too_long = api(people_with_four_evaluators["manager"]).post(
            f"{url}/excluded/cat", {"reason": "x" * 501}, format="json"
        )
        assert too_long.status_code == 400 and "reason" in too_long.json()["errors"]
        assert not RaterExclusion.objects.exists()


def rating_scenario(manager, team, tasks):
    rows = [
        {"item_id": f"t{n}", "variant_id": "v", "content": f"t{n} {n % 5 + 1}"}
        for n in range(tasks)
    ]
    return RatingScenarioFactory(
        team=team,
        created_by=manager,
        name="Scores",
        config={"dimensions": [{"name": "quality", "min": 1, "max": 5}]},
        overlap=3,
        rows=rows,
        open_it=True,
    )


def rate(client, scenario, score):
    """Answer every task left with ``score(true score)``, 4 s each."""
    for _ in range(100):
        response = client.post(f"{EVAL}/scenarios/{scenario.pk}/next")
        if response.status_code == 204:
            return
        view = response.json()
        true = int(view["variants"][0]["content"].split()[1])
        stored = client.post(
            f"{EVAL}/assignments/{view['assignment']}/submit",
            {"answer": {"scores": {"quality": score(true)}}, "time_spent_ms": 4000},
            format="json",
        )
        assert stored.status_code == 201, stored.content


@pytest.mark.django_db
def test_rating_quality_is_the_distance_from_the_others_and_flat_scores_are_flagged(
    api, team_a, people_with_four_evaluators
):
    scenario = rating_scenario(people_with_four_evaluators["manager"], team_a, tasks=20)
    rate(api(people_with_four_evaluators["ann"]), scenario, lambda true: true)
    rate(api(people_with_four_evaluators["bob"]), scenario, lambda true: true)
    rate(
        api(people_with_four_evaluators["cat"]), scenario, lambda true: 3
    )  # the same score every time
    rows = figures(api, people_with_four_evaluators["manager"], scenario)
    ann, cat = rows["ann"], rows["cat"]
    assert ann["judgments"] == cat["judgments"] == 20
    # ann against the mean of bob (the truth) and cat (3): |t - (t + 3) / 2| = |t - 3| / 2.
    expected = sum(abs(n % 5 + 1 - 3) / 2 for n in range(20)) / 20
    assert ann["agreement"] == {"tasks": 20, "value": round(expected, 4)}
    # cat against the truth: |3 - t|.
    assert cat["agreement"]["value"] == round(sum(abs(3 - (n % 5 + 1)) for n in range(20)) / 20, 4)
    assert cat["flags"] == ["straight-lining"] and ann["flags"] == []
    assert ann["median_seconds"] == 4.0
