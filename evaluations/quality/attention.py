"""Attention checks: tasks whose content tells the evaluator what to answer ("This is an
attention check: choose B"), mixed into their streams at the scenario's ``attention_rate``
to catch inattentive raters. Unlike gold tasks (real tasks with a known answer, which
evaluators cannot tell apart), a check is a task of its own: ``attention_add`` makes it from
one of the scenario's tasks (its item and variants, in the same presented order), and every
variant of it shows the manager's ``instruction`` instead of its content. It is a
``GoldTask`` of kind ``attention``, so it holds no place of the overlap, is handed to each
evaluator at most once, and is left out of the analytics, the review and the judges.

Each service takes the acting user (``feature:scenarios:manage``), checks everything before
writing and records itself in the audit log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from evalplatform import validation
from evalplatform.accounts import audit
from evalplatform.errors import Conflict, FieldErrors, NotFound
from evaluations.judgments.models import Assignment, Judgment
from evaluations.quality.services import GOLD_RATE_MAX, _manage
from evaluations.workspace import services as workspace
from scenarios import services as scenario_services
from scenarios.models import GoldKind, GoldTask, Scenario, ScenarioStatus, Task

INSTRUCTION_MAX = 2_000
MAX_ATTENTION = 1_000


def checks(scenario: Scenario) -> list[GoldTask]:
    """The scenario's attention checks with their tasks, in the order they were made."""
    return list(
        GoldTask.objects.filter(scenario=scenario, kind=GoldKind.ATTENTION)
        .select_related("task")
        .order_by("task__position")
    )


def attention_add(*, user: Any, scenario: Scenario, data: Any) -> GoldTask:
    """Add one check. ``data``: ``{"instruction": text, "answer": {...}, "task": id}``:
    ``answer`` is what the instruction asks for, as an evaluator sends it (checked by the
    scenario's type against the variants in the presented order); ``task`` (optional) the
    task whose item and variants it reuses (default: the scenario's tasks in turn)."""
    _manage(user, scenario)
    if scenario.status == ScenarioStatus.CLOSED:
        raise Conflict("The scenario is closed: nobody would be handed the check.")
    if not isinstance(data, Mapping):
        raise FieldErrors({"non_field_errors": "An object {instruction, answer, task}."})
    errors: dict[str, str] = {}
    unknown = set(data) - {"instruction", "answer", "task"}
    if unknown:
        errors["non_field_errors"] = f"Unknown fields: {', '.join(sorted(map(str, unknown)))}."
    instruction = validation.text(
        data.get("instruction"),
        name="instruction",
        errors=errors,
        max_length=INSTRUCTION_MAX,
        required=True,
        message=f"The text evaluators see, 1 to {INSTRUCTION_MAX:,} characters.",
    )
    made = GoldTask.objects.filter(scenario=scenario, kind=GoldKind.ATTENTION).count()
    if made >= MAX_ATTENTION:
        errors["non_field_errors"] = f"At most {MAX_ATTENTION:,} attention checks."
    template = _template(scenario, data.get("task"), made, errors)
    answer: dict[str, Any] = {}
    if template is not None:
        try:
            answer = workspace.check_answer(scenario, template, data.get("answer"))
        except FieldErrors as exc:
            for key, messages in exc.errors.items():
                # The type names the answer's fields ("answer.labels"); keep them so.
                where = key if key.split(".")[0] == "answer" else f"answer.{key}"
                errors[where] = " ".join(messages)
    if errors:
        raise FieldErrors(errors)
    assert template is not None
    with transaction.atomic():
        # Concurrent adds take turns on the scenario's row, so each gets its own position.
        list(Scenario.objects.select_for_update().filter(pk=scenario.pk).values_list("pk"))
        (task,) = scenario_services.tasks_add(
            scenario=scenario,
            tasks=[
                scenario_services.NewTask(
                    item_id=template.item_id,
                    variant_a_id=template.variant_a_id,
                    variant_b_id=template.variant_b_id,
                    order=list(template.order),
                )
            ],
        )
        check = GoldTask.objects.create(
            scenario=scenario,
            task=task,
            kind=GoldKind.ATTENTION,
            instruction=instruction,
            answer=answer,
        )
        audit.record(
            user=user,
            team=scenario.team_id,
            action="scenario.attention.add",
            target=scenario,
            task=task.pk,
            answer=answer,
        )
    return check


def _template(scenario: Scenario, ref: Any, made: int, errors: dict[str, str]) -> Task | None:
    regular = Task.objects.filter(scenario=scenario, gold__isnull=True).order_by("position")
    if ref is None:
        count = regular.count()
        if not count:
            errors["task"] = "The scenario has no task to build an attention check from."
            return None
        return regular[made % count]
    found = None
    if isinstance(ref, int) and not isinstance(ref, bool) and 0 < ref <= validation.INT_MAX:
        found = regular.filter(pk=ref).first()
    if found is None:
        errors["task"] = (
            f"{str(ref)[:50]!r} is no task of this scenario (gold tasks and attention checks "
            "are not either)."
        )
    return found


def attention_rate_set(*, user: Any, scenario: Scenario, rate: Any) -> Scenario:
    """The share of "next task" requests that hand an attention check (0 to 0.5)."""
    _manage(user, scenario)
    errors: dict[str, str] = {}
    checked = validation.number(
        rate, name="attention_rate", lo=0.0, hi=GOLD_RATE_MAX, errors=errors
    )
    if checked is None and "attention_rate" not in errors:
        errors["attention_rate"] = f"A number from 0 to {GOLD_RATE_MAX:g}."
    if errors:
        raise FieldErrors(errors)
    assert checked is not None
    with transaction.atomic():
        Scenario.objects.filter(pk=scenario.pk).update(attention_rate=checked)
        scenario.attention_rate = checked
        audit.record(
            user=user,
            team=scenario.team_id,
            action="scenario.attention.rate",
            target=scenario,
            attention_rate=checked,
        )
    return scenario


def attention_remove(*, user: Any, scenario: Scenario, task: Any) -> None:
    """Delete a check nobody answered yet (with its task); an answered one stays, since its
    answers are evaluators' record (set the rate to 0 to stop handing checks)."""
    _manage(user, scenario)
    number = validation.digits(str(task), most=10)
    check = (
        GoldTask.objects.filter(scenario=scenario, kind=GoldKind.ATTENTION, task_id=number)
        .select_related("task")
        .first()
        if number is not None and number <= validation.INT_MAX
        else None
    )
    if check is None:
        raise NotFound()
    with transaction.atomic():
        # The task's row, locked, then its answers and reservations: an evaluator handed the
        # check meanwhile keeps it (deleting the task would take their answer with it).
        list(Task.objects.select_for_update().filter(pk=check.task_id).values_list("pk"))
        if (
            Judgment.objects.filter(task_id=check.task_id).exists()
            or Assignment.objects.filter(task_id=check.task_id).exists()
        ):
            raise Conflict(
                "Evaluators answered this check or hold it, so it stays; set the attention "
                "rate to 0 to stop handing checks."
            )
        audit.record(
            user=user,
            team=scenario.team_id,
            action="scenario.attention.remove",
            target=scenario,
            task=check.task_id,
        )
        check.task.delete()


def attention_view(scenario: Scenario) -> dict[str, Any]:
    """The checks as the API shows them to managers."""
    return {
        "attention_rate": scenario.attention_rate,
        "checks": [
            {
                "task": c.task_id,
                "position": c.task.position,
                "instruction": c.instruction,
                "answer": c.answer,
            }
            for c in checks(scenario)
        ],
    }
