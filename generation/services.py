"""Generation use cases: plan (validate everything), estimate, create, and the state machine."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from evalplatform.accounts import audit, policy
from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import (
    GENERATION_CREATE,
    GENERATION_MANAGE,
    PROMPTS_VIEW,
    PROVIDERS_VIEW,
)
from evalplatform.accounts.services import notify
from evalplatform.errors import Conflict, FieldErrors, Forbidden
from evalplatform.prompts import services as prompt_services
from evalplatform.prompts.models import PromptVersion
from evalplatform.prompts.rendering import MissingVariable, MissingVariables, missing_for
from evalplatform.providers.estimate import estimate_cost
from evalplatform.providers.models import LLMModel
from evalplatform.runs.models import ProviderBatch
from generation import events, sources
from generation.models import (
    GenerationItem,
    GenerationJob,
    GenerationOutput,
    JobMode,
    JobModel,
    JobPrompt,
    JobStatus,
    OutputStatus,
    SourceKind,
)

BULK = 2000


@dataclass
class ModelSpec:
    llm_model: LLMModel
    label: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class JobPlan:
    team: Team
    name: str
    mode: str
    source_kind: str
    source_meta: dict[str, Any]
    items: list[sources.Item]
    prompts: list[PromptVersion]
    models: list[ModelSpec]
    repetitions: int
    temperatures: list[float]
    max_tokens: int | None
    budget_usd: Decimal | None
    max_retries: int
    concurrency: int
    finish_live: bool = False

    @property
    def cell_count(self) -> int:
        return (
            len(self.items)
            * len(self.prompts)
            * len(self.models)
            * self.repetitions
            * len(self.temperatures)
        )


def _int(
    data: Mapping[str, Any],
    name: str,
    default: int | None,
    lo: int,
    hi: int,
    errors: dict[str, str],
) -> int | None:
    value = data.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        errors[name] = f"A whole number from {lo} to {hi}."
        return default
    try:
        number = int(value)
    except ValueError:
        errors[name] = f"A whole number from {lo} to {hi}."
        return default
    if not lo <= number <= hi:
        errors[name] = f"A whole number from {lo} to {hi}."
    return number


def _budget(value: Any, errors: dict[str, str]) -> Decimal | None:
    """A budget in USD (None or "" for no budget); a bad one is reported in ``errors``."""
    if value in (None, ""):
        return None
    try:
        budget = Decimal(str(value).strip())
        if (
            not budget.is_finite()
            or not Decimal("0.0001") <= budget < Decimal(10**8)
            or budget != budget.quantize(Decimal("0.0001"))
        ):
            raise InvalidOperation
    except InvalidOperation:
        errors["budget_usd"] = "An amount in USD from 0.0001 to 99,999,999.9999 (4 decimals)."
        return None
    return budget


def temperatures_problem(temperatures: Any) -> str | None:
    """What is wrong with a list of temperatures, if anything."""
    if (
        not isinstance(temperatures, list)
        or not temperatures
        or not all(
            isinstance(t, int | float) and not isinstance(t, bool) and 0 <= t <= 2
            for t in temperatures
        )
    ):
        return "A list of temperatures, each from 0 to 2."
    if len(set(temperatures)) != len(temperatures):
        return "Each temperature once."
    return None


def job_plan(
    *,
    user: Any,
    data: Mapping[str, Any],
    upload: bytes | None = None,
    filename: str = "",
    internal: bool = False,
) -> JobPlan:
    """Check a job configuration completely, without writing anything. ``internal``: the
    caller is the service of an internal source (``sources.INTERNAL_SOURCES``)."""
    errors: dict[str, str] = {}
    team_slug = data.get("team")
    teams = policy.teams_with(user, GENERATION_CREATE)
    team = teams.filter(slug=team_slug).first() if team_slug else None
    if team is None:
        candidates = list(teams[:2])
        if team_slug or len(candidates) != 1:
            raise FieldErrors(
                {
                    "team": "Unknown team, or one where you may not create jobs."
                    if team_slug
                    else "Name the team (slug)."
                }
            )
        team = candidates[0]
    name = str(data.get("name") or "").strip()
    if not name or len(name) > 200:
        errors["name"] = "A job needs a name of at most 200 characters."
    mode = data.get("mode", JobMode.LIVE)
    if mode not in JobMode.values:
        errors["mode"] = "live or batch."
    finish_live = data.get("finish_live", False)
    if not isinstance(finish_live, bool):
        errors["finish_live"] = "true or false."
    repetitions = _int(data, "repetitions", 1, 1, 100, errors) or 1
    max_tokens = _int(data, "max_tokens", None, 1, 1_000_000, errors)
    max_retries = _int(data, "max_retries", 3, 0, 10, errors)
    concurrency = _int(data, "concurrency", 8, 1, 256, errors) or 8
    temperatures = data.get("temperatures", [data.get("temperature", 0.7)])
    if problem := temperatures_problem(temperatures):
        errors["temperatures"] = problem
        temperatures = [0.7]
    budget = _budget(data.get("budget_usd"), errors)

    prompt_ids = data.get("prompt_versions") or []
    prompts: list[PromptVersion] = []
    if (
        not isinstance(prompt_ids, list)
        or not prompt_ids
        or not all(isinstance(p, int) and not isinstance(p, bool) for p in prompt_ids)
    ):
        errors["prompt_versions"] = "Choose at least one prompt version (a list of ids)."
    else:
        found = (
            {
                v.pk: v
                for v in PromptVersion.objects.filter(pk__in=prompt_ids, template__team=team)
                .select_related("template")
                .prefetch_related("blocks")
            }
            if policy.has_feature(user, PROMPTS_VIEW, team)
            else {}
        )
        for index, pid in enumerate(prompt_ids):
            if pid not in found:
                errors[f"prompt_versions[{index}]"] = "Unknown prompt version in this team."
            elif found[pid] in prompts:
                errors[f"prompt_versions[{index}]"] = "Listed twice."
            else:
                prompts.append(found[pid])

    models: list[ModelSpec] = []
    raw_models = data.get("models") or []
    if not isinstance(raw_models, list) or not raw_models:
        errors["models"] = "Choose at least one model (ids, or objects {model, label, params})."
    else:
        specs = [m if isinstance(m, dict) else {"model": m} for m in raw_models]
        ids = [s.get("model") for s in specs]
        found_models = (
            {
                m.pk: m
                for m in LLMModel.objects.filter(
                    pk__in=[i for i in ids if isinstance(i, int)],
                    connection__team=team,
                    active=True,
                ).select_related("connection")
            }
            if policy.has_feature(user, PROVIDERS_VIEW, team)
            else {}
        )
        labels: set[str] = set()
        for index, spec in enumerate(specs):
            model_pk = spec.get("model")
            model = found_models.get(model_pk) if isinstance(model_pk, int) else None
            params = spec.get("params") or {}
            if model is None:
                errors[f"models[{index}]"] = "Unknown or inactive model in this team."
                continue
            if not isinstance(params, dict):
                errors[f"models[{index}].params"] = "Parameters are an object."
                continue
            if reserved := reserved_params(params):
                errors[f"models[{index}].params"] = (
                    f"{', '.join(reserved)} are set by the job (model, prompt, max_tokens, "
                    "temperature, one reply), not by parameters."
                )
                continue
            label = str(
                spec.get("label")
                or model.display_name
                + (" " + ",".join(f"{k}={v}" for k, v in sorted(params.items())) if params else "")
            )[:250]
            if label in labels:
                errors[f"models[{index}]"] = "Two model configurations with the same label."
            labels.add(label)
            if mode == JobMode.BATCH and (
                not model.supports_batch or model.connection.kind == "mock"
            ):
                errors[f"models[{index}]"] = (
                    f"{model.display_name} has no batch API here; choose live mode or "
                    "another model."
                )
            models.append(ModelSpec(model, label, params))

    source = data.get("source") or {}
    if not isinstance(source, dict):
        raise FieldErrors({"source": "The source is an object: {type, format, content}."})
    kind = source.get("type", SourceKind.MANUAL if upload is not None else None)
    items: list[sources.Item] = []
    meta: dict[str, Any] = {}
    if kind == SourceKind.PROMPT_ONLY:
        items = [sources.PROMPT_ONLY_ITEM]
    elif kind == SourceKind.MANUAL:
        raw = upload if upload is not None else str(source.get("content", "")).encode()
        fmt = sources.detect_format(filename, source.get("format", ""))
        try:
            items = sources.parse_upload(raw, fmt)
        except FieldErrors as exc:
            errors.update({k: v[0] for k, v in exc.errors.items()})
        meta = {"format": fmt, "filename": filename, "bytes": len(raw)}
    elif kind in sources.SOURCE_REGISTRY and (internal or kind not in sources.INTERNAL_SOURCES):
        items = sources.SOURCE_REGISTRY[kind](user=user, team=team, spec=source)
        meta = {k: v for k, v in source.items() if k != "type"}
    else:
        errors["source.type"] = "manual, prompt_only" + "".join(
            f", {k}" for k in sources.SOURCE_REGISTRY if k not in sources.INTERNAL_SOURCES
        )
    if errors:
        raise FieldErrors(errors)

    missing: list[MissingVariable] = []
    for version in prompts:
        for gap in missing_for(version.as_blocks(), items, version.default_variables):
            missing.append(
                MissingVariable(
                    f"{gap.item_id} ({version.template.name} v{version.number})", gap.variable
                )
            )
    if missing:
        raise MissingVariables(missing)
    plan = JobPlan(
        team,
        name,
        mode,
        str(kind),
        meta,
        items,
        prompts,
        models,
        repetitions,
        [float(t) for t in temperatures],
        max_tokens,
        budget,
        max_retries or 0,
        concurrency,
        finish_live is True,
    )
    limit = settings.GENERATION_MAX_CELLS
    if plan.cell_count > limit:
        raise FieldErrors({"models": f"{plan.cell_count:,} cells; at most {limit:,} per job."})
    return plan


# Request fields the job sets itself: parameters may not override them, or the budget
# reservation (based on max_tokens and one reply) and the pricing would be wrong.
_RESERVED_KEYS = {
    "model",
    "messages",
    "contents",
    "system",
    "systemInstruction",
    "stream",
    "n",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "candidateCount",
    "maxOutputTokens",
}


def reserved_params(params: Mapping[str, Any]) -> list[str]:
    found = sorted(k for k in params if k in _RESERVED_KEYS)
    config = params.get("generationConfig")
    if isinstance(config, Mapping):
        found += [f"generationConfig.{k}" for k in sorted(config) if k in _RESERVED_KEYS]
    return found


def job_estimate(plan: JobPlan, pilot: dict[str, Any] | None = None) -> dict[str, Any]:
    """Tokens and cost per model configuration, live and batch, and the total. With a
    ``pilot`` (``generation.pilot.run_pilot``), each configuration it measured uses its
    median reply length as typical, its p90 as high, and its real prompt tokens."""
    rendered = [
        (version, prompt_services.version_render(version=version, items=plan.items))
        for version in plan.prompts
    ]
    per_model: list[dict[str, Any]] = []
    runs = plan.repetitions * len(plan.temperatures)
    for spec in plan.models:
        prompts = [(r.system, r.user) for _, results in rendered for r in results] * runs
        measured = ((pilot or {}).get("per_model") or {}).get(spec.label) or {}
        calibrated = measured.get("output_tokens_p50") is not None
        e = estimate_cost(
            model=spec.llm_model,
            prompts=prompts,
            max_tokens=plan.max_tokens,
            typical_output_tokens=max(1, round(measured["output_tokens_p50"]))
            if calibrated
            else None,
            high_output_tokens=max(1, round(measured["output_tokens_p90"])) if calibrated else None,
            input_factor=measured.get("input_factor") or 1.0,
        )
        per_model.append(
            {
                "model": spec.llm_model.pk,
                "label": spec.label,
                "requests": e.requests,
                "input_tokens": e.input_tokens,
                "output_tokens": e.output_tokens_typical,
                "output_tokens_high": e.output_tokens_high,
                "live_usd": str(e.live_usd.quantize(Decimal("0.000001"))),
                "batch_usd": str(e.batch_usd.quantize(Decimal("0.000001"))),
                "live_usd_high": str(e.live_usd_high.quantize(Decimal("0.000001"))),
                "batch_usd_high": str(e.batch_usd_high.quantize(Decimal("0.000001"))),
                "calibrated": calibrated,
            }
        )

    def total(key: str) -> str:
        return str(sum((Decimal(m[key]) for m in per_model), Decimal(0)))

    return {
        "cells": plan.cell_count,
        "mode": plan.mode,
        "per_model": per_model,
        "total": {
            k: total(k) for k in ("live_usd", "batch_usd", "live_usd_high", "batch_usd_high")
        },
        "estimated_usd": total("batch_usd" if plan.mode == JobMode.BATCH else "live_usd"),
        "estimated_usd_high": total(
            "batch_usd_high" if plan.mode == JobMode.BATCH else "live_usd_high"
        ),
        **({"pilot": pilot} if pilot is not None else {}),
    }


def pilot_cells(data: Mapping[str, Any]) -> int:
    """The ``pilot`` field of an estimate request: 0 (none) to ``MAX_PILOT_CELLS``."""
    from generation.pilot import MAX_PILOT_CELLS

    value = data.get("pilot", 0)
    if value in (None, "", 0, "0"):
        return 0
    try:
        cells = int(value)
    except (TypeError, ValueError):
        cells = -1
    if isinstance(value, bool) or not 1 <= cells <= MAX_PILOT_CELLS:
        raise FieldErrors(
            {"pilot": f"A number of cells to run first, from 1 to {MAX_PILOT_CELLS} (0: none)."}
        )
    return cells


def job_estimate_with_pilot(plan: JobPlan, data: Mapping[str, Any]) -> dict[str, Any]:
    """The estimate, calibrated by a pilot when the request asks for one."""
    from generation.pilot import run_pilot

    cells = pilot_cells(data)
    return job_estimate(plan, run_pilot(plan, cells) if cells else None)


def custom_id(job_id: int, item: int, prompt: int, model: int, repetition: int, temp: int) -> str:
    """Deterministic, unique in the job, and valid for every provider (≤ 64, [A-Za-z0-9_-])."""
    return f"j{job_id}-i{item}-p{prompt}-m{model}-r{repetition}-t{temp}"


def job_create(*, user: Any, plan: JobPlan) -> GenerationJob:
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


# --- the state machine ------------------------------------------------------------------------

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


def _locked(job: GenerationJob) -> GenerationJob:
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


def _require(user: Any, feature: str, job: GenerationJob) -> None:
    if not policy.may(user, feature, job):
        raise Forbidden()


def job_start(*, user: Any, job: GenerationJob) -> GenerationJob:
    """Start a job, or resume a paused or failed one; queue it if its owner already has one
    running."""
    _require(user, GENERATION_MANAGE, job)
    with transaction.atomic():
        job = _locked(job)
        if job.status not in ALLOWED["start"]:
            raise _refuse("start", job)
        _start_locked(job)
        audit.record(user=user, team=job.team_id, action="generation.job.start", target=job)
    return job


def _start_locked(job: GenerationJob) -> None:
    """Start (or queue) a locked job."""
    busy = (
        GenerationJob.objects.select_for_update()
        .filter(owner_id=job.owner_id, status=JobStatus.RUNNING)
        .exclude(pk=job.pk)
        .exists()
    )
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


def job_retry_failed(*, user: Any, job: GenerationJob) -> tuple[GenerationJob, int]:
    """Run the failed cells again, and only them (a provider error, or a reply the job's
    result handler rejected). A finished job runs again for them; a paused job stays paused
    (its failed cells wait with its other pending cells until it is resumed); a running or
    queued job takes them up. The job's cost keeps what the failed replies cost."""
    _require(user, GENERATION_MANAGE, job)
    with transaction.atomic():
        job, count = retry_failed_cells(job)
        audit.record(
            user=user,
            team=job.team_id,
            action="generation.job.retry_failed",
            target=job,
            cells=count,
        )
    return job, count


