"""Creating and moving scenarios: from a generation job's outputs or from an upload; open,
close, edit while in draft. Everything is checked before anything is written, and a
scenario is written (items, variants, tasks) in one transaction."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from evalplatform import bulk, inputs, validation
from evalplatform.accounts import audit, policy
from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import GENERATION_TO_SCENARIO, SCENARIOS_CREATE, SCENARIOS_MANAGE
from evalplatform.errors import Conflict, FieldErrors, Forbidden
from evalplatform.prompts.rendering import field_read, variables_in
from evalplatform.providers.estimate import CHARS_PER_TOKEN
from evalplatform.providers.models import LLMModel
from generation import sources
from generation.models import GenerationJob, OutputStatus
from scenarios import selectors
from scenarios.design import check_config, design
from scenarios.injection import addresses_judge
from scenarios.inputs import ScenarioInput
from scenarios.models import (
    Scenario,
    ScenarioItem,
    ScenarioStatus,
    Task,
    Variant,
)
from scenarios.types import registry

BULK = 2000
# Rows written per transaction when a scenario is made: each commits in well under a
# second, so another team's writes wait no longer than that on SQLite (one writer).
WRITE_CHUNK = 5000
# A scenario still ``writing`` this long after it was begun lost its writer.
ABANDONED_AFTER = timedelta(hours=1)
# Tasks added at once from which PostgreSQL's statistics of the task table are brought up to
# date when the transaction commits (``tasks_add``).
ANALYZE_FROM = 500

logger = logging.getLogger(__name__)


@dataclass
class VariantSpec:
    variant_id: str
    content: str
    model_label: str = ""
    prompt_label: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    source_output_id: int | None = None


@dataclass
class ItemSpec:
    item_id: str
    context: dict[str, Any]
    variants: list[VariantSpec] = field(default_factory=list)


@dataclass
class ScenarioPlan:
    team: Team
    name: str
    type: str
    instructions: str
    config: dict[str, Any]
    blind: bool
    context_fields: list[str] | None
    overlap: int
    seed: int
    source: dict[str, Any]
    items: list[ItemSpec]


def _settings(
    team: Team, data: Mapping[str, Any], *, own: Scenario | None = None, preview: bool = False
) -> tuple[dict[str, Any], dict[str, str]]:
    """The fields every scenario has, read as ``ScenarioInput`` declares them, then the
    name's clash and the type's configuration; errors by field. ``own``: the scenario being
    edited (its own name is no clash); ``preview``: the name does not matter yet."""
    errors: dict[str, str] = {}
    given = ScenarioInput.read(data, errors)
    clash = Scenario.all_objects.filter(team=team, name=given["name"])
    if own is not None:
        clash = clash.exclude(pk=own.pk)
    if "name" not in errors and clash.exists():
        errors["name"] = "This team already has a scenario of that name."
    config: dict[str, Any] = {}
    if "type" not in errors:
        try:
            config = check_config(given["type"], given["config"] or {})
        except FieldErrors as exc:
            errors.update({k: v[0] for k, v in exc.errors.items()})
    return {
        "name": given["name"],
        "type": given["type"],
        "instructions": given["instructions"],
        "config": config,
        "blind": given["blind"],
        "context_fields": given["context_fields"],
        "overlap": given["overlap"],
        "seed": given["seed"],
    }, {
        k: v
        for k, v in inputs.in_order(errors, ScenarioInput).items()
        if not (preview and k == "name")
    }


def _check_items(kind: str, config: Mapping[str, Any], items: list[ItemSpec]) -> None:
    if not items:
        raise FieldErrors({"items": "Nothing to evaluate: no item has a variant."})
    registry.get(kind).check_items(config, [(i.item_id, len(i.variants)) for i in items])


def _create(user: Any, plan: ScenarioPlan) -> Scenario:
    """The scenario, then its items, variants and tasks a chunk per transaction (no write
    holds SQLite's one write lock for long); it is seen once all of it is written, and if
    writing fails nothing of it stays. Inside a caller's transaction the chunks are
    savepoints: all of it commits with the caller's, or none."""
    _check_design(plan)  # before anything is built
    outer = transaction.get_connection().in_atomic_block
    with transaction.atomic():
        scenario = Scenario.all_objects.create(
            team=plan.team,
            created_by=user,
            name=plan.name,
            type=plan.type,
            instructions=plan.instructions,
            config=plan.config,
            blind=plan.blind,
            context_fields=plan.context_fields,
            overlap=plan.overlap,
            seed=plan.seed,
            source=plan.source,
            writing=True,
        )
    try:
        items = _in_chunks(
            [
                ScenarioItem(
                    scenario=scenario, position=i, item_id=spec.item_id, context=spec.context
                )
                for i, spec in enumerate(plan.items)
            ],
            lambda chunk: ScenarioItem.objects.bulk_create(chunk, batch_size=BULK),
        )
        variants = _in_chunks(
            [
                Variant(
                    scenario=scenario,
                    item=item,
                    position=position,
                    variant_id=v.variant_id,
                    content=v.content,
                    model_label=v.model_label[:250],
                    prompt_label=v.prompt_label[:250],
                    meta=v.meta,
                    source_output_id=v.source_output_id,
                    addresses_judge=addresses_judge(v.content),
                )
                for item, spec in zip(items, plan.items, strict=True)
                for position, v in enumerate(spec.variants)
            ],
            lambda chunk: Variant.objects.bulk_create(chunk, batch_size=BULK),
        )
        _build_tasks(scenario, variants)
        with transaction.atomic():
            Scenario.all_objects.filter(pk=scenario.pk).update(writing=False)
    except BaseException:
        if not outer:  # a caller's transaction takes all of it back with it
            discard(scenario.pk)
        raise
    scenario.writing = False
    return scenario


def _in_chunks(rows: list[Any], write: Callable[[Sequence[Any]], list[Any]]) -> list[Any]:
    """``write`` each chunk of ``rows`` in a transaction of its own; what it returns."""
    return [made for chunk in bulk.in_chunks(rows, WRITE_CHUNK, write) for made in chunk]


def discard(scenario_id: int) -> None:
    """Delete a scenario that was never fully written (its writer failed or died), a chunk
    of its rows per transaction."""
    # The links between tasks first: a chunk may hold one end of a reverse pair.
    bulk.delete_in_chunks(
        Task.objects.filter(scenario_id=scenario_id),
        WRITE_CHUNK,
        first=lambda chunk: Task.objects.filter(pk__in=chunk).update(reverse_of=None),
    )
    for model in (Variant, ScenarioItem):
        bulk.delete_in_chunks(model.objects.filter(scenario_id=scenario_id), WRITE_CHUNK)
    with transaction.atomic():
        Scenario.all_objects.filter(pk=scenario_id, writing=True).delete()


def discard_abandoned() -> list[int]:
    """The scheduled task: scenarios left ``writing`` an hour after they were begun (their
    writer died mid-way) are deleted. Their ids."""
    old = Scenario.all_objects.filter(writing=True, created_at__lt=timezone.now() - ABANDONED_AFTER)
    gone = list(old.values_list("pk", flat=True)[:20])
    for scenario_id in gone:
        discard(scenario_id)
    return gone


def _build_tasks(scenario: Scenario, variants: Sequence[Variant]) -> None:
    """The scenario's tasks by its design, over its variants (a scenario without tasks), a
    chunk per transaction; then the links of reverse pairs (one may come before the task it
    mirrors)."""
    by_key = {(v.item_id, v.position): v for v in variants}
    positions: dict[int, list[int]] = {}
    for v in variants:
        positions.setdefault(v.item_id, []).append(v.position)
    keys = [(item, [(item, p) for p in sorted(ps)]) for item, ps in positions.items()]
    specs = design(scenario.type, keys, scenario.config, scenario.seed)
    new = [
        NewTask(
            item_id=spec.item,
            variant_a_id=by_key[spec.a].pk if spec.a is not None else None,
            variant_b_id=by_key[spec.b].pk if spec.b is not None else None,
            order=[by_key[k].pk for k in spec.order],
        )
        for spec in specs
    ]
    made = [
        task.pk for task in _in_chunks(new, lambda chunk: tasks_add(scenario=scenario, tasks=chunk))
    ]
    links = [(made[i], made[s.reverse_of]) for i, s in enumerate(specs) if s.reverse_of is not None]
    for _ in bulk.in_chunks(
        links, WRITE_CHUNK, lambda chunk: bulk.update(Task, ["reverse_of"], chunk)
    ):
        pass


@dataclass
class NewTask:
    """A task to add: its item and variants (``order`` for rankings); ``reverse_of``: the
    index of the task it mirrors among those added with it."""

    item_id: int | None
    variant_a_id: int | None = None
    variant_b_id: int | None = None
    order: list[int] = field(default_factory=list)
    reverse_of: int | None = None
    # Places of the overlap held from the start: the scenario's overlap makes a task no
    # evaluator is handed (one asked of judges only, e.g. by the budget scheduler).
    held: int = 0


def tasks_add(
    *, scenario: Scenario, tasks: Sequence[NewTask], start: int | None = None
) -> list[Task]:
    """Write tasks of the scenario after its last one: every place that makes tasks (a new
    scenario's design, imported judgments, adaptive pairs) comes here. ``start``: the first
    position when the caller has it already (``selectors.next_task_position``); run it in the
    caller's transaction."""
    if start is None:
        start = selectors.next_task_position(scenario)
    made = Task.objects.bulk_create(
        [
            Task(
                scenario=scenario,
                item_id=spec.item_id,
                position=start + offset,
                variant_a_id=spec.variant_a_id,
                variant_b_id=spec.variant_b_id,
                order=spec.order,
                taken=spec.held,
            )
            for offset, spec in enumerate(tasks)
        ],
        batch_size=BULK,
    )
    reverses = []
    for task, spec in zip(made, tasks, strict=True):
        if spec.reverse_of is not None:
            task.reverse_of = made[spec.reverse_of]
            reverses.append(task)
    Task.objects.bulk_update(reverses, ["reverse_of"], batch_size=50)
    if len(made) >= ANALYZE_FROM and connection.vendor == "postgresql":
        transaction.on_commit(_analyze_tasks)
    return made


def _analyze_tasks() -> None:
    """Bring PostgreSQL's statistics of the task table up to date after many tasks came at
    once (a new scenario's): until autovacuum's next look, up to a minute later, it plans
    the evaluators' "next" as if the scenario had a handful of tasks. ``ANALYZE`` reads a
    bounded sample (30,000 rows at the default statistics target) whatever the table's size,
    and takes no lock that writes wait for; ``SKIP_LOCKED``: while another ``ANALYZE``, a
    ``VACUUM`` or a schema change holds the table, it does nothing rather than wait."""
    try:
        with connection.cursor() as cursor:
            table = connection.ops.quote_name(Task._meta.db_table)
            cursor.execute(f"ANALYZE (SKIP_LOCKED) {table}")
    except DatabaseError:  # the tasks are written: statistics are a help, not a condition
        logger.warning("ANALYZE of the task table failed", exc_info=True)


# --- from a generation job ----------------------------------------------------------------------
def _ids(data: Mapping[str, Any], key: str, allowed: set[int], errors: dict[str, str]) -> set[int]:
    value = data.get(key)
    if value is None:
        return allowed
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        errors[f"outputs.{key}"] = "A list of ids."
        return allowed
    unknown = [v for v in value if v not in allowed]
    if unknown:
        errors[f"outputs.{key}"] = f"Not this job's: {', '.join(map(str, unknown))}."
    return set(value)


def scenario_from_job(*, user: Any, job: GenerationJob, data: Mapping[str, Any]) -> Scenario:
    """A scenario of the job's outputs, grouped by source item: each item's variants are its
    outputs that pass ``outputs`` (``status``: a list, default completed only; ``models``
    and ``prompts``: the job's model configuration and prompt ids; ``repetitions`` and
    ``temperatures``: which of the job's; all by default)."""
    return _create(user, _job_plan(user, job, data))


def _job_plan(
    user: Any, job: GenerationJob, data: Mapping[str, Any], *, preview: bool = False
) -> ScenarioPlan:
    if not policy.may(user, GENERATION_TO_SCENARIO, job) or not policy.has_feature(
        user, SCENARIOS_CREATE, job.team_id
    ):
        raise Forbidden()
    settings_, errors = _settings(job.team, data, preview=preview)
    filters = data.get("outputs") or {}
    if not isinstance(filters, dict):
        raise FieldErrors({"outputs": "An object {status, models, prompts}."})
    statuses = filters.get("status", [OutputStatus.COMPLETED])
    if not isinstance(statuses, list) or not set(statuses) <= set(OutputStatus.values):
        errors["outputs.status"] = "A list of: " + ", ".join(OutputStatus.values) + "."
        statuses = [OutputStatus.COMPLETED]
    models = _ids(filters, "models", set(job.models.values_list("pk", flat=True)), errors)
    prompts = _ids(filters, "prompts", set(job.prompts.values_list("pk", flat=True)), errors)
    repetitions = _ids(filters, "repetitions", set(range(job.repetitions)), errors)
    # null: the cells that sent no temperature (a null slot, or a configuration that sends
    # none whatever the job's temperatures).
    job_temperatures = list(job.temperatures)
    if None not in job_temperatures and job.outputs.filter(temperature__isnull=True).exists():
        job_temperatures.append(None)
    temperatures = filters.get("temperatures", job_temperatures)
    if (
        not isinstance(temperatures, list)
        or not all(t is None or isinstance(t, int | float) for t in temperatures)
        or not set(temperatures) <= set(job_temperatures)
    ):
        errors["outputs.temperatures"] = (
            "Some of the job's: "
            + ", ".join("null" if t is None else str(t) for t in job_temperatures)
            + "."
        )
        temperatures = job_temperatures
    if errors:
        raise FieldErrors(errors)
    at_temperatures = Q(temperature__in=[t for t in temperatures if t is not None])
    if None in temperatures:
        at_temperatures |= Q(temperature__isnull=True)
    outputs = (
        job.outputs.filter(
            at_temperatures,
            status__in=statuses,
            model_config_id__in=models,
            prompt_id__in=prompts,
            repetition__in=repetitions,
        )
        .select_related("item", "prompt", "model_config")
        .order_by(
            "item__position",
            "prompt__position",
            "model_config__position",
            "repetition",
            "temperature",
        )
    )
    items: dict[int, ItemSpec] = {}
    for output in outputs.iterator(BULK):
        spec = items.setdefault(
            output.item_id, ItemSpec(output.item.item_id, dict(output.item.data))
        )
        spec.variants.append(
            VariantSpec(
                output.custom_id,
                output.content,
                output.model_config.label,
                output.prompt.label,
                {"repetition": output.repetition, "temperature": output.temperature},
                output.pk,
            )
        )
    plan_items = list(items.values())
    _check_items(settings_["type"], settings_["config"], plan_items)
    if "context_fields" not in data:
        settings_["context_fields"] = _fields_read(job, plan_items)
    source = {"kind": "generation_job", "job": job.pk, "job_name": job.name, "outputs": filters}
    return ScenarioPlan(job.team, **settings_, source=source, items=plan_items)


def _fields_read(job: GenerationJob, items: Sequence[ItemSpec]) -> list[str] | None:
    """The items' fields the job's prompt versions read (their variables, aliases resolved
    as rendering does), in order of first use: what a blind scenario of the job shows by
    default, so that a field no prompt used (a score, a label) stays hidden. None when the
    job rendered no prompt (its rows carried their requests)."""
    versions = [
        p.prompt_version
        for p in job.prompts.select_related("prompt_version").prefetch_related(
            "prompt_version__blocks"
        )
        if p.prompt_version is not None
    ]
    if not versions:
        return None
    names = list(dict.fromkeys(n for v in versions for n in variables_in(v.as_blocks())))
    found: dict[str, None] = {}
    for item in items:
        for name in names:
            field_name = field_read(name, item.context)
            if field_name is not None:
                found.setdefault(field_name, None)
    return list(found)


# --- from an upload -----------------------------------------------------------------------------
def scenario_from_upload(
    *, user: Any, team: Team, data: Mapping[str, Any], raw: sources.Upload, filename: str = ""
) -> Scenario:
    """A scenario of outputs made elsewhere: CSV (with a header) or JSONL rows of
    ``item_id, variant_id, content`` and optionally ``model, prompt, context`` (a JSON
    object in CSV). Every bad row is reported by line; nothing is created unless all are
    good."""
    return _create(user, _upload_plan(user, team, data, raw, filename))


def _upload_plan(
    user: Any,
    team: Team,
    data: Mapping[str, Any],
    raw: sources.Upload,
    filename: str,
    *,
    preview: bool = False,
) -> ScenarioPlan:
    if not policy.has_feature(user, SCENARIOS_CREATE, team):
        raise Forbidden()
    settings_, errors = _settings(team, data, preview=preview)
    fmt = sources.detect_format(filename, str(data.get("format") or ""))
    if fmt not in ("csv", "jsonl", "json"):
        errors["file"] = "CSV with a header, JSON lines or a JSON array."
    if errors:
        raise FieldErrors(errors)
    limit = settings.SCENARIO_MAX_VARIANTS
    rows = sources.parse_upload(
        raw,
        fmt,
        most=limit,
        noun="rows",
        why=f": a scenario's upload holds at most {limit:,} (one variant each)",
    )
    items: dict[str, ItemSpec] = {}
    seen: set[tuple[str, str]] = set()
    for index, (_, row) in enumerate(rows, 1):
        where = f"line {index + 1}" if fmt == "csv" else f"line {index}"
        item_id = str(row.get("item_id") or "").strip()
        variant_id = str(row.get("variant_id") or row.get("variant") or "").strip()
        content = row.get("content")
        problems = []
        if not item_id:
            problems.append("item_id is missing")
        if not variant_id:
            problems.append("variant_id is missing")
        if not isinstance(content, str) or not content.strip():
            problems.append("content is missing")
        if (item_id, variant_id) in seen:
            problems.append(f"variant {variant_id} of item {item_id} appears twice")
        context = row.get("context") or {}
        if isinstance(context, str):
            try:
                context = validation.json_value(context)
            except ValueError:
                context = None
        if not isinstance(context, dict):
            problems.append("context is not a JSON object")
        if problems:
            errors[where] = "; ".join(problems) + "."
            if len(errors) >= sources.MAX_ERRORS:
                break
            continue
        seen.add((item_id, variant_id))
        spec = items.setdefault(item_id, ItemSpec(item_id, dict(context or {})))
        spec.variants.append(
            VariantSpec(
                variant_id,
                str(content),
                str(row.get("model") or ""),
                str(row.get("prompt") or ""),
            )
        )
    if errors:
        raise FieldErrors(errors)
    plan_items = list(items.values())
    _check_items(settings_["type"], settings_["config"], plan_items)
    source = {"kind": "upload", "filename": filename[:200], "format": fmt, "rows": len(rows)}
    return ScenarioPlan(team, **settings_, source=source, items=plan_items)


# --- previews -----------------------------------------------------------------------------------
def preview_from_job(*, user: Any, job: GenerationJob, data: Mapping[str, Any]) -> dict[str, Any]:
    """What ``scenario_from_job`` would make of ``data``, without writing anything."""
    return _preview(_job_plan(user, job, data, preview=True), data)


def preview_from_upload(
    *, user: Any, team: Team, data: Mapping[str, Any], raw: sources.Upload, filename: str = ""
) -> dict[str, Any]:
    """What ``scenario_from_upload`` would make of ``data`` and the rows, writing nothing."""
    return _preview(_upload_plan(user, team, data, raw, filename, preview=True), data)


def design_size(kind: str, config: Mapping[str, Any], sizes: Sequence[int]) -> int:
    """The number of tasks a design makes, counted without making them."""
    return registry.get(kind).task_count(config, sizes)


def _check_design(plan: ScenarioPlan) -> int:
    return _check_size(plan.type, plan.config, [len(i.variants) for i in plan.items])


def _check_size(kind: str, config: Mapping[str, Any], sizes: Sequence[int]) -> int:
    tasks = design_size(kind, config, sizes)
    limit = settings.SCENARIO_MAX_TASKS
    if tasks > limit:
        raise FieldErrors(
            {
                "config": f"This design makes {tasks:,} tasks; the limit is {limit:,}. Sample "
                "the pairs (a number or a share of them, or at most so many of each item) or "
                "choose fewer outputs."
            }
        )
    return tasks


def _preview(plan: ScenarioPlan, data: Mapping[str, Any]) -> dict[str, Any]:
    kind = registry.get(plan.type)
    sizes = [len(i.variants) for i in plan.items]
    tasks = design_size(plan.type, plan.config, sizes)
    judgments = tasks * plan.overlap
    seconds = kind.seconds_per_task
    preview: dict[str, Any] = {
        "type": plan.type,
        "items": len(plan.items),
        "variants": sum(sizes),
        "tasks": tasks,
        "overlap": plan.overlap,
        "judgments": judgments,
        "limit": settings.SCENARIO_MAX_TASKS,
        "allowed": tasks <= settings.SCENARIO_MAX_TASKS,
        "seconds_per_judgment": seconds,
        "human_hours": round(judgments * seconds / 3600, 2),
        "judge": None,
    }
    if data.get("judge_model") is not None:
        preview["judge"] = _judge_cost(plan, data.get("judge_model"), tasks, kind)
    return preview


# The default judge prompt and its rationale, in characters and tokens (docs/scenarios.md).
JUDGE_PROMPT_CHARS = 1200
JUDGE_REPLY_TOKENS = 150


def _judge_cost(plan: ScenarioPlan, model_id: Any, tasks: int, kind: Any) -> dict[str, Any]:
    """One call per task to the team's model ``model_id``: the default judge prompt with the
    task's input and the variants it shows, one token per four characters."""
    if isinstance(model_id, bool) or not isinstance(model_id, int) or not 0 < model_id < 2**31:
        raise FieldErrors({"judge_model": "The id of one of the team's models."})
    model = LLMModel.objects.filter(pk=model_id, connection__team=plan.team).first()
    if model is None:
        raise FieldErrors({"judge_model": "The id of one of the team's models."})
    variants = [v for item in plan.items for v in item.variants]
    mean_variant = sum(len(v.content) for v in variants) / max(1, len(variants))
    mean_context = sum(len(json.dumps(i.context)) for i in plan.items) / max(1, len(plan.items))
    sizes = [len(i.variants) for i in plan.items]
    shown = kind.variants_per_task(sum(sizes) / max(1, len(sizes)))
    per_call = JUDGE_PROMPT_CHARS + mean_context + shown * mean_variant
    input_tokens = math.ceil(tasks * per_call / CHARS_PER_TOKEN)
    output_tokens = tasks * JUDGE_REPLY_TOKENS
    cost = model.cost_usd(input_tokens, output_tokens)
    batch = model.cost_usd(input_tokens, output_tokens, batch=True)
    return {
        "model": model.pk,
        "calls": tasks,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cost_usd": str(cost.quantize(Decimal("0.0001"))),
        "batch_cost_usd": str(batch.quantize(Decimal("0.0001"))) if model.supports_batch else None,
    }


# --- lifecycle ----------------------------------------------------------------------------------
def _manage(user: Any, scenario: Scenario) -> Scenario:
    if not policy.may(user, SCENARIOS_MANAGE, scenario):
        raise Forbidden()
    return Scenario.objects.select_for_update().get(pk=scenario.pk)


def scenario_open(*, user: Any, scenario: Scenario) -> Scenario:
    with transaction.atomic():
        scenario = _manage(user, scenario)
        if scenario.status != ScenarioStatus.DRAFT:
            raise Conflict(f"A {scenario.status} scenario cannot open; only a draft can.")
        scenario.status, scenario.opened_at = ScenarioStatus.OPEN, timezone.now()
        scenario.save(update_fields=["status", "opened_at"])
        audit.record(user=user, team=scenario.team_id, action="scenario.open", target=scenario)
    return scenario


def scenario_close(*, user: Any, scenario: Scenario) -> Scenario:
    with transaction.atomic():
        scenario = _manage(user, scenario)
        if scenario.status != ScenarioStatus.OPEN:
            raise Conflict(f"A {scenario.status} scenario cannot close; only an open one can.")
        scenario.status, scenario.closed_at = ScenarioStatus.CLOSED, timezone.now()
        scenario.save(update_fields=["status", "closed_at"])
        audit.record(user=user, team=scenario.team_id, action="scenario.close", target=scenario)
    return scenario


EDITABLE = ("name", "instructions", "blind", "context_fields", "overlap", "config")
# The configuration keys the tasks were made from: fixed once the scenario exists.
DESIGN_KEYS = ("pairing", "sample_count", "sample_share", "max_pairs_per_item", "reverse_share")


def scenario_update(*, user: Any, scenario: Scenario, data: Mapping[str, Any]) -> Scenario:
    """Edit a draft's name, instructions, blind mode (and the context fields it shows),
    overlap or configuration (the rubric, the label set, whether ties are allowed). The task
    design is fixed once made: a change to the pairs (pairing, sample, reverse share) needs
    another scenario."""
    unknown = set(data) - set(EDITABLE)
    if unknown:
        raise FieldErrors({f: f"Only {', '.join(EDITABLE)} can change." for f in unknown})
    with transaction.atomic():
        scenario = _manage(user, scenario)
        if scenario.status != ScenarioStatus.DRAFT:
            raise Conflict("Only a draft scenario can be edited.")
        merged = {
            **{f: getattr(scenario, f) for f in EDITABLE},
            "type": scenario.type,
            "config": scenario.config,
            "seed": scenario.seed,
            **data,
        }
        checked, errors = _settings(scenario.team, merged, own=scenario)
        if "config" in data and not errors:
            errors |= {
                f"config.{key}": "Fixed by the task design: regenerate the draft's tasks "
                "to change it."
                for key in DESIGN_KEYS
                if checked["config"].get(key) != scenario.config.get(key)
            }
            if checked["config"] != scenario.config and scenario.judgments.exists():
                raise Conflict(
                    "This draft has judgments (imported, or by LLM judges) made under its "
                    "configuration: create another scenario to change it."
                )
        if errors:
            raise FieldErrors(errors)
        for name in data:
            setattr(scenario, name, checked[name])
        scenario.save(update_fields=list(data))
    return scenario


def scenario_regenerate(*, user: Any, scenario: Scenario, data: Mapping[str, Any]) -> Scenario:
    """Make a draft's tasks again with another pair design or seed (``config``, merged into
    the current one, and ``seed``): the items and variants stay. Not once anything was
    asked (judgments, reservations) or while a judge of it runs."""
    unknown = set(data) - {"config", "seed"}
    if unknown:
        raise FieldErrors({f: "Only config and seed can change the design." for f in unknown})
    with transaction.atomic():
        scenario = _manage(user, scenario)
        if scenario.status != ScenarioStatus.DRAFT:
            raise Conflict("Only a draft's tasks can be made again.")
        config = data.get("config", {})
        if not isinstance(config, dict):
            raise FieldErrors({"config": "The configuration is an object."})
        merged = {
            **{f: getattr(scenario, f) for f in EDITABLE},
            "type": scenario.type,
            "config": {**scenario.config, **config},
            "seed": data.get("seed", scenario.seed),
        }
        checked, errors = _settings(scenario.team, merged, own=scenario)
        if errors:
            raise FieldErrors(errors)
        for guard in (*DELETE_GUARDS, *REDESIGN_GUARDS):
            if (reason := guard(scenario)) is not None:
                raise Conflict(reason)
        if scenario.judgments.exists() or scenario.assignments.exists():
            raise Conflict("Tasks of this draft were asked already: create another scenario.")
        variants = list(Variant.objects.filter(scenario=scenario).order_by("item_id", "position"))
        sizes: dict[int, int] = {}
        for v in variants:
            sizes[v.item_id] = sizes.get(v.item_id, 0) + 1
        scenario.config, scenario.seed = checked["config"], checked["seed"]
        plan_sizes = list(sizes.values())
        registry.get(scenario.type).check_items(
            scenario.config, [(str(item), n) for item, n in sizes.items()]
        )
        _check_size(scenario.type, scenario.config, plan_sizes)
        scenario.tasks.all().delete()
        scenario.save(update_fields=["config", "seed"])
        _build_tasks(scenario, variants)
        audit.record(
            user=user, team=scenario.team_id, action="scenario.regenerate", target=scenario
        )
    return scenario


# Higher apps' reasons to keep a scenario (``register_delete_guard`` from their
# ``AppConfig.ready``): each returns why it cannot be deleted now, or None.
DELETE_GUARDS: list[Callable[[Scenario], str | None]] = []


def register_delete_guard(guard: Callable[[Scenario], str | None]) -> None:
    if guard not in DELETE_GUARDS:
        DELETE_GUARDS.append(guard)


# Higher apps' reasons to keep a draft's tasks as they are (``scenario_regenerate``).
REDESIGN_GUARDS: list[Callable[[Scenario], str | None]] = []


def register_redesign_guard(guard: Callable[[Scenario], str | None]) -> None:
    if guard not in REDESIGN_GUARDS:
        REDESIGN_GUARDS.append(guard)


def scenario_delete(*, user: Any, scenario: Scenario) -> None:
    with transaction.atomic():
        scenario = _manage(user, scenario)
        if scenario.status != ScenarioStatus.DRAFT:
            raise Conflict("Only a draft scenario can be deleted; close it instead.")
        for guard in DELETE_GUARDS:
            if (reason := guard(scenario)) is not None:
                raise Conflict(reason)
        audit.record(user=user, team=scenario.team_id, action="scenario.delete", target=scenario)
        scenario.delete()
