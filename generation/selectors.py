from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet

from evalplatform import exporting, validation
from evalplatform.accounts import policy
from evalplatform.accounts.roles import GENERATION_VIEW
from evalplatform.errors import FieldErrors
from evalplatform.runs.models import ProviderBatch
from generation.models import BATCH_WORK_KIND, GenerationJob, GenerationOutput

# The spec's CSV columns, in order, and the field each is read from.
CSV_FIELDS = [
    ("output_id", "pk"),
    ("source_item_id", "item__item_id"),
    ("prompt_variant", "prompt__label"),
    ("model_name", "model_config__label"),
    ("generated_content", "content"),
    ("input_tokens", "input_tokens"),
    ("output_tokens", "output_tokens"),
    ("cost_usd", "cost_usd"),
    ("processing_time_ms", "processing_time_ms"),
    ("status", "status"),
    ("error_message", "error_message"),
    ("created_at", "created_at"),
    ("completed_at", "completed_at"),
]
CSV_COLUMNS = [column for column, _ in CSV_FIELDS]
# The JSON export's outputs: the CSV's columns and what the spec's CSV leaves out.
JSON_FIELDS = [*CSV_FIELDS, ("last_attempt_ms", "last_attempt_ms")]
JSON_COLUMNS = [column for column, _ in JSON_FIELDS]


def jobs(*, llm_models: bool = True) -> QuerySet[GenerationJob]:
    """Jobs with their team, owner, prompts and models (and the models' ``LLMModel`` rows
    unless ``llm_models`` is false: the API shows only their ids). A job whose cells are
    still being written is none of them."""
    return (
        GenerationJob.objects.filter(writing=False)
        .select_related("team", "owner")
        .prefetch_related("prompts", "models__llm_model" if llm_models else "models")
    )


OWNER_HELP = '"me", "all", or the id of the user who created the jobs.'


def owned_by(
    jobs: QuerySet[GenerationJob], user: Any, owner: str | None
) -> QuerySet[GenerationJob]:
    """``jobs`` (already those the user may see) of one owner: ``me`` (the user's own),
    a user's id, or ``all``/none (every one). Anything else: ``FieldErrors`` on ``owner``."""
    if owner is None or owner == "" or owner == "all":
        return jobs
    if owner == "me":
        return jobs.filter(owner_id=user.pk)
    found = validation.digits(owner)
    if found is None:
        raise FieldErrors({"owner": OWNER_HELP})
    return jobs.filter(owner_id=found)


def outputs(job: GenerationJob | None = None) -> QuerySet[GenerationOutput]:
    """Outputs with their item, prompt and model; with their job and team too unless they
    are ``job``'s (then each row does not repeat the job's columns)."""
    qs = GenerationOutput.objects.select_related("item", "prompt", "model_config")
    return qs.filter(job=job) if job is not None else qs.select_related("job__team")


_DATETIME_FIELDS = ("created_at", "completed_at")


def _column_batches(job: GenerationJob, fields: list[tuple[str, str]]) -> Iterator[list[Any]]:
    """The job's outputs in batches, each batch a list of values per field of ``fields``
    (``evalplatform.exporting.column_batches``: one SELECT, flat memory)."""
    queryset = GenerationOutput.objects.filter(job=job).order_by("pk")
    return exporting.column_batches(queryset, [f for _, f in fields], _DATETIME_FIELDS)


def export_column_batches(job: GenerationJob) -> Iterator[list[Any]]:
    """The CSV's columns (in the spec's order), in batches of values per column."""
    return _column_batches(job, CSV_FIELDS)


def export_record_column_batches(job: GenerationJob) -> Iterator[list[Any]]:
    """The JSON export's outputs (``JSON_COLUMNS``), in batches of values per column."""
    return _column_batches(job, JSON_FIELDS)


def export_rows(job: GenerationJob) -> Iterator[tuple[Any, ...]]:
    """CSV rows in the spec's column order, fetched in chunks (flat memory)."""
    for columns in export_column_batches(job):
        yield from zip(*columns, strict=True)


