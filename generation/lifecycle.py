"""Every status transition of a generation job, and the dispatch of its runner.

| transition | from | to |
|---|---|---|
| ``start`` | created, paused or failed (resume) | running, or queued if the owner runs one |
| ``pause`` | running, queued | paused |
| ``cancel`` | created, queued, running, paused | cancelled |
| ``retry_failed`` | completed, failed (they run again), paused, running, queued | the same |
| ``pause_run_for_budget`` / ``pause_batch_for_budget`` | running | paused |
| ``end_run`` / ``complete_batch_jobs`` | running | completed (every cell done) |
| ``fail`` | running | failed |

One running job per user among the jobs that occupy task workers (``HOLDS_SLOT``: live jobs
of the user's own items): whenever such a job stops, ``start_next_queued`` starts the owner's
oldest queued one. Batch jobs (they wait at the provider), judge runs and judge files never
queue: they run side by side. Runners are dispatched to django-q2 by a declared path
(``RUN_JOB``: a system check resolves it), so this module never imports the tasks, each within its
team's share of the task workers (``evalplatform.runs.fairshare``). A live runner holds
a lease on the job (``take_lease``, released by ``end_run``).

Functions taking a job lock it themselves, in the caller's transaction if there is one;
permission checks and audit records are the caller's (``generation.services``). Every
terminal transition (``cancel``, ``end_run`` and ``complete_batch_jobs`` completing it,
``fail``) tells the job's source kind once it commits (``generation.results.job_finished``):
the one way other apps hear that a job ended.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from evalplatform.accounts.services import notify, notify_once
from evalplatform.errors import Conflict
from evalplatform.runs import fairshare, tasks
from generation import events, results
from generation.cells import release_live_cells
from generation.models import HOLDS_SLOT, GenerationJob, JobMode, JobStatus, OutputStatus

# The runner's task (this module cannot import it: the runners use the lifecycle).
RUN_JOB = tasks.declared("generation.tasks.run_job")
ALLOWED = {
    "start": {JobStatus.CREATED, JobStatus.PAUSED, JobStatus.FAILED},
    "pause": {JobStatus.RUNNING, JobStatus.QUEUED},
    "cancel": {JobStatus.CREATED, JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.PAUSED},
    "retry failed cells": {
        JobStatus.COMPLETED,
        JobStatus.FAILED,
        JobStatus.PAUSED,
        JobStatus.RUNNING,
        JobStatus.QUEUED,
    },
}


# --- locks and dispatch -------------------------------------------------------------------------
def _ended(job: GenerationJob) -> None:
    """The job reached a terminal status: its source kind hears it once this commits."""
    job_id, kind, status = job.pk, job.source_kind, job.status
    transaction.on_commit(lambda: results.job_finished(job_id, kind, status))


def lock_job(job: GenerationJob) -> GenerationJob:
    """The job, freshly read and locked, with its owner locked too (call inside a
    transaction)."""
    job = GenerationJob.objects.select_for_update().get(pk=job.pk)
    _lock_owner(job.owner_id)
    return job


def _lock_owner(owner_id: int) -> None:
    """Serialize "one running job per user" decisions: with no running job there is no job
    row to lock, so lock the owner's row (a constraint backs this up)."""
    get_user_model().objects.select_for_update().filter(pk=owner_id).exists()


def _refuse(action: str, job: GenerationJob) -> Conflict:
    allowed = ", ".join(sorted(ALLOWED[action]))
    return Conflict(f"A {job.status} job cannot {action}; only a job that is {allowed} can.")


def dispatch_run(job_id: int, team_id: int | None = None) -> None:
    """Queue the job's runner (``generation.tasks.run_job``) as work of the job's team: it
    runs within the team's share of the task workers (``evalplatform.runs.fairshare``)."""
    if team_id is None:
        team_id = GenerationJob.objects.filter(pk=job_id).values_list("team_id", flat=True).first()
        if team_id is None:
            return  # deleted
    fairshare.submit(
        team_id=team_id,
        func=RUN_JOB,
        args=[job_id],
        key=_run_key(job_id),
        name=_run_key(job_id),
    )


def _run_key(job_id: int) -> str:
    return f"generation-job-{job_id}"


