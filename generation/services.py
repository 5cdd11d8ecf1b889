"""Generation use cases, each checking the acting user's permissions: create a planned
job (``generation.planning`` checked it), start, pause, cancel, retry its failed cells,
rename or re-budget, delete. The transitions themselves are ``generation.lifecycle``'s."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction

from evalplatform import bulk, validation
from evalplatform.accounts import audit, policy
from evalplatform.accounts.roles import GENERATION_MANAGE
from evalplatform.errors import Conflict, FieldErrors, Forbidden
from evalplatform.prompts import services as prompt_services
from evalplatform.providers.estimate import estimate_cost
from evalplatform.runs.models import ProviderBatch
from generation import lifecycle
from generation.models import (
    BATCH_WORK_KIND,
    GenerationItem,
    GenerationJob,
    GenerationOutput,
    JobMode,
    JobModel,
    JobPrompt,
    JobStatus,
    SourceKind,
)
from generation.planning import JobPlan, job_estimate

BULK = 2000
# Cells written per transaction: each commits in well under a second, so another team's
# writes wait no longer than that on SQLite (one writer at a time).
WRITE_CHUNK = 5000
# A job still ``writing`` this long after it was made lost its writer.
ABANDONED_AFTER = timedelta(hours=1)


def custom_id(
    job_id: int, item: int, prompt: int, model: int, repetition: int, temp: int | None
) -> str:
    """Deterministic, unique in the job, and valid for every provider (≤ 64, [A-Za-z0-9_-]).
    ``temp``: the index of the job's temperature, or None for the one slot of a model
    configuration where no temperature is sent ("tn")."""
    t = "n" if temp is None else temp
    return f"j{job_id}-i{item}-p{prompt}-m{model}-r{repetition}-t{t}"


def job_create(*, user: Any, plan: JobPlan) -> GenerationJob:
    """Create the planned job (``planning.job_plan`` checked the user may, in its team):
    the job, its items and every cell; lock its prompt versions. The job is shown once all
    of it is written; if writing fails, nothing of it stays."""
    estimate = job_estimate(plan)
    config = {
        "prompts": [
            {
                "id": v.pk,
                "template": v.template.name,
                "number": v.number,
                "blocks": [{"title": b.title, "body": b.body} for b in v.blocks.all()],
                "default_variables": v.default_variables,
            }
            for v in plan.prompts
        ],
        "models": [
            {
                "id": s.llm_model.pk,
                "model_id": s.llm_model.model_id,
                "label": s.label,
                "params": s.params,
                "response_schema": s.response_schema,
                "connection": s.llm_model.connection_id,
                "input_price_per_mtok": str(s.llm_model.input_price_per_mtok),
                "output_price_per_mtok": str(s.llm_model.output_price_per_mtok),
                "batch_discount": str(s.llm_model.batch_discount),
            }
            for s in plan.models
        ],
        "repetitions": plan.repetitions,
        "temperatures": plan.temperatures,
        "max_tokens": plan.max_tokens,
        "max_retries": plan.max_retries,
        "concurrency": plan.concurrency,
        "mode": plan.mode,
        "finish_live": plan.finish_live,
        "budget_usd": str(plan.budget_usd) if plan.budget_usd is not None else None,
        "reply_format": plan.reply_format,
    }
    # The job and its configuration first; then its items and cells a chunk per
    # transaction (``writing`` until the last), then the job is shown. Inside a caller's
    # transaction the chunks are savepoints: all of it commits with the caller's, or none.
    outer = transaction.get_connection().in_atomic_block
    with transaction.atomic():
        job = GenerationJob.objects.create(
            team=plan.team,
            owner=user,
            name=plan.name,
            mode=plan.mode,
            source_kind=plan.source_kind,
            source_meta=plan.source_meta,
            repetitions=plan.repetitions,
            temperatures=plan.temperatures,
            max_tokens=plan.max_tokens,
            budget_usd=plan.budget_usd,
            max_retries=plan.max_retries,
            concurrency=plan.concurrency,
            finish_live=plan.finish_live,
            config=config,
            estimate=estimate,
            total_cells=plan.cell_count,
            writing=True,
        )
        prompts = JobPrompt.objects.bulk_create(
            [
                JobPrompt(
                    job=job, position=i, prompt_version=v, label=f"{v.template.name} v{v.number}"
                )
                for i, v in enumerate(plan.prompts)
            ]
        )
        models = JobModel.objects.bulk_create(
            [
                JobModel(
                    job=job,
                    position=i,
                    llm_model=s.llm_model,
                    label=s.label,
                    params=s.params,
                    response_schema=s.response_schema,
                )
                for i, s in enumerate(plan.models)
            ]
        )
        for version in plan.prompts:
            prompt_services.version_lock(version=version)
    # Each configuration's temperature slots: (index in the job's list, or None when none
    # is sent, and the temperature sent).
    slots = {
        model.pk: [
            (None if temp is None else index, temp)
            for index, temp in enumerate(plan.temperatures_for(spec))
        ]
        for model, spec in zip(models, plan.models, strict=True)
    }
    per_item = len(prompts) * plan.repetitions * sum(len(s) for s in slots.values())
    step = max(1, WRITE_CHUNK // max(1, per_item))
    try:
        for first in range(0, len(plan.items), step):
            with transaction.atomic():
                _write_cells(job, plan, first, first + step, prompts, models, slots)
            bulk.between_chunks()
        with transaction.atomic():
            GenerationJob.objects.filter(pk=job.pk).update(writing=False)
    except BaseException:
        if not outer:  # a caller's transaction takes all of it back with it
            discard(job.pk)
        raise
    job.writing = False
    return job


def _write_cells(
    job: GenerationJob,
    plan: JobPlan,
    first: int,
    end: int,
    prompts: list[JobPrompt],
    models: list[JobModel],
    slots: Mapping[int, list[tuple[int | None, float | None]]],
) -> None:
    """The items at positions ``first`` to ``end`` and all their cells, by set-based
    inserts (no model instance per cell)."""
    bulk.insert(
        GenerationItem,
        ["job_id", "position", "item_id", "data"],
        (
            (job.pk, i, item_id, data)
            for i, (item_id, data) in enumerate(plan.items[first:end], first)
        ),
    )
    items = GenerationItem.objects.filter(job=job, position__gte=first, position__lt=end)
    written = list(items.order_by("position").values_list("position", "pk"))
    bulk.insert(
        GenerationOutput,
        [
            "job_id",
            "item_id",
            "prompt_id",
            "model_config_id",
            "repetition",
            "temperature",
            "custom_id",
        ],
        (
            (
                job.pk,
                item,
                prompt.pk,
                model.pk,
                rep,
                temp,
                custom_id(job.pk, position, prompt.position, model.position, rep, t_index),
            )
            for (position, item), prompt, model, rep in itertools.product(
                written, prompts, models, range(plan.repetitions)
            )
            for t_index, temp in slots[model.pk]
        ),
    )


def discard(job_id: int) -> None:
    """Delete a job a chunk of cells per transaction (a job that was never fully written:
    its writer failed or died)."""
    bulk.delete_in_chunks(GenerationOutput.objects.filter(job_id=job_id), WRITE_CHUNK)
    with transaction.atomic():
        GenerationJob.objects.filter(pk=job_id).delete()


def discard_abandoned() -> list[int]:
    """Jobs left ``writing`` an hour after they were made (their writer died mid-way, and no
    judge-file validation goes on writing them): deleted. Their ids."""
    from django.utils import timezone

    old = GenerationJob.objects.filter(
        writing=True, created_at__lt=timezone.now() - ABANDONED_AFTER
    ).exclude(source_kind=SourceKind.JUDGE_FILE)
    gone = list(old.values_list("pk", flat=True)[:20])
    for job_id in gone:
        discard(job_id)
    return gone


def _require(user: Any, feature: str, job: GenerationJob) -> None:
    if not policy.may(user, feature, job):
        raise Forbidden()


def job_start(*, user: Any, job: GenerationJob) -> GenerationJob:
    """Start a job, or resume a paused or failed one; queue it if its owner already has one
    running."""
    _require(user, GENERATION_MANAGE, job)
    with transaction.atomic():
        job = lifecycle.start(job)
        audit.record(user=user, team=job.team_id, action="generation.job.start", target=job)
    return job


def job_retry_failed(*, user: Any, job: GenerationJob) -> tuple[GenerationJob, int]:
    """Run the failed cells again, and only them (a provider error, or a reply the job's
    result handler rejected). A finished job runs again for them; a paused job stays paused
    (its failed cells wait with its other pending cells until it is resumed); a running or
    queued job takes them up. The job's cost keeps what the failed replies cost."""
    _require(user, GENERATION_MANAGE, job)
    with transaction.atomic():
        job, count = lifecycle.retry_failed(job)
        audit.record(
            user=user,
            team=job.team_id,
            action="generation.job.retry_failed",
            target=job,
            cells=count,
        )
    return job, count


