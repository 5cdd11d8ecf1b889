"""The cells of a job, for both runners (live and batch): building a cell's request,
reserving its worst-case cost, claiming pending cells and recording finished ones.

A cell is one ``GenerationOutput``. It is claimed (``pending`` → ``running``) with its
budget reserved, in the transaction that locks the job; its result is recorded at most
once: callers pass only the cells they still own (running, claimed by this runner or in
this batch), so no result or cost is ever counted twice.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_CEILING, Decimal
from typing import Any, NamedTuple

from django.db import connections
from django.db.models import F
from django.utils import timezone

from evalplatform import bulk
from evalplatform.prompts.rendering import Block, render
from evalplatform.providers.estimate import estimate_tokens
from evalplatform.providers.llm.types import (
    LLMRequest,
    LLMResponse,
    ProviderError,
    ResponseSchema,
)
from evalplatform.providers.models import LLMModel
from evalplatform.validation import INT_MAX
from generation import events, replies, results, statements
from generation.job_input import response_schema
from generation.models import GenerationJob, GenerationOutput, OutputStatus, SourceKind
from generation.requests import RowRequest

# Without max_tokens, replies are capped at this many tokens (and the reservation assumes it).
UNCAPPED_RESERVE_TOKENS = 4096
MICRO_USD = Decimal("0.000001")


class CellRef(NamedTuple):
    """What building a cell's request needs, read without loading model instances."""

    pk: int
    custom_id: str
    attempts: int
    prompt_id: int
    model_config_id: int
    repetition: int
    temperature: float | None
    item_id: str
    item_data: Any


CELL_REF_FIELDS = [
    "pk",
    "custom_id",
    "attempts",
    "prompt_id",
    "model_config_id",
    "repetition",
    "temperature",
    "item__item_id",
    "item__data",
]


@dataclass
class _Prompt:
    blocks: list[Block]
    defaults: dict[str, Any]
    label: str


class JobCells:
    """What a job's cells are made of, read once: its frozen prompts and its model
    configurations (model and parameters)."""

    def __init__(self, job: GenerationJob) -> None:
        self.job_id = job.pk
        self.max_tokens = job.max_tokens
        self.own_requests = job.source_kind == SourceKind.JUDGE_FILE
        self.reply_format: dict[str, Any] | None = job.config.get("reply_format")
        self.prompts = {
            p.pk: _Prompt(
                [Block(b["title"], b["body"]) for b in snap["blocks"]],
                snap.get("default_variables") or {},
                p.label,
            )
            for p, snap in zip(job.prompts.order_by("position"), job.config["prompts"], strict=True)
        }
        self.models: dict[int, tuple[LLMModel, dict[str, Any]]] = {}
        self.model_labels: dict[int, str] = {}
        self.schemas: dict[int, ResponseSchema] = {}
        for m in job.models.select_related("llm_model__connection"):
            self.models[m.pk] = (m.llm_model, m.params)
            self.model_labels[m.pk] = m.label
            if m.response_schema:
                self.schemas[m.pk] = response_schema(m.response_schema)
        # The pending cells' select, compiled once for each limit and filter.
        self._pending: dict[tuple[Any, ...], statements.CompiledSelect] = {}

    def pending(self, limit: int, **filters: Any) -> list[CellRef]:
        """Up to ``limit`` of the job's pending cells (``filters`` narrow them), oldest
        first."""
        return [CellRef(*row) for row in self._pending_select(limit, filters).rows()]

    def pending_in(self, trip: statements.Trip, limit: int, **filters: Any) -> statements.Result:
        """``pending`` as a select in ``trip``: its result's rows are the ``CellRef``s."""
        select = self._pending_select(limit, filters)
        return trip.add(
            select.sql, select.params, read=lambda rows: [CellRef(*r) for r in select.convert(rows)]
        )

    def _pending_select(self, limit: int, filters: dict[str, Any]) -> statements.CompiledSelect:
        key = (limit, *sorted(filters.items()))
        select = self._pending.get(key)
        if select is None:
            select = statements.CompiledSelect(_pending(self.job_id, limit, **filters))
            self._pending[key] = select
        return select

    @classmethod
    def for_job(cls, job_id: int) -> JobCells:
        return cls(GenerationJob.objects.get(pk=job_id))

    @property
    def prices(self) -> dict[int, LLMModel]:
        """The model of each configuration (by its pk), for ``record``."""
        return {pk: model for pk, (model, _) in self.models.items()}

    def request_for(self, cell: CellRef) -> tuple[LLMRequest, LLMModel]:
        if self.own_requests:  # a judge file's row: its own messages, to the model it named
            model, _ = self.models[cell.model_config_id]
            row = RowRequest.from_data(cell.item_data["request"])
            default = self.max_tokens or UNCAPPED_RESERVE_TOKENS
            return row.to_llm(model.model_id, default), model
        prompt = self.prompts[cell.prompt_id]
        rendered = render(prompt.blocks, cell.item_data, prompt.defaults, item_id=cell.item_id)
        model, params = self.models[cell.model_config_id]
        params = dict(params)
        # ``"temperature": null`` marks a configuration that sends none (its cells hold None).
        params.pop("temperature", None)
        return LLMRequest(
            model=model.model_id,
            system=rendered.system,
            user=rendered.user,
            temperature=cell.temperature,
            max_tokens=self.max_tokens or UNCAPPED_RESERVE_TOKENS,
            params=params,
            response_schema=self.schemas.get(cell.model_config_id),
            repetition=cell.repetition,
        ), model

    def started_data(self, cell: CellRef) -> dict[str, Any]:
        """The data of the cell's ``generation:item:started`` event."""
        return events.cell_fields(
            cell.pk,
            cell.item_id,
            self.prompts[cell.prompt_id].label,
            self.model_labels[cell.model_config_id],
            cell.repetition,
            cell.temperature,
        )