def _dispatch_on_commit(job: GenerationJob) -> None:
    transaction.on_commit(lambda: dispatch_run(job.pk, job.team_id))


# --- transitions asked for by users -------------------------------------------------------------
def start(job: GenerationJob) -> GenerationJob:
    """Start a job, or resume a paused or failed one; queue it if its owner already has one
    running."""
    with transaction.atomic(savepoint=False):
        job = lock_job(job)
        if job.writing:
            raise Conflict("The job's cells are still being written: start it once they are.")
        if job.status not in ALLOWED["start"]:
            raise _refuse("start", job)
        _start_locked(job)
    return job


def _start_locked(job: GenerationJob) -> None:
    """Start (or queue) a locked job."""
    busy = job.holds_slot and _slot_taken(job.owner_id, but=job.pk)
    job.status = JobStatus.QUEUED if busy else JobStatus.RUNNING
    job.queued_at = timezone.now()
    if not busy:
        job.started_at = job.started_at or timezone.now()
    job.status_message = ""
    job.finished_at = None  # a failed job resumes
    job.save(
        update_fields=[
            "status",
            "queued_at",
            "started_at",
            "status_message",
            "finished_at",
            "updated_at",
        ]
    )
    if not busy:
        _dispatch_on_commit(job)
    events.announce(job)


def retry_failed(job: GenerationJob) -> tuple[GenerationJob, int]:
    """Run the failed cells again, and only them. A finished job runs again for them; a
    paused job stays paused; a running or queued job takes them up. Returns the job and how
    many cells."""
    with transaction.atomic(savepoint=False):
        job = lock_job(job)
        if job.status not in ALLOWED["retry failed cells"]:
            raise _refuse("retry failed cells", job)
        count = job.outputs.filter(status=OutputStatus.FAILED).update(
            status=OutputStatus.PENDING,
            content="",
            finish_reason="",
            attempts=0,
            error_kind="",
            error_message="",
            batch=None,
            runner_token="",
            started_at=None,
            completed_at=None,
        )
        if not count:
            raise Conflict("The job has no failed cells.")
        job.failed_cells -= count  # the job row is locked
        job.save(update_fields=["failed_cells", "updated_at"])
        if job.status in (JobStatus.COMPLETED, JobStatus.FAILED):
            _start_locked(job)
        else:
            events.announce(job)
    return job, count


def pause(job: GenerationJob, message: str = "") -> GenerationJob:
    return _stop(job, "pause", JobStatus.PAUSED, message)


def cancel(job: GenerationJob) -> GenerationJob:
    return _stop(job, "cancel", JobStatus.CANCELLED, "")


def _stop(job: GenerationJob, action: str, status: str, message: str) -> GenerationJob:
    with transaction.atomic(savepoint=False):
        job = lock_job(job)
        if job.status not in ALLOWED[action]:
            raise _refuse(action, job)
        was_running = job.status == JobStatus.RUNNING
        job.status = status
        job.status_message = message
        if status == JobStatus.CANCELLED:
            job.finished_at = timezone.now()
        job.save(update_fields=["status", "status_message", "finished_at", "updated_at"])
        events.announce(job)
        if status == JobStatus.CANCELLED:
            _ended(job)
        if was_running:
            start_next_queued(owner_id=job.owner_id)
    return job


def _slot_taken(owner_id: int, *, but: int | None = None) -> bool:
    """Whether one of the owner's running jobs holds the owner's slot (the owner row is
    locked by the caller)."""
    running = GenerationJob.objects.filter(HOLDS_SLOT, owner_id=owner_id, status=JobStatus.RUNNING)
    if but is not None:
        running = running.exclude(pk=but)
    return running.exists()


def start_next_queued(*, owner_id: int) -> GenerationJob | None:
    """Start the owner's oldest queued job if none holds the owner's slot (call inside a
    transaction)."""
    _lock_owner(owner_id)
    if _slot_taken(owner_id):
        return None
    nxt = (
        GenerationJob.objects.select_for_update()
        .filter(owner_id=owner_id, status=JobStatus.QUEUED)
        .order_by("queued_at", "pk")
        .first()
    )
    if nxt is None:
        return None
    nxt.status = JobStatus.RUNNING
    nxt.started_at = nxt.started_at or timezone.now()
    nxt.save(update_fields=["status", "started_at", "updated_at"])
    _dispatch_on_commit(nxt)
    events.announce(nxt)
    return nxt


