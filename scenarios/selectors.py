"""Reads of scenarios: their variants and tasks, and where the next task goes."""

from __future__ import annotations

from django.db.models import Max, QuerySet

from scenarios.models import Scenario, Task, Variant


def next_task_position(scenario: Scenario) -> int:
    """The position after the scenario's last task (0 when it has none)."""
    last = Task.objects.filter(scenario=scenario).aggregate(last=Max("position"))["last"]
    return 0 if last is None else last + 1


def variants(scenario: Scenario) -> QuerySet[Variant]:
    """The scenario's variants with their items, item by item in their order."""
    return (
        Variant.objects.filter(scenario=scenario)
        .select_related("item")
        .order_by("item__position", "position")
    )


def variants_by_pk(scenario: Scenario) -> dict[int, Variant]:
    """The scenario's variants (with their items) by primary key."""
    return {v.pk: v for v in Variant.objects.filter(scenario=scenario).select_related("item")}


def tasks(scenario: Scenario) -> QuerySet[Task]:
    """The scenario's tasks with their items, in presentation order."""
    return Task.objects.filter(scenario=scenario).select_related("item").order_by("position")


def scenario_with_team(pk: int) -> Scenario:
    """One scenario with its team and creator, as the API shows it."""
    return Scenario.objects.select_related("team", "created_by").get(pk=pk)
