"""Fair shares of the task workers: one team's stalled provider cannot hold every worker, so
another team's job completes while the stall goes on; the stalled team's parked work starts
when one of its tasks ends (``evalplatform.runs.fairshare``)."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connections
from django.utils import timezone
from django.utils.module_loading import import_string
from django_q.brokers import get_broker
from django_q.signing import SignedPackage

from evalplatform.accounts.roles import Role
from evalplatform.runs import fairshare
from evalplatform.runs.models import TeamTask
from generation.models import GenerationJob, JobStatus
from tests.factories import (
    ConnectionFactory,
    LLMModelFactory,
    PromptTemplateFactory,
    TeamFactory,
    make_version,
)

JOBS = "/api/generation/jobs"
# How long team B's one-cell job may take while team A's provider stalls: its turn on a
# free worker, one poll of the broker, and the cell itself.
BOUND_S = 15.0


class Workers:
    """The task cluster's workers as threads: each takes the next task from the configured
    broker (the database, or Redis) and runs it to its end, one at a time, as a django-q
    worker does."""

    def __init__(self, count: int):
        self.stopped = threading.Event()
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(count)]
        for thread in self.threads:
            thread.start()

    def loop(self) -> None:
        broker = get_broker()
        try:
            while not self.stopped.is_set():
                tasks = broker.dequeue()
                if not tasks:
                    time.sleep(0.05)
                    continue
                for ack_id, payload in tasks:
                    task = SignedPackage.loads(payload)
                    try:
                        import_string(task["func"])(*task["args"], **task.get("kwargs", {}))
                    except BaseException as exc:
                        self.errors.append(exc)
                    finally:
                        broker.acknowledge(ack_id)
        finally:
            connections.close_all()

    def stop(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=30)
        assert not any(t.is_alive() for t in self.threads), "a worker did not stop"


def until(condition, timeout: float, what: str) -> float:
    """Wait for ``condition()``; the seconds it took."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"not within {timeout} s: {what}"
        time.sleep(0.05)
    return time.monotonic() - started


def started_job(api, user, team, connection, content: str) -> int:
    model = LLMModelFactory(connection=connection, model_id=f"m-{connection.pk}-{user.pk}")
    version = make_version(PromptTemplateFactory(team=team), [("", "Say: {{content}}")])
    body = {
        "team": team.slug,
        "name": f"{user.username}'s job",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.0],
        "source": {
            "type": "manual",
            "format": "json",
            "content": json.dumps([{"id": "one", "content": content}]),
        },
    }
    created = api(user).post(JOBS, body, format="json")
    assert created.status_code == 201, created.json()
    job_id = created.json()["id"]
    assert api(user).post(f"{JOBS}/{job_id}/start").json()["status"] == "running"
    return job_id


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_stalled_team_leaves_a_worker_to_another_teams_job(
    api, member, team_a, team_b, fake_provider
):
    workers = settings.Q_CLUSTER["workers"]
    # The default share: every worker but one.
    assert settings.TEAM_MAX_RUNNING_TASKS == max(1, workers - 1)  # noqa: SIM300
    get_broker().purge_queue()
    # Team A's provider stalls: every call hangs far longer than this test.
    fake_provider.config.timeout_s = 600
    stalled = ConnectionFactory(team=team_a, kind="openai", base_url=fake_provider.url)
    mock = ConnectionFactory(team=team_b, kind="mock")
    # As many of team A's people as there are workers start a job (one running job per
    # person): first come, first served, they held every worker.
    a_jobs = [
        started_job(api, member(team_a, Role.CREATOR), team_a, stalled, "x [[fault:timeout]]")
        for _ in range(workers)
    ]
    pool = Workers(workers)
    try:
        until(lambda: get_broker().queue_size() == 0, 10, "team A's runners picked up")
        until(
            lambda: GenerationJob.objects.filter(pk__in=a_jobs).exclude(runner_token="").exists(),
            10,
            "team A's calls under way",
        )
        b_job = started_job(api, member(team_b, Role.CREATOR), team_b, mock, "fine")
        took = until(
            lambda: GenerationJob.objects.get(pk=b_job).status == JobStatus.COMPLETED,
            BOUND_S,
            "team B's job completes while team A's provider stalls",
        )
        print(f"\nteam B's job completed in {took:.2f} s while team A's provider stalled")
        b = GenerationJob.objects.get(pk=b_job)
        assert b.completed_cells == 1 and b.runner_token == ""
        # Team A's stall goes on: its jobs run, nothing done, within the team's share.
        a = GenerationJob.objects.filter(pk__in=a_jobs)
        assert {j.status for j in a} == {JobStatus.RUNNING}
        assert sum(j.completed_cells + j.failed_cells for j in a) == 0
        held = a.exclude(runner_token="")
        assert held.count() == settings.TEAM_MAX_RUNNING_TASKS
        assert TeamTask.objects.filter(team=team_a, running=True).count() == held.count()

        # One of team A's jobs is cancelled: its share goes to the team's parked job.
        parked = a.filter(runner_token="").values_list("pk", flat=True).first()
        owner = GenerationJob.objects.get(pk=held.first().pk).owner
        assert api(owner).post(f"{JOBS}/{held.first().pk}/cancel").status_code == 200
        until(
            lambda: GenerationJob.objects.get(pk=parked).runner_token != "",
            10,
            "team A's parked job takes the freed share",
        )
        assert not TeamTask.objects.filter(team=team_a, running=False).exists()
    finally:
        GenerationJob.objects.filter(pk__in=a_jobs, status=JobStatus.RUNNING).update(
            status=JobStatus.CANCELLED
        )  # the runners abort their calls within one control interval
        pool.stop()
    assert not pool.errors
    assert not TeamTask.objects.exists()


