"""django-q2 entry points: thin wrappers over the runners and the job lifecycle."""

from __future__ import annotations

import asyncio
import logging

from generation import lifecycle, services
from generation.models import GenerationJob, JobMode
from generation.runners import batch, live

logger = logging.getLogger(__name__)


def run_job(job_id: int) -> str:
    """Run a job's pending cells until done, paused, cancelled or out of budget. An error
    of the platform itself (not of a provider) fails the job with its reason. A batch job
    is submitted to the providers' batch APIs (``runners.batch``), except that with
    ``finish_live`` the cells that failed in a batch run live here."""
    job = GenerationJob.objects.filter(pk=job_id).values("mode", "finish_live").first()
    if job is None:
        return "gone"
    if job["mode"] == JobMode.BATCH and not (job["finish_live"] and batch.needs_live_run(job_id)):
        try:
            summary = asyncio.run(batch.drive(job_id))
        except Exception as exc:
            logger.exception("job %s: the batch driver failed", job_id)
            lifecycle.fail(job_id=job_id, message=f"The batch driver failed: {exc}"[:500])
            return "failed"
        return f"submitted {summary.submitted_cells} cells in {summary.submitted_batches} batches"
    try:
        run = live.run(job_id)
    except Exception as exc:
        logger.exception("job %s: the runner failed", job_id)
        lifecycle.fail(
            job_id=job_id, message=f"The runner failed: {type(exc).__name__}: {exc}"[:500]
        )
        return "failed"
    logger.info(
        "job %s: %s succeeded, %s failed, stopped by %s",
        job_id,
        run.succeeded,
        run.failed,
        run.stopped_by or "completion",
    )
    return run.stopped_by or "completed"


def drive_batches() -> dict:
    """Scheduled every minute: poll, record and re-submit provider batches of all jobs."""
    summary = asyncio.run(batch.drive())
    return vars(summary)


def recover_jobs() -> list[int]:
    """Re-dispatch running jobs whose live runner stopped renewing its lease (a killed
    worker), and delete jobs whose writer died before all their cells were written.
    Scheduled every minute; harmless when nothing is stale."""
    services.discard_abandoned()
    return lifecycle.recover_stale_runs()
