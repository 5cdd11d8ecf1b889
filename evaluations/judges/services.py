"""LLM judges: configure one on a scenario, estimate and run it over the scenario's tasks,
and turn its replies into judgments beside the human ones.

A judge run is a generation job (``source_kind`` "judge") of the one execution engine: its
items are the tasks in their presentation orders (with ``swap``, each pair and ranking also
in the reverse order), its prompt the judge's prompt version, its model the judge's model
configuration, with the judge's repetitions and temperatures. Live or batch, retries,
budget, crash recovery, live events and the job page all come from there. The job's result
handler (``JudgeResults``) reads each reply (``evaluations.judges.verdicts``): a valid verdict
becomes a judgment; anything else is recorded as a failed cell with its raw text, a judgment
with ``parse_status`` failed, and "retry failed" runs just those again.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from evalplatform import inputs
from evalplatform.accounts import audit, policy
from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import EVALUATIONS_JUDGE, PROMPTS_EDIT
from evalplatform.errors import Conflict, FieldErrors, Forbidden
from evalplatform.prompts import services as prompt_services
from evalplatform.prompts.models import PromptTemplate, PromptVersion
from evalplatform.providers.llm import kinds
from evalplatform.providers.models import LLMModel
from evaluations.analytics import cards
from evaluations.judges.inputs import JudgeInput
from evaluations.judges.verdicts import (
    KEYS,
    Rejected,
    check_reply_format,
    read,
    verdict_schema,
)
from evaluations.judgments.models import JudgeRun, Judgment, LLMJudge, ParseStatus, RaterKind
from generation import lifecycle, planning, sources
from generation import services as generation
from generation.models import (
    GenerationItem,
    GenerationOutput,
    JobMode,
    JobStatus,
    OutputStatus,
)
from scenarios.models import GoldKind, Scenario, Task, Variant
from scenarios.types import registry

SOURCE_KIND = "judge"


def _may_judge(user: Any, scenario: Scenario) -> None:
    if not policy.may(user, EVALUATIONS_JUDGE, scenario):
        raise Forbidden()


def default_prompt_version(*, user: Any, scenario: Scenario) -> PromptVersion:
    """The team's default judge prompt for the scenario's type (made on first use, then an
    ordinary prompt template: edit it into new versions like any other)."""
    name = f"Default judge: {scenario.type}"
    template = PromptTemplate.objects.filter(team=scenario.team, name=name).first()
    if template is None:
        if not policy.has_feature(user, PROMPTS_EDIT, scenario.team):
            raise FieldErrors({"prompt_version": "Choose a judge prompt version."})
        template = prompt_services.template_create(
            user=user,
            team=scenario.team,
            name=name,
            blocks=[dict(block) for block in registry.of(scenario).judge_prompt],
            description="The platform's default judge prompt for this scenario type.",
            note="Default",
        )
    return template.versions.order_by("-number").first()  # type: ignore[return-value]


# --- configuration ------------------------------------------------------------------------------
# A judge's settings are read as ``inputs.JudgeInput`` declares them (on an update, a field
# left out keeps the judge's value); ``_check`` adds what needs the scenario, the team's
# prompt versions and models, and the fields together.
def _checked_name(
    scenario: Scenario, name: str, own: LLMJudge | None, errors: dict[str, str]
) -> None:
    """No other judge of the scenario has this name."""
    if "name" in errors:
        return
    clash = LLMJudge.objects.filter(scenario=scenario, name=name)
    if own is not None:
        clash = clash.exclude(pk=own.pk)
    if clash.exists():
        errors["name"] = "This scenario already has a judge of that name."


def _checked_prompt_version(
    team: Team, pid: int | None, errors: dict[str, str]
) -> PromptVersion | None:
    """The team's prompt version ``pid`` names; None (the default) when it names none."""
    if pid is None:
        return None
    version = PromptVersion.objects.filter(pk=pid, template__team=team).first()
    if version is None:
        errors["prompt_version"] = "Unknown prompt version in this team."
    return version


