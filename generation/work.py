"""Generation jobs as ``Work`` for the execution engine (``evalplatform.runs.engine``)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import ROUND_CEILING, Decimal
from typing import Any, NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from evalplatform.live.publish import ThrottledPublisher
from evalplatform.prompts.rendering import Block, render
from evalplatform.providers.estimate import estimate_tokens
from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.providers.llm.types import LLMRequest
from evalplatform.providers.models import LLMModel, ProviderConnection
from evalplatform.runs.engine import Cell, Outcome
from generation import events, results
from generation.models import GenerationJob, GenerationOutput, JobStatus, OutputStatus

# Without max_tokens, replies are capped at this many tokens (and the reservation assumes it).
UNCAPPED_RESERVE_TOKENS = 4096
MICRO_USD = Decimal("0.000001")
UPDATE_CHUNK = 500  # ids in one UPDATE ... WHERE id IN (...)


class CellRef(NamedTuple):
    """What building a cell's request needs, read without loading model instances."""

    pk: int
    custom_id: str
    attempts: int
    prompt_id: int
    model_config_id: int
    repetition: int
    temperature: float
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


def mark_claimed(reserved: dict[int, Decimal], **fields: Any) -> None:
    """Write claimed cells: ``fields`` (the same for all) and each one's reservation (by
    pk), in a few UPDATEs (cells of one prompt length share a reservation). Django's
    bulk_update costs far more per row (a CASE per field; measured by the benchmarks)."""
    pks = list(reserved)
    for start in range(0, len(pks), UPDATE_CHUNK):
        GenerationOutput.objects.filter(pk__in=pks[start : start + UPDATE_CHUNK]).update(**fields)
    by_reserve: dict[Decimal, list[int]] = {}
    for pk, reserve in reserved.items():
        by_reserve.setdefault(reserve, []).append(pk)
    for reserve, same in by_reserve.items():
        for start in range(0, len(same), UPDATE_CHUNK):
            GenerationOutput.objects.filter(pk__in=same[start : start + UPDATE_CHUNK]).update(
                reserved_usd=reserve
            )


@dataclass
class _Prompt:
    blocks: list[Block]
    defaults: dict[str, Any]


