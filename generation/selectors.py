from __future__ import annotations

import json
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
from generation import consistency, replies
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


# What a job with a reply format adds after them: how each reply was read, and its fields
# (``parsed.<name>`` columns in the CSV, one ``parsed`` object in the JSON).
PARSE_FIELDS = [("parse_status", "parse_status"), ("parse_error", "parse_error")]


def reply_fields(job: GenerationJob) -> list[str]:
    """The names of the fields the job's reply format reads (none without one)."""
    return replies.field_names((job.config or {}).get("reply_format"))


def csv_columns(job: GenerationJob) -> list[str]:
    """The CSV's header: the spec's 13 columns first and unchanged, then, for a job with a
    reply format, ``parse_status``, ``parse_error`` and a ``parsed.<name>`` per field."""
    names = reply_fields(job)
    if not names:
        return list(CSV_COLUMNS)
    return [*CSV_COLUMNS, *(c for c, _ in PARSE_FIELDS), *(f"parsed.{n}" for n in names)]


def json_columns(job: GenerationJob) -> list[str]:
    """The JSON export's keys of an output (``parse_status``, ``parse_error`` and ``parsed``
    after the rest for a job with a reply format)."""
    if not reply_fields(job):
        return list(JSON_COLUMNS)
    return [*JSON_COLUMNS, *(c for c, _ in PARSE_FIELDS), "parsed"]


def _field_text(value: Any) -> Any:
    """A parsed field's CSV cell: numbers and text as they are, true/false, JSON text of an
    object or a list, empty for none."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return value


def export_column_batches(job: GenerationJob) -> Iterator[list[Any]]:
    """The CSV's columns (``csv_columns``), in batches of values per column."""
    names = reply_fields(job)
    if not names:
        yield from _column_batches(job, CSV_FIELDS)
        return
    for columns in _column_batches(job, [*CSV_FIELDS, *PARSE_FIELDS, ("parsed", "parsed")]):
        parsed = [p or {} for p in columns.pop()]
        columns += [[_field_text(p.get(n)) for p in parsed] for n in names]
        yield columns


def export_record_column_batches(job: GenerationJob) -> Iterator[list[Any]]:
    """The JSON export's outputs (``json_columns``), in batches of values per column."""
    extra = [*PARSE_FIELDS, ("parsed", "parsed")] if reply_fields(job) else []
    return _column_batches(job, [*JSON_FIELDS, *extra])


def percentile(values: list[int], q: float) -> float | None:
    """The nearest-rank ``q`` quantile of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))])


def statistics_for(job: GenerationJob) -> dict[str, Any]:
    """Counts, tokens, cost and latency by model, prompt and temperature; for a job with
    a reply format, how its replies were read (``by_parse_status``) and each numeric
    field's n, mean and SD by model, prompt and temperature (``fields``)."""
    groups: dict[str, dict[str, dict[str, Any]]] = {"model": {}, "prompt": {}, "temperature": {}}
    by_status: dict[str, int] = defaultdict(int)
    latencies: dict[tuple[str, str], list[int]] = defaultdict(list)
    names = reply_fields(job)
    scores: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    by_parse: dict[str, int] = defaultdict(int)
    columns = [
        "status",
        "model_config__label",
        "prompt__label",
        "temperature",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "processing_time_ms",
    ]
    rows = GenerationOutput.objects.filter(job=job).values_list(
        *columns, *(["parse_status", "parsed"] if names else [])
    )
    for row in rows.iterator(2000):
        status, model, prompt, temp, tokens_in, tokens_out, cost, latency = row[:8]
        by_status[status] += 1
        # "none": cells that sent no temperature (the provider's default).
        temperature = "none" if temp is None else f"{temp:g}"
        keys = (("model", model), ("prompt", prompt), ("temperature", temperature))
        for kind, key in keys:
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
        if names and status == "completed":
            parse_status, parsed = row[8], row[9] or {}
            by_parse[parse_status or "not read"] += 1
            for name in names:
                number = replies.numeric(parsed.get(name))
                if number is not None:
                    for kind, key in keys:
                        scores[(name, kind, key)].append(number)
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
    result: dict[str, Any] = {
        "total": job.total_cells,
        "by_status": dict(by_status),
        "cost_usd": str(job.cost_usd),
        "by_model": groups["model"],
        "by_prompt": groups["prompt"],
        "by_temperature": groups["temperature"],
    }
    if names:
        result["by_parse_status"] = dict(by_parse)
        result["fields"] = _field_statistics(names, groups, scores)
    return result


def _field_statistics(
    names: list[str],
    groups: dict[str, dict[str, dict[str, Any]]],
    scores: dict[tuple[str, str, str], list[float]],
) -> dict[str, dict[str, dict[str, Any]]]:
    """Each numeric field's n, mean and SD by model, prompt and temperature (the fields
    with no numeric value are left out)."""
    fields: dict[str, dict[str, dict[str, Any]]] = {}
    for name in names:
        entry: dict[str, dict[str, Any]] = {}
        for kind in groups:
            found = {
                key: {
                    "n": len(v),
                    "mean": round(statistics.fmean(v), 4),
                    "sd": round(statistics.stdev(v), 4) if len(v) > 1 else None,
                }
                for key in groups[kind]
                if (v := scores.get((name, kind, key)))
            }
            entry[f"by_{kind}"] = found
        if any(entry.values()):
            fields[name] = entry
    return fields


def _consistency_rows(job: GenerationJob) -> Iterator[consistency.Row]:
    rows = (
        job.outputs.filter(status="completed")
        .order_by("item__position", "pk")
        .values_list(
            "item__item_id", "model_config__label", "prompt__label", "temperature", "parsed"
        )
    )
    return (consistency.Row(*r) for r in rows.iterator(2000))


def consistency_for(job: GenerationJob, field: str | None = None) -> dict[str, Any]:
    """``consistency.summarise`` of the job's completed outputs for one of its reply
    format's fields (``field``, else the first with numbers): per item and condition n,
    mean, SD, min and max; each condition's summary; rank agreement between conditions.
    ``FieldErrors`` on ``field`` when the job reads no such field."""
    names = reply_fields(job)
    if field is not None and field not in names:
        raise FieldErrors(
            {
                "field": "One of " + ", ".join(names) + "."
                if names
                else "The job has no reply format."
            }
        )
    return {"job": job.pk, "fields": names} | consistency.summarise(
        _consistency_rows(job), names, field
    )


def consistency_items(job: GenerationJob) -> list[dict[str, Any]]:
    """Every numeric field's per-item table (``consistency.item_rows``)."""
    return consistency.item_rows(_consistency_rows(job), reply_fields(job))


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
    they may still view them (judge runs and judge files are the judges' business)."""
    if not policy.has_feature_anywhere(user, GENERATION_VIEW):
        return None
    own = GenerationJob.objects.filter(owner_id=user.pk).exclude(
        source_kind__in=["judge", "judge_file"]
    )
    jobs = list(
        policy.visible(user, GENERATION_VIEW, own.select_related("team")).order_by(
            "-created_at", "-pk"
        )[:HOME_JOBS]
    )
    return {"jobs": jobs} if jobs else None