def _checked_model(
    team: Team, mid: int | None, own: LLMJudge | None, errors: dict[str, str]
) -> LLMModel | None:
    """The team's active model ``mid`` names (a judge keeps its own, even made inactive)."""
    if own is not None and mid == own.llm_model_id:
        return own.llm_model
    model = (
        LLMModel.objects.filter(pk=mid, connection__team=team, active=True)
        .select_related("connection")
        .first()
        if mid is not None
        else None
    )
    if model is None:
        errors["model"] = "Unknown or inactive model in this team."
    return model


def _checked_swap(scenario: Scenario, swap: bool, errors: dict[str, str]) -> None:
    """Position swap only where the type asks in an order (comparisons and rankings)."""
    if swap and "swap" not in errors and not registry.of(scenario).swappable:
        # Alphabetical: "comparisons and rankings".
        swappable = sorted(f"{kind.value}s" for kind in registry.every() if kind.swappable)
        errors["swap"] = f"Position swap applies to {registry.listed(swappable, 'and')}."


def _checked_mode(mode: Any, model: LLMModel | None, errors: dict[str, str]) -> None:
    """Batch only where the model has a batch API."""
    if mode == JobMode.BATCH and model is not None and not model.batch_capable:
        errors["mode"] = f"{model.display_name} has no batch API here; choose live mode."


def _checked_reply_format(
    scenario: Scenario, reply_format: Any, model: LLMModel | None, errors: dict[str, str]
) -> None:
    """How replies are read; an output schema only where the scenario type and the model
    have one."""
    dimensions = [d["name"] for d in scenario.config.get("dimensions", [])]
    if problem := check_reply_format(reply_format, dimensions):
        errors["reply_format"] = problem
    elif isinstance(reply_format, dict) and reply_format.get("kind") == "structured":
        if verdict_schema(scenario.type, scenario.config) is None:
            errors["reply_format"] = "This scenario type has no verdict schema."
        elif model is not None and not kinds.has_structured_output(model.connection.kind):
            errors["reply_format"] = f"{model.display_name} takes no output schema here."


def _check(
    user: Any, scenario: Scenario, data: Mapping[str, Any], *, own: LLMJudge | None = None
) -> dict[str, Any]:
    """A judge's settings from the input (on an update, over the judge's own), every field
    checked before ``FieldErrors`` names all the bad ones, in the input's order."""
    errors: dict[str, str] = {}
    given = JudgeInput.read(data, errors, instance=own)
    _checked_name(scenario, given["name"], own, errors)
    version = _checked_prompt_version(scenario.team, given["prompt_version"], errors)
    model = _checked_model(scenario.team, given["model"], own, errors)
    _checked_swap(scenario, given["swap"], errors)
    _checked_mode(given["mode"], model, errors)
    _checked_reply_format(scenario, given["reply_format"], model, errors)
    if errors:
        raise FieldErrors(inputs.in_order(errors, JudgeInput))
    return {
        "name": given["name"],
        "prompt_version": version,
        "llm_model": model,
        "params": given["params"],
        "temperatures": given["temperatures"],
        "repetitions": given["repetitions"],
        "swap": given["swap"],
        "mode": given["mode"],
        "max_tokens": given["max_tokens"],
        "budget_usd": given["budget_usd"],
        "reply_format": given["reply_format"],
    }


def judge_create(*, user: Any, scenario: Scenario, data: Mapping[str, Any]) -> LLMJudge:
    """A judge of the scenario (``feature:evaluations:judge``). Without ``prompt_version``
    it uses the team's default judge prompt for the scenario's type."""
    _may_judge(user, scenario)
    checked = _check(user, scenario, data)
    with transaction.atomic():
        if checked["prompt_version"] is None:
            checked["prompt_version"] = default_prompt_version(user=user, scenario=scenario)
        # A judge's prompt version is fixed, like a job's: it can no longer be edited.
        prompt_services.version_lock(version=checked["prompt_version"])
        return LLMJudge.objects.create(scenario=scenario, created_by=user, **checked)


GRID_MOST = 50


