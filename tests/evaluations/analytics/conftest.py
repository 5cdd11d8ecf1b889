"""Fixtures of the analytics' tests: scenarios judged by people and judges."""

from __future__ import annotations

import pytest

from scenarios import services as scenario_services
from tests.factories import ConnectionFactory, LLMModelFactory
from tests.helpers.evaluations import (
    create_judge,
    import_people,
    make_scenario,
    rows,
    run,
    run_judge,
)


@pytest.fixture
def judged(api, people, team_a, mock_judge):
    """A comparison scenario answered by an evaluator (twice over, in both orders where
    the design has reverse pairs) and by a mock judge in both orders."""
    scenario = make_scenario(people, team_a, "comparison", {"ties": True})
    scenario = scenario_services.scenario_open(user=people["manager"], scenario=scenario)
    evaluator = api(people["evaluator"])
    while (
        task := evaluator.post(f"/api/evaluations/scenarios/{scenario.pk}/next")
    ).status_code == 200:
        evaluator.post(
            f"/api/evaluations/assignments/{task.json()['assignment']}/submit",
            {"answer": {"winner": "A"}},
            format="json",
        )
    judge = create_judge(api, people["manager"], scenario, name="J", model=mock_judge.pk, swap=True)
    run(
        api(people["manager"])
        .post(f"/api/judges/{judge['id']}/run", {}, format="json")
        .json()["job"]
    )
    return scenario, judge


@pytest.fixture
def biased(api, people, team_a):
    """A comparison scenario judged by people (imported) and by a judge that always picks
    the first shown, in both orders, twice at temperature 0."""
    connection = ConnectionFactory(
        team=team_a, kind="mock", name="biased", options={"position_bias": 1.0}
    )
    model = LLMModelFactory(connection=connection, model_id="mock-biased", display_name="B")
    scenario = make_scenario(people, team_a, "comparison", {"ties": False}, rows(items=4))
    import_people(api, people["manager"], scenario)
    judge = create_judge(
        api,
        people["manager"],
        scenario,
        name="First",
        model=model.pk,
        swap=True,
        repetitions=2,
        temperatures=[0.0],
    )
    run_judge(api, people["manager"], judge)
    return scenario, judge