def job_pause(*, user: Any, job: GenerationJob, message: str = "") -> GenerationJob:
    _require(user, GENERATION_MANAGE, job)
    with transaction.atomic():
        job = lifecycle.pause(job, message)
        audit.record(user=user, team=job.team_id, action="generation.job.pause", target=job)
    return job


def job_cancel(*, user: Any, job: GenerationJob) -> GenerationJob:
    _require(user, GENERATION_MANAGE, job)
    with transaction.atomic():
        job = lifecycle.cancel(job)
        audit.record(user=user, team=job.team_id, action="generation.job.cancel", target=job)
    return job


def job_update(*, user: Any, job: GenerationJob, data: Mapping[str, Any]) -> GenerationJob:
    """Rename a job or change its budget (``budget_usd``: an amount, or null/"" for none).
    A running or queued job's budget cannot change: pause it first."""
    _require(user, GENERATION_MANAGE, job)
    errors: dict[str, str] = {}
    changes: dict[str, Any] = {}
    if "name" in data:
        name = str(data["name"] or "").strip()
        if not name or len(name) > 200:
            errors["name"] = "A job needs a name of at most 200 characters."
        changes["name"] = name
    if "budget_usd" in data:
        changes["budget_usd"] = validation.usd(data["budget_usd"], errors=errors)
    unknown = set(data) - {"name", "budget_usd"}
    if unknown:
        errors.update({field: "Only name and budget_usd can change." for field in unknown})
    if errors:
        raise FieldErrors(errors)
    with transaction.atomic():
        job = lifecycle.lock_job(job)
        if "budget_usd" in changes and job.status in (JobStatus.RUNNING, JobStatus.QUEUED):
            raise Conflict(f"A {job.status} job's budget cannot change; pause it first.")
        for field, value in changes.items():
            setattr(job, field, value)
        job.save(update_fields=[*changes, "updated_at"])
    return job


