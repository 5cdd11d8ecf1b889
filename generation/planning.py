"""Planning a job before it exists: ``job_plan`` checks a configuration completely
(team, prompts, models, parameters, source and every prompt variable of every item)
without writing anything, and ``job_estimate`` says what it will cost. A pilot
(``generation.pilot``) can calibrate the estimate with a few real calls."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings

from evalplatform import inputs, validation
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
from evalplatform.providers.llm import kinds
from evalplatform.providers.models import LLMModel
from generation import job_input, replies, sources
from generation.job_input import reserved_params as reserved_params  # judges use it here
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
    # ``{"name": ..., "schema": {...}}``: replies held to a JSON schema (``JobModel``).
    response_schema: dict[str, Any] | None = None

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
    # How replies are scored into fields (``generation.replies``), or None.
    reply_format: dict[str, Any] | None = None

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
    caller is the service of an internal source (``sources.INTERNAL_SOURCES``).

    The fields are checked as ``job_input.JobInput`` declares them, then against the team's
    prompt versions, models and items; one ``FieldErrors`` names every problem found. Then
    the prompts' variables against the items (``MissingVariables``), and the job's size."""
    team = _team(user, data.get("team"))
    errors: dict[str, str] = {}
    fields = job_input.JobInput.read(data, errors)
    prompts = _prompt_versions(user, team, fields["prompt_versions"], errors)
    models = _model_specs(user, team, fields["models"], mode=fields["mode"], errors=errors)
    source = fields["source"]
    kind = source.get("type", SourceKind.MANUAL if upload is not None else None)
    items, meta = (
        _source_items(
            user,
            team,
            kind,
            source,
            upload=upload,
            filename=filename,
            internal=internal,
            errors=errors,
            most=_most_items(len(prompts), models, fields),
        )
        if "source" not in errors
        else ([], {})
    )
    _check_placeholders(prompts, fields["prompt_versions"], errors)
    reply_format = fields["reply_format"]
    models_ok = not any(key.startswith("models") for key in errors)
    if reply_format is not None and "fields" not in reply_format and models_ok:
        try:
            reply_format = replies.check(reply_format, [s.response_schema for s in models])
        except ValueError as exc:
            errors["reply_format"] = str(exc)
    if errors:
        raise FieldErrors(inputs.in_order(errors, job_input.JobInput))
    _check_variables(prompts, items)
    plan = JobPlan(
        team,
        fields["name"],
        fields["mode"],
        str(kind),
        meta,
        items,
        prompts,
        models,
        fields["repetitions"],
        fields["temperatures"],
        fields["max_tokens"],
        fields["budget_usd"],
        fields["max_retries"],
        fields["concurrency"],
        fields["finish_live"],
        reply_format,
    )
    limit = settings.GENERATION_MAX_CELLS
    if plan.cell_count > limit:
        raise FieldErrors({"models": f"{plan.cell_count:,} cells; at most {limit:,} per job."})
    return plan


def _team(user: Any, slug: Any) -> Team:
    """The team named, where the user may create jobs; without a name, the user's only such
    team. Refused at once: nothing else can be looked up without it."""
    teams = policy.teams_with(user, GENERATION_CREATE)
    team = teams.filter(slug=slug).first() if slug else None
    if team is not None:
        return team
    candidates = list(teams[:2])
    if slug or len(candidates) != 1:
        raise FieldErrors(
            {
                "team": "Unknown team, or one where you may not create jobs."
                if slug
                else "Name the team (slug)."
            }
        )
    return candidates[0]


def _prompt_versions(
    user: Any, team: Team, ids: list[int], errors: dict[str, str]
) -> list[PromptVersion]:
    """The team's prompt versions that ``ids`` name, once each and in order."""
    if not ids:
        return []
    found = (
        {
            v.pk: v
            for v in PromptVersion.objects.filter(pk__in=ids, template__team=team)
            .select_related("template")
            .prefetch_related("blocks")
        }
        if policy.has_feature(user, PROMPTS_VIEW, team)
        else {}
    )
    prompts: list[PromptVersion] = []
    for index, pid in enumerate(ids):
        if pid not in found:
            errors[f"prompt_versions[{index}]"] = "Unknown prompt version in this team."
        elif found[pid] in prompts:
            errors[f"prompt_versions[{index}]"] = "Listed twice."
        else:
            prompts.append(found[pid])
    return prompts


def _model_specs(
    user: Any, team: Team, entries: list[dict[str, Any]], *, mode: str, errors: dict[str, str]
) -> list[ModelSpec]:
    """The configurations of the team's active models that ``entries`` name. An entry's
    problems go under ``models[<index>]``: an unknown model (its parameters are not checked
    then), else its parameters, else a label used twice or a model without a batch API."""
    if not entries:
        return []
    ids = [e.get("model") for e in entries]
    found = (
        {
            m.pk: m
            for m in LLMModel.objects.filter(
                pk__in=[i for i in ids if validation.is_id(i)], connection__team=team, active=True
            ).select_related("connection")
        }
        if policy.has_feature(user, PROVIDERS_VIEW, team)
        else {}
    )
    models: list[ModelSpec] = []
    labels: set[str] = set()
    unreachable = _internal_connections(found.values())
    for index, entry in enumerate(entries):
        model_pk = entry.get("model")
        model = found.get(model_pk) if validation.is_id(model_pk) else None
        if model is None:
            errors[f"models[{index}]"] = "Unknown or inactive model in this team."
        elif (problem_ := unreachable.get(model.connection_id)) is not None:
            errors[f"models[{index}]"] = f"{model.display_name}'s connection: {problem_}"
        elif problem := _entry_problem(entry, model):
            errors[f"models[{index}].{problem[0]}"] = problem[1]
        else:
            params = entry.get("params") or {}
            label = _model_label(entry.get("label"), model, params)
            spec = ModelSpec(model, label, params, entry.get("response_schema"))
            if spec.label in labels:
                errors[f"models[{index}]"] = "Two model configurations with the same label."
            labels.add(spec.label)
            if mode == JobMode.BATCH and not model.batch_capable:
                errors[f"models[{index}]"] = (
                    f"{model.display_name} has no batch API here; choose live mode or "
                    "another model."
                )
            models.append(spec)
    return models


