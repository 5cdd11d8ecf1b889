"""A judge run's job is written before the locks that serialize runs are taken, a chunk per
transaction (issue 35: a run of a large scenario held the database while all its cells were
written): another team writes between the chunks, the job is hidden until whole, and a run
that cannot start after all (another run began meanwhile) leaves no job behind."""

from __future__ import annotations

import pytest

from evalplatform import bulk
from evalplatform.errors import Conflict
from evaluations.judges import services as judges
from evaluations.models import JudgeRun, LLMJudge
from generation import services as generation
from generation.models import GenerationJob
from tests.helpers.evaluations import create_judge, make_scenario
from tests.helpers.writes import other_team_writes

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_writes_its_job_in_chunks_and_a_refused_run_leaves_none(
    api, people, team_a, mock_judge, monkeypatch
):
    scenario = make_scenario(people, team_a, "comparison", {"ties": True})
    made = create_judge(
        api, people["manager"], scenario, name="Chunked", model=mock_judge.pk, swap=True
    )
    judge = LLMJudge.objects.get(pk=made["id"])
    monkeypatch.setattr(generation, "WRITE_CHUNK", 4)
    seen: list[bool] = []

    def between() -> None:
        writing = GenerationJob.objects.get(writing=True)
        assert not JudgeRun.objects.filter(job=writing).exists()  # no run on a half job
        seen.append(other_team_writes(people["outsider"]))

    monkeypatch.setattr(bulk, "between_chunks", between)
    first = list(scenario.tasks.order_by("position").values_list("pk", flat=True)[:5])
    run = judges.judge_run(user=people["manager"], judge=judge, data={"tasks": first})
    assert len(seen) == 3 and all(seen)  # 5 tasks in both orders: 10 cells, 4 a chunk
    job = GenerationJob.objects.get(pk=run.job_id)
    assert not job.writing and job.total_cells == 10 and job.status in ("running", "queued")

    # Another run asked as the first began (its check before the job passed; the one under
    # the lock did not): its job was written, then is deleted.
    monkeypatch.setattr(bulk, "between_chunks", lambda: None)
    check, calls = judges._no_run_open, {"n": 0}

    def raced(judge: LLMJudge) -> None:
        calls["n"] += 1
        if calls["n"] > 1:
            check(judge)

    monkeypatch.setattr(judges, "_no_run_open", raced)
    with pytest.raises(Conflict, match="not finished"):
        judges.judge_run(user=people["manager"], judge=judge, data={})  # the 4 others
    assert calls["n"] == 2
    assert list(GenerationJob.objects.values_list("pk", flat=True)) == [job.pk]
