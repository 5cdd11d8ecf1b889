"""Blind stays blind: in a blind scenario, an evaluator's own judgments name the variants by
the neutral keys they saw (A, B), in the answer to a submit, the list of their judgments,
a revision and the judgments API; variant ids (made in the order of the models) reach only
those who may see every judgment."""

from __future__ import annotations

import pytest

from evaluations.models import Judgment
from tests.helpers.evaluations import open_scenario

EVAL = "/api/evaluations"


def _answer(client, scenario):
    task = client.post(f"{EVAL}/scenarios/{scenario.pk}/next").json()
    done = client.post(
        f"{EVAL}/assignments/{task['assignment']}/submit",
        {"answer": {"winner": "A"}},
        format="json",
    )
    assert done.status_code == 201, done.json()
    return done.json()


@pytest.mark.django_db
def test_an_evaluator_of_a_blind_scenario_sees_keys_not_variant_ids(
    api, creator, finished_job, people_crew_and_outsider
):
    people = people_crew_and_outsider
    scenario = open_scenario(api, creator, finished_job, people["manager"])
    assert scenario.blind
    eve = api(people["eve"])
    submitted = _answer(eve, scenario)
    stored = Judgment.objects.get(pk=submitted["id"]).presented
    assert all(isinstance(pk, int) for pk in stored)
    assert submitted["presented"] == ["A", "B"]
    [mine] = eve.get(f"{EVAL}/scenarios/{scenario.pk}/mine").json()["results"]
    listed = eve.get(f"{EVAL}/judgments", {"scenario": scenario.pk}).json()["results"]
    revised = eve.post(
        f"{EVAL}/judgments/{submitted['id']}/revise", {"answer": {"winner": "B"}}, format="json"
    ).json()
    assert mine["presented"] == listed[0]["presented"] == revised["presented"] == ["A", "B"]
    for shown in (submitted, mine, listed[0], revised):
        assert not set(map(str, stored)) & set(map(str, shown["presented"]))
    # Whoever may see every judgment sees the variants' ids.
    managed = api(people["manager"]).get(f"{EVAL}/judgments", {"scenario": scenario.pk})
    assert managed.json()["results"][0]["presented"] == stored


@pytest.mark.django_db
def test_an_evaluator_of_an_open_book_scenario_sees_the_variant_ids(
    api, creator, finished_job, people_crew_and_outsider
):
    people = people_crew_and_outsider
    scenario = open_scenario(api, creator, finished_job, people["manager"], blind=False)
    submitted = _answer(api(people["eve"]), scenario)
    assert submitted["presented"] == Judgment.objects.get(pk=submitted["id"]).presented