def _grid_axes(data: Mapping[str, Any]) -> tuple[list[Any], list[Any]]:
    """The grid's prompt version ids (None: the default prompt) and model specs."""
    grid = data.get("grid")
    if not isinstance(grid, dict):
        raise FieldErrors({"grid": '{"prompt_versions": [...], "models": [...]}'})
    versions = grid.get("prompt_versions") or [None]
    models = grid.get("models")
    if not isinstance(versions, list) or not isinstance(models, list) or not models:
        raise FieldErrors({"grid": "Lists of prompt versions (or none: the default) and models."})
    if len(versions) * len(models) > GRID_MOST:
        raise FieldErrors({"grid": f"At most {GRID_MOST} judges at a time."})
    return versions, models


def _grid_version(scenario: Scenario, version_id: Any) -> PromptVersion | None:
    if not isinstance(version_id, int):
        return None
    return (
        PromptVersion.objects.filter(pk=version_id, template__team=scenario.team)
        .select_related("template")
        .first()
    )


def _grid_label(spec: Mapping[str, Any]) -> str:
    """The judge's label: the spec's, else its model's name with its parameters."""
    model_id = spec.get("model")
    model = LLMModel.objects.filter(pk=model_id).first() if isinstance(model_id, int) else None
    label = str(spec.get("label") or (model.display_name if model else "model"))
    if spec.get("params") and not spec.get("label"):
        label += " " + ",".join(f"{k}={w}" for k, w in sorted(spec["params"].items()))
    return label


def _grid_judge(
    user: Any,
    scenario: Scenario,
    shared: Mapping[str, Any],
    version: PromptVersion,
    spec: Mapping[str, Any],
    cell: tuple[int, int],
    errors: dict[str, str],
) -> LLMJudge | None:
    """The judge of one cell of the grid, made; None (and its errors recorded) when its
    settings are bad. A judge made earlier in the grid counts (two cells of one name clash)."""
    v_index, m_index = cell
    if not isinstance(spec.get("params") or {}, dict):
        errors[f"grid.models[{m_index}].params"] = "Parameters are an object."
        return None
    name = f"{_grid_label(spec)} · {version.template.name} v{version.number}"[:200]
    given = {
        "name": name,
        "model": spec.get("model"),
        "params": spec.get("params") or {},
        "prompt_version": version.pk,
    }
    try:
        checked = _check(user, scenario, dict(shared) | given)
    except FieldErrors as exc:
        errors.update({f"grid[{v_index},{m_index}].{k}": v[0] for k, v in exc.errors.items()})
        return None
    prompt_services.version_lock(version=checked["prompt_version"])
    return LLMJudge.objects.create(scenario=scenario, created_by=user, **checked)


def judge_grid(*, user: Any, scenario: Scenario, data: Mapping[str, Any]) -> list[LLMJudge]:
    """Judges to test against each other: one per judge prompt version x model configuration
    (``grid``: ``{"prompt_versions": [ids], "models": [{"model": id, "params": {...},
    "label": ...}]}``), sharing the other settings (temperatures, repetitions, swap, mode,
    max_tokens, budget_usd). All are made, or none."""
    _may_judge(user, scenario)
    versions, models = _grid_axes(data)
    shared = {k: v for k, v in data.items() if k not in ("grid", "name", "model", "params")}
    specs = [spec if isinstance(spec, dict) else {"model": spec} for spec in models]
    made: list[LLMJudge] = []
    errors: dict[str, str] = {}
    with transaction.atomic():
        default = None
        for v_index, version_id in enumerate(versions):
            for m_index, spec in enumerate(specs):
                version = _grid_version(scenario, version_id)
                if version_id is not None and version is None:
                    errors[f"grid.prompt_versions[{v_index}]"] = "Unknown prompt version."
                    continue
                if version is None:
                    default = default or default_prompt_version(user=user, scenario=scenario)
                    version = default
                cell = (v_index, m_index)
                judge = _grid_judge(user, scenario, shared, version, spec, cell, errors)
                if judge is not None:
                    made.append(judge)
        if errors:
            # The judges made before a bad cell are undone with it: all or none.
            transaction.set_rollback(True)
            raise FieldErrors(errors)
    return made


