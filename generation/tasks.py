"""django-q2 entry points: thin wrappers over the engine and services."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from django.db import InterfaceError, OperationalError, connections, transaction
from django.utils import timezone
from django_q.tasks import async_task

from evalplatform.runs.engine import RunSummary, run_live
from generation import batch_runner
from generation.models import GenerationJob, JobMode, JobStatus
from generation.services import job_fail
from generation.work import GenerationWork

logger = logging.getLogger(__name__)
# A lost database connection (a restart, a failover, a dropped session) is not the job's
# failure: its runner starts again after each of these waits, taking its own lease back, and
# runs only what is left (each step commits whole or not at all). Then it gives up. A run
# that went on for STEADY_S before losing the connection starts the count afresh.
RECONNECT_WAITS_S = (1.0, 3.0, 10.0)
STEADY_S = 60.0


def enqueue_run(job_id: int) -> None:
    async_task("generation.tasks.run_job", job_id, task_name=f"generation-job-{job_id}")


def run_job(job_id: int) -> str:
    """Run a job's pending cells until done, paused, cancelled or out of budget. An error
    of the platform itself (not of a provider) fails the job with its reason. A batch job
    is submitted to the providers' batch APIs (``batch_runner``), except that with
    ``finish_live`` the cells that failed in a batch run live here."""
    job = GenerationJob.objects.filter(pk=job_id).values("mode", "finish_live").first()
    if job is None:
        return "gone"
    if job["mode"] == JobMode.BATCH and not (
        job["finish_live"] and batch_runner.needs_live_run(job_id)
    ):
        try:
            batch = asyncio.run(batch_runner.drive(job_id))
        except Exception as exc:
            logger.exception("job %s: the batch driver failed", job_id)
            job_fail(job_id=job_id, message=f"The batch driver failed: {exc}"[:500])
            return "failed"
        return f"submitted {batch.submitted_cells} cells in {batch.submitted_batches} batches"
    try:
        summary = _run_live(job_id)
    except Exception as exc:
        logger.exception("job %s: the runner failed", job_id)
        job_fail(job_id=job_id, message=f"The runner failed: {type(exc).__name__}: {exc}"[:500])
        return "failed"
    logger.info(
        "job %s: %s succeeded, %s failed, stopped by %s",
        job_id,
        summary.succeeded,
        summary.failed,
        summary.stopped_by or "completion",
    )
    return summary.stopped_by or "completed"


def _run_live(job_id: int) -> RunSummary:
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


def drive_batches() -> dict:
    """Scheduled every minute: poll, record and re-submit provider batches of all jobs."""
    summary = asyncio.run(batch_runner.drive())
    return vars(summary)


def recover_jobs() -> list[int]:
    """Re-dispatch running jobs whose live runner stopped renewing its lease (a killed
    worker). Batch jobs between live runs need no runner (``drive_batches`` moves them).
    Scheduled every minute; harmless when nothing is stale."""
    stale = []
    with transaction.atomic():
        for job in (
            GenerationJob.objects.select_for_update(skip_locked=True)
            .filter(status=JobStatus.RUNNING)
            .exclude(mode=JobMode.BATCH, runner_token="")
        ):
            if job.lease_until is None or job.lease_until < timezone.now():
                stale.append(job.pk)
    for job_id in stale:
        enqueue_run(job_id)
    return stale
