"""Live runs: a generation job as ``Work`` for the execution engine
(``evalplatform.runs.engine``), and ``run``, which starts it again after a lost database
connection."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connections, transaction
from django.utils import timezone

from evalplatform.live.publish import ThrottledPublisher
from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.providers.models import ProviderConnection
from evalplatform.runs.engine import Cell, Outcome, RunSummary, run_live
from generation import cells, events, lifecycle, results, statements
from generation.failures import FailureWatch
from generation.models import (
    GenerationJob,
    GenerationOutput,
    JobStatus,
    OutputStatus,
    SourceKind,
)

logger = logging.getLogger(__name__)
# A lost database connection (a restart, a failover, a dropped session) is not the job's
# failure: its runner starts again after each of these waits, taking its own lease back, and
# runs only what is left (each step commits whole or not at all). Then it gives up. A run
# that went on for STEADY_S before losing the connection starts the count afresh.
RECONNECT_WAITS_S = (1.0, 3.0, 10.0)
STEADY_S = 60.0


class GenerationWork:
    def __init__(self, job_id: int, *, retry: RetryPolicy | None = None, token: str | None = None):
        """``token``: the runner's (a new one by default); a runner that starts again with its
        own token takes its lease back (``begin``)."""
        job = GenerationJob.objects.get(pk=job_id)
        self.job_id = job_id
        self.handler = results.handler_for(job.source_kind)
        self.token = token or uuid.uuid4().hex
        self.concurrency = job.concurrency
        self.retry = retry or RetryPolicy(max_retries=job.max_retries)
        self.cells = cells.JobCells(job)
        self.prices = self.cells.prices
        self.failures = FailureWatch(live=True, stops_job=job.source_kind != SourceKind.JUDGE_FILE)
        self._publisher = events.publisher(job_id, self.token)
        self._job_select_compiled: statements.CompiledSelect | None = None
        # Claimed cells whose calls have not begun (``started`` announces them).
        self._claimed: dict[int, cells.CellRef] = {}

    @property
    def publisher(self) -> ThrottledPublisher | None:
        return self._publisher

    def _emit(self, event: str, data: dict[str, Any], key: int | None = None) -> None:
        if self._publisher is not None:
            self._publisher.add(event, data, key=key)

    # --- lease ----------------------------------------------------------------------------------
    def begin(self) -> bool:
        job = lifecycle.take_lease(self.job_id, self.token)
        if job is None:
            return False
        self._emit(events.JOB_STARTED, events.state(job))
        return True

    @property
    def heartbeat_s(self) -> float:
        return min(settings.GENERATION_LEASE_S / 3, settings.GENERATION_CONTROL_S)

    def heartbeat(self) -> str:
        return self.control()

    def control(self) -> str:
        now = timezone.now()
        renewed = GenerationJob.objects.filter(
            pk=self.job_id, runner_token=self.token, status=JobStatus.RUNNING
        ).update(lease_until=now + timedelta(seconds=settings.GENERATION_LEASE_S))
        if renewed:
            return "run"
        job = GenerationJob.objects.filter(pk=self.job_id).values("status", "runner_token").first()
        if job is None or job["runner_token"] != self.token:
            return "lost"
        return job["status"]

    def end(self) -> bool:
        keep_going, job = lifecycle.end_run(self.job_id, self.token)
        if job is not None:
            completed = job.status == JobStatus.COMPLETED
            self._emit(
                events.JOB_COMPLETED if completed else events.JOB_PROGRESS, events.state(job)
            )
        return keep_going

    def budget_exhausted(self) -> None:
        job = lifecycle.pause_run_for_budget(self.job_id, self.token)
        if job is not None:
            self._emit(events.JOB_BUDGET_EXCEEDED, events.state(job))

    # --- cells ----------------------------------------------------------------------------------
    def connection(self, connection_id: int) -> ProviderConnection:
        return ProviderConnection.objects.get(pk=connection_id)

    def step(self, outcomes: Sequence[Outcome], limit: int) -> tuple[str, list[Cell], bool]:
        """One database hop, one transaction: lock the job, record what finished, read the
        job's state (renewing the lease of a running job), claim up to ``limit`` more cells.
        The cells' events go out once it has committed. When the results show systematic
        failures, the results are committed, the job fails, and nothing more is claimed.

        Two trips (``statements.Trip``; on PostgreSQL, a round trip each, with BEGIN and
        COMMIT four in all): the reads (the job's row, locked first; this runner's cells
        among the finished ones, locked; the pending cells a claim would take), then the
        writes (the results, the claimed cells, the job's new state)."""
        out: list[tuple[str, dict[str, Any], int]] = []
        progress: list[dict[str, Any]] = []
        reason = None
        claimed: list[cells.Claimed] = []
        blocked = False
        with transaction.atomic(), connections[GenerationJob.objects.db].cursor() as cursor:
            reads = statements.Trip(cursor)
            select = self._job_select()
            job_row = select.add_to(reads)
            # Only this runner's running cells: after a takeover, the old runner's late
            # results are not recorded (and not counted). Locked until the step commits.
            owned = statements.ids_where(
                reads,
                GenerationOutput,
                [o.cell.id for o in outcomes],
                lock=True,
                status=OutputStatus.RUNNING,
                runner_token=self.token,
            )
            # Read with the job locked, as the claim would: cells are claimed, released and
            # made pending again only under the job's lock, so these stay pending until the
            # step commits.
            pending = self.cells.pending_in(reads, limit) if limit > 0 else None
            reads.run()
            if not job_row.rows:
                return "lost", [], False
            job = GenerationJob.from_db(select.db, select.names, job_row.rows[0])
            writes = statements.Trip(cursor)
            # The job's fields to write, in one UPDATE at the end of the step.
            dirty: list[str] = []
            if outcomes and job.runner_token == self.token:
                reason = self._record(writes, job, outcomes, statements.ids(owned), out, progress)
                dirty += ["completed_cells", "failed_cells", "cost_usd", "reserved_usd"]
            if reason is None:
                control = self._control(job)
                if control == "run":
                    dirty.append("lease_until")
                if control == "run" and pending is not None:
                    claimed, blocked = cells.claim(
                        self.cells,
                        job,
                        pending.rows,
                        also_save=[f for f in dirty if f != "reserved_usd"],
                        trip=writes,
                        status=OutputStatus.RUNNING,
                        started_at=timezone.now(),
                        runner_token=self.token,
                    )
            if dirty and not claimed:
                statements.save_fields(writes, job, dirty)
            writes.run()
        for event, data, key in out:
            self._emit(event, data, key=key)
        if progress and self._publisher is not None:
            self._publisher.progress(events.JOB_PROGRESS, progress[-1])
        if reason is not None:
            # Systematic failures: the job stops, spending nothing more.
            lifecycle.fail(job_id=self.job_id, message=reason, token=self.token)
            return self.control(), [], False
        if self._publisher is not None:
            self._claimed.update((c.ref.pk, c.ref) for c in claimed)
        return (
            control,
            [
                Cell(
                    c.ref.pk,
                    c.model.connection_id,
                    c.request,
                    c.reserved_usd,
                    c.ref.model_config_id,
                )
                for c in claimed
            ],
            blocked,
        )

    def started(self, cell: Cell) -> None:
        ref = self._claimed.pop(cell.id, None)
        if ref is not None:
            self._emit(events.ITEM_STARTED, self.cells.started_data(ref), key=cell.id)

    def _job_select(self) -> statements.CompiledSelect:
        """The job's fields a step needs, its row locked: one select, compiled once (in
        the database thread, where the steps run, inside their transaction)."""
        if self._job_select_compiled is None:
            self._job_select_compiled = statements.CompiledSelect(
                GenerationJob.objects.select_for_update().only(*_STEP_FIELDS).filter(pk=self.job_id)
            )
        return self._job_select_compiled

    def _control(self, job: GenerationJob) -> str:
        """``control`` on the locked job: a running job of this runner has its lease
        renewed (in memory: the caller saves ``lease_until``)."""
        if job.runner_token != self.token:
            return "lost"
        if job.status != JobStatus.RUNNING:
            return job.status
        job.lease_until = timezone.now() + timedelta(seconds=settings.GENERATION_LEASE_S)
        return "run"

    def _record(
        self,
        trip: statements.Trip,
        job: GenerationJob,
        outcomes: Sequence[Outcome],
        owned: set[int],
        out: list[tuple[str, dict[str, Any], int]],
        progress: list[dict[str, Any]],
    ) -> str | None:
        """Record finished cells in ``trip``, in the step's transaction, on the job this
        runner holds (locked). Only ``owned`` cells are recorded (this runner's running
        cells, locked), so a result can never be counted twice. The job's counts are brought
        up to date in memory too; the cells' events are appended to ``out``, the job's state
        to ``progress``. Returns why the job must fail (``generation.failures``), or None; a
        cell that failed for such a reason of its connection goes back to pending (with its
        error), to run on resume."""
        reason = None
        systematic = set()
        for o in outcomes:
            label = self.cells.model_labels.get(o.cell.meta, "a model configuration")
            why = self.failures.observe(o.cell.meta, label, o.error)
            if o.error is not None and self.failures.systematic(o.error):
                systematic.add(o.cell.id)
            reason = reason or why
        recorded = cells.record(
            self.job_id,
            [
                cells.Finished(
                    o.cell.id,
                    o.cell.meta,
                    o.cell.reserved_usd,
                    o.attempts,
                    response=o.response,
                    error=o.error,
                    retry=o.cell.id in systematic,
                    total_s=o.total_s,
                    started_at=_moment(o.started),
                )
                for o in outcomes
                if o.cell.id in owned and (o.response is not None or o.error is not None)
            ],
            prices=self.prices,
            handler=self.handler,
            item_events=self._publisher is not None,
            update_job=False,
            trip=trip,
            reply_format=self.cells.reply_format,
        )
        # The job's counts, on the locked instance (``step`` writes them).
        job.completed_cells += recorded.completed
        job.failed_cells += recorded.failed
        job.cost_usd += recorded.cost_usd
        job.reserved_usd -= recorded.released_usd
        if recorded.item_events and self._publisher is not None:
            out.extend(recorded.item_events)
            progress.append(events.state(job))
        return reason


# The job's fields a step reads: its state, budget and the event's fields.
_STEP_FIELDS = (
    "runner_token",
    "status",
    "status_message",
    "budget_usd",
    "cost_usd",
    "reserved_usd",
    "total_cells",
    "completed_cells",
    "failed_cells",
    "lease_until",
    "updated_at",
)


def _moment(epoch: float | None) -> datetime | None:
    return datetime.fromtimestamp(epoch, tz=UTC) if epoch is not None else None


def run(job_id: int) -> RunSummary:
    """Run the job live until done, paused, cancelled, out of budget or taken over; after
    a lost database connection, start again (``RECONNECT_WAITS_S``) with the same token."""
    token = uuid.uuid4().hex
    failures = 0
    while True:
        started = time.monotonic()
        try:
            return asyncio.run(run_live(GenerationWork(job_id, token=token)))
        except (OperationalError, InterfaceError):
            failures = 1 if time.monotonic() - started > STEADY_S else failures + 1
            if failures > len(RECONNECT_WAITS_S):
                raise
            wait = RECONNECT_WAITS_S[failures - 1]
            logger.warning(
                "job %s: the database connection failed; the runner starts again in %s s",
                job_id,
                wait,
                exc_info=True,
            )
        connections.close_all()  # this thread's broken connection; the next query reconnects
        time.sleep(wait)