def judge_update(*, user: Any, judge: LLMJudge, data: Mapping[str, Any]) -> LLMJudge:
    """Change a judge that has not run yet (a judge that has judged is a fixed rater: make
    another one to try other settings)."""
    _may_judge(user, judge.scenario)
    if judge.runs.exists():
        raise Conflict("This judge has run: create another judge to change its settings.")
    checked = _check(user, judge.scenario, data, own=judge)
    with transaction.atomic():
        for name, value in checked.items():
            setattr(judge, name, value)
        prompt_services.version_lock(version=judge.prompt_version)
        judge.save()
    return judge


FINISHED = (JobStatus.COMPLETED, JobStatus.CANCELLED, JobStatus.FAILED)


def judge_delete(*, user: Any, judge: LLMJudge) -> None:
    """Delete a judge with its judgments (its runs' jobs stay, as generation jobs). Not
    while a run is unfinished or still has calls out (a cancelled batch run may still be
    collecting what the provider did): cancel it, and wait."""
    _may_judge(user, judge.scenario)
    with transaction.atomic():
        judge = LLMJudge.objects.select_for_update().get(pk=judge.pk)
        if _busy(LLMJudge.objects.filter(pk=judge.pk)):
            raise Conflict("A run of this judge is not finished: cancel it first.")
        audit.record(
            user=user, team=judge.scenario.team_id, action="evaluations.judge.delete", target=judge
        )
        judge.delete()


def _busy(judges: QuerySet[LLMJudge]) -> bool:
    """Whether a run of these judges is unfinished or still has calls out."""
    return (
        JudgeRun.objects.filter(judge__in=judges).exclude(job__status__in=FINISHED).exists()
        or GenerationOutput.objects.filter(
            job__judge_run__judge__in=judges, status=OutputStatus.RUNNING
        ).exists()
    )


def scenario_redesign_guard(scenario: Scenario) -> str | None:
    """Registered with ``scenarios.services.register_redesign_guard``: a draft's tasks are
    not made again once a judge ran on them (a run can be resumed or retried, and its calls
    name the tasks it was made for)."""
    if JudgeRun.objects.filter(judge__scenario=scenario).exists():
        return "A judge of this draft has run on its tasks: create another scenario."
    return None


def scenario_delete_guard(scenario: Scenario) -> str | None:
    """Registered with ``scenarios.services.register_delete_guard``: a scenario is not
    deleted while one of its judges runs (as the judge alone is not)."""
    if _busy(LLMJudge.objects.filter(scenario=scenario)):
        return "A run of one of this scenario's judges is not finished: cancel it first."
    return None


# --- the items of a run -------------------------------------------------------------------------
def _context_text(context: Any) -> str:
    if not context:
        return "(none)"
    if isinstance(context, dict):
        return "\n".join(
            f"{key}: {value}" if isinstance(value, str) else f"{key}: {value!r}"
            for key, value in context.items()
        )
    return str(context)


def _asked(judge: LLMJudge) -> set[int]:
    """Tasks this judge was asked about: in a run not cancelled, or with a judgment."""
    in_runs = GenerationItem.objects.filter(job__judge_run__judge=judge).exclude(
        job__status=JobStatus.CANCELLED
    )
    asked = {task for task in in_runs.values_list("data__task", flat=True) if task is not None}
    return asked | set(Judgment.objects.filter(judge=judge).values_list("task_id", flat=True))


def task_ids_to_judge(judge: LLMJudge, which: Any) -> list[int]:
    """``"unjudged"``: the tasks this judge was never asked about (by a run that was not
    cancelled); or a list of such task ids. A task is asked once per judge (its calls that
    fail are asked again with "retry failed"); to ask again, make another judge."""
    # Attention checks are for people: a judge reads the variants, not the instruction.
    tasks = Task.objects.filter(scenario=judge.scenario).exclude(gold__kind=GoldKind.ATTENTION)
    asked = _asked(judge)
    if which == "unjudged":
        ids = tasks.order_by("position").values_list("pk", flat=True)
        return [pk for pk in ids if pk not in asked]
    if isinstance(which, list) and which and all(isinstance(t, int) for t in which):
        found = set(tasks.filter(pk__in=which).values_list("pk", flat=True))
        unknown = [t for t in which if t not in found]
        if unknown:
            raise FieldErrors({"tasks": f"Not tasks of this scenario: {unknown[:20]}."})
        again = [t for t in which if t in asked]
        if again:
            raise FieldErrors({"tasks": f"This judge was asked about these already: {again[:20]}."})
        return list(dict.fromkeys(which))
    raise FieldErrors({"tasks": '"unjudged", or a list of task ids.'})


