"""Reads of scenarios: their variants and tasks, where the next task goes, and their items
as a generation source ("scenario", registered from ``ScenariosConfig.ready``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from django.db.models import Count, Max, QuerySet

from evalplatform.accounts import policy
from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import SCENARIOS_VIEW
from evalplatform.errors import FieldErrors
from scenarios.models import Scenario, ScenarioItem, Task, Variant

SOURCE_KIND = "scenario"
MAX_SOURCE_CHOICES = 500


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


class ExportVariant(NamedTuple):
    """What the judgment exports read of a variant (a ``VariantLike``)."""

    pk: int
    variant_id: str
    model_label: str
    prompt_label: str
    meta: Any
    item_key: str  # its item's ``item_id``


def export_variants(scenario: Scenario) -> dict[int, ExportVariant]:
    """The scenario's variants by primary key, as the judgment exports read them: plain
    values, without their content (the outputs' text, held for the whole download)."""
    found = Variant.objects.filter(scenario=scenario).values_list(
        "pk", "variant_id", "model_label", "prompt_label", "meta", "item__item_id"
    )
    return {row[0]: ExportVariant(*row) for row in found}


def variant_source_models(scenario: Scenario) -> dict[int, tuple[str, str]]:
    """The model that generated each of the scenario's generated variants, by variant
    primary key: (its model id, its connection's kind). Imported variants are not there."""
    model = "source_output__model_config__llm_model"
    found = Variant.objects.filter(scenario=scenario, source_output__isnull=False)
    return {
        pk: (model_id, kind)
        for pk, model_id, kind in found.values_list(
            "pk", f"{model}__model_id", f"{model}__connection__kind"
        )
    }


def tasks(scenario: Scenario) -> QuerySet[Task]:
    """The scenario's tasks with their items, in presentation order."""
    return Task.objects.filter(scenario=scenario).select_related("item").order_by("position")


def scenario_with_team(pk: int) -> Scenario:
    """One scenario with its team and creator, as the API shows it."""
    return Scenario.objects.select_related("team", "created_by").get(pk=pk)


def readable_scenarios(user: Any, team: Team) -> QuerySet[Scenario]:
    """The team's scenarios the user may read (none without ``feature:scenarios:view``)."""
    return policy.visible(user, SCENARIOS_VIEW, Scenario.objects.filter(team=team))


def generation_source(
    *, user: Any, team: Team, spec: Mapping[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """The generation source "scenario": ``{"scenario": id}``, the items of a scenario of
    the job's team the user may read, in order, each with its fields (its context) as the
    prompt's variables. Another team's, an unreadable or an unknown scenario are the same
    error."""
    scenario_id = spec.get("scenario")
    scenario = (
        readable_scenarios(user, team).filter(pk=scenario_id).first()
        if isinstance(scenario_id, int)
        and not isinstance(scenario_id, bool)
        and 0 < scenario_id < 2**63  # what a primary key column holds
        else None
    )
    if scenario is None:
        raise FieldErrors(
            {"source.scenario": "Not found: give the id of a scenario of this team you can read."}
        )
    rows = (
        ScenarioItem.objects.filter(scenario=scenario)
        .order_by("position")
        .values_list("item_id", "context")
    )
    items = [
        (item_id, dict(context) if isinstance(context, dict) else {"context": context})
        for item_id, context in rows.iterator(2000)
    ]
    if not items:
        raise FieldErrors({"source.scenario": f"“{scenario.name}” has no items."})
    return items


def generation_source_choices(*, user: Any, team: Team) -> list[tuple[int, str]]:
    """The wizard's choice of scenarios: the team's readable ones with their item counts."""
    rows = (
        readable_scenarios(user, team)
        .annotate(item_count=Count("items"))
        .order_by("name")
        .values_list("pk", "name", "item_count")[:MAX_SOURCE_CHOICES]
    )
    return [(pk, f"{name} · {count:,} items") for pk, name, count in rows]


HOME_SCENARIOS = 5


def home_section(user: Any) -> dict[str, Any] | None:
    """The home page's "Recent scenarios": the latest of the teams where the user may view
    them (``evalplatform.web.home``)."""
    if not policy.has_feature_anywhere(user, SCENARIOS_VIEW):
        return None
    recent = policy.visible(user, SCENARIOS_VIEW, Scenario.objects.select_related("team"))
    scenarios = list(recent.order_by("-created_at", "-pk")[:HOME_SCENARIOS])
    return {"scenarios": scenarios} if scenarios else None