def reservation(request: LLMRequest, model: LLMModel, *, batch: bool = False) -> Decimal:
    """The most a call can cost: its input estimate with a margin, and every reply token."""
    out = request.max_tokens or UNCAPPED_RESERVE_TOKENS
    tokens_in = estimate_tokens(request.system) + estimate_tokens(request.user)
    tokens_in += sum(estimate_tokens(text) for _, text in request.turns)
    # A margin on the input side covers the estimate's error against real tokenizers.
    cost = model.cost_usd(math.ceil(tokens_in * 1.5), out, batch=batch)
    return cost.quantize(MICRO_USD, ROUND_CEILING)


# --- claiming -----------------------------------------------------------------------------------
class Claimed(NamedTuple):
    ref: CellRef
    request: LLMRequest
    model: LLMModel
    reserved_usd: Decimal


def _pending(job_id: int, limit: int, **filters: Any) -> Any:
    return (
        GenerationOutput.objects.filter(job_id=job_id, status=OutputStatus.PENDING, **filters)
        .order_by("pk")
        .values_list(*CELL_REF_FIELDS)[:limit]
    )


def pending_refs(job: GenerationJob, limit: int, **filters: Any) -> list[CellRef]:
    """Up to ``limit`` of the job's pending cells (``filters`` narrow them), oldest first
    (``JobCells.pending`` runs the same select compiled once)."""
    return [CellRef(*values) for values in _pending(job.pk, limit, **filters)]


def claim(
    cells: JobCells,
    job: GenerationJob,
    pending: Sequence[CellRef],
    *,
    batch_price: bool = False,
    also_save: Sequence[str] = (),
    trip: statements.Trip | None = None,
    **fields: Any,
) -> tuple[list[Claimed], bool]:
    """Claim ``pending`` cells of the locked ``job`` in order while their reservations (at
    the batch price with ``batch_price``) fit its budget: each is written with ``fields`` (the
    same for all) and its reservation, and the job's reservations grow by their sum.
    Returns the claimed cells and whether the budget stopped the claim (call inside the
    transaction that locked the job). ``also_save``: more of the job's fields, set by the
    caller, to write in the same UPDATE when cells are claimed. ``trip``: the writes go in
    it (the caller runs it), else they run at once."""
    available = (
        job.budget_usd - job.cost_usd - job.reserved_usd if job.budget_usd is not None else None
    )
    claimed: list[Claimed] = []
    blocked = False
    for ref in pending:
        request, model = cells.request_for(ref)
        reserve = reservation(request, model, batch=batch_price)
        if available is not None:
            if reserve > available:
                blocked = True
                break
            available -= reserve
        claimed.append(Claimed(ref, request, model, reserve))
    if claimed:
        with _trip(trip) as writes:
            mark_claimed(writes, {c.ref.pk: c.reserved_usd for c in claimed}, **fields)
            job.reserved_usd += sum((c.reserved_usd for c in claimed), Decimal(0))
            statements.save_fields(writes, job, ["reserved_usd", "updated_at", *also_save])
    return claimed, blocked


