"""Evaluators through the API: the next task (resume, never the same task twice, balanced),
blind task views, answers checked by type with the presented order recorded, skip,
expired reservations, overlap never exceeded under concurrent evaluators, permissions."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from evalplatform.accounts.roles import Role
from evaluations.models import Assignment, AssignmentStatus, Judgment
from evaluations.tasks import expire_reservations
from scenarios.models import Task
from tests.helpers.evaluations import EVAL, open_scenario


@pytest.mark.django_db
def test_an_evaluator_works_through_a_blind_comparison(api, creator, finished_job, people_crew):
    scenario = open_scenario(api, creator, finished_job, people_crew["manager"])
    eve = api(people_crew["eve"])
    assert eve.get(f"{EVAL}/scenarios").json() == [
        {
            "id": scenario.pk,
            "team": "team-a",
            "name": "Eval",
            "type": "comparison",
            "done": 0,
            "total": 18,
            "skipped": 0,
            "left": 18,
        }
    ]
    first = eve.post(f"{EVAL}/scenarios/{scenario.pk}/next")
    task = first.json()
    assert [v["key"] for v in task["variants"]] == ["A", "B"]
    # Blind: nothing in what the evaluator gets says which model or prompt made a variant.
    body = first.content.decode()
    for label in scenario.variants.values_list("model_label", "prompt_label"):
        assert label[0] not in body and label[1] not in body
    assert "custom_id" not in body and "j" + str(finished_job.pk) + "-" not in body
    again = eve.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()
    assert again["assignment"] == task["assignment"]  # resume where you left off

    answer = {"answer": {"winner": "A"}, "rationale": "clearer", "time_spent_ms": 4200}
    stored = eve.post(f"{EVAL}/assignments/{task['assignment']}/submit", answer, format="json")
    assert stored.status_code == 201, stored.json()
    judgment = Judgment.objects.get()
    shown = Task.objects.get(assignments__pk=task["assignment"])
    assert judgment.presented == [shown.variant_a_id, shown.variant_b_id]
    assert judgment.payload == {"winner": "A"} and judgment.time_spent_ms == 4200
    assert judgment.evaluator == people_crew["eve"] and judgment.rater_kind == "human"
    assert (
        eve.post(
            f"{EVAL}/assignments/{task['assignment']}/submit", answer, format="json"
        ).status_code
        == 409
    )
    second = eve.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()
    assert second["assignment"] != task["assignment"]
    assert eve.get(f"{EVAL}/scenarios").json()[0]["done"] == 1


@pytest.mark.django_db
def test_overlap_and_balance(api, creator, finished_job, people_crew):
    scenario = open_scenario(api, creator, finished_job, people_crew["manager"], overlap=2)
    evaluators = [api(people_crew[name]) for name in ("eve", "ed", "manager")]
    for client in evaluators:
        while True:
            response = client.post(f"{EVAL}/scenarios/{scenario.pk}/next")
            if response.status_code == 204:
                break
            assignment = response.json()["assignment"]
            client.post(
                f"{EVAL}/assignments/{assignment}/submit",
                {"answer": {"winner": "B"}},
                format="json",
            )
    per_task = Counter(Judgment.objects.values_list("task_id", flat=True))
    assert len(per_task) == 18 and set(per_task.values()) == {2}
    per_rater = Counter(Judgment.objects.values_list("evaluator_id", flat=True))
    assert sum(per_rater.values()) == 36
    assert all(count <= 18 for count in per_rater.values())  # never a task twice


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kind", "config", "answer", "field"),
    [
        ("comparison", {"ties": False}, {"winner": "tie"}, "answer.winner"),
        ("comparison", {}, {"winner": "C"}, "answer.winner"),
        (
            "rating",
            {"dimensions": [{"name": "Q", "min": 1, "max": 5}]},
            {"scores": {"Q": 6}},
            "answer.scores.Q",
        ),
        (
            "rating",
            {"dimensions": [{"name": "Q", "min": 1, "max": 5}]},
            {"scores": {"Q": 3, "Other": 1}},
            "answer.scores",
        ),
        ("ranking", {}, {"ranking": ["A", "A"]}, "answer.ranking"),
        ("labeling", {"labels": ["x", "y"]}, {"labels": ["x", "y"]}, "answer.labels"),
        ("labeling", {"labels": ["x", "y"]}, {"labels": ["x"], "text": "no"}, "answer.text"),
    ],
)
def test_answers_are_checked_against_the_scenario(
    api, creator, finished_job, people_crew, kind, config, answer, field
):
    scenario = open_scenario(
        api, creator, finished_job, people_crew["manager"], type=kind, config=config
    )
    eve = api(people_crew["eve"])
    task = eve.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()
    response = eve.post(
        f"{EVAL}/assignments/{task['assignment']}/submit", {"answer": answer}, format="json"
    )
    assert response.status_code == 400 and field in response.json()["errors"], response.json()
    assert not Judgment.objects.exists()


@pytest.mark.django_db
def test_rankings_and_ratings_are_stored_by_variant(api, creator, finished_job, people_crew):
    ranking = open_scenario(api, creator, finished_job, people_crew["manager"], type="ranking")
    eve = api(people_crew["eve"])
    task = eve.post(f"{EVAL}/scenarios/{ranking.pk}/next").json()
    assert [v["key"] for v in task["variants"]] == ["A", "B", "C", "D"]
    eve.post(
        f"{EVAL}/assignments/{task['assignment']}/submit",
        {"answer": {"ranking": ["C", "A", "D", "B"]}},
        format="json",
    )
    judgment = Judgment.objects.get()
    order = judgment.presented
    assert judgment.payload["ranking"] == [order[2], order[0], order[3], order[1]]


@pytest.mark.django_db
def test_skip_and_expiry_give_places_back(api, creator, finished_job, people_crew):
    scenario = open_scenario(api, creator, finished_job, people_crew["manager"])
    eve, ed = api(people_crew["eve"]), api(people_crew["ed"])
    first = eve.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()["assignment"]
    assert eve.post(f"{EVAL}/assignments/{first}/skip").status_code == 204
    skipped_task = Assignment.objects.get(pk=first).task_id
    offered = set()
    while (response := eve.post(f"{EVAL}/scenarios/{scenario.pk}/next")).status_code == 200:
        assignment = Assignment.objects.get(pk=response.json()["assignment"])
        offered.add(assignment.task_id)
        eve.post(f"{EVAL}/assignments/{assignment.pk}/skip")
    assert skipped_task not in offered and len(offered) == 17

    taken = ed.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()["assignment"]
    past = timezone.now() - timedelta(minutes=1)
    Assignment.objects.filter(pk=taken).update(expires_at=past)
    # Past its time but not swept yet: its evaluator resumes it, renewed.
    resumed = ed.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()
    assert resumed["assignment"] == taken
    assert Assignment.objects.get(pk=taken).expires_at > timezone.now()
    Assignment.objects.filter(pk=taken).update(expires_at=past)
    assert expire_reservations() == 1  # the scheduled sweep
    other = api(people_crew["manager"]).post(f"{EVAL}/scenarios/{scenario.pk}/next").json()
    assert Assignment.objects.get(pk=other["assignment"]).task_id == (
        Assignment.objects.get(pk=taken).task_id  # the abandoned place went to someone else
    )
    late = ed.post(f"{EVAL}/assignments/{taken}/submit", {"answer": {"winner": "A"}}, format="json")
    assert late.status_code == 409 and "expired" in late.json()["detail"]


@pytest.mark.django_db
def test_who_may_evaluate(api, creator, finished_job, people_crew, team_b, member):
    scenario = open_scenario(api, creator, finished_job, people_crew["manager"])
    outsider = api(member(team_b, Role.EVALUATOR))
    assert outsider.post(f"{EVAL}/scenarios/{scenario.pk}/next").status_code == 404
    assert (
        api(people_crew["viewer"]).post(f"{EVAL}/scenarios/{scenario.pk}/next").status_code == 404
    )
    mine = api(people_crew["eve"]).post(f"{EVAL}/scenarios/{scenario.pk}/next").json()["assignment"]
    ed = api(people_crew["ed"])
    assert ed.get(f"{EVAL}/assignments/{mine}").status_code == 404
    answer = {"answer": {"winner": "A"}}
    assert ed.post(f"{EVAL}/assignments/{mine}/submit", answer, format="json").status_code == 404
    api(people_crew["eve"]).post(f"{EVAL}/assignments/{mine}/submit", answer, format="json")
    own = api(people_crew["ed"]).get(f"{EVAL}/judgments?scenario={scenario.pk}").json()
    assert own["count"] == 0  # evaluators see their own judgments only
    everything = api(people_crew["viewer"]).get(f"{EVAL}/judgments?scenario={scenario.pk}").json()
    assert (
        everything["count"] == 1
        and everything["results"][0]["rater"] == people_crew["eve"].username
    )
    assert outsider.get(f"{EVAL}/judgments?scenario={scenario.pk}").status_code == 404
    api(people_crew["manager"]).post(f"/api/scenarios/{scenario.pk}/close")
    assert api(people_crew["ed"]).post(f"{EVAL}/scenarios/{scenario.pk}/next").status_code == 409


@pytest.mark.django_db
def test_an_open_scenario_shows_what_made_each_variant(api, creator, finished_job, people_crew):
    scenario = open_scenario(api, creator, finished_job, people_crew["manager"], blind=False)
    task = api(people_crew["eve"]).post(f"{EVAL}/scenarios/{scenario.pk}/next").json()
    labels = set(scenario.variants.values_list("model_label", flat=True))
    assert {v["model"] for v in task["variants"]} <= labels


@pytest.mark.django_db(transaction=True)
def test_concurrent_evaluators_never_exceed_the_overlap(api, creator, finished_job, team_a, member):
    manager = member(team_a, Role.MANAGER)
    scenario = open_scenario(api, creator, finished_job, manager, overlap=2)
    evaluators = [member(team_a, Role.EVALUATOR) for _ in range(6)]
    failures = []

    def work(user):
        client = api(user)
        try:
            while True:
                response = client.post(f"{EVAL}/scenarios/{scenario.pk}/next")
                if response.status_code == 204:
                    return
                assert response.status_code == 200, response.content
                assignment = response.json()["assignment"]
                stored = client.post(
                    f"{EVAL}/assignments/{assignment}/submit",
                    {"answer": {"winner": "A"}},
                    format="json",
                )
                assert stored.status_code == 201, stored.content
        except Exception as exc:
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(user,)) for user in evaluators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures
    per_task = Counter(Judgment.objects.values_list("task_id", flat=True))
    assert set(per_task.values()) == {2} and len(per_task) == 18
    assert all(t.taken == 2 for t in Task.objects.filter(scenario=scenario))


@pytest.mark.django_db(transaction=True)
def test_one_evaluators_concurrent_requests_make_one_reservation(
    api, creator, finished_job, team_a, member
):
    manager = member(team_a, Role.MANAGER)
    scenario = open_scenario(api, creator, finished_job, manager, overlap=2)
    eve = member(team_a, Role.EVALUATOR)
    barrier = threading.Barrier(6)
    answers, failures = [], []

    def ask():
        client = api(eve)
        try:
            barrier.wait(10)
            response = client.post(f"{EVAL}/scenarios/{scenario.pk}/next")
            assert response.status_code == 200, response.content
            answers.append(response.json()["assignment"])
        except Exception as exc:
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    held = Assignment.objects.filter(evaluator=eve, status=AssignmentStatus.RESERVED)
    assert held.count() == 1 and set(answers) == {held.get().pk}
    assert sum(Task.objects.filter(scenario=scenario).values_list("taken", flat=True)) == 1


@pytest.mark.django_db
def test_judgments_export_unblinded(api, creator, finished_job, people_crew):
    import csv
    import io
    import json

    scenario = open_scenario(api, creator, finished_job, people_crew["manager"])
    eve = api(people_crew["eve"])
    for winner in ("A", "B"):
        task = eve.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()
        eve.post(
            f"{EVAL}/assignments/{task['assignment']}/submit",
            {"answer": {"winner": winner}},
            format="json",
        )
    url = f"/api/scenarios/{scenario.pk}/export"
    assert eve.post(f"{url}/csv").status_code == 404  # evaluators: not theirs to export
    assert api(people_crew["viewer"]).post(f"{url}/csv").status_code == 403
    response = api(creator).post(f"{url}/csv")
    table = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(table) == 2 and table[0]["rater"] == people_crew["eve"].username
    for row in table:
        judgment = Judgment.objects.get(pk=row["judgment_id"])
        a, b = judgment.presented
        first = scenario.variants.get(pk=a)
        assert (row["variant_a"], row["model_a"]) == (first.variant_id, first.model_label)
        shown = {"A": a, "B": b}[row["winner"]]
        assert row["winner_variant"] == scenario.variants.get(pk=shown).variant_id
    body = json.loads(b"".join(api(creator).post(f"{url}/json").streaming_content))
    assert body["scenario"]["type"] == "comparison" and len(body["judgments"]) == 2
    assert {v["model"] for v in body["variants"]} == set(
        scenario.variants.values_list("model_label", flat=True)
    )
    assert api(creator).post(f"{url}/xml").status_code == 404


@pytest.mark.django_db
def test_when_nothing_else_is_left_abandoned_places_are_swept_at_once(
    api, creator, finished_job, people_crew
):
    scenario = open_scenario(api, creator, finished_job, people_crew["manager"])
    ed, manager = api(people_crew["ed"]), api(people_crew["manager"])
    abandoned = ed.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()["assignment"]
    answer = {"answer": {"winner": "tie"}}
    for _ in range(17):
        handed = manager.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()["assignment"]
        manager.post(f"{EVAL}/assignments/{handed}/submit", answer, format="json")
    assert manager.post(f"{EVAL}/scenarios/{scenario.pk}/next").status_code == 204
    Assignment.objects.filter(pk=abandoned).update(expires_at=timezone.now() - timedelta(minutes=1))
    last = manager.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()["assignment"]
    assert Assignment.objects.get(pk=last).task_id == Assignment.objects.get(pk=abandoned).task_id
    assert Assignment.objects.get(pk=abandoned).status == AssignmentStatus.EXPIRED


@pytest.mark.django_db
def test_the_queue_costs_the_same_queries_for_one_scenario_or_many(
    api, creator, finished_job, people_crew
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    open_scenario(api, creator, finished_job, people_crew["manager"], name="One")
    eve = api(people_crew["eve"])

    def cost():
        with CaptureQueriesContext(connection) as queries:
            listed = eve.get(f"{EVAL}/scenarios").json()
        return len(queries), listed

    cost()  # the user's grants are cached from here on
    one, listed = cost()
    assert [(s["name"], s["done"], s["total"]) for s in listed] == [("One", 0, 18)]
    for name in ("Two", "Three"):
        open_scenario(api, creator, finished_job, people_crew["manager"], name=name)
    task = eve.post(f"{EVAL}/scenarios/{listed[0]['id']}/next").json()
    eve.post(
        f"{EVAL}/assignments/{task['assignment']}/submit",
        {"answer": {"winner": "A"}},
        format="json",
    )
    many, listed = cost()
    # The scenarios, then done, skipped, reserved, open places and quotas.
    assert many == one == 6
    assert sorted((s["name"], s["done"], s["total"]) for s in listed) == [
        ("One", 1, 18),
        ("Three", 0, 18),
        ("Two", 0, 18),
    ]
