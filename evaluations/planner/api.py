"""The budget scheduler's API (docs/api.md): ``POST /api/scenarios/{id}/plan`` proposes the
next batch of work for a question and a budget (``feature:scenarios:manage``), ``GET`` lists
the scenario's proposals and ``GET .../plan/{plan_id}`` shows one (``feature:evaluations:
view_all``), ``POST .../plan/{plan_id}/accept`` submits one (``feature:scenarios:manage``,
and ``feature:evaluations:judge`` when it runs judges)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts import policy
from evalplatform.accounts.roles import EVALUATIONS_VIEW_ALL, SCENARIOS_MANAGE, SCENARIOS_VIEW
from evalplatform.api import bodies
from evalplatform.api.parsers import JSONParser
from evalplatform.errors import FieldErrors, NotFound
from evalplatform.throttling import expensive
from evaluations.planner import replan, selectors, services
from evaluations.planner.inputs import PlanInput
from evaluations.planner.models import BudgetPlan, PlanStatus
from scenarios.models import Scenario

LISTED = 50

PLAN_BODY = bodies.request(PlanInput)


def plan_json(plan: BudgetPlan, *, stamp: str | None = None) -> dict[str, Any]:
    """A proposal as the API answers it; ``stamp``: the scenario's current fingerprint when
    the caller has it (a list reads it once)."""
    stale = (
        services.is_stale(plan)
        if stamp is None
        else plan.status == PlanStatus.PROPOSED and plan.fingerprint != stamp
    )
    return {
        "id": plan.pk,
        "scenario": plan.scenario_id,
        "status": plan.status,
        "stale": stale,
        "fingerprint": plan.fingerprint,
        "question": plan.question,
        "budget": plan.budget,
        "proposal": plan.proposal,
        "submitted": plan.submitted,
        "created_by": plan.created_by.username if plan.created_by else None,
        "created_at": plan.created_at.isoformat(),
        "accepted_at": plan.accepted_at.isoformat() if plan.accepted_at else None,
        "chain": chain_json(plan),
    }


def chain_json(plan: BudgetPlan) -> dict[str, Any]:
    """Where the plan stands in its chain: its first plan (``root``), the accepted plan it
    re-plans (``predecessor``, None for a first plan), what triggered it, how many new
    verdicts, the chain's spending, and why it was skipped (``reason``)."""
    return {
        "root": plan.chain_id or plan.pk,
        "predecessor": plan.replans_id,
        "trigger": plan.trigger or None,
        "new_verdicts": plan.new_verdicts,
        "spending": plan.spending,
        "reason": plan.reason or None,
        "reason_text": replan.reason_text(plan.reason) if plan.reason else None,
    }


def scenario_for(user: Any, pk: int, feature: str) -> Scenario:
    return policy.access(
        user, feature, Scenario.objects.select_related("team"), view_feature=SCENARIOS_VIEW, pk=pk
    )


def plan_for(user: Any, pk: int, plan_id: int, feature: str) -> BudgetPlan:
    scenario = scenario_for(user, pk, feature)
    plan = selectors.plan_of(scenario, plan_id)
    if plan is None:
        raise NotFound()
    plan.scenario = scenario
    return plan


def _body(request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise FieldErrors({"non_field_errors": "Send a JSON object."})
    return dict(request.data)


class PlansView(APIView):
    parser_classes = [JSONParser]

    @extend_schema(operation_id="api_scenarios_plan_list", responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        """The scenario's proposals, newest first (at most 50), each with ``stale``: whether
        the verdicts or tasks changed since it was computed."""
        scenario = scenario_for(request.user, pk, EVALUATIONS_VIEW_ALL)
        rows = list(selectors.plans(scenario).order_by("-created_at", "-pk")[:LISTED])
        stamp = selectors.fingerprint(scenario)
        for plan in rows:
            plan.scenario = scenario
        return Response({"plans": [plan_json(plan, stamp=stamp) for plan in rows]})

    @extend_schema(request=PLAN_BODY, responses={201: OpenApiTypes.OBJECT})
    @expensive
    def post(self, request, pk: int):
        """Propose the next batch of work: the question (``question``: pair with ``a`` and
        ``b``, top_k with ``k``, ranking with ``tau``), the budget (``budget_usd``,
        ``budget_hours``, ``hourly_rate_usd``) and options; nothing is submitted."""
        scenario = scenario_for(request.user, pk, SCENARIOS_MANAGE)
        plan = services.plan_propose(user=request.user, scenario=scenario, data=_body(request))
        return Response(plan_json(plan), status=201)


class PlanView(APIView):
    @extend_schema(operation_id="api_scenarios_plan_retrieve", responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int, plan_id: int):
        """One proposal, with its projected cost and width, and what accepting it made."""
        return Response(plan_json(plan_for(request.user, pk, plan_id, EVALUATIONS_VIEW_ALL)))


class PlanAcceptView(APIView):
    parser_classes = [JSONParser]

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    @expensive
    def post(self, request, pk: int, plan_id: int):
        """Submit the proposal: its people's tasks are added to the scenario, its judges run
        over theirs. Optional body ``{"fingerprint": ...}``: the proposal's ``fingerprint``
        as you read it (a pending re-plan is computed again in place; a different one is a
        409). 409 when it is stale (propose again), accepted already, the scenario is
        closed, or judges' tasks wait for a draft scenario to open."""
        plan = plan_for(request.user, pk, plan_id, SCENARIOS_MANAGE)
        body = request.data if isinstance(request.data, dict) else {}
        seen = body.get("fingerprint")
        plan = services.plan_accept(user=request.user, plan=plan, seen=seen)
        return Response(plan_json(plan))