def judge_items(judge: LLMJudge, task_ids: Sequence[int]) -> list[sources.Item]:
    """One item per task and presentation order, holding every variable of the judge
    prompts (context, responses under their presented keys, rubric, labels)."""
    scenario = judge.scenario
    config = scenario.config
    tasks = list(Task.objects.filter(pk__in=task_ids).select_related("item").order_by("position"))
    wanted: set[int] = set()
    for task in tasks:
        wanted.update(task.order or [v for v in (task.variant_a_id, task.variant_b_id) if v])
    content = dict(Variant.objects.filter(pk__in=wanted).values_list("pk", "content"))
    kind = registry.of(scenario)
    base = {"instructions": scenario.instructions or "", "kind": scenario.type}
    base |= kind.judge_variables(config)
    items: list[sources.Item] = []
    for task in tasks:
        shown = task.order or [v for v in (task.variant_a_id, task.variant_b_id) if v]
        orders = [(False, list(shown))]
        if judge.swap and kind.swappable:
            orders.append((True, list(reversed(shown))))
        for swapped, presented in orders:
            keys = list(KEYS[: len(presented)])
            data: dict[str, Any] = base | {
                "task": task.pk,
                "swapped": swapped,
                "presented": presented,
                "context": _context_text(task.item.context if task.item else {}),
            }
            texts = [content[v] for v in presented]
            data |= kind.judge_responses(texts, keys)
            code = fence_code(task.pk, swapped)
            fenced = [fence(text, key, code) for key, text in zip(keys, texts, strict=True)]
            data |= {
                f"{name}_fenced": value
                for name, value in kind.judge_responses(fenced, keys).items()
                if name.startswith("response")
            }
            items.append((f"task-{task.pk}" + ("-swapped" if swapped else ""), data))
    return items


def fence_code(task_id: int, swapped: bool) -> str:
    """The code of a task's fences: the same at every run of the task (the prompt does not
    change between runs), and not to be guessed by whoever wrote a response (a keyed hash:
    the instance's secret key)."""
    key = settings.SECRET_KEY.encode()
    return hmac.new(key, f"judge-fence:{task_id}:{int(swapped)}".encode(), "sha256").hexdigest()[
        :16
    ]


def fence(text: str, key: str, code: str) -> str:
    """A response between lines that name it and the task's code: a response cannot close
    its own fence early, since it cannot know the code."""
    return f"<<<RESPONSE {key} {code}>>>\n{text}\n<<<END RESPONSE {key} {code}>>>"


def judge_source(*, user: Any, team: Team, spec: Mapping[str, Any]) -> list[sources.Item]:
    """The generation source "judge": ``{"judge": id, "tasks": ...}``."""
    judge_id = spec.get("judge")
    judge = (
        LLMJudge.objects.select_related("scenario__team")
        .filter(pk=judge_id, scenario__team=team)
        .first()
        if isinstance(judge_id, int)
        else None
    )
    if judge is None:
        raise FieldErrors({"source.judge": "Unknown judge in this team."})
    _may_judge(user, judge.scenario)
    task_ids = task_ids_to_judge(judge, spec.get("tasks", "unjudged"))
    if not task_ids:
        raise FieldErrors({"tasks": "No task to judge: this judge has judged them all."})
    return judge_items(judge, task_ids)


