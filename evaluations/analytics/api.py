"""``GET /api/scenarios/{id}/analytics`` (``feature:evaluations:view_all``): the analytics
JSON; ``GET /api/scenarios/{id}/analytics/{table}.csv`` (``feature:evaluations:export``):
one of its tables. Query parameters: ``raters`` (all, humans, judges, judge:<id>; by
default humans when the scenario has people's judgments, else all),
``resamples`` (0 to 10,000), ``seed``, ``elo_k``, ``elo_order`` (chronological, random)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform import validation
from evalplatform.accounts import audit, policy
from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import (
    EVALUATIONS_EXPORT,
    EVALUATIONS_VIEW_ALL,
    SCENARIOS_MANAGE,
    SCENARIOS_VIEW,
)
from evalplatform.api import bodies
from evalplatform.api.parsers import JSONParser
from evalplatform.api.uploads import csv_dict_chunks, download
from evalplatform.errors import FieldErrors, NotFound
from evalplatform.throttling import expensive
from evaluations.analytics import cards, results, tables, trust
from evaluations.analytics.analyze import default_raters, rater_filter
from evaluations.analytics.models import AnalysisStatus, GateThresholds, TeamTrustGate
from scenarios.models import Scenario

MAX_RESAMPLES = 10_000


def options_from(query: Any, scenario: Scenario) -> dict[str, Any]:
    """The analysis options of a query string (or form); field errors for bad values.
    ``raters`` defaults to the people's judgments when the scenario has some."""
    errors: dict[str, str] = {}
    options: dict[str, Any] = {"raters": query.get("raters") or default_raters(scenario)}
    try:
        rater_filter(options["raters"])
    except ValueError:
        errors["raters"] = "all, humans, judges or judge:<id>."
    for name, cast, low, high in (
        ("resamples", int, 0, MAX_RESAMPLES),
        ("seed", int, 0, validation.SEED_MAX),
        ("elo_k", float, 0.0, 1000.0),
    ):
        raw = query.get(name)
        if raw in (None, ""):
            continue
        try:
            value = cast(raw)
            if not low <= value <= high:
                raise ValueError
        except ValueError:
            errors[name] = f"A number from {low} to {high}."
            continue
        options[name] = value
    order = query.get("elo_order")
    if order:
        if order not in ("chronological", "random"):
            errors["elo_order"] = "chronological or random."
        options["elo_order"] = order
    if errors:
        raise FieldErrors(errors)
    return options


def scenario_for(user: Any, pk: int, feature: str) -> Scenario:
    return policy.access(
        user, feature, Scenario.objects.select_related("team"), view_feature=SCENARIOS_VIEW, pk=pk
    )


PARAMETERS = [
    OpenApiParameter(
        "raters",
        str,
        description="all, humans, judges or judge:<id> (default: humans when there are "
        "people's judgments, else all)",
    ),
    OpenApiParameter("resamples", int, description="bootstrap resamples (default 1000)"),
    OpenApiParameter("seed", int),
    OpenApiParameter("elo_k", float),
    OpenApiParameter("elo_order", str, description="chronological or random"),
]


ANSWERS = {
    200: OpenApiTypes.OBJECT,
    202: OpenApiTypes.OBJECT,
    503: OpenApiTypes.OBJECT,
}


def not_ready(request, state: results.State) -> Response:
    """No result yet: 202 while it is computed (ask the same URL again), 503 when the last
    computation failed (new judgments or other options compute it again)."""
    failed = state.analysis.status == AnalysisStatus.FAILED
    return Response(
        {
            "detail": "The analysis failed." if failed else "The analysis is being computed.",
            "status_url": request.build_absolute_uri(),
            "analysis": state.describe(),
        },
        status=503 if failed else 202,
        headers={} if failed else {"Retry-After": "2"},
    )


def with_cards_now(scenario: Scenario, result: dict[str, Any]) -> dict[str, Any]:
    """A stored result with its judge cards' staleness and trust as of now (the judges'
    configurations, the gate and the opt-ins may have changed since it was computed)."""
    judges = list(
        scenario.judges.select_related("llm_model__connection", "prompt_version__template")
    )
    gate = cards.gate_for(scenario)
    found = cards.refresh(result.get("judge_cards") or [], judges, gate)
    return result | {"judge_cards": found}


class AnalyticsView(APIView):
    @extend_schema(parameters=PARAMETERS, responses=ANSWERS)
    @expensive
    def get(self, request, pk: int):
        """The analytics JSON with ``analysis`` (its status, when it was computed and from how
        many judgments). Computed once per state of the judgments: a large one is computed
        in the background, and until then the last result (``fresh`` false) or a 202 comes
        back."""
        scenario = scenario_for(request.user, pk, EVALUATIONS_VIEW_ALL)
        state = results.current(scenario, options_from(request.query_params, scenario))
        if state.analysis.result is None:
            return not_ready(request, state)
        return Response(
            with_cards_now(scenario, state.analysis.result) | {"analysis": state.describe()}
        )


