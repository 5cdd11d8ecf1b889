"""Live events of generation jobs, with the spec's event names.

A job's WebSocket group is ``generation.job.<id>``. Clients get a snapshot first
(``generation:job:snapshot``: status, counts, cost and the partial text of the cells being
generated), then the events below, at most ~10 messages a second a job:

- ``generation:job:started``, ``generation:job:progress`` (also sent on every status change),
  ``generation:job:completed``, ``generation:job:failed``, ``generation:job:budget_exceeded``:
  the job's state (status, total, completed, failed, progress, cost_usd, ...);
- ``generation:item:started``: a cell was claimed (output_id, item_id, prompt, model,
  repetition, temperature);
- ``generation:item:token``: streamed text of a cell (output_id, offset, delta): ``delta``
  belongs at ``offset`` of the cell's text; offset 0 starts the text afresh (a retried call);
- ``generation:item:completed`` / ``generation:item:failed``: a cell's result.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Case, TextField, Value, When

from evalplatform.live.publish import ThrottledPublisher
from evalplatform.live.transport import send_on_commit
from generation.models import GenerationJob, GenerationOutput, OutputStatus

JOB_STARTED = "generation:job:started"
JOB_PROGRESS = "generation:job:progress"
JOB_COMPLETED = "generation:job:completed"
JOB_FAILED = "generation:job:failed"
JOB_BUDGET_EXCEEDED = "generation:job:budget_exceeded"
JOB_SNAPSHOT = "generation:job:snapshot"
ITEM_STARTED = "generation:item:started"
ITEM_TOKEN = "generation:item:token"
ITEM_COMPLETED = "generation:item:completed"
ITEM_FAILED = "generation:item:failed"

EVENTS = [
    JOB_STARTED,
    JOB_PROGRESS,
    ITEM_STARTED,
    ITEM_TOKEN,
    ITEM_COMPLETED,
    ITEM_FAILED,
    JOB_COMPLETED,
    JOB_FAILED,
    JOB_BUDGET_EXCEEDED,
]
PREVIEW_CHARS = 300
SNAPSHOT_CELLS = 256  # at most this many cells in flight in a snapshot (a job's concurrency)


def group(job_id: int) -> str:
    return f"generation.job.{job_id}"


_STATE_FIELDS = [
    "pk",
    "status",
    "status_message",
    "total_cells",
    "completed_cells",
    "failed_cells",
    "cost_usd",
    "budget_usd",
]


def state(job: GenerationJob | dict[str, Any]) -> dict[str, Any]:
    """The job's counts and status as every job event carries them."""
    row = job if isinstance(job, dict) else {f: getattr(job, f) for f in _STATE_FIELDS}
    total, completed, failed = row["total_cells"], row["completed_cells"], row["failed_cells"]
    return {
        "job_id": row["pk"],
        "status": row["status"],
        "status_message": row["status_message"],
        "total": total,
        "completed": completed,
        "failed": failed,
        "progress": round((completed + failed) / total, 4) if total else 0.0,
        "cost_usd": str(row["cost_usd"]),
        "budget_usd": None if row["budget_usd"] is None else str(row["budget_usd"]),
    }


def current_state(job_id: int) -> dict[str, Any]:
    return state(GenerationJob.objects.values(*_STATE_FIELDS).get(pk=job_id))


def announce(job: GenerationJob, event: str = JOB_PROGRESS) -> None:
    """Tell the job's watchers about a change made outside a runner (start, pause, cancel,
    failure), once the transaction commits."""
    send_on_commit(group(job.pk), [{"event": event, "data": state(job)}])


def cell_fields(
    output_id: int,
    item_id: str,
    prompt: str,
    model: str,
    repetition: int,
    temperature: float | None,
) -> dict[str, Any]:
    """A cell as ``generation:item:started`` and the snapshot show it."""
    return {
        "output_id": output_id,
        "item_id": item_id,
        "prompt": prompt,
        "model": model,
        "repetition": repetition,
        "temperature": temperature,
    }


def cell_data(output: GenerationOutput) -> dict[str, Any]:
    return cell_fields(
        output.pk,
        output.item.item_id,
        output.prompt.label,
        output.model_config.label,
        output.repetition,
        output.temperature,
    )


def snapshot(job_id: int) -> dict[str, Any]:
    # The cells being generated live (those in provider batches have no text to show).
    running = (
        GenerationOutput.objects.filter(
            job_id=job_id, status=OutputStatus.RUNNING, batch__isnull=True
        )
        .select_related("item", "prompt", "model_config")
        .order_by("pk")[:SNAPSHOT_CELLS]
    )
    processing = [cell_data(o) | {"text": o.content} for o in running]
    return {"event": JOB_SNAPSHOT, "data": current_state(job_id) | {"processing": processing}}


def publisher(job_id: int, runner_token: str) -> ThrottledPublisher | None:
    """The throttled publisher of one run; it also keeps the partial text of running cells in
    their rows, so a client that connects part-way sees it in its snapshot."""
    if not settings.GENERATION_LIVE_EVENTS:
        return None

    def save_texts(texts: dict[int, str]) -> None:
        # One statement for every cell that streamed since the last message.
        GenerationOutput.objects.filter(
            pk__in=list(texts), status=OutputStatus.RUNNING, runner_token=runner_token
        ).update(
            content=Case(
                *(When(pk=pk, then=Value(text)) for pk, text in texts.items()),
                output_field=TextField(),
            )
        )

    return ThrottledPublisher(
        group(job_id),
        token_event=ITEM_TOKEN,
        interval=1 / settings.LIVE_MAX_MESSAGES_PER_S,
        save_texts=save_texts,
    )