# --- running ------------------------------------------------------------------------------------
def _job_data(judge: LLMJudge, data: Mapping[str, Any], mode: str | None = None) -> dict[str, Any]:
    budget = data.get("budget_usd", judge.budget_usd)
    return {
        "team": judge.scenario.team.slug,
        "name": f"Judge “{judge.name}” on {judge.scenario.name}"[:200],
        "mode": mode or judge.mode,
        "source": {
            "type": SOURCE_KIND,
            "judge": judge.pk,
            "scenario": judge.scenario_id,
            "tasks": data.get("tasks", "unjudged"),
        },
        "prompt_versions": [judge.prompt_version_id],
        "models": [
            {
                "model": judge.llm_model_id,
                "params": dict(judge.params or {}),
                "response_schema": _response_schema(judge),
                "label": judge.name[:250],
            }
        ],
        "repetitions": judge.repetitions,
        "temperatures": judge.temperatures,
        "max_tokens": judge.max_tokens,
        "budget_usd": str(budget) if budget is not None else None,
        "max_retries": data.get("max_retries", 3),
        "concurrency": data.get("concurrency", 8),
    }


def _response_schema(judge: LLMJudge) -> dict[str, Any] | None:
    """The verdict's JSON schema when the judge's replies are structured (the run's model
    configuration holds it in no provider's words: each adapter writes it in its own)."""
    if (judge.reply_format or {}).get("kind") != "structured":
        return None
    schema = verdict_schema(judge.scenario.type, judge.scenario.config)
    return None if schema is None else {"name": "verdict", "schema": schema}


def judge_estimate(*, user: Any, judge: LLMJudge, data: Mapping[str, Any]) -> dict[str, Any]:
    """Calls and cost of a run (live and batch prices), without running anything."""
    _may_judge(user, judge.scenario)
    plan = planning.job_plan(user=user, data=_job_data(judge, data), internal=True)
    return planning.job_estimate(plan) | {"calls": plan.cell_count}


def judge_run(
    *, user: Any, judge: LLMJudge, data: Mapping[str, Any], mode: str | None = None
) -> JudgeRun:
    """Run the judge over ``tasks`` ("unjudged" by default, "all", or task ids): a
    generation job, started at once (queued behind the user's running job, if any).
    ``mode``: live or batch for this run (the budget scheduler sends its judges' tasks
    through the batch API where the model has one); default the judge's."""
    _may_judge(user, judge.scenario)
    _no_run_open(judge)
    # The job first, its cells written a chunk per transaction and hidden until all are (no
    # long write under the locks below); a run that cannot start after all deletes it.
    plan = planning.job_plan(user=user, data=_job_data(judge, data, mode), internal=True)
    planned = {item["task"] for _, item in plan.items}
    outer = transaction.get_connection().in_atomic_block
    job = generation.job_create(user=user, plan=plan)
    try:
        with transaction.atomic():
            # The scenario's row first (a draft's tasks being made again wait, or this waits
            # for them), then one run at a time per judge: the lock serializes double clicks.
            Scenario.objects.select_for_update().filter(pk=judge.scenario_id).first()
            judge = (
                LLMJudge.objects.select_for_update()
                .select_related("scenario__team")
                .get(pk=judge.pk)
            )
            _no_run_open(judge)
            if Task.objects.filter(pk__in=planned).count() != len(planned):
                raise Conflict(
                    "The scenario's tasks changed while the run was prepared: run it again."
                )
            run = JudgeRun.objects.create(
                judge=judge,
                job=job,
                configuration=cards.configuration(judge),
                tasks=str(data.get("tasks", "unjudged"))
                if not isinstance(data.get("tasks"), list)
                else "listed",
                created_by=user,
            )
            generation.job_start(user=user, job=job)
            audit.record(
                user=user,
                team=judge.scenario.team_id,
                action="evaluations.judge.run",
                target=judge,
                job=job.pk,
                calls=job.total_cells,
            )
    except BaseException:
        if not outer:  # a caller's transaction takes the job back with it
            generation.discard(job.pk)
        raise
    return run


def _no_run_open(judge: LLMJudge) -> None:
    if judge.runs.exclude(job__status__in=FINISHED).exists():
        raise Conflict("A run of this judge is not finished: resume it, or cancel it, first.")