def retry_failed_cells(job: GenerationJob) -> tuple[GenerationJob, int]:
    """``job_retry_failed`` without the permission check, for services that checked their
    own (call inside a transaction)."""
    job = _locked(job)
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


def _dispatch_on_commit(job: GenerationJob) -> None:
    from generation.tasks import enqueue_run

    transaction.on_commit(lambda: enqueue_run(job.pk))


def job_pause(*, user: Any, job: GenerationJob, message: str = "") -> GenerationJob:
    _require(user, GENERATION_MANAGE, job)
    return _stop(job, "pause", JobStatus.PAUSED, message, user=user)


def job_cancel(*, user: Any, job: GenerationJob) -> GenerationJob:
    _require(user, GENERATION_MANAGE, job)
    return _stop(job, "cancel", JobStatus.CANCELLED, "", user=user)


def _stop(
    job: GenerationJob, action: str, status: str, message: str, *, user: Any
) -> GenerationJob:
    with transaction.atomic():
        job = _locked(job)
        if job.status not in ALLOWED[action]:
            raise _refuse(action, job)
        was_running = job.status == JobStatus.RUNNING
        job.status = status
        job.status_message = message
        if status == JobStatus.CANCELLED:
            job.finished_at = timezone.now()
        job.save(update_fields=["status", "status_message", "finished_at", "updated_at"])
        audit.record(user=user, team=job.team_id, action=f"generation.job.{action}", target=job)
        events.announce(job)
        if was_running:
            start_next_queued(owner_id=job.owner_id)
    return job


