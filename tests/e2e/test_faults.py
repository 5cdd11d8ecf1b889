"""Faults around a running job: a provider failing a fifth of its calls in every way it can,
Redis restarted mid-job, and the worker's database connections dropped mid-task.

The provider faults run the job in this process (on the embedded default and on PostgreSQL);
the other two need scale mode (PostgreSQL + Redis, see conftest.py) and skip without it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import defaultdict

import pytest

from evalplatform.accounts.roles import Role
from evalplatform.providers.fake import FakeConfig, run_in_thread
from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.runs import engine
from evalplatform.runs.engine import run_live
from generation.runners.live import GenerationWork
from tests.factories import (
    ConnectionFactory,
    LLMModelFactory,
    PromptTemplateFactory,
    make_version,
)
from tests.helpers.e2e import Watcher, wait_for

JOBS = "/api/generation/jobs"

# --- provider faults ------------------------------------------------------------------------

FAULT_CELLS = 200
RETRY_AFTER_S = 0.25
# The platform schedule, shortened, and all far below the provider's Retry-After, so a retry
# that waited only the schedule after a 429 shows.
SCHEDULE_S = (0.01, 0.02)
# What each injected fault is recorded as, and what its message says.
KINDS = {
    "429": ("rate_limit", "Rate limit reached."),
    "500": ("server", "Injected fault 500."),
    "503": ("server", "Injected fault 503."),
    "529": ("overloaded", "Injected fault 529."),
    "timeout": ("timeout", "Timed out"),
    "malformed": ("malformed", "Unreadable reply: not JSON"),
}


class FaultLog:
    """Wraps the fake's fault decision: every call with its prompt, when it arrived (after the
    fake's latency) and the fault it got, if any."""

    def __init__(self, app):
        self.calls = defaultdict(list)
        self.lock = threading.Lock()
        decide = app.fault_for

        def fault_for(route, request):
            fault = decide(route, request)
            with self.lock:
                self.calls[request.user].append((time.monotonic(), fault.kind if fault else None))
            return fault

        app.fault_for = fault_for


@pytest.mark.django_db(transaction=True)
def test_provider_faults_at_a_fifth_of_calls_leave_every_failed_cell_its_last_error(
    api, member, team_a
):
    user = member(team_a, Role.CREATOR)
    config = FakeConfig(
        latency_s=0.01,
        fault_rate=0.2,
        fault_kinds=tuple(KINDS),
        retry_after_s=RETRY_AFTER_S,
        # The fake hangs this long; the client gives up after timeout_s below, which leaves a
        # healthy call (10 ms) seconds to spare on a loaded machine: a healthy call timed out
        # at 0.5 s under CI's load, and the platform's attempts no longer matched the fake's.
        timeout_s=5.0,
    )
    with run_in_thread(config) as fake:
        log = FaultLog(fake.app)
        connection = ConnectionFactory(
            team=team_a, kind="openai", base_url=fake.url, max_concurrency=16, timeout_s=2.5
        )
        model = LLMModelFactory(connection=connection, model_id="gpt-fake")
        version = make_version(PromptTemplateFactory(team=team_a), [("", "Say {{content}}")])
        items = [{"id": i, "content": f"item {i}"} for i in range(FAULT_CELLS)]
        # Two cells whose fault is certain: a 429 once (then fine), a 503 every time.
        items[0]["content"] = "item 0 [[fault:429*1]]"
        items[1]["content"] = "item 1 [[fault:503]]"
        body = {
            "team": "team-a",
            "name": "Faults",
            "prompt_versions": [version.pk],
            "models": [model.pk],
            "temperatures": [0.0],
            "max_tokens": 50,
            "max_retries": 2,
            "concurrency": 16,
            "start": True,
            "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
        }
        response = api(user).post(JOBS, body, format="json")
        assert response.status_code == 201, response.json()
        job_id = response.json()["id"]
        retry = RetryPolicy(max_retries=2, schedule=SCHEDULE_S)
        asyncio.run(run_live(GenerationWork(job_id, retry=retry)))

    job = api(user).get(f"{JOBS}/{job_id}").json()
    outputs = api(user).get(f"{JOBS}/{job_id}/outputs", {"page_size": 500}).json()["results"]
    assert job["status"] == "completed" and len(outputs) == FAULT_CELLS
    by_status = defaultdict(list)
    for output in outputs:
        by_status[output["status"]].append(output)
    assert set(by_status) == {"completed", "failed"}  # some of each, nothing else
    assert len(by_status["completed"]) == job["completed_cells"]
    assert len(by_status["failed"]) == job["failed_cells"]
    kinds_seen = {kind for calls in log.calls.values() for _, kind in calls}
    assert kinds_seen == {*KINDS, None}  # every kind of fault happened

    prompts = {str(item["id"]): f"Say {item['content']}" for item in items}
    for output in outputs:
        calls = log.calls[prompts[output["source_item_id"]]]
        kinds = [kind for _, kind in calls]
        assert output["attempts"] == len(calls), (output, kinds)
        if output["status"] == "completed":
            assert kinds[-1] is None and None not in kinds[:-1], kinds
            assert (
                output["content"] and output["output_tokens"] > 0 and output["error_message"] == ""
            )
        else:
            # The last call's error, after the retries ran out or at a permanent one.
            error_kind, message = KINDS[kinds[-1]]
            assert output["error_kind"] == error_kind, (output, kinds)
            assert message in output["error_message"], (output, kinds)
            assert len(calls) == 3 or kinds[-1] == "malformed", kinds
            assert output["cost_usd"] == "0.000000"
        # Each retry waited at least what the provider asked for (Retry-After), else the
        # platform schedule.
        for (asked, kind), (again, _) in itertools.pairwise(calls):
            assert again - asked >= (RETRY_AFTER_S if kind == "429" else SCHEDULE_S[0]), kinds
    first, second = (log.calls[prompts[i]] for i in ("0", "1"))
    assert [k for _, k in first] == ["429", None] and [k for _, k in second] == ["503"] * 3