# --- replies → judgments ------------------------------------------------------------------------
class JudgeResults:
    """The result handler of judge runs (see ``generation.results``)."""

    def _judge(self, job_id: int) -> LLMJudge | None:
        """The run's judge; None once the judge is gone (its replies are then recorded as
        plain outputs)."""
        run = JudgeRun.objects.select_related("judge__scenario").filter(job_id=job_id).first()
        return run.judge if run is not None else None

    @staticmethod
    def _read(judge: LLMJudge, data: Mapping[str, Any], text: str):
        keys = list(KEYS[: len(data["presented"])])
        scenario = judge.scenario
        return read(
            scenario.type, scenario.config, text, keys=keys, reply_format=judge.reply_format
        )

    def check(self, job_id: int, replies: Mapping[int, str]) -> dict[int, str]:
        judge = self._judge(job_id) if replies else None
        if judge is None:
            return {}
        items = dict(
            GenerationOutput.objects.filter(pk__in=list(replies)).values_list("pk", "item__data")
        )
        problems: dict[int, str] = {}
        for pk, text in replies.items():
            try:
                self._read(judge, items[pk], text)
            except Rejected as exc:
                problems[pk] = str(exc)
        return problems

    def recorded(self, job_id: int, output_ids: Sequence[int]) -> None:
        judge = self._judge(job_id)
        if judge is not None:
            record_judgments(judge, output_ids)

    def finished(self, job_id: int, status: str) -> None:
        """Nothing to do: a run's judgments are recorded with its replies (the budget
        scheduler listens for runs ending, ``evaluations.planner.replan``)."""


def record_judgments(judge: LLMJudge, output_ids: Sequence[int], *, replace: bool = False) -> None:
    """The judge's judgments of recorded cells whose items name a task of its scenario
    (``task``, ``presented``, ``swapped``): a reply read as a verdict, or a parse failure.
    ``replace``: an earlier judgment of the judge for the same call (task, order,
    repetition, temperature) gives way (a judge file run again)."""
    scenario = judge.scenario
    rows = GenerationOutput.objects.filter(pk__in=output_ids).values(
        "pk", "status", "content", "error_message", "repetition", "temperature", "item__data"
    )
    made = []
    for row in rows:
        data = row["item__data"]
        presented = data["presented"]
        judgment = Judgment(
            scenario=scenario,
            task_id=data["task"],
            rater_kind=RaterKind.JUDGE,
            judge=judge,
            output_id=row["pk"],
            presented=presented,
            repetition=row["repetition"],
            temperature=row["temperature"],
            swapped=bool(data.get("swapped")),
        )
        try:
            verdict = JudgeResults._read(judge, data, row["content"])
        except Rejected as exc:
            judgment.parse_status = ParseStatus.FAILED
            judgment.parse_error = str(exc)[:500]
        else:
            # The verdict names variants by their presented keys; stored, by their ids.
            judgment.payload = registry.of(scenario).stored(verdict.payload, presented)
            judgment.rationale = verdict.rationale[:20_000]
            judgment.parse_status = verdict.parse_status
        made.append(judgment)
    # A retried cell replaces its earlier judgment; a call already answered by another
    # run (a late reply of a cancelled one) is not counted twice.
    Judgment.objects.filter(output_id__in=output_ids).delete()
    if replace:
        calls = {(j.task_id, j.swapped, j.repetition, j.temperature) for j in made}
        earlier = Judgment.objects.filter(judge=judge, task_id__in={c[0] for c in calls})
        Judgment.objects.filter(
            pk__in=[
                pk
                for pk, *call in earlier.values_list(
                    "pk", "task_id", "swapped", "repetition", "temperature"
                )
                if tuple(call) in calls
            ]
        ).delete()
    Judgment.objects.bulk_create(made, ignore_conflicts=True)


def judge_retry_failed(*, user: Any, judge: LLMJudge) -> int:
    """Ask again the judge's calls that failed (provider errors and unparseable replies),
    and only them, in all its runs at once; how many."""
    _may_judge(user, judge.scenario)
    retried = 0
    with transaction.atomic():
        runs = JudgeRun.objects.filter(judge=judge, job__failed_cells__gt=0).exclude(
            job__status=JobStatus.CANCELLED
        )
        for run in runs.select_related("job"):
            retried += lifecycle.retry_failed(run.job)[1]
        if not retried:
            raise Conflict("No failed call to retry.")
    return retried
