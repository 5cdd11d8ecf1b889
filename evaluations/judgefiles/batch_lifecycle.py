"""Every status transition of a judge-file batch (OpenAI's batch statuses), in one table.

| transition | from | to | when |
|---|---|---|---|
| ``started`` | validating | in_progress | validation made the batch's job (``validate``) |
| ``refused`` | validating | failed | no line can run, or validation itself failed |
| ``cancelled`` | validating | cancelled | ``batch_cancel`` before the batch has a job |
| ``cancelling`` | in_progress | cancelling | ``batch_cancel`` (its job is cancelled) |
| ``finalizing`` | in_progress, cancelling | finalizing | its job ended, or its job is gone |
| ``ended`` | finalizing | completed, expired, cancelled, failed | ``finalize`` wrote its files |
| ``reopened`` | completed, expired, cancelled, failed | in_progress | its job runs again |

What moves a batch: the requests that create and cancel it; the tasks that validate and
finalize it; its job's end, heard once it commits (``generation.results``: the judge-file
result handler's ``finished``); and ``services.sweep``, scheduled every minute, which
expires a batch past its window, queues again a step lost with its worker, and finalizes a
batch whose job ended unheard. Reads never write: ``current`` shows a batch with its job's
counts as they are now.
"""

from __future__ import annotations

from typing import Any

from evaluations.judgefiles.models import BatchStatus, JudgeBatch

VALIDATING = BatchStatus.VALIDATING
IN_PROGRESS = BatchStatus.IN_PROGRESS
FINALIZING = BatchStatus.FINALIZING
CANCELLING = BatchStatus.CANCELLING
ENDED = frozenset(
    {BatchStatus.COMPLETED, BatchStatus.EXPIRED, BatchStatus.CANCELLED, BatchStatus.FAILED}
)
# A batch in one of these is not over: its files are not written yet.
OPEN = frozenset({VALIDATING, IN_PROGRESS, FINALIZING, CANCELLING})

# transition: (the statuses it leaves, the statuses it may reach)
TRANSITIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "started": (frozenset({VALIDATING}), frozenset({IN_PROGRESS})),
    "refused": (frozenset({VALIDATING}), frozenset({BatchStatus.FAILED})),
    "cancelled": (frozenset({VALIDATING}), frozenset({BatchStatus.CANCELLED})),
    "cancelling": (frozenset({IN_PROGRESS}), frozenset({CANCELLING})),
    "finalizing": (frozenset({IN_PROGRESS, CANCELLING}), frozenset({FINALIZING})),
    "ended": (frozenset({FINALIZING}), ENDED),
    "reopened": (ENDED, frozenset({IN_PROGRESS})),
}
# When each status was reached (the batch's ``<status>_at`` field; OpenAI's names).
STAMPS: dict[str, str] = {
    IN_PROGRESS: "in_progress_at",
    FINALIZING: "finalizing_at",
    CANCELLING: "cancelling_at",
    BatchStatus.COMPLETED: "completed_at",
    BatchStatus.CANCELLED: "cancelled_at",
    BatchStatus.FAILED: "failed_at",
}


class Refused(Exception):
    """A transition from a status it does not leave (a programming error, or a race the
    caller's lock should have ruled out)."""


def may(batch: JudgeBatch, transition: str) -> bool:
    """Whether ``transition`` leaves the batch's status."""
    return batch.status in TRANSITIONS[transition][0]


def move(
    batch: JudgeBatch, transition: str, now: Any, to: str | None = None, *, stamp: bool = True
) -> None:
    """Take ``transition`` (to ``to`` where it may reach several statuses), stamping when
    (unless ``stamp`` is false: a reopened batch keeps when it first started); the caller
    holds the batch's lock and saves it."""
    leaves, reaches = TRANSITIONS[transition]
    target = to if to is not None else next(iter(reaches)) if len(reaches) == 1 else ""
    if batch.status not in leaves or target not in reaches:
        raise Refused(f"{transition}: {batch.status} -> {target or '?'}")
    batch.status = target
    field = STAMPS.get(target)
    if stamp and field is not None:
        setattr(batch, field, now)


def current(batch: JudgeBatch) -> JudgeBatch:
    """The batch as it is now, without writing: while its job runs, the job's counts (the
    stored ones are written when it ends)."""
    job = batch.job if batch.job_id else None
    if batch.status in (IN_PROGRESS, CANCELLING, FINALIZING) and job is not None:
        batch.completed = job.completed_cells
        batch.failed = job.failed_cells + batch.invalid
    return batch
