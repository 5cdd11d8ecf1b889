"""What an answer locks on PostgreSQL (SQLite serializes every write transaction): answers to
one scenario do not wait for each other, and closing the scenario waits for the answers
under way, so none is stored once it is closed.

Each test holds one transaction open in a thread of its own (its own connection) and makes
the other request meanwhile; ``lock_timeout`` turns a wait that should not happen into an
error instead of a hang."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction

from evalplatform.accounts.roles import Role
from evaluations.models import Assignment, Judgment
from evaluations.workspace import services
from scenarios import services as scenarios
from scenarios.models import Scenario, ScenarioStatus
from tests.helpers.evaluations import comparison

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="SQLite serializes every write transaction"
    ),
]

EVAL = "/api/evaluations"
ANSWER = {"answer": {"winner": "A"}, "time_spent_ms": 1000}


class Held:
    """Run ``work`` in a transaction on a thread of its own, and keep the transaction open
    until ``release``; ``result`` is what ``work`` returned (or raised)."""

    def __init__(self, work):
        self.work, self.started, self.done = work, threading.Event(), threading.Event()
        self.result = None
        self.thread = threading.Thread(target=self._run)
        self.thread.start()
        assert self.started.wait(30), "the held transaction did not start"
        if isinstance(self.result, Exception):
            raise self.result

    def _run(self):
        try:
            with transaction.atomic():
                self.result = self.work()
                self.started.set()
                self.done.wait(60)
        except Exception as exc:
            self.result = exc
            self.started.set()
        finally:
            connections.close_all()

    def release(self):
        self.done.set()
        self.thread.join(60)


def waiting_on_a_lock() -> bool:
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


@pytest.fixture
def setting(api, team_a, member):
    manager = member(team_a, Role.MANAGER)
    scenario = comparison(manager, team_a, tasks=4)
    eve, ed = member(team_a, Role.EVALUATOR), member(team_a, Role.EVALUATOR)
    handed = {}
    for user in (eve, ed):
        response = api(user).post(f"{EVAL}/scenarios/{scenario.pk}/next")
        assert response.status_code == 200, response.content
        handed[user] = response.json()["assignment"]
    return scenario, manager, eve, ed, handed


def test_answers_to_one_scenario_do_not_wait_for_each_other(api, setting):
    _, _, eve, ed, handed = setting
    held = Held(
        lambda: services.submit(user=eve, assignment=Assignment(pk=handed[eve]), data=ANSWER).pk
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '3s'")
        response = api(ed).post(f"{EVAL}/assignments/{handed[ed]}/submit", ANSWER, format="json")
        assert response.status_code == 201, response.content
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
        held.release()
    assert isinstance(held.result, int)
    assert set(Judgment.objects.values_list("evaluator", flat=True)) == {eve.pk, ed.pk}


def test_closing_waits_for_the_answers_under_way(setting):
    scenario, manager, eve, _, handed = setting
    held = Held(
        lambda: services.submit(user=eve, assignment=Assignment(pk=handed[eve]), data=ANSWER).pk
    )
    closed = {}

    def close():
        try:
            closed["scenario"] = scenarios.scenario_close(user=manager, scenario=scenario)
        except Exception as exc:
            closed["error"] = exc
        finally:
            connections.close_all()

    closing = threading.Thread(target=close)
    closing.start()
    try:
        for _ in range(300):
            if waiting_on_a_lock() or not closing.is_alive():
                break
            time.sleep(0.05)
        assert closing.is_alive(), f"the close did not wait for the answer: {closed}"
    finally:
        held.release()
        closing.join(60)
    assert isinstance(held.result, int), held.result
    assert "error" not in closed, closed
    assert Judgment.objects.filter(evaluator=eve).count() == 1
    assert Scenario.objects.get(pk=scenario.pk).status == ScenarioStatus.CLOSED


def test_an_answer_that_comes_while_the_scenario_closes_is_refused(api, setting):
    scenario, manager, _, ed, handed = setting
    held = Held(lambda: scenarios.scenario_close(user=manager, scenario=scenario).status)
    answered = {}

    def answer():
        try:
            answered["response"] = api(ed).post(
                f"{EVAL}/assignments/{handed[ed]}/submit", ANSWER, format="json"
            )
        except Exception as exc:
            answered["error"] = exc
        finally:
            connections.close_all()

    answering = threading.Thread(target=answer)
    answering.start()
    try:
        for _ in range(300):
            if waiting_on_a_lock() or not answering.is_alive():
                break
            time.sleep(0.05)
    finally:
        held.release()
        answering.join(60)
    assert held.result == ScenarioStatus.CLOSED
    assert "error" not in answered, answered
    assert answered["response"].status_code == 409, answered["response"].content
    assert not Judgment.objects.filter(evaluator=ed).exists()