def start_next_queued(*, owner_id: int) -> GenerationJob | None:
    """Start the owner's oldest queued job if none is running (call inside a transaction)."""
    _lock_owner(owner_id)
    if GenerationJob.objects.filter(owner_id=owner_id, status=JobStatus.RUNNING).exists():
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


def _usd(amount: Decimal) -> str:
    """$1,234.5 or $0.0004: as many decimals as the amount has (at most six)."""
    text = f"{amount:,.6f}".rstrip("0").rstrip(".")
    return f"${text}"


def pause_for_budget(job: GenerationJob) -> None:
    """The budget is reached: pause the (locked, running) job, tell its owner and its
    watchers. Raising the budget and resuming continues."""
    job.status = JobStatus.PAUSED
    job.status_message = (
        f"Budget reached: {_usd(job.cost_usd)} spent of {_usd(job.budget_usd or Decimal(0))}. "
        "Raise the budget and resume to continue."
    )
    job.save(update_fields=["status", "status_message", "updated_at"])
    notify(
        user=job.owner,
        team=job.team,
        kind="generation.budget_exceeded",
        message=f"{job.name}: {job.status_message}",
        link=f"/generation/jobs/{job.pk}",
    )


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


def job_fail(*, job_id: int, message: str) -> None:
    """Mark a running job failed (an error of the platform, not of a provider): cells left
    running go back to pending (a resume runs them), reservations are released, the lease
    is dropped and the owner's next queued job starts."""
    with transaction.atomic():
        job = GenerationJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.status != JobStatus.RUNNING:
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
        start_next_queued(owner_id=job.owner_id)


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
        changes["budget_usd"] = _budget(data["budget_usd"], errors)
    unknown = set(data) - {"name", "budget_usd"}
    if unknown:
        errors.update({field: "Only name and budget_usd can change." for field in unknown})
    if errors:
        raise FieldErrors(errors)
    with transaction.atomic():
        job = _locked(job)
        if "budget_usd" in changes and job.status in (JobStatus.RUNNING, JobStatus.QUEUED):
            raise Conflict(f"A {job.status} job's budget cannot change; pause it first.")
        for field, value in changes.items():
            setattr(job, field, value)
        job.save(update_fields=[*changes, "updated_at"])
    return job


def job_delete(*, user: Any, job: GenerationJob) -> None:
    _require(user, GENERATION_MANAGE, job)
    with transaction.atomic():
        job = _locked(job)
        if job.status in (JobStatus.RUNNING, JobStatus.QUEUED):
            raise Conflict(f"A {job.status} job cannot be deleted; pause or cancel it first.")
        if ProviderBatch.objects.filter(
            work_kind="generation", work_id=job.pk, closed_at__isnull=True
        ).exists():
            raise Conflict(
                "This job still has provider batches open (they are billed and their results "
                "recorded); cancel the job and delete it once they have closed."
            )
        audit.record(user=user, team=job.team_id, action="generation.job.delete", target=job)
        job.delete()
