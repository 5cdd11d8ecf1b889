"""Fair shares of the shared task workers between teams.

Every task done for a team (a job's runner, a judge file's steps, an analysis) goes to the
broker through ``submit``, wrapped in ``run``. A worker that picks it up first takes one of
the team's shares: a team runs at most ``TEAM_MAX_RUNNING_TASKS`` tasks at once (by default
every worker but one; no limit while the platform holds a single team), so however long its
tasks take (a stalled provider, a heavy analysis), the other workers stay free for the other
teams. A task over the team's share does not keep its worker: it is parked in the team's
queue (a ``TeamTask`` row, in order) and the worker moves on. When one of the team's tasks
ends, the team's oldest parked task goes back to the broker, behind what other teams queued
meanwhile, so teams take turns. Shares go in the team's queue order: a new task does not
overtake a parked one.

A running task's share is a lease, renewed while it runs: the share of a worker that died
comes free after ``TEAM_TASK_LEASE_S``. ``sweep`` (scheduled every minute) hands parked
tasks whose wake-up was lost to the broker again. The tasks themselves must be safe to run
twice, as every task here is (a job's runner takes the job's lease; the others check state).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connections, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.module_loading import import_string
from django_q.tasks import async_task

from evalplatform.accounts.models import Team
from evalplatform.runs import tasks
from evalplatform.runs.models import TeamTask

logger = logging.getLogger(__name__)

WAITING = "waiting for the team's share of the workers"


def submit(
    *, team_id: int, func: Callable[..., Any] | str, args: Sequence[Any], key: str, name: str = ""
) -> None:
    """Queue ``func(*args)`` (a task function, or a path ``tasks.declared``; JSON
    arguments) as work of the team. ``key`` names what it is for: a task waits in the
    team's queue once per key."""
    async_task(
        tasks.path(run),
        team_id,
        tasks.as_path(func),
        list(args),
        key,
        task_name=name or f"{key}-{time.time_ns()}",
    )


def run(team_id: int, func: str, args: list[Any], key: str) -> Any:
    """The task as a worker runs it: with one of the team's shares, or parked."""
    share = _take_share(team_id, func, args, key)
    if share is None:
        return WAITING
    renewal = _Renewal(share)
    renewal.start()
    try:
        return import_string(func)(*args)
    finally:
        renewal.stop()
        _release(team_id, share)


def waiting(keys: Sequence[str]) -> set[str]:
    """Which of these keys name a task parked in its team's queue."""
    return set(TeamTask.objects.filter(running=False, key__in=keys).values_list("key", flat=True))


def sweep() -> int:
    """Scheduled every minute: hand parked tasks to the broker again where their team has a
    free share (their wake-up was lost, or the worker holding a share died); how many."""
    count = 0
    for team_id in set(TeamTask.objects.filter(running=False).values_list("team_id", flat=True)):
        with transaction.atomic():
            count += _dispatch_waiting(_lock_team(team_id))
    return count


# --- shares -------------------------------------------------------------------------------------
def _cap() -> int | None:
    """The most tasks a team runs at once, or None: no limit (``TEAM_MAX_RUNNING_TASKS`` 0,
    or a platform with one team, which has nobody to share the workers with: its jobs, judge
    runs and analyses keep running side by side, as without shares)."""
    cap = settings.TEAM_MAX_RUNNING_TASKS
    if not cap or not Team.objects.all()[1:2].exists():
        return None
    return cap


def _lease() -> timedelta:
    return timedelta(seconds=settings.TEAM_TASK_LEASE_S)


def _lock_team(team_id: int) -> int:
    """Serialize the team's share decisions (call inside a transaction); drop the shares of
    workers that died; the team's id."""
    Team.objects.select_for_update().filter(pk=team_id).exists()
    TeamTask.objects.filter(team_id=team_id, running=True, lease_until__lt=timezone.now()).delete()
    return team_id


def _held(team_id: int) -> int:
    return TeamTask.objects.filter(team_id=team_id, running=True).count()


def _take_share(team_id: int, func: str, args: list[Any], key: str) -> int | None:
    """A share for the task (the running row's id), or None: the task was parked."""
    now = timezone.now()
    with transaction.atomic():
        _lock_team(team_id)
        waiting = TeamTask.objects.filter(team_id=team_id, running=False)
        mine = waiting.filter(key=key).first()
        if mine is not None:
            ahead = waiting.filter(
                Q(queued_at__lt=mine.queued_at) | Q(queued_at=mine.queued_at, pk__lt=mine.pk)
            ).count()
        else:
            ahead = waiting.count()
        cap = _cap()
        if cap is not None and _held(team_id) + ahead >= cap:
            # Over the team's share, or the free shares are owed to tasks parked earlier.
            if mine is None:
                TeamTask.objects.create(
                    team_id=team_id, key=key, func=func, args=args, queued_at=now
                )
            _dispatch_waiting(team_id)
            return None
        if mine is not None:
            mine.delete()
        share = TeamTask.objects.create(
            team_id=team_id,
            key=key,
            func=func,
            args=args,
            running=True,
            queued_at=now,
            lease_until=now + _lease(),
        )
    return share.pk


def _release(team_id: int, share: int) -> None:
    """The task ended: free its share and start the team's next parked task."""
    try:
        with transaction.atomic():
            _lock_team(team_id)
            TeamTask.objects.filter(pk=share).delete()
            _dispatch_waiting(team_id)
    except DatabaseError:
        # The share comes free when its lease runs out; the sweep starts the next task.
        logger.warning("team %s: the share of task %s could not be released", team_id, share)
        close_old_connections()


def _dispatch_waiting(team_id: int) -> int:
    """Hand the team's oldest parked tasks, as many as it has free shares, to the broker
    (after the commit); one handed over recently is not handed again. How many were."""
    cap = _cap()
    waiting = TeamTask.objects.filter(team_id=team_id, running=False)
    if cap is not None:
        waiting = waiting[: max(cap - _held(team_id), 0)]
    now = timezone.now()
    due = [t for t in waiting if t.dispatched_at is None or t.dispatched_at < now - _lease()]
    for task in due:
        task.dispatched_at = now
        task.save(update_fields=["dispatched_at"])
        transaction.on_commit(
            functools.partial(submit, team_id=team_id, func=task.func, args=task.args, key=task.key)
        )
    return len(due)


class _Renewal(threading.Thread):
    """Renews a running task's share while the task runs (on its own connection)."""

    def __init__(self, share: int):
        super().__init__(name=f"team-task-{share}", daemon=True)
        self.share = share
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(settings.TEAM_TASK_LEASE_S / 3):
                try:
                    TeamTask.objects.filter(pk=self.share).update(
                        lease_until=timezone.now() + _lease()
                    )
                except DatabaseError:  # one missed renewal is harmless: a lease lasts three
                    logger.warning("the share of task %s could not be renewed", self.share)
                    close_old_connections()
        finally:
            connections.close_all()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)