def mark_claimed(trip: statements.Trip, reserved: dict[int, Decimal], **fields: Any) -> None:
    """Write claimed cells in ``trip``: ``fields`` (the same for all) and each one's
    reservation (by pk), one UPDATE per distinct reservation (cells of one prompt length
    share one; often a step's cells all do). Django's bulk_update costs far more per row (a
    CASE per field; measured by the benchmarks)."""
    by_reserve: dict[Decimal, list[int]] = {}
    for pk, reserve in reserved.items():
        by_reserve.setdefault(reserve, []).append(pk)
    for reserve, same in by_reserve.items():
        statements.update_by_pk(trip, GenerationOutput, same, {"reserved_usd": reserve, **fields})


@contextmanager
def _trip(trip: statements.Trip | None) -> Iterator[statements.Trip]:
    """``trip``, or a new one (on a cursor of its own) that runs as the block ends."""
    if trip is not None:
        yield trip
        return
    with connections[GenerationOutput.objects.db].cursor() as cursor:
        own = statements.Trip(cursor)
        yield own
        own.run()


def release_live_cells(job: GenerationJob) -> Decimal:
    """Return the job's live cells left running (never recorded) to pending; the sum of the
    reservations they held, for the caller to take off the (locked) job's."""
    live = job.outputs.filter(status=OutputStatus.RUNNING, batch__isnull=True)
    released = sum(live.values_list("reserved_usd", flat=True), Decimal(0))
    live.update(
        status=OutputStatus.PENDING,
        reserved_usd=0,
        runner_token="",
        started_at=None,
        content="",  # a partial text, kept for watchers while it streamed
    )
    return released


# --- recording ----------------------------------------------------------------------------------
@dataclass
class Finished:
    """A claimed cell's result: a reply, or the error it ended with. ``retry``: the error
    returns the cell to pending, to be run again. ``total_s``: a live reply's seconds across
    all its attempts, waits before retrying included (None: the last attempt's only)."""

    pk: int
    model_config_id: int
    reserved_usd: Decimal
    attempts: int
    response: LLMResponse | None = None
    error: ProviderError | None = None
    retry: bool = False
    total_s: float | None = None
    started_at: datetime | None = None


@dataclass
class Recorded:
    changed: int = 0
    completed: int = 0
    failed: int = 0
    # What the job's cost grew by and its reservations shrank by (already written).
    cost_usd: Decimal = Decimal(0)
    released_usd: Decimal = Decimal(0)
    # The cells' events (event, data, cell id), for a runner that publishes them.
    item_events: list[tuple[str, dict[str, Any], int]] = field(default_factory=list)


