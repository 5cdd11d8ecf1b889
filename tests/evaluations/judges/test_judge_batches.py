"""LLM judges in batch mode against the fake provider's batch API: every scenario type comes
back complete at the batch price, failed rows are re-submitted alone, the cost is counted
once."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from evaluations.models import Judgment, ParseStatus
from generation.models import GenerationJob, GenerationOutput, JobStatus
from tests.helpers.evaluations import create_judge, make_scenario, rows
from tests.helpers.generation import cost_counted_once, drive_until_done, model_for

pytestmark = pytest.mark.django_db(transaction=True)

CONFIGS = {
    "comparison": {"ties": False},
    "rating": {"dimensions": [{"name": "clarity", "min": 1, "max": 7}]},
    "ranking": {},
    "labeling": {"labels": ["useful", "useless"]},
}


@pytest.fixture
def fast_batches(fake_provider):
    fake_provider.config.batch_duration_s = 0
    return fake_provider


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_each_type_judged_through_a_batch_api(api, people_manager_only, team_a, fast_batches, kind):
    model = model_for(team_a, fast_batches)
    scenario = make_scenario(people_manager_only, team_a, kind, CONFIGS[kind])
    swap = kind in ("comparison", "ranking")
    judge = create_judge(
        api,
        people_manager_only["manager"],
        scenario,
        name="Batch judge",
        model=model.pk,
        mode="batch",
        swap=swap,
        temperatures=[0.0, 0.7],
        max_tokens=200,
    )
    response = api(people_manager_only["manager"]).post(
        f"/api/judges/{judge['id']}/run", {}, format="json"
    )
    assert response.status_code == 201, response.json()
    job = drive_until_done(response.json()["job"])
    assert job.status == JobStatus.COMPLETED, job.status_message
    cost_counted_once(job)
    calls = scenario.tasks.count() * (2 if swap else 1) * 2
    judgments = Judgment.objects.filter(judge_id=judge["id"])
    assert job.completed_cells == calls and judgments.count() == calls
    assert {j.parse_status for j in judgments} <= {ParseStatus.OK, ParseStatus.EXTRACTED}
    # Priced at the batch rate: half the live price of the same tokens.
    output = GenerationOutput.objects.filter(job=job).first()
    live = model.cost_usd(output.input_tokens, output.output_tokens)
    assert abs(output.cost_usd * 2 - live) <= Decimal("0.000002")  # both rounded to 1e-6


def test_failed_rows_of_a_judge_batch_are_resubmitted_alone(
    api, people_manager_only, team_a, fast_batches
):
    model = model_for(team_a, fast_batches)
    data = rows(items=2)
    data[0]["content"] += " [[fault:500*1]]"  # this variant's requests fail once
    scenario = make_scenario(people_manager_only, team_a, "comparison", {}, data)
    judge = create_judge(
        api,
        people_manager_only["manager"],
        scenario,
        name="J",
        model=model.pk,
        mode="batch",
        max_tokens=100,
    )
    job_id = api(people_manager_only["manager"]).post(
        f"/api/judges/{judge['id']}/run", {}, format="json"
    )
    job = drive_until_done(job_id.json()["job"])
    assert job.status == JobStatus.COMPLETED and job.completed_cells == scenario.tasks.count()
    cost_counted_once(job)
    batches = fast_batches.app.batches.batches.values()
    _, second = sorted(batches, key=lambda b: b.created)
    flaky = [
        t
        for t in scenario.tasks.all()
        if data[0]["content"] in json.dumps([t.variant_a.content, t.variant_b.content])
    ]
    assert len(second.requests) == len(flaky) > 0  # only the failed rows went again
    assert Judgment.objects.filter(judge_id=judge["id"]).count() == scenario.tasks.count()
    assert GenerationJob.objects.get(pk=job.pk).failed_cells == 0
