"""The batch registry across jobs: every provider batch of the generation jobs a user may
see (``GET /api/generation/batches`` and ``.csv``), with its filters.

One row per ``runs.ProviderBatch`` of generation jobs (judge runs are generation jobs too),
newest first, read as plain values: the connection's name and kind are read, never the
connection itself, so its key is never loaded. The row's job, team, connection and cell
counts are joined and sub-selected in the one query, so a page costs the same number of
queries whatever its length.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, DecimalField, F, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import dateparse, timezone

from evalplatform import validation
from evalplatform.accounts import policy
from evalplatform.accounts.roles import GENERATION_VIEW
from evalplatform.errors import FieldErrors, NotFound
from evalplatform.providers.llm.kinds import adapter_for
from evalplatform.providers.models import ProviderKind
from evalplatform.runs.models import BatchState, ProviderBatch
from generation.models import (
    BATCH_WORK_KIND,
    GenerationJob,
    GenerationOutput,
    JobModel,
    OutputStatus,
)

# The registry's columns, in order: the JSON rows' keys and the CSV's header (a contract).
COLUMNS = (
    "id",
    "job_id",
    "job_name",
    "team",
    "provider",
    "connection_id",
    "connection_name",
    "model",
    "name",
    "remote_id",
    "input_file_id",
    "state",
    "provider_state",
    "round",
    "request_count",
    "succeeded",
    "failed",
    "cells_completed",
    "cells_failed",
    "cost_usd",
    "submitted_bytes",
    "error_message",
    "created_at",
    "submitted_at",
    "ended_at",
    "closed_at",
    # What was asked, as pairwiseLLM's ``batch_jobs_index.csv`` keeps it: the prompts
    # (template and version), the reasoning settings and, for a judge run, the directions.
    "prompts",
    "reasoning",
    "direction",
)
# Read from the batch's cells, after the row's own columns.
DESCRIBED = ("prompts", "reasoning", "direction")

ID_MAX = 2**63 - 1  # the id columns are 64-bit


@dataclass(frozen=True)
class BatchFilters:
    job: int | None = None
    team: int | None = None
    provider: tuple[str, ...] = ()
    connection: int | None = None
    state: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    until_exclusive: bool = False  # a date: up to the start of the next day


def _choices(raw: str, allowed: list[str], *, name: str, errors: dict[str, str]) -> tuple:
    """One value or several separated by commas, each among ``allowed``."""
    values = tuple(v.strip() for v in raw.split(","))
    if not all(v in allowed for v in values):
        errors[name] = f"One or more (comma-separated) of: {', '.join(allowed)}."
        return ()
    return values


def _moment(raw: str, *, name: str, end: bool, errors: dict[str, str]) -> tuple[datetime, bool]:
    """An ISO date or date-time; as the ``end`` of a range, a date means up to the start of
    the next day. A time without an offset is in the server's time zone. Returns the moment
    (in UTC, so every database takes it) and whether the range ends before it."""
    try:
        if len(raw) <= 10 and (day := dateparse.parse_date(raw)) is not None:
            if end:
                day += timedelta(days=1)
            start = timezone.make_aware(datetime.combine(day, time.min))
            return start.astimezone(UTC), end
        if (moment := dateparse.parse_datetime(raw)) is not None:
            if timezone.is_naive(moment):
                moment = timezone.make_aware(moment)
            return moment.astimezone(UTC), False
    except (ValueError, OverflowError):  # 2026-02-30; a day past the calendar's end
        pass
    errors[name] = "An ISO date (2026-01-31) or date and time (2026-01-31T14:00:00Z)."
    return timezone.now(), False


def filters_from(user: Any, params: Mapping[str, str]) -> BatchFilters:
    """The registry's filters from query parameters. A bad value is a 400 naming the
    parameter; a job the user may not see is a 404, as a missing one is (the same answer);
    a team is given by the slug of one where the user may view generation jobs."""
    errors: dict[str, str] = {}
    found: dict[str, Any] = {}
    for name in ("job", "connection"):
        if raw := params.get(name):
            found[name] = validation.whole_number(
                raw, name=name, lo=1, hi=ID_MAX, errors=errors, message="An id."
            )
    if raw := params.get("team"):
        slug = validation.text(raw, name="team", errors=errors, max_length=60)
        if slug:
            team = policy.teams_with(user, GENERATION_VIEW).filter(slug=slug).first()
            if team is None:
                errors["team"] = "Unknown team, or one where you may not view generation jobs."
            else:
                found["team"] = team.pk
    if raw := params.get("provider"):
        found["provider"] = _choices(raw, ProviderKind.values, name="provider", errors=errors)
    if raw := params.get("state"):
        found["state"] = _choices(raw, BatchState.values, name="state", errors=errors)
    if raw := params.get("since"):
        found["since"], _ = _moment(raw, name="since", end=False, errors=errors)
    if raw := params.get("until"):
        found["until"], found["until_exclusive"] = _moment(
            raw, name="until", end=True, errors=errors
        )
    if not errors and found.get("since") and found.get("until"):
        since, until = found["since"], found["until"]
        if until < since or (found["until_exclusive"] and until == since):
            errors["until"] = "Not before since."
    if errors:
        raise FieldErrors(errors)
    if found.get("job") is not None:
        jobs = GenerationJob.objects.filter(pk=found["job"])
        seen = policy.visible(user, GENERATION_VIEW, jobs).exists()
        if not seen and not jobs.exists():
            # A deleted job: its batches stay listed for whom may see their team.
            kept = ProviderBatch.objects.filter(work_kind=BATCH_WORK_KIND, work_id=found["job"])
            seen = policy.visible(user, GENERATION_VIEW, kept).exists()
        if not seen:
            raise NotFound()
    return BatchFilters(**found)


def _cells(value: Any, **where: Any) -> Subquery:
    """One figure over the batch's cells: those whose result came from it (a cell sent
    again in a later batch leaves it) and those waiting in it."""
    cells = (
        GenerationOutput.objects.filter(batch_id=OuterRef("pk"), **where)
        .order_by()
        .values("batch_id")
        .annotate(value=value)
        .values("value")
    )
    return Subquery(cells)


def _usd() -> DecimalField:
    return DecimalField(max_digits=14, decimal_places=6)


def batches(user: Any, filters: BatchFilters | None = None) -> QuerySet[ProviderBatch, dict]:
    """The provider batches of the generation jobs the user may see, newest first, as rows
    with ``COLUMNS`` as keys but ``DESCRIBED`` (``rows_of`` adds them)."""
    f = filters or BatchFilters()
    rows = policy.visible(
        user, GENERATION_VIEW, ProviderBatch.objects.filter(work_kind=BATCH_WORK_KIND)
    )
    if f.job is not None:
        rows = rows.filter(work_id=f.job)
    if f.team is not None:
        rows = rows.filter(team_id=f.team)
    if f.provider:
        rows = rows.filter(protocol__in=f.provider)
    if f.connection is not None:
        rows = rows.filter(connection_id=f.connection)
    if f.state:
        rows = rows.filter(state__in=f.state)
    if f.since is not None:
        rows = rows.filter(submitted_at__gte=f.since)
    if f.until is not None:
        rows = rows.filter(
            **{"submitted_at__lt" if f.until_exclusive else "submitted_at__lte": f.until}
        )
    job_name = GenerationJob.objects.filter(pk=OuterRef("work_id")).values("name")[:1]
    return (
        rows.annotate(
            job_id=F("work_id"),
            job_name=Subquery(job_name),
            team_slug=F("team__slug"),
            provider=F("protocol"),
            connection_name=F("connection__name"),
            model=F("model_id"),
            cells_completed=Coalesce(_cells(Count("pk"), status=OutputStatus.COMPLETED), 0),
            cells_failed=Coalesce(_cells(Count("pk"), status=OutputStatus.FAILED), 0),
            cost_usd=Coalesce(
                _cells(Sum("cost_usd")),
                Value(Decimal(0)),
                output_field=_usd(),
            ),
        )
        .order_by("-created_at", "-pk")
        .values(*(("team_slug" if c == "team" else c) for c in COLUMNS if c not in DESCRIBED))
    )


def rows_of(values: Iterable[dict[str, Any]], size: int = 500) -> Iterator[dict[str, Any]]:
    """Registry rows with ``COLUMNS`` as keys, in order, from ``batches``' values: what
    their batches asked is read ``size`` batches a query."""
    chunk: list[dict[str, Any]] = []
    for found in values:
        chunk.append(found)
        if len(chunk) == size:
            described = describe(chunk)
            yield from (row(v, described) for v in chunk)
            chunk = []
    if chunk:
        described = describe(chunk)
        yield from (row(v, described) for v in chunk)


def row(values: dict[str, Any], described: Mapping[int, dict[str, str]]) -> dict[str, Any]:
    """A registry row with ``COLUMNS`` as keys, in order (``described``: ``describe`` of
    its rows)."""
    found = described.get(values["id"], dict.fromkeys(DESCRIBED, ""))
    return {
        c: found[c] if c in DESCRIBED else values["team_slug" if c == "team" else c]
        for c in COLUMNS
    }


def describe(rows: list[dict[str, Any]]) -> dict[int, dict[str, str]]:
    """What the batches of ``rows`` asked, in one query over their cells: ``prompts`` (each
    prompt's label, "Template v2", joined by "; "), ``reasoning`` (each model
    configuration's setting: "off", "on", an effort or a budget of thinking tokens; empty
    where none is set) and ``direction`` ("forward", "reversed", or "both" for a judge run's
    tasks in both orders; empty for a job that is not a judge run)."""
    protocol = {r["id"]: r["provider"] for r in rows}
    prompts: dict[int, dict[str, None]] = {pk: {} for pk in protocol}
    settings: dict[int, dict[int, None]] = {pk: {} for pk in protocol}
    swapped: dict[int, set[bool]] = {pk: set() for pk in protocol}
    cells = (
        GenerationOutput.objects.filter(batch_id__in=list(protocol))
        .values_list("batch_id", "prompt__label", "model_config_id", "item__data__swapped")
        .order_by("batch_id", "prompt__position", "model_config__position")
        .distinct()
    )
    for batch, label, config, turned in cells:
        prompts[batch][label] = None
        settings[batch][config] = None
        if turned is not None:
            swapped[batch].add(bool(turned))
    wanted = {config for found in settings.values() for config in found}
    params = dict(JobModel.objects.filter(pk__in=wanted).values_list("pk", "params"))
    described = {}
    for pk in protocol:
        words = [_reasoning(protocol[pk], params.get(config) or {}) for config in settings[pk]]
        described[pk] = {
            "prompts": "; ".join(prompts[pk]),
            "reasoning": "; ".join(dict.fromkeys(w for w in words if w)),
            "direction": {
                frozenset(): "",
                frozenset({False}): "forward",
                frozenset({True}): "reversed",
            }.get(frozenset(swapped[pk]), "both"),
        }
    return described


def _reasoning(kind: str, params: Mapping[str, Any]) -> str:
    """A configuration's reasoning setting in a word, in no provider's words."""
    found = adapter_for(kind).reasoning_in(params)
    if found is None:
        return ""
    if not found.enabled:
        return "off"
    if found.effort:
        return found.effort
    return f"{found.budget_tokens} tokens" if found.budget_tokens else "on"