def _internal_connections(models: Iterable[LLMModel]) -> dict[int, str]:
    """The connections of ``models`` whose address is on the platform's own network (saved
    before that was refused, or a name that resolves there now), with why: no call of the
    job would leave (``netguard``)."""
    found: dict[int, str] = {}
    for connection in {m.connection_id: m.connection for m in models}.values():
        if problem := connection.address_problem():
            found[connection.pk] = problem
    return found


def _entry_problem(entry: dict[str, Any], model: LLMModel) -> tuple[str, str] | None:
    """A configuration's first problem with the model it names, as (its key, the message):
    its parameters, else its response schema."""
    if problem := job_input.params_problem(entry.get("params") or {}):
        return "params", problem
    schema = entry.get("response_schema")
    if problem := job_input.response_schema_problem(schema):
        return "response_schema", problem
    if schema is not None and not kinds.has_structured_output(model.connection.kind):
        return "response_schema", f"{model.display_name} takes no output schema here."
    return None


def _model_label(label: Any, model: LLMModel, params: dict[str, Any]) -> str:
    """The label given, or the model's name and its parameters; at most 250 characters."""
    shown = " " + ",".join(f"{k}={v}" for k, v in sorted(params.items())) if params else ""
    return str(label or model.display_name + shown)[:250]


def _most_items(
    prompts: int, models: list[ModelSpec], fields: Mapping[str, Any]
) -> tuple[int, str]:
    """The most items an upload may hold for the job to stay within its cells, and why:
    an upload past it is refused while it is read, so memory never holds more (a 7 MB
    file of 300,000 tiny items parsed whole took 155 MB before the cap refused the job).
    Counted low when a part is refused (none of it: one), so the bound never refuses more
    than the cap would."""
    slots = sum(len(fields["temperatures"]) if spec.sends_temperature else 1 for spec in models)
    per_item = max(1, prompts) * max(1, slots) * max(1, fields["repetitions"])
    limit = settings.GENERATION_MAX_CELLS
    return max(1, limit // per_item), (
        f": each makes {per_item:,} cells (prompts x model configurations x temperatures x "
        f"repetitions), and a job holds at most {limit:,}"
    )


def _source_items(
    user: Any,
    team: Team,
    kind: Any,
    source: dict[str, Any],
    *,
    upload: bytes | None,
    filename: str,
    internal: bool,
    errors: dict[str, str],
    most: tuple[int, str],
) -> tuple[list[sources.Item], dict[str, Any]]:
    """The items of the source, and what the job keeps of its spec (``source_meta``);
    an upload is refused once it passes ``most`` items (its bound, and why)."""
    if kind == SourceKind.PROMPT_ONLY:
        return [sources.PROMPT_ONLY_ITEM], {}
    if kind == SourceKind.MANUAL:
        raw = upload if upload is not None else str(source.get("content", "")).encode()
        fmt = sources.detect_format(filename, source.get("format", ""))
        items = _collect(errors, sources.parse_upload, raw, fmt, most=most[0], why=most[1])
        return items, {"format": fmt, "filename": filename, "bytes": len(raw)}
    if (
        isinstance(kind, str)
        and kind in sources.SOURCE_REGISTRY
        and (internal or kind not in sources.INTERNAL_SOURCES)
    ):
        items = _collect(errors, sources.SOURCE_REGISTRY[kind], user=user, team=team, spec=source)
        return items, {k: v for k, v in source.items() if k != "type"}
    errors["source.type"] = "One of: " + ", ".join(sources.public_kinds()) + "."
    return [], {}


def _collect(
    errors: dict[str, str], read: Callable[..., list[sources.Item]], *args: Any, **kwargs: Any
) -> list[sources.Item]:
    """The items ``read`` returns; or none, and its problems (the first message of each
    field) in ``errors``."""
    try:
        return read(*args, **kwargs)
    except FieldErrors as exc:
        errors.update({k: v[0] for k, v in exc.errors.items()})
        return []


def _check_placeholders(
    prompts: list[PromptVersion], prompt_ids: list[int], errors: dict[str, str]
) -> None:
    """A version with placeholders that are no variable (saved before placeholders were
    checked on save) cannot run."""
    for version in prompts:
        if problems := placeholder_problems(version.as_blocks()):
            more = len(problems) - MAX_PROBLEMS
            errors[f"prompt_versions[{prompt_ids.index(version.pk)}]"] = (
                f"{version.template.name} v{version.number} has placeholders that are no "
                "variable (make a new version without them): "
                + "; ".join(map(str, problems[:MAX_PROBLEMS]))
                + (f"; and {more} more." if more > 0 else ".")
            )


def _check_variables(prompts: list[PromptVersion], items: list[sources.Item]) -> None:
    """Every variable of every prompt version has a value for every item."""
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
