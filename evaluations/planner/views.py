"""The scheduler's page of a scenario (linked from its analytics page): the latest proposal
with its projected cost and width, the form that proposes another, and the accept form."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from evalplatform import inputs
from evalplatform.accounts import policy
from evalplatform.accounts.roles import EVALUATIONS_VIEW_ALL, SCENARIOS_MANAGE
from evalplatform.errors import ApplicationError, FieldErrors, Forbidden, NotFound
from evaluations.planner import replan, selectors, services
from evaluations.planner.api import plan_for, scenario_for
from evaluations.planner.inputs import PlanInput

QUESTION_NAMES = {
    "pair": "Is one model better than another?",
    "top_k": "Which are the top k?",
    "ranking": "The whole ranking",
}


def _form_data(post: Any) -> dict[str, Any]:
    """The form's fields as the service reads them (empty fields left out; raters ticked)."""
    data: dict[str, Any] = {k: v for k, v in post.items() if v != "" and k != "raters"}
    data.pop("csrfmiddlewaretoken", None)
    raters = post.getlist("raters")
    if raters:
        data["raters"] = raters
    return data


@login_required
@require_http_methods(["GET", "POST"])
def plan_page(request: HttpRequest, scenario_id: int) -> HttpResponse:
    try:
        feature = SCENARIOS_MANAGE if request.method == "POST" else EVALUATIONS_VIEW_ALL
        scenario = scenario_for(request.user, scenario_id, feature)
    except NotFound as exc:
        raise Http404 from exc
    except Forbidden as exc:
        raise PermissionDenied from exc
    errors: dict[str, list[str]] = {}
    status = 200
    if request.method == "POST":
        try:
            plan = services.plan_propose(
                user=request.user, scenario=scenario, data=_form_data(request.POST)
            )
        except FieldErrors as exc:
            errors, status = inputs.relabelled(exc.errors, PlanInput), 400
        except ApplicationError as exc:
            errors, status = {"scenario": [exc.message]}, exc.status_code
        else:
            return redirect("planner:plan", scenario_id=scenario.pk, plan_id=plan.pk)
    return _render(request, scenario, selectors.latest_plan(scenario), errors, status)


@login_required
def plan_detail(request: HttpRequest, scenario_id: int, plan_id: int) -> HttpResponse:
    try:
        plan = plan_for(request.user, scenario_id, plan_id, EVALUATIONS_VIEW_ALL)
    except NotFound as exc:
        raise Http404 from exc
    except Forbidden as exc:
        raise PermissionDenied from exc
    return _render(request, plan.scenario, plan, {}, 200)


def _render(request, scenario, plan, errors, status) -> HttpResponse:
    return render(
        request,
        "evaluations/plan.html",
        {
            "scenario": scenario,
            "plan": plan,
            "stale": plan is not None and services.is_stale(plan),
            "reason_text": replan.reason_text(plan.reason) if plan is not None else "",
            "question_name": QUESTION_NAMES.get(str((plan.question or {}).get("kind")), "")
            if plan
            else "",
            "entities": selectors.entity_list(scenario),
            "judges": list(selectors.usable_judges(scenario)),
            "can_manage": policy.may(request.user, SCENARIOS_MANAGE, scenario),
            "errors": errors,
            "form": request.POST if request.method == "POST" else _again(plan),
        },
        status=status,
    )


def _again(plan) -> dict[str, Any]:
    """The form filled with a proposal's question and budget: propose again from the
    verdicts that arrived since."""
    if plan is None:
        return {}
    question, budget = plan.question or {}, plan.budget or {}
    filled = {
        "question": question.get("kind"),
        "a": question.get("a"),
        "b": question.get("b"),
        "k": question.get("k"),
        "tau": question.get("tau"),
        "budget_usd": budget.get("usd"),
        "budget_hours": budget.get("hours"),
        "hourly_rate_usd": budget.get("hourly_rate_usd"),
        "target_width": budget.get("target_width"),
    }
    return {k: v for k, v in filled.items() if v is not None}


@login_required
@require_POST
def plan_accept(request: HttpRequest, scenario_id: int, plan_id: int) -> HttpResponse:
    try:
        plan = plan_for(request.user, scenario_id, plan_id, SCENARIOS_MANAGE)
        seen = request.POST.get("fingerprint")
        plan = services.plan_accept(user=request.user, plan=plan, seen=seen)
    except NotFound as exc:
        raise Http404 from exc
    except Forbidden as exc:
        raise PermissionDenied from exc
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        made = sum(len(ids) for ids in (plan.submitted or {}).get("tasks", {}).values())
        runs = len((plan.submitted or {}).get("judge_runs", []))
        messages.success(
            request,
            f"Submitted: {made} task{'s' if made != 1 else ''}, "
            f"{runs} judge run{'s' if runs != 1 else ''} started.",
        )
    return redirect("planner:plan", scenario_id=scenario_id, plan_id=plan_id)
