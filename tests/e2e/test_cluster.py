"""Scale mode (PostgreSQL + Redis): one ASGI server and three qcluster workers on loopback run
a large live job against the fake provider while the worker running it is killed with SIGKILL
part-way. The job completes, every cell exactly once, its cost counted once, and a WebSocket
client attached to the ASGI server gets the workers' events through to the end.

How the work is shared: one live job runs in one worker at a time (its runner holds the job's
lease, ``GENERATION_LEASE_S``), with up to ``concurrency`` cells in flight there. So the three
workers share the work as jobs, not cells: a second owner's job runs beside the first on
another worker, and when the first job's worker dies, recovery (``recover_jobs``, scheduled
every minute in production and called here once the lease ran out) hands the job to a
surviving worker, which finishes only what was left.

Skipped without ``DATABASE_URL`` and ``REDIS_URL``; each run uses a database and a
redis-server of its own (see conftest.py). ``CLUSTER_CELLS`` sets the job's size (2,000).
"""

from __future__ import annotations

import ast
import os
import signal

from evalplatform.providers.fake import FakeConfig, run_in_thread
from evalplatform.runs import engine
from tests.helpers.e2e import Watcher, stop, wait_for

CELLS = int(os.environ.get("CLUSTER_CELLS", "2000"))
OTHER_CELLS = max(CELLS // 2, 1)  # the second owner's job, beside it
CONCURRENCY = 16
WORKERS = ("worker-1", "worker-2", "worker-3")
RECOVER = "from generation.tasks import recover_jobs; print(recover_jobs())"


def test_three_workers_finish_a_job_whose_worker_was_sigkilled(scale):
    scale.env["GENERATION_LEASE_S"] = "3"  # heartbeat every second
    scale.env["TEAM_TASK_LEASE_S"] = "3"  # the killed worker's share of the team, likewise
    with (
        run_in_thread(FakeConfig(latency_s=0.05)) as fake,
        run_in_thread(FakeConfig(latency_s=0.05)) as other_fake,
    ):
        owner, other = scale.setup(
            [
                {"url": fake.url, "concurrency": CONCURRENCY},
                {"url": other_fake.url, "concurrency": CONCURRENCY},
            ]
        )
        scale.start_web()
        workers = {name: scale.start_worker(name) for name in WORKERS}
        job = scale.create_job(owner, "big", CELLS, CONCURRENCY)
        other_job = scale.create_job(other, "beside", OTHER_CELLS, CONCURRENCY)
        watcher = Watcher(scale.web_port, job, owner["key"])
        wait_for(lambda: watcher.messages, 10, "the snapshot")
        scale.start_job(owner, job)
        scale.start_job(other, other_job)

        # Kill the worker running the job, its whole process group, well under way.
        first = wait_for(lambda: [n for n in WORKERS if scale.ran(n, job)], 60, "a runner")[0]
        wait_for(lambda: scale.job(job)["completed"] >= CELLS * 0.3, 120, "progress")
        stop(workers[first], signal.SIGKILL)
        at_kill = scale.job(job)
        assert at_kill["status"] == "running" and at_kill["completed"] < CELLS
        assert scale.consistent(job)  # its last step was committed whole, or not at all
        recorded_by_first = scale.completed_ids(job)

        # The lease runs out; recovery hands the job to a surviving worker.
        wait_for(lambda: scale.job(job)["expired"], 30, "the dead runner's lease to run out")
        recovered = ast.literal_eval(scale.manage("shell", "-c", RECOVER).splitlines()[-1])
        # [] only if a worker's own scheduler ran recover_jobs a moment before.
        assert job in recovered or recovered == [], recovered
        jobs = (job, other_job)

        def nothing_half_written():
            assert all(scale.consistent(j) for j in jobs)

        wait_for(
            lambda: all(scale.job(j)["status"] == "completed" for j in jobs),
            180,
            "both jobs to complete",
            meanwhile=nothing_half_written,
        )
        wait_for(watcher.final, 30, lambda: f"the last event: {watcher.describe()}")
        watcher.close()

    scale.assert_done_once(job, CELLS)
    scale.assert_done_once(other_job, OTHER_CELLS)
    # The provider was asked again only for cells in flight, or answered and not yet
    # recorded, at the kill: at most the concurrency and the cells claimed ahead.
    held = CONCURRENCY + int(CONCURRENCY * engine.CLAIM_AHEAD)
    assert CELLS <= fake.app.calls["openai_chat"] <= CELLS + held
    assert other_fake.app.calls["openai_chat"] <= OTHER_CELLS + held
    # The job ran on the killed worker, then on a survivor.
    ran = {name for name in WORKERS if scale.ran(name, job)}
    assert first in ran and len(ran) >= 2, ran

    # The WebSocket stayed open through the crash and saw both runners' events to the end.
    assert watcher.connections == 1
    assert watcher.messages[0]["event"] == "generation:job:snapshot"
    assert len(watcher.events("generation:job:started")) >= 2
    reported = [e["output_id"] for e in watcher.events("generation:item:completed")]
    assert len(reported) == len(set(reported))  # no cell reported twice
    assert scale.completed_ids(job) - recorded_by_first <= set(reported)  # the survivor's: all
    assert set(reported) & recorded_by_first  # the killed worker's: all but its last messages
    progress = [e["completed"] for e in watcher.events("generation:job:progress")]
    assert min(progress) <= at_kill["completed"] < max(progress)
    [final] = watcher.events("generation:job:completed")
    assert (final["status"], final["completed"], final["failed"]) == ("completed", CELLS, 0)