class AnalyticsTableView(APIView):
    @extend_schema(
        parameters=PARAMETERS,
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            (202, "application/json"): OpenApiTypes.OBJECT,
            (503, "application/json"): OpenApiTypes.OBJECT,
        },
    )
    @expensive
    def get(self, request, pk: int, table: str):
        if table not in tables.TABLES:
            raise NotFound()
        scenario = scenario_for(request.user, pk, EVALUATIONS_EXPORT)
        audit.record(
            user=request.user,
            team=scenario.team_id,
            action="scenario.analytics.export",
            target=scenario,
            table=table,
        )
        state = results.current(scenario, options_from(request.query_params, scenario))
        if state.analysis.result is None:
            return not_ready(request, state)
        rows = tables.rows(state.analysis.result, table)
        columns: list[str] = []
        for row in rows:
            columns += [c for c in row if c not in columns]
        return download(
            csv_dict_chunks(columns or ["empty"], rows),
            "text/csv; charset=utf-8",
            f"scenario-{scenario.pk}-{table}.csv",
        )


class AdaptiveTasksView(APIView):
    """``POST /api/scenarios/{id}/adaptive-tasks`` (``feature:scenarios:manage``) with
    ``{"count": N}``: add the N comparison tasks worth the most under the judgments so far
    (docs/analytics.md); evaluators and judges ("unjudged") take them up like any task."""

    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: OpenApiTypes.OBJECT})
    @expensive
    def post(self, request, pk: int):
        from evaluations.analytics.adaptive import add_adaptive_tasks

        scenario = scenario_for(request.user, pk, SCENARIOS_MANAGE)
        data = request.data if isinstance(request.data, dict) else {}
        tasks = add_adaptive_tasks(user=request.user, scenario=scenario, count=data.get("count"))
        return Response(
            {
                "added": len(tasks),
                "tasks": [
                    {
                        "id": t.pk,
                        "position": t.position,
                        "variant_a": t.variant_a_id,
                        "variant_b": t.variant_b_id,
                    }
                    for t in tasks
                ],
            },
            status=201,
        )


def gate_object(gate: GateThresholds | None) -> dict[str, Any]:
    """A gate as the API shows it (``gate: null`` without one), with ``source``: which
    gate applies ("scenario": the scenario's own; "team": its team's default; null)."""
    if gate is None:
        return {"gate": None, "source": None}
    return {
        "gate": cards.gate_of(gate),
        "source": cards.source_of(gate),
        "updated_by": gate.updated_by.username if gate.updated_by else None,
        "updated_at": gate.updated_at.isoformat(),
    }


class TrustGateView(APIView):
    """``/api/scenarios/{id}/trust-gate``: the thresholds the scenario's judges are held to
    (docs/analytics.md, "Trust gates"). GET (``feature:evaluations:view_all``) answers the
    gate that applies: the scenario's own, else its team's default (``source``); PUT sets the
    scenario's own whole gate and DELETE removes it (``feature:scenarios:manage``), both
    audited."""

    parser_classes = [JSONParser]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        scenario = scenario_for(request.user, pk, EVALUATIONS_VIEW_ALL)
        return Response(gate_object(cards.gate_for(scenario)))

    @extend_schema(request=bodies.TRUST_GATE, responses=OpenApiTypes.OBJECT)
    def put(self, request, pk: int):
        """Thresholds left out are not checked (``min_shared_items``: 0);
        ``include_untrusted`` true counts untrusted judges in the rankings anyway."""
        scenario = scenario_for(request.user, pk, SCENARIOS_MANAGE)
        gate = trust.trust_gate_set(user=request.user, scenario=scenario, data=request.data)
        return Response(gate_object(gate))

    @extend_schema(responses={204: None})
    def delete(self, request, pk: int):
        scenario = scenario_for(request.user, pk, SCENARIOS_MANAGE)
        trust.trust_gate_delete(user=request.user, scenario=scenario)
        return Response(status=status.HTTP_204_NO_CONTENT)


def team_for(user: Any, slug: str, feature: str) -> Team:
    """A team by slug among those whose analytics the user may see; another team's is a
    404 like a missing one, and a seen one without ``feature`` a 403."""
    return policy.access(
        user, feature, Team.objects.all(), view_feature=EVALUATIONS_VIEW_ALL, slug=slug
    )


class TeamTrustGateView(APIView):
    """``/api/teams/{slug}/trust-gate``: the team's default gate, held by every scenario of
    the team without its own (docs/analytics.md, "Trust gates"). GET
    (``feature:evaluations:view_all`` in the team); PUT sets the whole gate and DELETE
    removes it (``feature:scenarios:manage`` in the team), both audited."""

    parser_classes = [JSONParser]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, slug: str):
        team = team_for(request.user, slug, EVALUATIONS_VIEW_ALL)
        found = TeamTrustGate.objects.filter(team=team).select_related("updated_by").first()
        return Response(gate_object(found) | {"team": team.slug})

    @extend_schema(request=bodies.TRUST_GATE, responses=OpenApiTypes.OBJECT)
    def put(self, request, slug: str):
        """Thresholds left out are not checked (``min_shared_items``: 0)."""
        team = team_for(request.user, slug, SCENARIOS_MANAGE)
        gate = trust.team_gate_set(user=request.user, team=team, data=request.data)
        return Response(gate_object(gate) | {"team": team.slug})

    @extend_schema(responses={204: None})
    def delete(self, request, slug: str):
        team = team_for(request.user, slug, SCENARIOS_MANAGE)
        trust.team_gate_delete(user=request.user, team=team)
        return Response(status=status.HTTP_204_NO_CONTENT)
