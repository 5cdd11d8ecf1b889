"""Reads of the review: a scenario's tasks with how much their answers disagree, filtered and
sorted (``review_tasks``), and one page of them with every rater's answer side by side and
the adjudicated answer (``review_rows``).

Both read in a fixed number of queries, whatever the number of tasks or judgments:
``review_tasks`` reads every task's position, every valid answer (without rationales) and
which tasks are adjudicated, and computes in Python; ``review_rows`` reads the page's tasks,
their variants, their judgments and their adjudications.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalplatform import validation
from evalplatform.errors import FieldErrors
from evaluations.judgments.models import Judgment, ParseStatus, RaterKind
from evaluations.review.models import Adjudication
from evaluations.workspace.services import presented as task_order
from scenarios.models import GoldKind, Scenario, Task, Variant
from scenarios.types import registry
from scenarios.types.base import KEYS, ScenarioKind

RATERS = ("all", "humans", "judges")
ORDERINGS = ("-disagreement", "disagreement", "position")
MAX_MIN_ANSWERS = 1000


@dataclass(frozen=True)
class Filters:
    """Whose answers count (``raters``: all, humans, judges; humans are evaluators and
    imported raters), which tasks are listed (at least ``min_answers`` answers; only those
    without an adjudicated answer) and in which order."""

    raters: str = "all"
    min_answers: int = 0
    unadjudicated: bool = False
    ordering: str = "-disagreement"


def _yes(raw: Any, name: str, errors: dict[str, str]) -> bool:
    if raw in (None, "", "false", "0", "no", "off"):
        return False
    if raw in ("true", "1", "yes", "on"):
        return True
    errors[name] = "true or false."
    return False


def filters_from(query: Mapping[str, Any]) -> Filters:
    """The filters of a query string; ``FieldErrors`` for bad values."""
    errors: dict[str, str] = {}
    raters = query.get("raters") or "all"
    if raters not in RATERS:
        errors["raters"] = "all, humans or judges."
    ordering = query.get("ordering") or "-disagreement"
    if ordering not in ORDERINGS:
        errors["ordering"] = ", ".join(ORDERINGS[:-1]) + f" or {ORDERINGS[-1]}."
    raw = (query.get("min_answers") or "0").strip()
    found = validation.digits(raw, most=4)
    min_answers = -1 if found is None else found
    if not 0 <= min_answers <= MAX_MIN_ANSWERS:
        errors["min_answers"] = f"A whole number from 0 to {MAX_MIN_ANSWERS:,}."
    unadjudicated = _yes(query.get("unadjudicated"), "unadjudicated", errors)
    if errors:
        raise FieldErrors(errors)
    return Filters(raters, min_answers, unadjudicated, ordering)


def _answers(scenario: Scenario, raters: str):
    """The scenario's valid answers (judges' unparseable replies left out) of ``raters``."""
    found = Judgment.objects.filter(scenario=scenario).exclude(parse_status=ParseStatus.FAILED)
    if raters == "humans":
        found = found.exclude(rater_kind=RaterKind.JUDGE)
    elif raters == "judges":
        found = found.filter(rater_kind=RaterKind.JUDGE)
    return found


@dataclass
class TaskDisagreement:
    task: int
    position: int
    answers: int
    disagreement: float | None
    adjudicated: bool


def review_tasks(
    scenario: Scenario, filters: Filters, *, task_id: int | None = None
) -> list[TaskDisagreement]:
    """Every task of the scenario that passes ``filters`` (or the one ``task_id``), with
    its number of answers and their disagreement (the type's ``disagreement``), in the
    order asked: by disagreement (tasks without one last) then position, or by position."""
    kind = registry.of(scenario)
    only = {} if task_id is None else {"task_id": task_id}
    values: dict[int, list[Any]] = defaultdict(list)
    rows = _answers(scenario, filters.raters).filter(**only)
    for task, payload, presented in rows.values_list("task_id", "payload", "presented").iterator(
        chunk_size=5000
    ):
        values[task].append(kind.answer_value(payload or {}, presented or []))
    adjudicated = set(
        Adjudication.objects.filter(scenario=scenario, **only).values_list("task_id", flat=True)
    )
    found = []
    # Attention checks are no real tasks: their answers show attention, not disagreement.
    tasks = Task.objects.filter(scenario=scenario).exclude(gold__kind=GoldKind.ATTENTION)
    if task_id is not None:
        tasks = tasks.filter(pk=task_id)
    positions = tasks.values_list("pk", "position")
    for pk, position in positions.iterator(chunk_size=5000):
        given = values.get(pk, [])
        if len(given) < filters.min_answers:
            continue
        if filters.unadjudicated and pk in adjudicated:
            continue
        found.append(
            TaskDisagreement(
                pk,
                position,
                len(given),
                disagreement(kind, given, scenario.config),
                pk in adjudicated,
            )
        )
    if filters.ordering == "position":
        found.sort(key=lambda t: t.position)
    else:
        sign = -1 if filters.ordering.startswith("-") else 1
        found.sort(
            key=lambda t: (
                t.disagreement is None,
                sign * (t.disagreement or 0.0),
                t.position,
            )
        )
    return found


def _rater(judgment: Judgment) -> str:
    if judgment.judge is not None:
        return judgment.judge.name
    if judgment.evaluator is not None:
        return judgment.evaluator.get_username()
    return judgment.external_rater.name if judgment.external_rater is not None else "(deleted)"


def _call(judgment: Judgment) -> str:
    """Which call of a judge an answer is (its temperature, repetition, order)."""
    if judgment.rater_kind != RaterKind.JUDGE:
        return ""
    parts = [f"t={judgment.temperature:g}" if judgment.temperature is not None else ""]
    parts.append(f"repetition {judgment.repetition + 1}")
    if judgment.swapped:
        parts.append("shown reversed")
    return " · ".join(p for p in parts if p)


def keys_as_seen(presented: Sequence[int], order: Sequence[int]) -> str:
    """How to read a rationale written under the keys the rater saw, when they are not the
    page's: "In this rationale “A” is B and “B” is A." ("" when the order was the task's)."""
    if list(presented) == list(order):
        return ""
    pairs = [
        f"“{KEYS[i]}” is {KEYS[order.index(pk)]}"
        for i, pk in enumerate(presented)
        if pk in order and KEYS[i] != KEYS[order.index(pk)]
    ]
    return f"In this rationale {' and '.join(pairs)} (shown in another order)." if pairs else ""


def disagreement(kind: ScenarioKind, values: Sequence[Any], config: Any) -> float | None:
    """How much the answers (``answer_value``s, None left out) of one task disagree, 0 to 1
    (the type says how: docs/scenarios.md, "Review"); None under two answers."""
    found = [v for v in values if v is not None]
    return kind.disagreement(found, config) if len(found) >= 2 else None


def _adjudication(adjudication: Adjudication | None, kind: ScenarioKind, order: Sequence[int]):
    if adjudication is None:
        return None
    return {
        "answer": kind.in_task_keys(adjudication.payload, adjudication.presented, order),
        "payload": adjudication.payload,
        "summary": kind.summary(adjudication.payload, adjudication.presented, order),
        "note": adjudication.note,
        "set_by": adjudication.set_by.get_username() if adjudication.set_by else None,
        "set_at": adjudication.set_at.isoformat(),
        "replaced": len(adjudication.history),
    }


def review_rows(
    scenario: Scenario, found: Sequence[TaskDisagreement], raters: str
) -> list[dict[str, Any]]:
    """The rows of some tasks of ``review_tasks`` (one page), in their order: the task, its
    variants under the task's keys (A shown first), every rater's answer and rationale,
    the disagreement, the adjudicated answer. Unblinded (for managers)."""
    ids = [t.task for t in found]
    kind = registry.of(scenario)
    tasks = {t.pk: t for t in Task.objects.filter(pk__in=ids).select_related("item")}
    orders = {pk: task_order(task) for pk, task in tasks.items()}
    wanted = {pk for order in orders.values() for pk in order}
    variants = {v.pk: v for v in Variant.objects.filter(pk__in=wanted)}
    given: dict[int, list[Judgment]] = defaultdict(list)
    judgments = (
        _answers(scenario, raters)
        .filter(task_id__in=ids)
        .select_related("evaluator", "external_rater", "judge")
        .order_by("rater_kind", "created_at", "pk")
    )
    for judgment in judgments:
        given[judgment.task_id].append(judgment)
    adjudications = {
        a.task_id: a for a in Adjudication.objects.filter(task_id__in=ids).select_related("set_by")
    }
    rows = []
    for entry in found:
        task = tasks[entry.task]
        order = orders[task.pk]
        mine = given.get(task.pk, [])
        row: dict[str, Any] = {
            "task": {
                "id": task.pk,
                "position": task.position,
                "item_id": task.item.item_id if task.item else None,
                "reverse_of": task.reverse_of_id,
            },
            "context": task.item.context if task.item else {},
            "variants": [
                {
                    "key": KEYS[i],
                    "id": pk,
                    "variant_id": variants[pk].variant_id,
                    "model": variants[pk].model_label,
                    "prompt": variants[pk].prompt_label,
                    "content": variants[pk].content,
                }
                for i, pk in enumerate(order)
                if pk in variants
            ],
            "answers": [
                {
                    "judgment": j.pk,
                    "rater": _rater(j),
                    "rater_kind": j.rater_kind,
                    "judge": j.judge_id,
                    "call": _call(j),
                    "presented": j.presented,
                    "payload": j.payload,
                    "answer": kind.in_task_keys(j.payload, j.presented, order),
                    "summary": kind.summary(j.payload, j.presented, order),
                    "rationale": j.rationale,
                    "rationale_keys": keys_as_seen(j.presented, order),
                    "created_at": j.created_at.isoformat(),
                }
                for j in mine
            ],
            "answer_count": entry.answers,
            "disagreement": None if entry.disagreement is None else round(entry.disagreement, 4),
            "adjudication": _adjudication(adjudications.get(task.pk), kind, order),
        }
        values = [kind.answer_value(j.payload, j.presented) for j in mine]
        spread = kind.spread(values, scenario.config)
        if spread is not None:
            row["dimensions"] = spread
        rows.append(row)
    return rows


def adjudicated_tasks(scenario: Scenario) -> dict[int, Adjudication]:
    """The scenario's adjudications by task id (exports)."""
    found = Adjudication.objects.filter(scenario=scenario).select_related("set_by")
    return {a.task_id: a for a in found}