# --- transitions made by runners ----------------------------------------------------------------
def take_lease(job_id: int, token: str) -> GenerationJob | None:
    """A live runner (``token``) takes the running job's lease, unless another runner holds
    it; cells a dead runner left running go back to pending, their reservations released.
    The job, or None when it is not running or held."""
    now = timezone.now()
    with transaction.atomic():
        job = GenerationJob.objects.select_for_update().get(pk=job_id)
        if job.status != JobStatus.RUNNING:
            return None
        if job.runner_token not in ("", token) and job.lease_until and job.lease_until > now:
            return None  # another runner holds it
        # Cells a dead runner left running were never recorded: they run again, and
        # their reservations are released. Recorded cells are never run twice.
        job.reserved_usd -= release_live_cells(job)
        job.runner_token, job.lease_until = (
            token,
            now + timedelta(seconds=settings.GENERATION_LEASE_S),
        )
        job.save(update_fields=["reserved_usd", "runner_token", "lease_until", "updated_at"])
    return job


def end_run(job_id: int, token: str) -> tuple[bool, GenerationJob | None]:
    """A live run ends: the job completes if nothing is left (and no provider batch is in
    flight), the lease is dropped, and if the job stopped, the owner's next queued job
    starts. Returns whether to keep going (the job was resumed while the last window
    drained), and the job as left (None if another runner holds it)."""
    with transaction.atomic():
        job = GenerationJob.objects.select_for_update().get(pk=job_id)
        if job.runner_token != token:
            return False, None
        # The runner has nothing in flight now. Live cells still running under it were
        # claimed and never recorded (calls aborted by a pause or a cancel, cells claimed
        # ahead and not started): they run again, on resume or in the next window.
        job.reserved_usd -= release_live_cells(job)
        fields = ["reserved_usd", "updated_at"]
        if (
            job.status == JobStatus.RUNNING
            and job.outputs.filter(status=OutputStatus.PENDING).exists()
        ):
            job.save(update_fields=fields)
            return True, None  # resumed while the last window drained: keep going
        fields += ["runner_token", "lease_until"]
        in_batches = job.outputs.filter(status=OutputStatus.RUNNING, batch__isnull=False)
        if job.status == JobStatus.RUNNING and not in_batches.exists():
            job.status, job.finished_at = JobStatus.COMPLETED, timezone.now()
            fields += ["status", "finished_at"]
        job.runner_token, job.lease_until = "", None
        job.save(update_fields=fields)
        if "status" in fields:
            _ended(job)
        if job.status != JobStatus.RUNNING:
            start_next_queued(owner_id=job.owner_id)
    return False, job


def _usd(amount: Decimal) -> str:
    """$1,234.5 or $0.0004: as many decimals as the amount has (at most six)."""
    text = f"{amount:,.6f}".rstrip("0").rstrip(".")
    return f"${text}"


def _pause_for_budget(job: GenerationJob) -> None:
    """The budget is reached: pause the (locked, running) job and tell its owner. Raising
    the budget and resuming continues."""
    job.status = JobStatus.PAUSED
    job.status_message = (
        f"Budget reached: {_usd(job.cost_usd)} spent of {_usd(job.budget_usd or Decimal(0))}. "
        "Raise the budget and resume to continue."
    )
    job.save(update_fields=["status", "status_message", "updated_at"])
    # Resumed without a higher budget, the job stops again at once: the owner has been told.
    notify_once(
        user=job.owner,
        team=job.team,
        kind="generation.budget_exceeded",
        message=f"{job.name}: {job.status_message}",
        link=f"/generation/jobs/{job.pk}",
    )


def pause_run_for_budget(job_id: int, token: str) -> GenerationJob | None:
    """Nothing more fits a live run's budget: pause the job if this runner still holds it
    (its ``end_run`` then starts the owner's next queued job). The paused job, for the
    runner to announce, or None."""
    with transaction.atomic():
        job = GenerationJob.objects.select_for_update().get(pk=job_id)
        if job.status != JobStatus.RUNNING or job.runner_token != token:
            return None
        _pause_for_budget(job)
    return job


