"""django-q2 entry points: thin wrappers over the engine and services."""

from __future__ import annotations

import asyncio
import logging

from django.db import transaction
from django.utils import timezone
from django_q.tasks import async_task

from evalplatform.runs.engine import RunSummary, run_live
from generation.models import GenerationJob, JobStatus
from generation.services import job_fail
from generation.work import GenerationWork

logger = logging.getLogger(__name__)


def enqueue_run(job_id: int) -> None:
    async_task("generation.tasks.run_job", job_id, task_name=f"generation-job-{job_id}")


def run_job(job_id: int) -> str:
    """Run a job's pending cells until done, paused, cancelled or out of budget. An error
    of the platform itself (not of a provider) fails the job with its reason."""
    try:
        summary: RunSummary = asyncio.run(run_live(GenerationWork(job_id)))
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


def recover_jobs() -> list[int]:
    """Re-dispatch running jobs whose runner stopped renewing its lease (a killed worker).
    Scheduled every minute; harmless when nothing is stale."""
    stale = []
    with transaction.atomic():
        for job in GenerationJob.objects.select_for_update(skip_locked=True).filter(
            status=JobStatus.RUNNING
        ):
            if job.lease_until is None or job.lease_until < timezone.now():
                stale.append(job.pk)
    for job_id in stale:
        enqueue_run(job_id)
    return stale
