"""The scenario manager pages: the list, and one page per scenario with its design, its
progress per evaluator, the open / close actions and the unblinded exports."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from evalplatform import validation
from evalplatform.accounts import policy
from evalplatform.accounts.roles import (
    EVALUATIONS_JUDGE,
    EVALUATIONS_VIEW_ALL,
    SCENARIOS_CREATE,
    SCENARIOS_EXPORT,
    SCENARIOS_MANAGE,
    SCENARIOS_VIEW,
)
from evalplatform.api.uploads import read_upload
from evalplatform.errors import ApplicationError, FieldErrors
from evaluations.manager import selectors
from evaluations.pages import scenario_or_404
from evaluations.quality import selectors as quality
from evaluations.workspace import access
from scenarios import forms, services
from scenarios.models import ScenarioStatus
from scenarios.types import registry


@login_required
def scenario_list(request: HttpRequest) -> HttpResponse:
    if not policy.has_feature_anywhere(request.user, SCENARIOS_VIEW):
        raise PermissionDenied  # an evaluator's scenarios are in the workspace
    scenarios = selectors.scenario_list(request.user)
    can_create = policy.has_feature_anywhere(request.user, SCENARIOS_CREATE)
    return render(
        request,
        "evaluations/scenario_list.html",
        {"scenarios": scenarios, "can_create": can_create},
    )


@login_required
def scenario_page(request: HttpRequest, scenario_id: int) -> HttpResponse:
    scenario = scenario_or_404(request, scenario_id)
    per_evaluator = selectors.per_evaluator(scenario)
    can_manage = policy.may(request.user, SCENARIOS_MANAGE, scenario)
    can_judge = policy.may(request.user, EVALUATIONS_JUDGE, scenario)
    tasks = scenario.tasks.count()
    judgments = selectors.human_judgment_count(scenario)
    can_analyse = policy.may(request.user, EVALUATIONS_VIEW_ALL, scenario)
    feedback = selectors.feedback(scenario) if can_analyse else {}
    return render(
        request,
        "evaluations/scenario_page.html",
        {
            "scenario": scenario,
            "kind": registry.of(scenario),
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
            "can_judge": can_judge,
            "can_analyse": can_analyse,
            **feedback,
            "judges": selectors.judges(scenario),
            **(selectors.judge_form_choices(scenario) if can_judge else {}),
            **(quality.page_context(scenario) if can_manage else {}),
        },
    )


@login_required
@require_POST
def scenario_action(request: HttpRequest, scenario_id: int, action: str) -> HttpResponse:
    scenario = scenario_or_404(request, scenario_id)
    act = {"open": services.scenario_open, "close": services.scenario_close}.get(action)
    if act is None:
        raise Http404
    try:
        scenario = act(user=request.user, scenario=scenario)
        messages.success(request, f"Scenario {scenario.status}.")
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("manager:scenario-page", scenario_id=scenario.pk)


@login_required
def scenario_edit(request: HttpRequest, scenario_id: int) -> HttpResponse:
    """Edit a draft: name, instructions, blind mode and its context fields, overlap, and the
    rubric, label set or ties (the tasks stay as they were made)."""
    scenario = scenario_or_404(request, scenario_id)
    if not policy.may(request.user, SCENARIOS_MANAGE, scenario):
        raise PermissionDenied
    if scenario.status != ScenarioStatus.DRAFT:
        messages.error(request, "Only a draft scenario can be edited.")
        return redirect("manager:scenario-page", scenario_id=scenario.pk)
    errors: dict[str, str] = {}
    beside: dict[str, str] = {}
    if request.method == "POST":
        fields = forms.scenario_fields(request.POST)
        config = forms.config_from_post(scenario.type, request.POST, scenario.config)
        try:
            services.scenario_update(
                user=request.user, scenario=scenario, data={**fields, "config": config}
            )
        except FieldErrors as exc:
            errors, beside = forms.named_errors(exc.errors, scenario.type, config)
        except ApplicationError as exc:
            errors = {"": exc.message}
        else:
            messages.success(request, "Scenario saved.")
            return redirect("manager:scenario-page", scenario_id=scenario.pk)
        values = forms.form_values(scenario.type, fields, config)
    else:
        fields = {
            f: getattr(scenario, f)
            for f in ("name", "instructions", "blind", "context_fields", "overlap")
        }
        values = forms.form_values(scenario.type, fields, scenario.config)
    return render(
        request,
        "evaluations/scenario_form.html",
        {
            "scenario": scenario,
            "values": values,
            "errors": errors,
            "beside": beside,
            "editing": True,
        },
        status=400 if errors else 200,
    )


def _upload_form(request: HttpRequest, teams: list[Any]) -> tuple[Any, dict[str, Any]]:
    """The upload form's team and data (the API's shape), read from the POST."""
    team = next((t for t in teams if t.slug == request.POST.get("team")), None)
    kind = request.POST.get("type", registry.DEFAULT)
    seed = request.POST.get("seed", "0").strip() or "0"
    data = {
        **forms.scenario_fields(request.POST),
        "type": kind,
        "config": forms.config_from_post(kind, request.POST),
        "seed": number if (number := validation.digits(seed, signed=True)) is not None else seed,
    }
    return team, data


def _upload_of(request: HttpRequest, team: Any) -> tuple[Any, str]:
    if team is None:
        raise FieldErrors({"team": "Choose one of your teams."})
    upload = read_upload(request)
    if upload is None:
        raise FieldErrors({"file": "Choose a CSV or JSON lines file."})
    return upload


@login_required
def scenario_new(request: HttpRequest) -> HttpResponse:
    """A scenario from an upload of outputs made elsewhere (CSV or JSON lines of
    ``item_id, variant_id, content`` and optionally ``model, prompt, context``)."""
    teams = list(policy.teams_with(request.user, SCENARIOS_CREATE))
    if not teams:
        raise PermissionDenied
    errors: dict[str, str] = {}
    beside: dict[str, str] = {}
    kind, fields, config = registry.DEFAULT, forms.INITIAL_FIELDS, forms.initial_config()
    if request.method == "POST":
        team, data = _upload_form(request, teams)
        kind, config = data["type"], data["config"]
        fields = {key: data[key] for key in forms.INITIAL_FIELDS}
        try:
            raw, filename = _upload_of(request, team)
            scenario = services.scenario_from_upload(
                user=request.user, team=team, data=data, raw=raw, filename=filename
            )
        except FieldErrors as exc:
            errors, beside = forms.named_errors(exc.errors, kind, config)
        except ApplicationError as exc:
            errors = {"": exc.message}
        else:
            messages.success(request, forms.created(scenario))
            return redirect("manager:scenario-page", scenario_id=scenario.pk)
    return render(
        request,
        "evaluations/scenario_form.html",
        {
            "values": forms.form_values(kind, fields, config),
            "errors": errors,
            "beside": beside,
            "editing": False,
            "teams": teams,
            "team": request.POST.get("team", teams[0].slug),
            "seed": request.POST.get("seed", "0"),
        },
        status=400 if errors else 200,
    )


@login_required
@require_POST
def scenario_new_preview(request: HttpRequest) -> HttpResponse:
    """The upload form's design, previewed (htmx): tasks, judgments and human time from
    the file and the settings, or what is wrong with them; nothing is written."""
    teams = list(policy.teams_with(request.user, SCENARIOS_CREATE))
    if not teams:
        raise PermissionDenied
    team, data = _upload_form(request, teams)
    try:
        raw, filename = _upload_of(request, team)
        preview = services.preview_from_upload(
            user=request.user, team=team, data=data, raw=raw, filename=filename
        )
    except FieldErrors as exc:
        errors = forms.named_errors(exc.errors, data["type"], data["config"])[0]
        return render(request, "scenarios/_preview.html", {"errors": errors})
    except ApplicationError as exc:
        return render(request, "scenarios/_preview.html", {"errors": {"": exc.message}})
    return render(request, "scenarios/_preview.html", {"preview": preview})
