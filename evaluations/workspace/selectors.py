"""Reads of the evaluator workspace: the queue, an evaluator's own assignment, their progress
and judgments (for revising them), the flags of a scenario,
the judgments they may list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Count, F, QuerySet

from evaluations.judgments.models import Assignment, AssignmentStatus, Judgment
from evaluations.workspace import access
from evaluations.workspace.models import TaskFlag
from scenarios.models import GoldTask, Scenario, ScenarioStatus, Task

QUEUE_LENGTH = 200
# What a task's view reads besides the task (``services.task_view``): fetched with it
# (``select_related``), so that the view needs no query of its own for them.
TASK_VIEW = ("item", "gold", "variant_a", "variant_b")


def queue(user: Any) -> list[Scenario]:
    """The open scenarios the user may evaluate, the latest opened first."""
    return list(
        access.evaluable(
            user, Scenario.objects.filter(status=ScenarioStatus.OPEN).select_related("team")
        ).order_by("-opened_at", "-pk")[:QUEUE_LENGTH]
    )


def own_assignment(user: Any, pk: Any) -> Assignment | None:
    """The user's assignment ``pk`` with its scenario, task and item; None if it is not theirs."""
    related = [f"task__{name}" for name in TASK_VIEW]
    rows = Assignment.objects.select_related("scenario", *related).filter(
        pk=pk, evaluator_id=user.pk
    )
    return access.scenario_open_to(user, access.with_scenario_open_to(user, rows).first())


def judgments(scenario_id: int) -> QuerySet[Judgment]:
    """The scenario's judgments with their raters, oldest first."""
    return (
        Judgment.objects.select_related("evaluator", "external_rater", "judge")
        .filter(scenario_id=scenario_id)
        .order_by("pk")
    )


def progress(*, user: Any, scenario: Scenario) -> dict[str, int]:
    """The evaluator's queue: answered, and how many more they could be handed."""
    return progress_many(user=user, scenarios=[scenario])[scenario.pk]


def progress_many(*, user: Any, scenarios: Sequence[Scenario]) -> dict[int, dict[str, int]]:
    """``progress`` of several scenarios in five queries, whatever their number. Gold tasks
    count when answered (they come mixed in, not as places); a quota caps the total."""
    ids = [s.pk for s in scenarios]

    def per_scenario(rows: QuerySet[Any]) -> dict[int, int]:
        return dict(rows.values("scenario").annotate(n=Count("pk")).values_list("scenario", "n"))

    done = per_scenario(Judgment.objects.filter(scenario__in=ids, evaluator=user))
    skipped = per_scenario(
        Assignment.objects.filter(scenario__in=ids, evaluator=user, status=AssignmentStatus.SKIPPED)
    )
    reserved = per_scenario(
        Assignment.objects.filter(
            scenario__in=ids, evaluator=user, status=AssignmentStatus.RESERVED
        )
    )
    seen = Assignment.objects.filter(scenario__in=ids, evaluator=user).values("task_id")
    gold = GoldTask.objects.filter(scenario__in=ids).values("task_id")
    open_places = per_scenario(
        Task.objects.filter(scenario__in=ids, taken__lt=F("scenario__overlap"))
        .exclude(pk__in=seen)
        .exclude(pk__in=gold)
    )
    limits = access.quotas(user, scenarios)
    progress: dict[int, dict[str, int]] = {}
    for pk in ids:
        answered = done.get(pk, 0)
        total = answered + reserved.get(pk, 0) + open_places.get(pk, 0)
        limit = limits[pk]
        if limit is not None:  # a quota caps what is left, never what is done
            total = max(answered, min(total, limit))
        progress[pk] = {
            "done": answered,
            "total": total,
            "skipped": skipped.get(pk, 0),
            # What may still come the user's way: others answering shrink it, so pages say
            # "done · skipped · up to N left" rather than a total that moves.
            "left": total - answered,
        }
    return progress


HOME_TASKS = 10


def home_section(user: Any) -> dict[str, Any] | None:
    """The home page's "Your open tasks": the open scenarios the user may evaluate (an
    invited guest's included) with something left for them, and their progress."""
    scenarios = queue(user)
    done = progress_many(user=user, scenarios=scenarios)
    rows = [(s, done[s.pk]) for s in scenarios if done[s.pk]["done"] < done[s.pk]["total"]]
    return {"rows": rows[:HOME_TASKS], "more": len(rows) > HOME_TASKS} if rows else None


def own_judgments(user: Any, scenario: Scenario) -> QuerySet[Judgment]:
    """The user's judgments in the scenario with their earlier answers, the latest first."""
    return (
        Judgment.objects.filter(scenario=scenario, evaluator_id=user.pk)
        .select_related("evaluator")
        .prefetch_related("revisions")
        .order_by("-pk")
    )


def own_judgment(user: Any, pk: Any) -> Judgment | None:
    """The user's judgment ``pk`` with its scenario, task and item; None if it is not theirs."""
    return (
        Judgment.objects.select_related("scenario", "task__item")
        .filter(pk=pk, evaluator_id=user.pk)
        .first()
    )


def previous_judgment(user: Any, scenario_id: int, before: int | None = None) -> int | None:
    """The id of the user's latest judgment in the scenario (given before judgment
    ``before``, when named): where "back" goes."""
    rows = Judgment.objects.filter(scenario_id=scenario_id, evaluator_id=user.pk)
    if before is not None:
        rows = rows.filter(pk__lt=before)
    return rows.order_by("-pk").values_list("pk", flat=True).first()


def flags(scenario: Scenario) -> QuerySet[TaskFlag]:
    """The scenario's flags with who raised them and on which item, the latest first."""
    return (
        TaskFlag.objects.filter(scenario=scenario)
        .select_related("evaluator", "task__item")
        .order_by("-created_at", "-pk")
    )