def job_delete(*, user: Any, job: GenerationJob) -> None:
    _require(user, GENERATION_MANAGE, job)
    with transaction.atomic():
        job = lifecycle.lock_job(job)
        if job.status in (JobStatus.RUNNING, JobStatus.QUEUED):
            raise Conflict(f"A {job.status} job cannot be deleted; pause or cancel it first.")
        if ProviderBatch.objects.filter(
            work_kind=BATCH_WORK_KIND, work_id=job.pk, closed_at__isnull=True
        ).exists():
            raise Conflict(
                "This job still has provider batches open (they are billed and their results "
                "recorded); cancel the job and delete it once they have closed."
            )
        audit.record(user=user, team=job.team_id, action="generation.job.delete", target=job)
        job.delete()


# --- jobs of rows that carry their own requests (judge files) -------------------------------
OWN_MESSAGES = "Each row's own messages"
# What ``estimate_cost`` sums for a model's rows.
ESTIMATE_SUMS = (
    "requests",
    "input_tokens",
    "output_tokens_typical",
    "output_tokens_high",
    "live_usd",
    "batch_usd",
    "live_usd_high",
    "batch_usd_high",
)


class RowsJob:
    """A job whose rows carry their own requests (``generation.requests.RowRequest``), one
    cell per row to the model the row names, written a chunk at a time (never all held in
    memory): ``add`` rows, ``flush`` them (inside the caller's transaction, one per chunk:
    the job and its progress are saved with each), and ``finish`` once all are written.
    Until then the job is ``writing`` (hidden, it cannot start); ``resume`` takes up a job
    whose writer stopped after a flush. The job is batch mode when every model it ends up
    with has a batch API here (and ``live`` is not asked), else live."""

    def __init__(self, job: GenerationJob, prompt: JobPrompt, live: bool) -> None:
        self.job, self.prompt, self.live = job, prompt, live
        self.configs: dict[int, JobModel] = {
            c.llm_model_id: c for c in JobModel.objects.filter(job=job).select_related("llm_model")
        }
        self.models: dict[int, Any] = {pk: c.llm_model for pk, c in self.configs.items()}
        self.pending: list[tuple[str, dict[str, Any], Any]] = []
        self.priced = 0  # of the pending rows, those whose cost is in ``estimates``
        self.position = job.total_cells
        # Each model's running estimate (its sums kept in the job between flushes).
        self.estimates: dict[int, dict[str, Decimal]] = {
            int(pk): {key: Decimal(value) for key, value in sums.items()}
            for pk, sums in (job.estimate or {}).get("partial", {}).items()
        }

    @classmethod
    def create(
        cls,
        *,
        user: Any,
        team: Any,
        name: str,
        budget_usd: Any = None,
        max_retries: int = 3,
        concurrency: int = 8,
        live: bool = False,
        source_meta: Mapping[str, Any] | None = None,
    ) -> RowsJob:
        """A new job, with no rows yet (call inside a transaction)."""
        job = GenerationJob.objects.create(
            team=team,
            owner=user,
            name=name[:200],
            mode=JobMode.LIVE,
            source_kind=SourceKind.JUDGE_FILE,
            source_meta=dict(source_meta or {}),
            repetitions=1,
            temperatures=[],
            budget_usd=budget_usd,
            max_retries=max_retries,
            concurrency=concurrency,
            config={"live": live},
            writing=True,
        )
        prompt = JobPrompt.objects.create(
            job=job, position=0, prompt_version=None, label=OWN_MESSAGES
        )
        return cls(job, prompt, live)

    @classmethod
    def resume(cls, job: GenerationJob) -> RowsJob:
        """The writer of a job ``create`` made, as its last ``flush`` left it."""
        return cls(job, JobPrompt.objects.get(job=job, position=0), bool(job.config.get("live")))

    def add(self, item_id: str, data: dict[str, Any], llm_model: Any) -> None:
        """A row: its id (the user's, up to 200 characters), its item data (holding its
        ``request``) and the team's model it goes to; written by the next ``flush``."""
        self.pending.append((item_id, data, llm_model))

    def price(self) -> None:
        """Estimate the cost of the rows added since the last flush (CPU only: call it
        before the transaction that flushes them, which then holds the database less)."""
        by_model: dict[int, list[tuple[str, str]]] = {}
        for _, data, llm_model in self.pending[self.priced :]:
            request = data["request"]
            earlier = "\n".join(text for _, text in request.get("turns") or [])
            by_model.setdefault(llm_model.pk, []).append(
                (f"{request.get('system', '')}\n{earlier}", request["user"])
            )
            self.models.setdefault(llm_model.pk, llm_model)
        for model_pk, prompts in by_model.items():
            found = estimate_cost(model=self.models[model_pk], prompts=prompts)
            sums = self.estimates.setdefault(model_pk, {})
            for key in ESTIMATE_SUMS:
                sums[key] = sums.get(key, Decimal(0)) + Decimal(getattr(found, key))
        self.priced = len(self.pending)

    def flush(self) -> None:
        """Write the rows added since the last flush, and the job's progress."""
        self.price()
        for _, _, llm_model in self.pending:
            if llm_model.pk not in self.configs:
                self.configs[llm_model.pk] = JobModel.objects.create(
                    job=self.job,
                    position=len(self.configs),
                    llm_model=llm_model,
                    label=f"{llm_model.display_name} ({llm_model.model_id})"[:250],
                    params={},
                )
        items = GenerationItem.objects.bulk_create(
            [
                GenerationItem(job=self.job, position=self.position + n, item_id=item_id, data=data)
                for n, (item_id, data, _) in enumerate(self.pending)
            ]
        )
        GenerationOutput.objects.bulk_create(
            [
                GenerationOutput(
                    job=self.job,
                    item=item,
                    prompt=self.prompt,
                    model_config=self.configs[llm_model.pk],
                    repetition=0,
                    temperature=data["request"].get("temperature"),
                    custom_id=custom_id(
                        self.job.pk, item.position, 0, self.configs[llm_model.pk].position, 0, 0
                    ),
                )
                for item, (_, data, llm_model) in zip(items, self.pending, strict=True)
            ]
        )
        self.position += len(self.pending)
        self.pending, self.priced = [], 0
        self.job.total_cells = self.position
        self.job.estimate = {
            "partial": {
                str(pk): {key: str(value) for key, value in sums.items()}
                for pk, sums in self.estimates.items()
            }
        }
        self.job.save(update_fields=["total_cells", "estimate", "updated_at"])

    def finish(self) -> GenerationJob:
        """Write what is left and the job's totals, frozen configuration and estimate; the
        job is shown (call inside a transaction)."""
        if self.pending:
            self.flush()
        models = list(self.models.values())
        batch = bool(models) and not self.live and all(m.batch_capable for m in models)
        job = self.job
        job.mode = JobMode.BATCH if batch else JobMode.LIVE
        job.total_cells = self.position
        job.writing = False
        per_model = []
        for model_pk, config in self.configs.items():
            found = self.estimates.get(model_pk, {})
            model = self.models[model_pk]

            def total(name: str, found: dict[str, Decimal] = found) -> Decimal:
                return found.get(name, Decimal(0))

            per_model.append(
                {
                    "model": model.pk,
                    "label": config.label,
                    "requests": int(total("requests")),
                    "input_tokens": int(total("input_tokens")),
                    "output_tokens": int(total("output_tokens_typical")),
                    "output_tokens_high": int(total("output_tokens_high")),
                    **{
                        key: str(total(key).quantize(Decimal("0.000001")))
                        for key in ("live_usd", "batch_usd", "live_usd_high", "batch_usd_high")
                    },
                    "calibrated": False,
                }
            )
        sums = {
            key: str(sum((Decimal(m[key]) for m in per_model), Decimal(0)))
            for key in ("live_usd", "batch_usd", "live_usd_high", "batch_usd_high")
        }
        kind = "batch" if batch else "live"
        job.estimate = {
            "cells": self.position,
            "mode": job.mode,
            "per_model": per_model,
            "total": sums,
            "estimated_usd": sums[f"{kind}_usd"],
            "estimated_usd_high": sums[f"{kind}_usd_high"],
        }
        job.config = {
            "prompts": [
                {
                    "id": None,
                    "template": OWN_MESSAGES,
                    "number": 0,
                    "blocks": [],
                    "default_variables": {},
                }
            ],
            "models": [
                {
                    "id": m.pk,
                    "model_id": m.model_id,
                    "label": self.configs[m.pk].label,
                    "params": {},
                    "connection": m.connection_id,
                    "input_price_per_mtok": str(m.input_price_per_mtok),
                    "output_price_per_mtok": str(m.output_price_per_mtok),
                    "batch_discount": str(m.batch_discount),
                }
                for m in models
            ],
            "repetitions": 1,
            "temperatures": [],
            "max_tokens": None,
            "max_retries": job.max_retries,
            "concurrency": job.concurrency,
            "mode": job.mode,
            "finish_live": False,
            "budget_usd": str(job.budget_usd) if job.budget_usd is not None else None,
        }
        job.save(
            update_fields=["mode", "total_cells", "estimate", "config", "writing", "updated_at"]
        )
        return job