def export_records(job: GenerationJob) -> Iterator[dict[str, Any]]:
    """The JSON export's outputs, one dict each, fetched in chunks (flat memory)."""
    for columns in export_record_column_batches(job):
        for values in zip(*columns, strict=True):
            yield dict(zip(JSON_COLUMNS, values, strict=True))


def percentile(values: list[int], q: float) -> float | None:
    """The nearest-rank ``q`` quantile of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))])


def statistics_for(job: GenerationJob) -> dict[str, Any]:
    groups: dict[str, dict[str, dict[str, Any]]] = {"model": {}, "prompt": {}, "temperature": {}}
    by_status: dict[str, int] = defaultdict(int)
    latencies: dict[tuple[str, str], list[int]] = defaultdict(list)
    rows = GenerationOutput.objects.filter(job=job).values_list(
        "status",
        "model_config__label",
        "prompt__label",
        "temperature",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "processing_time_ms",
    )
    for status, model, prompt, temp, tokens_in, tokens_out, cost, latency in rows.iterator(2000):
        by_status[status] += 1
        # "none": cells that sent no temperature (the provider's default).
        temperature = "none" if temp is None else f"{temp:g}"
        for kind, key in (("model", model), ("prompt", prompt), ("temperature", temperature)):
            entry = groups[kind].setdefault(
                key,
                {
                    "outputs": 0,
                    "completed": 0,
                    "failed": 0,
                    "input_tokens": 0,
                    "output_tokens": 0,
                    "cost_usd": Decimal(0),
                },
            )
            entry["outputs"] += 1
            entry["completed"] += status == "completed"
            entry["failed"] += status == "failed"
            entry["input_tokens"] += tokens_in
            entry["output_tokens"] += tokens_out
            entry["cost_usd"] += cost
            if latency is not None:
                latencies[(kind, key)].append(latency)
    for kind, entries in groups.items():
        for key, entry in entries.items():
            values = latencies[(kind, key)]
            entry["cost_usd"] = str(entry["cost_usd"])
            entry["latency_ms"] = {
                "mean": round(statistics.fmean(values), 1) if values else None,
                "p50": percentile(values, 0.5),
                "p90": percentile(values, 0.9),
                "p95": percentile(values, 0.95),
            }
    return {
        "total": job.total_cells,
        "by_status": dict(by_status),
        "cost_usd": str(job.cost_usd),
        "by_model": groups["model"],
        "by_prompt": groups["prompt"],
        "by_temperature": groups["temperature"],
    }


# What the job page and the API show of a provider batch.
BATCH_FIELDS = (
    "id",
    "remote_id",
    "model_id",
    "state",
    "provider_state",
    "request_count",
    "succeeded",
    "failed",
    "round",
    "error_message",
    "created_at",
    "submitted_at",
    "ended_at",
    "closed_at",
)


def job_batches(job: GenerationJob) -> QuerySet[ProviderBatch, dict[str, Any]]:
    """The job's provider batches, newest first (the job page and the API show them)."""
    rows = ProviderBatch.objects.filter(work_kind=BATCH_WORK_KIND, work_id=job.pk)
    return rows.order_by("-created_at", "-pk").values(*BATCH_FIELDS)


HOME_JOBS = 5


def home_section(user: Any) -> dict[str, Any] | None:
    """The home page's "Your recent jobs": the user's own latest jobs in the teams where
    they may still view them (judge runs are the judges' business)."""
    if not policy.has_feature_anywhere(user, GENERATION_VIEW):
        return None
    own = GenerationJob.objects.filter(owner_id=user.pk).exclude(source_kind="judge")
    jobs = list(
        policy.visible(user, GENERATION_VIEW, own.select_related("team")).order_by(
            "-created_at", "-pk"
        )[:HOME_JOBS]
    )
    return {"jobs": jobs} if jobs else None