def pause_batch_for_budget(job_id: int) -> None:
    """Nothing more fits a batch job's budget: once nothing is in flight (batches may still
    release reservations), pause it, tell its watchers and start the owner's next job."""
    with transaction.atomic():
        job = GenerationJob.objects.select_for_update().get(pk=job_id)
        if job.status != JobStatus.RUNNING:
            return
        if job.outputs.filter(status=OutputStatus.RUNNING).exists():
            return  # batches in flight may release reservations: wait for them
        _pause_for_budget(job)
        events.announce(job, events.JOB_BUDGET_EXCEEDED)
        start_next_queued(owner_id=job.owner_id)


def complete_batch_jobs(job_id: int | None = None) -> list[int]:
    """Batch jobs (all, or one) with nothing pending or in flight and no live runner are
    complete; their ids."""
    jobs = GenerationJob.objects.filter(mode=JobMode.BATCH, status=JobStatus.RUNNING)
    if job_id is not None:
        jobs = jobs.filter(pk=job_id)
    done = []
    for candidate in jobs.values_list("pk", flat=True):
        with transaction.atomic():
            job = GenerationJob.objects.select_for_update().get(pk=candidate)
            left = job.outputs.filter(status__in=[OutputStatus.PENDING, OutputStatus.RUNNING])
            if job.status != JobStatus.RUNNING or left.exists() or job.runner_token:
                continue
            job.status, job.finished_at = JobStatus.COMPLETED, timezone.now()
            job.reserved_usd = Decimal(0)
            job.save(update_fields=["status", "finished_at", "reserved_usd", "updated_at"])
            events.announce(job, events.JOB_COMPLETED)
            _ended(job)
            start_next_queued(owner_id=job.owner_id)
            done.append(job.pk)
    return done


def fail(*, job_id: int, message: str, token: str | None = None) -> None:
    """Mark a running job failed (an error of the platform, or systematic failures of its
    provider calls, ``generation.failures``): cells left running go back to pending (a
    resume runs them), reservations are released, the lease is dropped, the owner is told
    and the owner's next queued job starts. ``token``: only if that runner holds the job."""
    with transaction.atomic():
        job = GenerationJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.status != JobStatus.RUNNING:
            return
        if token is not None and job.runner_token != token:
            return
        _lock_owner(job.owner_id)
        # Cells in provider batches stay there (their results are still recorded) and keep
        # their reservations; the live cells left running give theirs back.
        released = release_live_cells(job)
        job.status, job.status_message, job.finished_at = JobStatus.FAILED, message, timezone.now()
        job.reserved_usd -= released
        job.runner_token, job.lease_until = "", None
        job.save()
        events.announce(job, events.JOB_FAILED)
        _ended(job)
        notify(
            user=job.owner,
            team=job.team,
            kind="generation.failed",
            message=f"{job.name} failed: {message}"[:500],
            link=f"/generation/jobs/{job.pk}",
        )
        start_next_queued(owner_id=job.owner_id)


def recover_stale_runs() -> list[int]:
    """Re-dispatch running jobs whose live runner stopped renewing its lease (a killed
    worker); their ids. Batch jobs between live runs need no runner (the batch driver moves
    them), and a job whose runner waits for its team's share is not stale (the team's queue
    starts it)."""
    stale = []
    with transaction.atomic():
        for job in (
            GenerationJob.objects.select_for_update(skip_locked=True)
            .filter(status=JobStatus.RUNNING)
            .exclude(mode=JobMode.BATCH, runner_token="")
        ):
            if job.lease_until is None or job.lease_until < timezone.now():
                stale.append((job.pk, job.team_id))
    parked = fairshare.waiting([_run_key(job_id) for job_id, _ in stale])
    stale = [(job_id, team_id) for job_id, team_id in stale if _run_key(job_id) not in parked]
    for job_id, team_id in stale:
        dispatch_run(job_id, team_id)
    return [job_id for job_id, _ in stale]