# --- Redis restarted mid-job (scale mode) ---------------------------------------------------

REDIS_CELLS = 1000


def test_workers_and_live_pages_recover_when_redis_restarts_mid_job(scale):
    with (
        run_in_thread(FakeConfig(latency_s=0.1)) as fake,
        run_in_thread(FakeConfig(latency_s=0.02)) as later_fake,
    ):
        owner, later = scale.setup(
            [{"url": fake.url, "concurrency": 8}, {"url": later_fake.url, "concurrency": 8}]
        )
        scale.start_web()
        for name in ("worker-1", "worker-2"):
            scale.start_worker(name)
        job = scale.create_job(owner, "through", REDIS_CELLS, 8)
        watcher = Watcher(scale.web_port, job, owner["key"], reconnect=True)
        wait_for(lambda: watcher.messages, 10, "the snapshot")
        scale.start_job(owner, job)
        wait_for(lambda: scale.job(job)["completed"] >= REDIS_CELLS * 0.15, 60, "progress")

        scale.redis.kill()  # everything in it is lost: queued tasks, groups, channels
        time.sleep(1)
        scale.redis.start()  # same port, empty
        seen_before = len(watcher.messages)
        done_at_restart = scale.job(job)["completed"]
        assert done_at_restart < REDIS_CELLS
        # A job started now goes through the new Redis to a worker.
        later_job = scale.create_job(later, "after", 50, 8)
        scale.start_job(later, later_job)

        def nothing_half_written():
            assert scale.consistent(job) and scale.consistent(later_job)

        wait_for(
            lambda: scale.job(job)["status"] == scale.job(later_job)["status"] == "completed",
            120,
            "both jobs to complete",
            meanwhile=nothing_half_written,
        )
        wait_for(watcher.final, 30, lambda: f"the page to learn of the end: {watcher.describe()}")
        watcher.close()

    scale.assert_done_once(job, REDIS_CELLS)
    scale.assert_done_once(later_job, 50)
    assert fake.app.calls["openai_chat"] == REDIS_CELLS  # the runner never stopped
    # The page got live updates again after the restart, through to the completion.
    after = watcher.messages[seen_before:]
    progress = [m["data"]["completed"] for m in after if m["event"] == "generation:job:progress"]
    assert any(done_at_restart < done < REDIS_CELLS for done in progress), (watcher.closes,)
    [final] = [m["data"] for m in after if m["event"] == "generation:job:completed"]
    assert (final["status"], final["completed"]) == ("completed", REDIS_CELLS)


# --- database connections dropped mid-task (scale mode) -------------------------------------

DROP_CELLS = 600


def test_dropped_database_connections_are_retried_and_nothing_is_half_written(scale):
    with run_in_thread(FakeConfig(latency_s=0.05)) as fake:
        [owner] = scale.setup([{"url": fake.url, "concurrency": 8}])
        scale.start_web()
        scale.start_worker("worker-1")
        job = scale.create_job(owner, "blip", DROP_CELLS, 8)
        scale.start_job(owner, job)

        def nothing_half_written():
            assert scale.consistent(job)

        dropped = []
        for share in (0.25, 0.6):  # twice, at different points of the run
            wait_for(
                lambda share=share: scale.job(job)["completed"] >= DROP_CELLS * share,
                60,
                "progress",
                meanwhile=nothing_half_written,
            )
            dropped += scale.db.query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = 'worker-1'"
            )
            assert scale.job(job)["status"] == "running"
            nothing_half_written()
        # The runner's lease (60 s) has not run out: the task itself must carry on.
        wait_for(
            lambda: scale.job(job)["status"] != "running",
            45,
            "the job to finish",
            meanwhile=nothing_half_written,
        )

    assert len(dropped) >= 2 and all(ok for (ok,) in dropped)
    scale.assert_done_once(job, DROP_CELLS)
    assert scale.job(job)["message"] == ""
    # The task itself started the runner again (the lease never ran out, so no recovery
    # could have; a re-dispatch that finds the lease held does nothing).
    assert "the database connection failed; the runner starts again" in scale.log("worker-1")
    # Only cells in flight, or answered and not yet recorded, when a connection dropped
    # were asked for again: at most the concurrency and the cells claimed ahead (whose
    # calls start as others end, before a step records those) each time.
    held = 8 + int(8 * engine.CLAIM_AHEAD)
    assert DROP_CELLS <= fake.app.calls["openai_chat"] <= DROP_CELLS + 2 * held
