"""The scenario manager pages: the list, and one page per scenario with its design, its
progress per evaluator, the open / close actions and the unblinded exports."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from evalplatform.accounts import policy
from evalplatform.accounts.roles import (
    SCENARIOS_EXPORT,
    SCENARIOS_MANAGE,
    SCENARIOS_VIEW,
)
from evalplatform.errors import ApplicationError, NotFound
from evaluations import access
from evaluations.models import Assignment, AssignmentStatus, Judgment
from scenarios import services
from scenarios.models import Scenario, Task


def _scenario(request: HttpRequest, scenario_id: int) -> Scenario:
    try:
        return policy.access(
            request.user, SCENARIOS_VIEW, Scenario.objects.select_related("team"), pk=scenario_id
        )
    except NotFound as exc:
        raise Http404 from exc


@login_required
def scenario_list(request: HttpRequest) -> HttpResponse:
    # Counted in subqueries: two joined Counts would multiply tasks by judgments.
    def count_of(model) -> Coalesce:
        rows = model.objects.filter(scenario=OuterRef("pk")).order_by().values("scenario")
        return Coalesce(Subquery(rows.annotate(n=Count("pk")).values("n")), 0)

    scenarios = policy.visible(
        request.user, SCENARIOS_VIEW, Scenario.objects.select_related("team")
    ).annotate(task_count=count_of(Task), judgment_count=count_of(Judgment))[:200]
    return render(request, "evaluations/scenario_list.html", {"scenarios": scenarios})


@login_required
def scenario_page(request: HttpRequest, scenario_id: int) -> HttpResponse:
    scenario = _scenario(request, scenario_id)
    per_evaluator = (
        Assignment.objects.filter(scenario=scenario)
        .values("evaluator__username")
        .annotate(
            done=Count("pk", filter=Q(status=AssignmentStatus.DONE)),
            reserved=Count("pk", filter=Q(status=AssignmentStatus.RESERVED)),
            skipped=Count("pk", filter=Q(status=AssignmentStatus.SKIPPED)),
        )
        .order_by("-done", "evaluator__username")
    )
    can_manage = policy.may(request.user, SCENARIOS_MANAGE, scenario)
    tasks = scenario.tasks.count()
    judgments = Judgment.objects.filter(scenario=scenario).count()
    return render(
        request,
        "evaluations/scenario_page.html",
        {
            "scenario": scenario,
            "tasks": tasks,
            "items": scenario.items.count(),
            "variants": scenario.variants.count(),
            "judgments": judgments,
            "wanted": tasks * scenario.overlap,
            "per_evaluator": per_evaluator,
            "can_manage": can_manage,
            "invitations": (
                scenario.invitations.select_related("accepted_by")[:500] if can_manage else []
            ),
            "can_export": policy.may(request.user, SCENARIOS_EXPORT, scenario),
            "can_evaluate": access.may_evaluate(request.user, scenario),
        },
    )


@login_required
@require_POST
def scenario_action(request: HttpRequest, scenario_id: int, action: str) -> HttpResponse:
    scenario = _scenario(request, scenario_id)
    act = {"open": services.scenario_open, "close": services.scenario_close}.get(action)
    if act is None:
        raise Http404
    try:
        scenario = act(user=request.user, scenario=scenario)
        messages.success(request, f"Scenario {scenario.status}.")
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("scenario-page", scenario_id=scenario.pk)
