"""The scenario page's quality-control forms: who evaluates (and quotas), gold tasks, and
excluding an evaluator's judgments from the analytics. Each posts, then goes back to the
scenario page with what happened."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from evalplatform import validation
from evalplatform.api.uploads import read_upload
from evalplatform.errors import ApplicationError, FieldErrors, NotFound, report_on_page
from evaluations.pages import scenario_or_404
from evaluations.quality import attention, services


def _back(scenario_id: int, anchor: str) -> HttpResponse:
    response = redirect("manager:scenario-page", scenario_id=scenario_id)
    response["Location"] += f"#{anchor}"
    return response


@login_required
@require_POST
def assignees(request: HttpRequest, scenario_id: int) -> HttpResponse:
    """``assignee``: the chosen members' ids and ``group`` the chosen groups' (none of
    either: everyone who may submit); ``quota-<id>`` each member's quota and
    ``default_quota`` (empty: no limit)."""
    scenario = scenario_or_404(request, scenario_id)
    chosen = request.POST.getlist("assignee")[: services.MAX_ASSIGNEES + 1]
    entries = [
        {
            "user": number if (number := validation.digits(pk, most=10)) is not None else pk,
            "quota": request.POST.get(f"quota-{pk}", "").strip() or None,
        }
        for pk in chosen
    ]
    groups = [
        number if (number := validation.digits(pk, most=10)) is not None else pk
        for pk in request.POST.getlist("group")[: services.MAX_ASSIGNEES + 1]
    ]
    data = {
        "assignees": entries,
        "groups": groups,
        "default_quota": request.POST.get("default_quota", "").strip(),
    }
    try:
        services.assignees_set(user=request.user, scenario=scenario, data=data)
    except ApplicationError as exc:
        report_on_page(request, exc, {"assignees": "Evaluator", "groups": "Group"})
    else:
        messages.success(
            request,
            f"{len(entries)} evaluator{'s' if len(entries) != 1 else ''} and "
            f"{len(groups)} group{'s' if len(groups) != 1 else ''} chosen."
            if entries or groups
            else "Every evaluator of the team may evaluate this scenario.",
        )
    return _back(scenario.pk, "who-evaluates")


@login_required
@require_POST
def gold(request: HttpRequest, scenario_id: int) -> HttpResponse:
    """``gold_rate``, and optionally a ``file`` of gold tasks (replacing them)."""
    scenario = scenario_or_404(request, scenario_id)
    try:
        data: dict = {"gold_rate": request.POST.get("gold_rate", "").strip() or None}
        upload = read_upload(request)
        if upload is not None:
            entries = services.gold_entries(upload[0])
            data |= entries if isinstance(entries, dict) else {"tasks": entries}
        services.gold_set(user=request.user, scenario=scenario, data=data)
    except ApplicationError as exc:
        report_on_page(request, exc)
    else:
        messages.success(request, "Gold tasks saved.")
    return _back(scenario.pk, "quality")


@login_required
@require_POST
def attention_checks(request: HttpRequest, scenario_id: int) -> HttpResponse:
    """``action``: ``rate`` (``attention_rate``), ``add`` (``instruction``, ``answer`` as
    JSON, optional ``task``) or ``remove`` (``task``)."""
    scenario = scenario_or_404(request, scenario_id)
    action = request.POST.get("action")
    try:
        if action == "rate":
            attention.attention_rate_set(
                user=request.user,
                scenario=scenario,
                rate=request.POST.get("attention_rate", "").strip() or None,
            )
            messages.success(request, "Attention rate saved.")
        elif action == "add":
            try:
                answer = validation.json_value(request.POST.get("answer", "")[:20_000])
            except validation.UnstorableJSON as exc:
                raise FieldErrors({"answer": str(exc)}) from exc
            except ValueError as exc:
                raise FieldErrors({"answer": "The expected answer as JSON."}) from exc
            task = request.POST.get("task", "").strip()
            data = {"instruction": request.POST.get("instruction", ""), "answer": answer}
            if task:
                data["task"] = number if (number := validation.digits(task, most=10)) else task
            attention.attention_add(user=request.user, scenario=scenario, data=data)
            messages.success(request, "Attention check added.")
        elif action == "remove":
            attention.attention_remove(
                user=request.user, scenario=scenario, task=request.POST.get("task", "")
            )
            messages.success(request, "Attention check removed.")
        else:
            raise Http404
    except NotFound as exc:
        raise Http404 from exc
    except ApplicationError as exc:
        report_on_page(request, exc)
    return _back(scenario.pk, "attention")


@login_required
@require_POST
def excluded(request: HttpRequest, scenario_id: int, user: str) -> HttpResponse:
    """``action``: ``exclude`` (with an optional ``reason``) or ``include``."""
    scenario = scenario_or_404(request, scenario_id)
    action = request.POST.get("action")
    if action not in ("exclude", "include"):
        raise Http404
    try:
        evaluator = services.rater(scenario, user)
    except NotFound as exc:
        raise Http404 from exc
    try:
        if action == "exclude":
            services.rater_exclude(
                user=request.user,
                scenario=scenario,
                evaluator=evaluator,
                reason=request.POST.get("reason", ""),
            )
            messages.success(request, f"{evaluator.get_username()}'s judgments left out.")
        else:
            services.rater_include(user=request.user, scenario=scenario, evaluator=evaluator)
            messages.success(request, f"{evaluator.get_username()}'s judgments taken back in.")
    except ApplicationError as exc:
        report_on_page(request, exc)
    return _back(scenario.pk, "quality")
