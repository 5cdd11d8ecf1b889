"""Generation use cases, each checking the acting user's permissions: create a planned
job (``generation.planning`` checked it), start, pause, cancel, retry its failed cells,
rename or re-budget, delete. The transitions themselves are ``generation.lifecycle``'s."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from django.db import transaction

from evalplatform import validation
from evalplatform.accounts import audit, policy
from evalplatform.accounts.roles import GENERATION_MANAGE
from evalplatform.errors import Conflict, FieldErrors, Forbidden
from evalplatform.prompts import services as prompt_services
from evalplatform.runs.models import ProviderBatch
from generation import lifecycle
from generation.models import (
    BATCH_WORK_KIND,
    GenerationItem,
    GenerationJob,
    GenerationOutput,
    JobModel,
    JobPrompt,
    JobStatus,
)
from generation.planning import JobPlan, job_estimate

BULK = 2000


def custom_id(job_id: int, item: int, prompt: int, model: int, repetition: int, temp: int) -> str:
    """Deterministic, unique in the job, and valid for every provider (≤ 64, [A-Za-z0-9_-])."""
    return f"j{job_id}-i{item}-p{prompt}-m{model}-r{repetition}-t{temp}"


def job_create(*, user: Any, plan: JobPlan) -> GenerationJob:
    """Create the planned job (``planning.job_plan`` checked the user may, in its team):
    the job, its items and every cell, in one transaction; lock its prompt versions."""
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
    }
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
        )
        items = GenerationItem.objects.bulk_create(
            [
                GenerationItem(job=job, position=i, item_id=item_id, data=data)
                for i, (item_id, data) in enumerate(plan.items)
            ],
            batch_size=BULK,
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
                JobModel(job=job, position=i, llm_model=s.llm_model, label=s.label, params=s.params)
                for i, s in enumerate(plan.models)
            ]
        )
        for version in plan.prompts:
            prompt_services.version_lock(version=version)
        cells = (
            GenerationOutput(
                job=job,
                item=item,
                prompt=prompt,
                model_config=model,
                repetition=rep,
                temperature=temp,
                custom_id=custom_id(
                    job.pk, item.position, prompt.position, model.position, rep, t_index
                ),
            )
            for item, prompt, model, rep, (t_index, temp) in itertools.product(
                items, prompts, models, range(plan.repetitions), enumerate(plan.temperatures)
            )
        )
        while chunk := list(itertools.islice(cells, BULK)):
            GenerationOutput.objects.bulk_create(chunk)
    return job


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