HELD = threading.Event()


def hold() -> None:
    """A task that runs until the test lets it end."""
    assert HELD.wait(timeout=30)


def queued_tasks():
    """The tasks in the broker's queue, taken out: (func, args) of each."""
    broker, found = get_broker(), []
    while tasks := broker.dequeue():
        for ack_id, payload in tasks:
            task = SignedPackage.loads(payload)
            found.append((task["func"], list(task["args"])))
            broker.acknowledge(ack_id)
    return found


@pytest.mark.django_db(transaction=True)
def test_work_over_a_teams_share_waits_in_its_queue_without_holding_a_worker(
    team_a, team_b, settings
):
    settings.TEAM_MAX_RUNNING_TASKS = 1
    get_broker().purge_queue()

    # One of team A's tasks runs on a worker until the test lets it end.
    def long_task():
        try:
            fairshare.run(team_a.pk, "tests.generation.test_fair_workers.hold", [], "a-long")
        finally:
            connections.close_all()  # this thread's own connection

    HELD.clear()
    holder = threading.Thread(target=long_task)
    holder.start()
    try:
        until(lambda: TeamTask.objects.filter(running=True).exists(), 5, "team A's task runs")
        # Team A's next tasks are parked at once (their workers move on); team B's run.
        assert fairshare.run(team_a.pk, "math.floor", [2.5], "a-second") == fairshare.WAITING
        assert fairshare.run(team_a.pk, "math.floor", [3.5], "a-third") == fairshare.WAITING
        assert fairshare.run(team_a.pk, "math.floor", [2.5], "a-second") == fairshare.WAITING
        assert fairshare.run(team_b.pk, "math.floor", [4.5], "b-first") == 4
        assert fairshare.waiting(["a-second", "a-third", "b-first"]) == {"a-second", "a-third"}
        assert queued_tasks() == []
    finally:
        HELD.set()  # the long task ends: the team's oldest parked task goes to the broker
        holder.join()
    run = "evalplatform.runs.fairshare.run"
    assert queued_tasks() == [(run, [team_a.pk, "math.floor", [2.5], "a-second"])]
    # A newer task does not overtake it: the free share is owed to the older one.
    assert fairshare.run(team_a.pk, "math.floor", [3.5], "a-third") == fairshare.WAITING
    assert queued_tasks() == []  # the older one was handed over a moment ago
    # That hand-over was lost (a flushed queue): the sweep hands it over again, once a
    # lease has passed.
    assert fairshare.sweep() == 0
    TeamTask.objects.filter(key="a-second").update(
        dispatched_at=timezone.now() - timedelta(seconds=settings.TEAM_TASK_LEASE_S + 1)
    )
    assert fairshare.sweep() == 1
    assert queued_tasks() == [(run, [team_a.pk, "math.floor", [2.5], "a-second"])]
    assert fairshare.run(team_a.pk, "math.floor", [2.5], "a-second") == 2
    # It ended: the next one is handed over, runs, and the team's queue is empty.
    assert queued_tasks() == [(run, [team_a.pk, "math.floor", [3.5], "a-third"])]
    assert fairshare.run(team_a.pk, "math.floor", [3.5], "a-third") == 3
    assert queued_tasks() == [] and not TeamTask.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_dead_workers_share_comes_free_after_its_lease(team_a, team_b, settings):
    settings.TEAM_MAX_RUNNING_TASKS = 1  # team_b: shares apply from the second team on
    now = timezone.now()
    dead = TeamTask.objects.create(
        team=team_a, key="dead", func="math.floor", args=[1.5], running=True, queued_at=now,
        lease_until=now + timedelta(seconds=30),
    )  # fmt: skip
    assert fairshare.run(team_a.pk, "math.floor", [2.5], "next") == fairshare.WAITING
    TeamTask.objects.filter(pk=dead.pk).update(lease_until=now - timedelta(seconds=1))
    assert fairshare.run(team_a.pk, "math.floor", [2.5], "next") == 2
    assert not TeamTask.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_team_alone_on_the_platform_has_no_share_limit(team_a, settings):
    settings.TEAM_MAX_RUNNING_TASKS = 1
    now = timezone.now()
    TeamTask.objects.create(
        team=team_a, key="long", func="math.floor", args=[1.5], running=True, queued_at=now,
        lease_until=now + timedelta(seconds=30),
    )  # fmt: skip
    # Nobody to share the workers with: a second task runs beside the first.
    assert fairshare.run(team_a.pk, "math.floor", [2.5], "beside") == 2
    # From the second team on, the team holds its share and no more.
    TeamFactory(name="Second team", slug="second")
    assert fairshare.run(team_a.pk, "math.floor", [3.5], "over") == fairshare.WAITING