def record(
    job_id: int,
    finished: Sequence[Finished],
    *,
    prices: Mapping[int, LLMModel],
    handler: results.ResultHandler | None,
    batch_id: int | None = None,
    item_events: bool = False,
    update_job: bool = True,
    trip: statements.Trip | None = None,
    reply_format: Mapping[str, Any] | None = None,
) -> Recorded:
    """Record results of cells the caller owns (running, and locked or guarded by the
    caller, in the caller's transaction), and add them to the job's counts, cost and
    reservations. ``prices``: the model of each configuration; ``handler``: the job's
    result handler (``results.handler_for``), which sees the replies first. ``batch_id``:
    the results came from this provider batch, at the batch price (a cell run again
    leaves it). ``item_events``: also return each recorded cell's event, to publish.
    ``update_job=False``: the caller, holding the job locked, writes its counts, cost and
    reservations itself (from the returned tally). ``trip``: the writes go in it (the
    handler's ``recorded`` and the job's counts once it has run), else they run at once.
    ``reply_format``: the job's (``generation.replies``): each completed reply's fields are
    read and kept with it."""
    rejected = (
        handler.check(job_id, {f.pk: f.response.text for f in finished if f.response is not None})
        if handler is not None
        else {}
    )
    now = timezone.now()
    tally = Recorded()
    cost_total = released = Decimal(0)
    changes: list[dict[str, Any]] = []
    for cell in finished:
        released += cell.reserved_usd
        change: dict[str, Any] = {
            "pk": cell.pk,
            "attempts": cell.attempts,
            "reserved_usd": Decimal(0),
            "completed_at": now,
        }
        if batch_id is not None:
            change["batch_id"] = batch_id
        if cell.started_at is not None:
            change["started_at"] = cell.started_at  # the call's, if it was claimed earlier
        if cell.response is not None:
            response = cell.response
            cost = (
                prices[cell.model_config_id]
                .cost_usd(response.input_tokens, response.output_tokens, batch=batch_id is not None)
                .quantize(MICRO_USD)
            )
            cost_total += cost
            problem = rejected.get(cell.pk)
            change |= {
                "status": OutputStatus.FAILED if problem else OutputStatus.COMPLETED,
                "content": response.text,
                "finish_reason": response.finish_reason[:40],
                "input_tokens": response.input_tokens,
                "output_tokens": response.output_tokens,
                "model_version": response.model_version[:200],
                "reasoning_tokens": min(response.reasoning_tokens, INT_MAX)
                if response.reasoning_tokens is not None
                else None,
                "cost_usd": cost,
                "error_kind": results.REJECTED if problem else "",
                "error_message": problem or "",
            }
            if batch_id is None:
                # processing_time_ms: what producing the output took, retries and their
                # waits included; last_attempt_ms: the call that answered.
                last_ms = round(response.latency_s * 1000)
                total_ms = round(cell.total_s * 1000) if cell.total_s is not None else last_ms
                change["processing_time_ms"] = min(max(total_ms, last_ms), INT_MAX)
                change["last_attempt_ms"] = min(last_ms, INT_MAX)
            if reply_format and not problem:
                parsed = replies.read(response.text, reply_format)
                change |= {
                    "parsed": parsed.fields,
                    "parse_status": parsed.status,
                    "parse_error": parsed.error[:500],
                }
            if problem:
                tally.failed += 1
                if item_events:
                    tally.item_events.append(_failed_event(cell, results.REJECTED, problem))
            else:
                tally.completed += 1
                if item_events:
                    tally.item_events.append(
                        (
                            events.ITEM_COMPLETED,
                            {
                                "output_id": cell.pk,
                                "input_tokens": response.input_tokens,
                                "output_tokens": response.output_tokens,
                                "cost_usd": str(cost),
                                "processing_time_ms": change.get("processing_time_ms"),
                                "last_attempt_ms": change.get("last_attempt_ms"),
                                "attempts": cell.attempts,
                                "preview": response.text[: events.PREVIEW_CHARS],
                            },
                            cell.pk,
                        )
                    )
        else:
            error = cell.error or ProviderError("No result.", kind="missing", retryable=True)
            message = error.message + (f"\n{error.raw_text}" if error.raw_text else "")
            change |= {"error_kind": error.kind[:40], "error_message": message[:4000]}
            if cell.retry:
                change |= {"status": OutputStatus.PENDING, "completed_at": None, "started_at": None}
                if batch_id is not None:
                    change["batch_id"] = None
            else:
                change["status"] = OutputStatus.FAILED
                tally.failed += 1
                if item_events:
                    tally.item_events.append(_failed_event(cell, error.kind, message))
        changes.append(change)
    with_reply = [c["pk"] for c in changes if "content" in c]

    def after() -> None:
        if with_reply and handler is not None:
            handler.recorded(job_id, with_reply)
        if changes and update_job:
            GenerationJob.objects.filter(pk=job_id).update(
                completed_cells=F("completed_cells") + tally.completed,
                failed_cells=F("failed_cells") + tally.failed,
                cost_usd=F("cost_usd") + cost_total,
                reserved_usd=F("reserved_usd") - released,
            )

    with _trip(trip) as writes:
        write(writes, changes)
        writes.then(after)
    tally.changed = len(changes)
    tally.cost_usd, tally.released_usd = cost_total, released
    return tally


def _failed_event(cell: Finished, kind: str, message: str) -> tuple[str, dict[str, Any], int]:
    data = {
        "output_id": cell.pk,
        "error_kind": kind,
        "error_message": message[:500],
        "attempts": cell.attempts,
    }
    return events.ITEM_FAILED, data, cell.pk


def write(trip: statements.Trip, changes: Sequence[dict[str, Any]]) -> None:
    """Write cells in ``trip`` (each change: ``pk`` and the fields to set): one set-based
    update per set of fields (``evalplatform.bulk.update``'s: an UPDATE ... FROM
    jsonb_to_recordset(...) on PostgreSQL, a prepared UPDATE run with executemany on SQLite),
    where per-row ORM updates or bulk_update (a CASE per field) cost far more (measured by
    bench/batch_scale.py)."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for change in changes:
        groups.setdefault(tuple(sorted(k for k in change if k != "pk")), []).append(change)
    for names, rows in groups.items():
        for sql, params, many, _ in bulk.update_statements(
            GenerationOutput,
            names,
            [[c["pk"], *(c[name] for name in names)] for c in rows],
            using=GenerationOutput.objects.db,
        ):
            trip.add(sql, params, many=many)
