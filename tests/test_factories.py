"""The shared factories (``tests/factories.py``) make valid objects through the services,
with their defaults alone: a job, a scenario of each type, a judge and a judgment."""

from __future__ import annotations

import pytest

from evalplatform.accounts.roles import Role
from evaluations.models import RaterKind
from generation.models import JobStatus
from scenarios.models import ScenarioStatus
from tests.factories import (
    SCENARIO_CONFIGS,
    ComparisonScenarioFactory,
    GenerationJobFactory,
    JudgmentFactory,
    LabelingScenarioFactory,
    LLMJudgeFactory,
    RankingScenarioFactory,
    RatingScenarioFactory,
    member_of,
)

pytestmark = pytest.mark.django_db


def test_a_generation_job_of_its_defaults_is_a_draft_with_a_cell_per_item():
    job = GenerationJobFactory(items=2, repetitions=2)
    assert job.status == JobStatus.CREATED
    assert job.outputs.count() == 2 * 2


@pytest.mark.parametrize(
    "factory",
    [
        RatingScenarioFactory,
        RankingScenarioFactory,
        ComparisonScenarioFactory,
        LabelingScenarioFactory,
    ],
)
def test_each_scenario_type_is_made_with_its_default_configuration(factory):
    scenario = factory()
    assert set(SCENARIO_CONFIGS[scenario.type]) <= set(scenario.config)
    assert scenario.tasks.exists()
    opened = factory(team=scenario.team, created_by=scenario.created_by, open_it=True)
    assert opened.status == ScenarioStatus.OPEN


def test_a_judge_and_judgments_of_a_comparison():
    judge = LLMJudgeFactory()
    assert judge.prompt_version_id and judge.llm_model.connection.team == judge.scenario.team
    task = judge.scenario.tasks.first()
    human = JudgmentFactory(task=task)
    assert human.rater_kind == RaterKind.HUMAN and human.payload == {"winner": "A"}
    assert human.presented == [task.variant_a_id, task.variant_b_id]
    by_judge = JudgmentFactory(task=task, rater_kind=RaterKind.JUDGE, judge=judge)
    assert by_judge.evaluator is None and by_judge.judge == judge


def test_a_judgment_answers_in_its_scenarios_shape():
    rated = JudgmentFactory(task=RatingScenarioFactory().tasks.first())
    assert rated.payload == {"scores": {"quality": 1}}
    ranked = JudgmentFactory(task=RankingScenarioFactory().tasks.first())
    assert ranked.payload == {"ranking": ranked.presented} and len(ranked.presented) == 3
    labeled = JudgmentFactory(task=LabelingScenarioFactory().tasks.first())
    assert labeled.payload == {"labels": ["good"]}
    assert member_of(labeled.scenario.team, Role.EVALUATOR).memberships.exists()