class GenerationWork:
    def __init__(self, job_id: int, *, retry: RetryPolicy | None = None, token: str | None = None):
        """``token``: the runner's (a new one by default); a runner that starts again with its
        own token takes its lease back (``begin``)."""
        job = GenerationJob.objects.get(pk=job_id)
        self.job_id = job_id
        self.handler = results.handler_for(job.source_kind)
        self.token = token or uuid.uuid4().hex
        self.concurrency = job.concurrency
        self.retry = retry or RetryPolicy(max_retries=job.max_retries)
        self.max_tokens = job.max_tokens
        self.prompts = {
            p.pk: _Prompt(
                [Block(b["title"], b["body"]) for b in snap["blocks"]],
                snap.get("default_variables") or {},
            )
            for p, snap in zip(job.prompts.order_by("position"), job.config["prompts"], strict=True)
        }
        self._publisher = events.publisher(job_id, self.token)
        self.models: dict[int, tuple[LLMModel, dict[str, Any]]] = {
            m.pk: (m.llm_model, m.params)
            for m in job.models.select_related("llm_model__connection")
        }

    @property
    def publisher(self) -> ThrottledPublisher | None:
        return self._publisher

    def _emit(self, event: str, data: dict[str, Any], key: int | None = None) -> None:
        if self._publisher is not None:
            self._publisher.add(event, data, key=key)

    # --- lease ----------------------------------------------------------------------------------
    def begin(self) -> bool:
        now = timezone.now()
        with transaction.atomic():
            job = GenerationJob.objects.select_for_update().get(pk=self.job_id)
            if job.status != JobStatus.RUNNING:
                return False
            if (
                job.runner_token not in ("", self.token)
                and job.lease_until
                and job.lease_until > now
            ):
                return False  # another runner holds it
            # Cells a dead runner left running were never recorded: they run again, and
            # their reservations are released. Recorded cells are never run twice.
            from generation.services import release_live_cells

            job.reserved_usd -= release_live_cells(job)
            job.runner_token, job.lease_until = (
                self.token,
                now + timedelta(seconds=settings.GENERATION_LEASE_S),
            )
            job.save(update_fields=["reserved_usd", "runner_token", "lease_until", "updated_at"])
        self._emit(events.JOB_STARTED, events.state(job))
        return True

    @property
    def heartbeat_s(self) -> float:
        return settings.GENERATION_LEASE_S / 3

    def heartbeat(self) -> bool:
        return bool(
            GenerationJob.objects.filter(pk=self.job_id, runner_token=self.token).update(
                lease_until=timezone.now() + timedelta(seconds=settings.GENERATION_LEASE_S)
            )
        )

    def control(self) -> str:
        now = timezone.now()
        renewed = GenerationJob.objects.filter(
            pk=self.job_id, runner_token=self.token, status=JobStatus.RUNNING
        ).update(lease_until=now + timedelta(seconds=settings.GENERATION_LEASE_S))
        if renewed:
            return "run"
        job = GenerationJob.objects.filter(pk=self.job_id).values("status", "runner_token").first()
        if job is None or job["runner_token"] != self.token:
            return "lost"
        return job["status"]

    def end(self) -> bool:
        from generation.services import start_next_queued

        with transaction.atomic():
            job = GenerationJob.objects.select_for_update().get(pk=self.job_id)
            if job.runner_token != self.token:
                return False
            live_left = job.outputs.filter(status=OutputStatus.PENDING) | job.outputs.filter(
                status=OutputStatus.RUNNING, batch__isnull=True
            )
            if job.status == JobStatus.RUNNING and live_left.exists():
                return True  # resumed while the last window drained: keep going
            fields = ["runner_token", "lease_until", "updated_at"]
            in_batches = job.outputs.filter(status=OutputStatus.RUNNING, batch__isnull=False)
            if job.status == JobStatus.RUNNING and not in_batches.exists():
                job.status, job.finished_at = JobStatus.COMPLETED, timezone.now()
                fields += ["status", "finished_at"]
            job.runner_token, job.lease_until = "", None
            job.save(update_fields=fields)
            if job.status != JobStatus.RUNNING:
                start_next_queued(owner_id=job.owner_id)
        completed = job.status == JobStatus.COMPLETED
        self._emit(events.JOB_COMPLETED if completed else events.JOB_PROGRESS, events.state(job))
        return False

    # --- cells ----------------------------------------------------------------------------------
    def connection(self, connection_id: int) -> ProviderConnection:
        return ProviderConnection.objects.get(pk=connection_id)

    def _request(self, output: GenerationOutput) -> tuple[LLMRequest, LLMModel]:
        return self.request_for(
            CellRef(
                output.pk,
                output.custom_id,
                output.attempts,
                output.prompt_id,
                output.model_config_id,
                output.repetition,
                output.temperature,
                output.item.item_id,
                output.item.data,
            )
        )

    def request_for(self, cell: CellRef) -> tuple[LLMRequest, LLMModel]:
        prompt = self.prompts[cell.prompt_id]
        rendered = render(prompt.blocks, cell.item_data, prompt.defaults, item_id=cell.item_id)
        model, params = self.models[cell.model_config_id]
        params = dict(params)
        if model.connection.kind == "mock":
            params.setdefault("seed", cell.repetition)  # repeated calls differ, reproducibly
        return LLMRequest(
            model=model.model_id,
            system=rendered.system,
            user=rendered.user,
            temperature=cell.temperature,
            max_tokens=self.max_tokens or UNCAPPED_RESERVE_TOKENS,
            params=params,
        ), model

    def _reservation(self, request: LLMRequest, model: LLMModel, *, batch: bool = False) -> Decimal:
        out = request.max_tokens or UNCAPPED_RESERVE_TOKENS
        tokens_in = estimate_tokens(request.system) + estimate_tokens(request.user)
        # A margin on the input side covers the estimate's error against real tokenizers.
        cost = model.cost_usd(math.ceil(tokens_in * 1.5), out, batch=batch)
        return cost.quantize(MICRO_USD, ROUND_CEILING)

    def claim(self, limit: int) -> tuple[list[Cell], bool]:
        cells: list[Cell] = []
        blocked = False
        with transaction.atomic():
            job = GenerationJob.objects.select_for_update().get(pk=self.job_id)
            if job.runner_token != self.token or job.status != JobStatus.RUNNING:
                return [], False
            available = (
                job.budget_usd - job.cost_usd - job.reserved_usd
                if job.budget_usd is not None
                else None
            )
            pending = list(
                job.outputs.filter(status=OutputStatus.PENDING)
                .select_related("item", "prompt", "model_config")
                .order_by("pk")[:limit]
            )
            now = timezone.now()
            for output in pending:
                request, model = self._request(output)
                reserve = self._reservation(request, model)
                if available is not None:
                    if reserve > available:
                        blocked = True
                        break
                    available -= reserve
                output.status, output.started_at, output.reserved_usd = (
                    OutputStatus.RUNNING,
                    now,
                    reserve,
                )
                output.runner_token = self.token
                cells.append(
                    Cell(output.pk, model.connection_id, request, reserve, output.model_config_id)
                )
            claimed = pending[: len(cells)]
            mark_claimed(
                {o.pk: o.reserved_usd for o in claimed},
                status=OutputStatus.RUNNING,
                started_at=now,
                runner_token=self.token,
            )
            job.reserved_usd += sum((c.reserved_usd for c in cells), Decimal(0))
            job.save(update_fields=["reserved_usd", "updated_at"])
        for output in claimed:
            self._emit(events.ITEM_STARTED, events.cell_data(output), key=output.pk)
        return cells, blocked

    def step(self, outcomes: Sequence[Outcome], limit: int) -> tuple[str, list[Cell], bool]:
        if outcomes:
            self.record(outcomes)
        control = self.control()
        if control != "run" or limit <= 0:
            return control, [], False
        cells, blocked = self.claim(limit)
        return control, cells, blocked

    def record(self, outcomes: Sequence[Outcome]) -> None:
        """Record finished cells in one transaction. Only a running cell is recorded, so a
        result can never be counted twice."""
        now = timezone.now()
        completed = failed = 0
        cost_total = released = Decimal(0)
        item_events: list[tuple[str, dict[str, Any], int]] = []
        with_reply: list[int] = []
        with transaction.atomic():
            if not GenerationJob.objects.filter(pk=self.job_id, runner_token=self.token).exists():
                return  # taken over: the new runner owns these cells now
            rejected = (
                self.handler.check(
                    self.job_id,
                    {o.cell.id: o.response.text for o in outcomes if o.response is not None},
                )
                if self.handler is not None
                else {}
            )
            for outcome in outcomes:
                cell, response, error = outcome.cell, outcome.response, outcome.error
                # Only this runner's running cells: after a takeover, the old runner's late
                # results are not recorded (and not counted).
                running = GenerationOutput.objects.filter(
                    pk=cell.id, status=OutputStatus.RUNNING, runner_token=self.token
                )
                if response is not None:
                    cost = (
                        self.models[cell.meta][0]
                        .cost_usd(response.input_tokens, response.output_tokens)
                        .quantize(MICRO_USD)
                    )
                    problem = rejected.get(cell.id)
                    updated = running.update(
                        status=OutputStatus.FAILED if problem else OutputStatus.COMPLETED,
                        content=response.text,
                        finish_reason=response.finish_reason[:40],
                        input_tokens=response.input_tokens,
                        output_tokens=response.output_tokens,
                        cost_usd=cost,
                        processing_time_ms=round(response.latency_s * 1000),
                        attempts=outcome.attempts,
                        error_kind=results.REJECTED if problem else "",
                        error_message=problem or "",
                        reserved_usd=0,
                        completed_at=now,
                    )
                    if updated:
                        with_reply.append(cell.id)
                        cost_total += cost
                        released += cell.reserved_usd
                    if updated and problem:
                        failed += 1
                        item_events.append(
                            (
                                events.ITEM_FAILED,
                                {
                                    "output_id": cell.id,
                                    "error_kind": results.REJECTED,
                                    "error_message": problem[:500],
                                    "attempts": outcome.attempts,
                                },
                                cell.id,
                            )
                        )
                    elif updated:
                        completed += 1
                        item_events.append(
                            (
                                events.ITEM_COMPLETED,
                                {
                                    "output_id": cell.id,
                                    "input_tokens": response.input_tokens,
                                    "output_tokens": response.output_tokens,
                                    "cost_usd": str(cost),
                                    "processing_time_ms": round(response.latency_s * 1000),
                                    "attempts": outcome.attempts,
                                    "preview": response.text[: events.PREVIEW_CHARS],
                                },
                                cell.id,
                            )
                        )
                elif error is not None:
                    message = error.message + (f"\n{error.raw_text}" if error.raw_text else "")
                    updated = running.update(
                        status=OutputStatus.FAILED,
                        attempts=outcome.attempts,
                        error_kind=error.kind,
                        error_message=message[:4000],
                        reserved_usd=0,
                        completed_at=now,
                    )
                    if updated:
                        failed += 1
                        released += cell.reserved_usd
                        item_events.append(
                            (
                                events.ITEM_FAILED,
                                {
                                    "output_id": cell.id,
                                    "error_kind": error.kind,
                                    "error_message": message[:500],
                                    "attempts": outcome.attempts,
                                },
                                cell.id,
                            )
                        )
            if with_reply and self.handler is not None:
                self.handler.recorded(self.job_id, with_reply)
            if completed or failed:
                GenerationJob.objects.filter(pk=self.job_id).update(
                    completed_cells=F("completed_cells") + completed,
                    failed_cells=F("failed_cells") + failed,
                    cost_usd=F("cost_usd") + cost_total,
                    reserved_usd=F("reserved_usd") - released,
                )
        if item_events and self._publisher is not None:
            for event, data, key in item_events:
                self._emit(event, data, key=key)
            self._publisher.progress(events.JOB_PROGRESS, events.current_state(self.job_id))

    def budget_exhausted(self) -> None:
        from generation.services import pause_for_budget

        with transaction.atomic():
            job = GenerationJob.objects.select_for_update().get(pk=self.job_id)
            if job.status != JobStatus.RUNNING or job.runner_token != self.token:
                return
            pause_for_budget(job)
        self._emit(events.JOB_BUDGET_EXCEEDED, events.state(job))
