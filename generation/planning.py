"""Planning a job before it exists: ``job_plan`` checks a configuration completely
(team, prompts, models, parameters, source and every prompt variable of every item)
without writing anything, and ``job_estimate`` says what it will cost. A pilot
(``generation.pilot``) can calibrate the estimate with a few real calls."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings

from evalplatform import validation
from evalplatform.accounts import policy
from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import GENERATION_CREATE, PROMPTS_VIEW, PROVIDERS_VIEW
from evalplatform.errors import FieldErrors
from evalplatform.prompts import services as prompt_services
from evalplatform.prompts.models import PromptVersion
from evalplatform.prompts.rendering import (
    MissingVariable,
    MissingVariables,
    missing_for,
    placeholder_problems,
)
from evalplatform.providers.estimate import estimate_cost
from evalplatform.providers.models import LLMModel
from generation import sources
from generation.models import JobMode, SourceKind

MAX_PROBLEMS = 5  # malformed placeholders quoted per prompt version


# How a slot without temperature is shown: the wizard's choice, and the estimate's note.
NO_TEMPERATURE_CHOICE = "none (provider default)"
NO_TEMPERATURE = "no temperature sent"


def temperature_label(temperature: float | None, none: str = NO_TEMPERATURE) -> str:
    return none if temperature is None else f"{temperature:g}"


@dataclass
class ModelSpec:
    llm_model: LLMModel
    label: str
    # ``{"temperature": null}`` among them: this configuration sends no temperature.
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def sends_temperature(self) -> bool:
        return "temperature" not in self.params


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
    temperatures: list[float | None]  # None: a slot where no temperature is sent
    max_tokens: int | None
    budget_usd: Decimal | None
    max_retries: int
    concurrency: int
    finish_live: bool = False

    def temperatures_for(self, spec: ModelSpec) -> list[float | None]:
        """The temperature slots of a model configuration: the job's, or one slot sending
        none for a configuration that sends no temperature."""
        return list(self.temperatures) if spec.sends_temperature else [None]

    @property
    def all_send_temperature(self) -> bool:
        return all(spec.sends_temperature for spec in self.models)

    @property
    def model_slots(self) -> int:
        """The model configurations times their temperature slots."""
        return sum(len(self.temperatures_for(spec)) for spec in self.models)

    @property
    def cell_count(self) -> int:
        return len(self.items) * len(self.prompts) * self.model_slots * self.repetitions

    @property
    def temperature_labels(self) -> list[str]:
        return [temperature_label(t, NO_TEMPERATURE_CHOICE) for t in self.temperatures]


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

    def whole(name: str, default: int, lo: int, hi: int) -> int:
        number = validation.whole_number(
            data.get(name, default), name=name, lo=lo, hi=hi, errors=errors, default=default
        )
        return default if number is None else number

    repetitions = whole("repetitions", 1, 1, 100)
    max_tokens = validation.max_tokens(data.get("max_tokens"), errors=errors)
    max_retries = whole("max_retries", 3, 0, 10)
    concurrency = whole("concurrency", 8, 1, 256)
    temperatures = validation.temperatures(
        data.get("temperatures", [data.get("temperature", 0.7)]),
        errors=errors,
        default=[0.7],
        allow_none=True,
    )
    budget = validation.usd(data.get("budget_usd"), errors=errors)

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
                    "temperature, one reply), not by parameters; "
                    '"temperature": null sends no temperature for this model.'
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
            if mode == JobMode.BATCH and not model.batch_capable:
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
    elif (
        isinstance(kind, str)
        and kind in sources.SOURCE_REGISTRY
        and (internal or kind not in sources.INTERNAL_SOURCES)
    ):
        try:
            items = sources.SOURCE_REGISTRY[kind](user=user, team=team, spec=source)
        except FieldErrors as exc:
            errors.update({k: v[0] for k, v in exc.errors.items()})
        meta = {k: v for k, v in source.items() if k != "type"}
    else:
        errors["source.type"] = "One of: " + ", ".join(sources.public_kinds()) + "."
    for version in prompts:
        if problems := placeholder_problems(version.as_blocks()):
            more = len(problems) - MAX_PROBLEMS
            errors[f"prompt_versions[{prompt_ids.index(version.pk)}]"] = (
                f"{version.template.name} v{version.number} has placeholders that are no "
                "variable (make a new version without them): "
                + "; ".join(map(str, problems[:MAX_PROBLEMS]))
                + (f"; and {more} more." if more > 0 else ".")
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
        temperatures,
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
    """The parameters a job sets itself; ``"temperature": null`` (send none) is allowed."""
    found = sorted(
        k for k in params if k in _RESERVED_KEYS and not (k == "temperature" and params[k] is None)
    )
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
    for spec in plan.models:
        temperatures = plan.temperatures_for(spec)
        runs = plan.repetitions * len(temperatures)
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
                "temperatures": temperatures,
                "temperature_labels": [temperature_label(t) for t in temperatures],
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
