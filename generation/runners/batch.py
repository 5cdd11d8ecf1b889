"""Batch mode: a job's cells go through the providers' batch APIs, at the batch price.

One driver pass (``drive``; scheduled every minute, and run at once when a batch job starts):

1. every open ``ProviderBatch`` of generation jobs moves on:
   - still ``submitting`` after ``SUBMIT_GRACE`` (its worker died between the provider
     accepting it and the platform recording it): found again at the provider and adopted,
     or, if the provider has no such batch, given up and its cells made pending again;
   - the job was cancelled: the provider is asked to cancel it (once);
   - polled; once done, its results are recorded in chunks, idempotently by ``custom_id``
     (only a cell still running in that batch is recorded, so a second pass over the same
     results changes nothing). Failed, errored, expired and missing rows go back to pending
     for the next round (alone, in a new batch) until ``max_retries``, then fail;
2. every running batch job's pending cells are submitted: one batch per (connection,
   model) and at most ``GENERATION_BATCH_MAX_CELLS`` cells, each recorded before it is
   sent, with the budget reserved at the batch price (``cells.claim``). With
   ``finish_live``, cells that failed in a batch run live instead (through the one
   execution engine);
3. jobs with nothing pending or in flight complete (``lifecycle.complete_batch_jobs``).

Everything the driver knows is in the database, so a restarted worker simply continues.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from evalplatform.providers.llm.batch import Batches, BatchHandle, BatchResult, BatchSubmitError
from evalplatform.providers.llm.client import ProviderClient
from evalplatform.providers.llm.types import LLMRequest, ProviderError
from evalplatform.providers.models import ProviderConnection
from evalplatform.runs.models import BatchState, ProviderBatch
from generation import cells, events, lifecycle
from generation import results as results_
from generation.failures import FailureWatch
from generation.failures import message as failure_message
from generation.models import (
    BATCH_WORK_KIND,
    GenerationJob,
    GenerationOutput,
    JobMode,
    JobModel,
    JobStatus,
    OutputStatus,
    SourceKind,
)

logger = logging.getLogger(__name__)

WORK_KIND = BATCH_WORK_KIND
SUBMIT_GRACE = timedelta(minutes=15)
INGEST_CHUNK = 1000

db = sync_to_async


@dataclass
class DriveSummary:
    submitted_batches: int = 0
    submitted_cells: int = 0
    polled: int = 0
    recorded: int = 0
    adopted: int = 0
    given_up: int = 0
    completed_jobs: list[int] = field(default_factory=list)


def _handle(row: ProviderBatch) -> BatchHandle:
    return BatchHandle(
        row.protocol,
        row.remote_id,
        row.request_count,
        row.submitted_bytes,
        model=row.model_id,
        input_file_id=row.input_file_id,
        custom_ids=list(row.custom_ids or []),
    )


def _open_rows(job_id: int | None) -> list[ProviderBatch]:
    rows = ProviderBatch.objects.filter(work_kind=WORK_KIND, closed_at__isnull=True)
    if job_id is not None:
        rows = rows.filter(work_id=job_id)
    return list(rows.order_by("pk"))


def _job_status(job_id: int) -> str | None:
    return GenerationJob.objects.filter(pk=job_id).values_list("status", flat=True).first()


# --- recording results --------------------------------------------------------------------------
def _record(row_id: int, results: Sequence[BatchResult], *, requeue: bool = False) -> int:
    """Record one chunk of a batch's results in one transaction; returns how many cells
    changed. Only cells still running in this batch are touched; a failed, errored or
    missing row within the retry limit goes back to pending, to be re-submitted alone in
    the next round's batch. ``requeue``: every errored row goes back to pending (the job
    fails, and a resume sends them again)."""
    work_id = ProviderBatch.objects.values_list("work_id", flat=True).get(pk=row_id)
    with transaction.atomic():
        job = GenerationJob.objects.select_for_update().get(pk=work_id)
        prices = {
            jm.pk: jm.llm_model
            for jm in JobModel.objects.filter(job_id=job.pk).select_related("llm_model")
        }
        # Looked up by the job's unique (job, custom_id) index, one probe a result; the
        # batch and status are checked here (filtering on them in SQL lets SQLite scan the
        # whole batch's rows instead, for every chunk).
        rows = (
            GenerationOutput.objects.filter(
                job_id=job.pk, custom_id__in=[r.custom_id for r in results]
            )
            .order_by()  # the model's ordering would make SQLite read the job's rows in order
            .values_list(
                "pk",
                "custom_id",
                "attempts",
                "reserved_usd",
                "model_config_id",
                "batch_id",
                "status",
            )
        )
        running: dict[str, tuple[int, int, Decimal, int]] = {
            custom_id: (pk, attempts, reserved, model_config_id)
            for pk, custom_id, attempts, reserved, model_config_id, batch_id, status in rows
            if batch_id == row_id and status == OutputStatus.RUNNING
        }
        finished = []
        for result in results:
            found = running.pop(result.custom_id, None)
            if found is None:
                continue  # recorded already (a second pass), or not this batch's
            pk, attempts, reserved, model_config_id = found
            error = None
            if result.response is None:
                error = result.error or ProviderError("No result.", kind="missing", retryable=True)
            finished.append(
                cells.Finished(
                    pk,
                    model_config_id,
                    reserved,
                    attempts if requeue else attempts + 1,  # a refusal uses no retry
                    response=result.response,
                    error=error,
                    retry=error is not None
                    and (requeue or (error.retryable and attempts + 1 <= job.max_retries)),
                )
            )
        recorded = cells.record(
            job.pk,
            finished,
            prices=prices,
            handler=results_.handler_for(job.source_kind),
            batch_id=row_id,
            reply_format=job.config.get("reply_format"),
        )
        if recorded.changed:
            job.refresh_from_db()
            events.announce(job)
    return recorded.changed


def _close(row_id: int) -> int:
    """The batch is done and its results read: a cell the provider said nothing about is a
    (re-submittable) missing result. Then nothing more is done with the batch."""
    row = ProviderBatch.objects.get(pk=row_id)
    missing = ProviderError(
        f"No result returned (batch {row.state}).", kind="missing", retryable=True
    )
    recorded = _fail_cells(row.pk, missing)
    ProviderBatch.objects.filter(pk=row.pk).update(closed_at=timezone.now())
    return recorded


def _fail_cells(
    row_id: int, error: ProviderError, keep: Set[str] = frozenset(), *, requeue: bool = False
) -> int:
    """Record ``error`` for the batch's running cells (except ``keep``): each such try counts;
    pending again within the retry limit for a retryable error (or ``requeue``), else failed."""
    left = GenerationOutput.objects.filter(batch_id=row_id, status=OutputStatus.RUNNING)
    failures = [
        BatchResult(custom_id, error=error)
        for custom_id in left.values_list("custom_id", flat=True)
        if custom_id not in keep
    ]
    return _record(row_id, failures, requeue=requeue) if failures else 0


def _give_up(row_id: int, message: str) -> None:
    """A batch that never reached the provider (or vanished there): its cells run again in
    a later round (the try counts, so a provider that always loses them ends in failure)."""
    _fail_cells(row_id, ProviderError(message, kind="lost", retryable=True))
    ProviderBatch.objects.filter(pk=row_id).update(
        state=BatchState.LOST, error_message=message[:2000], closed_at=timezone.now()
    )


# --- submitting ---------------------------------------------------------------------------------
def _prepare(
    work: cells.JobCells, llm_model_id: int, limit: int
) -> tuple[ProviderBatch | None, list[tuple[str, LLMRequest]], bool]:
    """Claim up to ``limit`` pending cells of one model into a new batch row (recorded
    before anything is sent), reserving their budget at the batch price."""
    with transaction.atomic():
        job = GenerationJob.objects.select_for_update().get(pk=work.job_id)
        if job.status != JobStatus.RUNNING:
            return None, [], False
        pending = work.pending(limit, model_config__llm_model_id=llm_model_id)
        if not pending:
            return None, [], False
        model = work.models[pending[0].model_config_id][0]
        row = ProviderBatch.objects.create(
            team_id=job.team_id,
            connection_id=model.connection_id,
            work_kind=WORK_KIND,
            work_id=job.pk,
            model_id=model.model_id,
            name=f"gen-{job.pk}-{uuid.uuid4().hex[:16]}",
            protocol=model.connection.kind,
            round=1 + max(o.attempts for o in pending),
        )
        claimed, blocked = cells.claim(
            work,
            job,
            pending,
            batch_price=True,
            status=OutputStatus.RUNNING,
            batch=row,
            started_at=timezone.now(),
        )
        if not claimed:
            row.delete()
            return None, [], blocked
        requests = [(c.ref.custom_id, c.request) for c in claimed]
        row.request_count = len(requests)
        row.custom_ids = [custom_id for custom_id, _ in requests]
        row.save(update_fields=["request_count", "custom_ids"])
    return row, requests, blocked


def _record_handle(row_id: int, handle: BatchHandle) -> None:
    """The provider accepted (part of) a submission: record it at once. A submission the
    provider split by its size limits becomes one row per provider batch."""
    with transaction.atomic():
        row = ProviderBatch.objects.select_for_update().get(pk=row_id)
        target = row
        if row.remote_id:
            target = ProviderBatch.objects.create(
                team_id=row.team_id,
                connection_id=row.connection_id,
                work_kind=row.work_kind,
                work_id=row.work_id,
                model_id=row.model_id,
                name=f"{row.name}-{uuid.uuid4().hex[:6]}",
                protocol=row.protocol,
                round=row.round,
            )
            GenerationOutput.objects.filter(
                batch_id=row.pk, custom_id__in=handle.custom_ids
            ).update(batch=target)
        target.remote_id = handle.remote_id
        target.input_file_id = handle.input_file_id
        target.request_count = handle.request_count
        target.submitted_bytes = handle.submitted_bytes
        target.custom_ids = list(handle.custom_ids)
        target.state = BatchState.VALIDATING
        target.submitted_at = timezone.now()
        target.save()


# Errors after which the provider may have created the batch all the same.
AMBIGUOUS = {"timeout", "connection", "server", "overloaded"}


def _submit_failed(row_id: int, error: ProviderError, accepted: set[str]) -> None:
    """Cells of a submission the provider did not accept: pending again (a retryable error,
    within the retry limit) or failed with the provider's message. When the answer leaves it
    open whether the provider created the batch (a timeout, a dropped connection, a 5xx),
    the row stays ``submitting``: after ``SUBMIT_GRACE`` it is looked for at the provider
    and adopted, or given up, so it is never paid for twice."""
    row = ProviderBatch.objects.get(pk=row_id)
    message = f"Batch submission failed: {error.message}"[:2000]
    if not row.remote_id and not accepted and error.kind in AMBIGUOUS:
        ProviderBatch.objects.filter(pk=row.pk).update(error_message=message)
        return
    # A refused key, permission or model (``generation.failures``) fails the job: its cells
    # wait, pending, for a resume, and nothing more is submitted.
    source = GenerationJob.objects.filter(pk=row.work_id).values_list("source_kind", flat=True)
    watch = FailureWatch(live=False, stops_job=source.first() != SourceKind.JUDGE_FILE)
    reasons = watch.systematic(error)
    _fail_cells(
        row.pk,
        ProviderError(message, kind=error.kind, retryable=error.retryable, status=error.status),
        keep=accepted,
        requeue=reasons is not None,
    )
    fields: dict[str, Any] = {"error_message": message}
    if not row.remote_id:
        fields |= {"state": BatchState.FAILED, "closed_at": timezone.now()}
    ProviderBatch.objects.filter(pk=row.pk).update(**fields)
    if reasons is not None:
        lifecycle.fail(
            job_id=row.work_id, message=failure_message(error.kind, reasons, error, row.model_id)
        )


def _jobs_to_submit(job_id: int | None) -> list[tuple[int, bool, list[int]]]:
    """Running batch jobs with pending cells: (job, finish live?, models with pending)."""
    jobs = GenerationJob.objects.filter(mode=JobMode.BATCH, status=JobStatus.RUNNING)
    if job_id is not None:
        jobs = jobs.filter(pk=job_id)
    found = []
    for job in jobs:
        model_ids = sorted(
            set(
                job.outputs.filter(status=OutputStatus.PENDING).values_list(
                    "model_config__llm_model_id", flat=True
                )
            )
        )
        if model_ids:
            found.append((job.pk, job.finish_live, model_ids))
    return found


def needs_live_run(job_id: int) -> bool:
    """A finish-live batch job has live work: rows that failed in a batch wait, or a live
    runner held the job (it may have died with cells claimed)."""
    cells = GenerationOutput.objects.filter(job_id=job_id)
    return (
        cells.filter(status=OutputStatus.PENDING, attempts__gt=0).exists()
        or cells.filter(status=OutputStatus.RUNNING, batch__isnull=True).exists()
        or GenerationJob.objects.filter(pk=job_id).exclude(runner_token="").exists()
    )


# --- the pass -----------------------------------------------------------------------------------
class _Clients:
    def __init__(self) -> None:
        self.clients: dict[int, ProviderClient] = {}

    async def batches(self, connection_id: int) -> Batches:
        if connection_id not in self.clients:
            connection = await db(ProviderConnection.objects.get)(pk=connection_id)
            self.clients[connection_id] = ProviderClient.for_connection(connection)
        return self.clients[connection_id].batches()

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()


async def _advance(row: ProviderBatch, clients: _Clients, summary: DriveSummary) -> None:
    batches = await clients.batches(row.connection_id)
    now = timezone.now()
    job_status = await db(_job_status)(row.work_id)
    if job_status is None:  # the job was deleted (the admin can): stop paying for its batch
        if row.remote_id:
            with contextlib.suppress(ProviderError):
                await batches.cancel(_handle(row))
        await db(ProviderBatch.objects.filter(pk=row.pk).update)(
            error_message="The job was deleted.", closed_at=now
        )
        return
    if row.state == BatchState.SUBMITTING:
        if now - row.created_at < SUBMIT_GRACE:
            return  # probably still being sent by another worker
        known = await db(
            lambda: set(
                ProviderBatch.objects.filter(connection_id=row.connection_id)
                .exclude(remote_id="")
                .values_list("remote_id", flat=True)
            )
        )()
        found = await batches.find(
            row.name,
            request_count=row.request_count,
            created_after=row.created_at.timestamp(),
            exclude=known,
        )
        if not found:
            await db(_give_up)(row.pk, "The provider has no record of this submission.")
            summary.given_up += 1
            return
        for handle in found:
            if len(found) == 1:
                handle.custom_ids = list(row.custom_ids)
            await db(_record_handle)(row.pk, handle)
        summary.adopted += 1
        return
    handle = _handle(row)
    try:
        if job_status == JobStatus.CANCELLED and row.cancel_requested_at is None:
            await batches.cancel(handle)
            await db(ProviderBatch.objects.filter(pk=row.pk).update)(cancel_requested_at=now)
        status = await batches.poll(handle)
    except ProviderError as error:
        if error.kind == "not_found":
            await db(_give_up)(row.pk, f"The provider no longer knows this batch: {error}")
            summary.given_up += 1
        else:
            logger.warning("batch %s: polling failed: %s", row.pk, error)
            await db(ProviderBatch.objects.filter(pk=row.pk).update)(
                error_message=f"Polling failed: {error.message}"[:2000], polled_at=now
            )
        return
    summary.polled += 1
    await db(ProviderBatch.objects.filter(pk=row.pk).update)(
        state=status.state,
        provider_state=status.provider_state[:60],
        succeeded=status.succeeded,
        failed=status.failed,
        polled_at=now,
        ended_at=now if status.done else None,
    )
    if not status.done:
        return
    row.state = status.state
    chunk: list[BatchResult] = []
    # A chunk is recorded (on the database thread) while the next one is read and parsed.
    recording: asyncio.Future[int] | None = None
    try:
        async for result in batches.results(handle, status):
            chunk.append(result)
            if len(chunk) >= INGEST_CHUNK:
                if recording is not None:
                    summary.recorded += await recording
                recording = asyncio.ensure_future(db(_record)(row.pk, chunk))
                chunk = []
        last, recording = recording, None
        if last is not None:
            summary.recorded += await last
        if chunk:
            summary.recorded += await db(_record)(row.pk, chunk)
    except ProviderError as error:
        # Reading the results failed part-way: what was recorded stays; the next pass
        # reads them again and records only the rest.
        logger.warning("batch %s: reading results failed: %s", row.pk, error)
        return
    finally:
        if recording is not None:  # reading failed while a chunk was being recorded
            summary.recorded += await recording
    summary.recorded += await db(_close)(row.pk)


async def _submit(
    job_id: int, model_ids: list[int], clients: _Clients, summary: DriveSummary
) -> None:
    work = await db(cells.JobCells.for_job)(job_id)
    blocked = False
    for llm_model_id in model_ids:
        while not blocked:
            row, requests, blocked = await db(_prepare)(
                work, llm_model_id, settings.GENERATION_BATCH_MAX_CELLS
            )
            if row is None:
                break
            batches = await clients.batches(row.connection_id)

            async def accepted(handle: BatchHandle, row_id: int = row.pk) -> None:
                await db(_record_handle)(row_id, handle)

            try:
                await batches.submit(requests, display_name=row.name, on_submitted=accepted)
            except BatchSubmitError as error:
                taken = {c for h in error.handles for c in h.custom_ids}
                await db(_submit_failed)(row.pk, error, taken)
                break  # the next pass tries again, not this one in a loop
            except ProviderError as error:
                await db(_submit_failed)(row.pk, error, set())
                break
            else:
                summary.submitted_batches += 1
                summary.submitted_cells += len(requests)
    if blocked:
        await db(lifecycle.pause_batch_for_budget)(job_id)


async def drive(job_id: int | None = None) -> DriveSummary:
    """One pass over open batches and running batch jobs (all, or one job's)."""
    summary = DriveSummary()
    clients = _Clients()
    try:
        for row in await db(_open_rows)(job_id):
            try:
                await _advance(row, clients, summary)
            except Exception:  # one broken batch must not stop the others
                logger.exception("batch %s could not be advanced", row.pk)
        for pending_job, finish_live, model_ids in await db(_jobs_to_submit)(job_id):
            try:
                if finish_live and await db(needs_live_run)(pending_job):
                    # The live runner finishes them.
                    await db(lifecycle.dispatch_run)(pending_job)
                    continue
                await _submit(pending_job, model_ids, clients, summary)
            except Exception:  # one broken job must not stop the others
                logger.exception("job %s: submitting batches failed", pending_job)
        summary.completed_jobs = await db(lifecycle.complete_batch_jobs)(job_id)
        return summary
    finally:
        await clients.aclose()
        await db(connections.close_all)()
