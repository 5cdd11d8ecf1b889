"""The evaluator workspace: the queue, one page per task type (to answer a task, or to revise
an earlier answer), flags. The pages go through the same services as the API (assignment,
answer checks, revisions, blind task views)."""

from __future__ import annotations

import contextlib
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from evalplatform import validation
from evalplatform.errors import ApplicationError, FieldErrors, NotFound
from evaluations.judgments.models import Assignment, AssignmentStatus
from evaluations.workspace import access, flags, revisions, selectors, services
from evaluations.workspace.models import FlagReason
from scenarios.models import Scenario, ScenarioStatus
from scenarios.types import registry
from scenarios.types.base import ScenarioKind


@login_required
def queue(request: HttpRequest) -> HttpResponse:
    scenarios = selectors.queue(request.user)
    done = selectors.progress_many(user=request.user, scenarios=scenarios)
    rows = [(s, done[s.pk]) for s in scenarios]
    return render(request, "evaluations/queue.html", {"rows": rows})


@login_required
def scenario_next(request: HttpRequest, scenario_id: int) -> HttpResponse:
    try:
        scenario = access.scenario_to_evaluate(request.user, scenario_id)
        assignment = services.next_task(user=request.user, scenario=scenario)
    except NotFound as exc:
        raise Http404 from exc
    except ApplicationError as exc:
        return render(request, "evaluations/done.html", {"message": exc.message}, status=409)
    if assignment is None:
        done = selectors.progress(user=request.user, scenario=scenario)
        return render(request, "evaluations/done.html", {"scenario": scenario, "progress": done})
    return redirect("workspace:task", assignment_id=assignment.pk)


def _assignment(request: HttpRequest, assignment_id: int) -> Assignment:
    found = selectors.own_assignment(request.user, assignment_id)
    if found is None or not access.may_evaluate(request.user, found.scenario):
        raise Http404
    return found


def _answer_from_post(request: HttpRequest, scenario: Scenario) -> dict[str, Any]:
    raw_time = request.POST.get("time_spent_ms", "")
    return {
        "answer": registry.of(scenario).answer_from_form(request.POST, scenario.config),
        "rationale": request.POST.get("rationale", ""),
        "comment": request.POST.get("comment", ""),
        "time_spent_ms": validation.digits(raw_time),
    }


def _error_list(exc: ApplicationError) -> list[str]:
    if isinstance(exc, FieldErrors):
        return [m for ms in exc.errors.values() for m in ms]
    return [exc.message]


def _chosen(kind: ScenarioKind, view: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """What the page shows as already chosen, from an answer under the presented keys (a
    judgment being revised, or a form sent back with errors)."""
    found = data.get("answer")
    answer: dict[str, Any] = found if isinstance(found, dict) else {}
    keys = [v["key"] for v in view["variants"]]
    return kind.form_fill(answer, view["config"], keys) | {
        "rationale": data.get("rationale", ""),
        "comment": data.get("comment", ""),
    }


def _render_task(
    request: HttpRequest,
    *,
    scenario: Scenario,
    view: dict[str, Any],
    chosen: dict[str, Any],
    errors: list[str],
    **extra: Any,
) -> HttpResponse:
    by_key = {v["key"]: v for v in view["variants"]}
    context: dict[str, Any] = {
        "scenario": scenario,
        "view": view,
        "chosen": chosen,
        "errors": errors,
        "variants": [by_key[k] for k in chosen["order"]],
        "progress": selectors.progress(user=request.user, scenario=scenario),
        "context_rows": [
            (key, value if isinstance(value, str) else repr(value))
            for key, value in (view["context"] or {}).items()
        ],
        "scale": chosen.get("scale", []),
        "flag_reasons": FlagReason.choices,
        **extra,
    }
    return render(
        request,
        f"evaluations/task_{scenario.type}.html",
        context,
        status=400 if errors else 200,
    )


UNTOUCHED_RANKING = (
    "Order the responses first (drag them, or move them with ↑ / ↓), or tick “The order "
    "shown is my answer”."
)


@login_required
def task(request: HttpRequest, assignment_id: int) -> HttpResponse:
    assignment = _assignment(request, assignment_id)
    if assignment.status != AssignmentStatus.RESERVED:
        return redirect("workspace:next", scenario_id=assignment.scenario_id)
    scenario = assignment.scenario
    errors: list[str] = []
    data: dict[str, Any] = {}
    if request.method == "POST":
        data = _answer_from_post(request, scenario)
        if scenario.type == "ranking" and request.POST.get("ranking_as_shown") != "1":
            # A ranking sent as it was first shown is no answer unless the evaluator says so.
            errors = [UNTOUCHED_RANKING]
        else:
            try:
                services.submit(user=request.user, assignment=assignment, data=data)
            except ApplicationError as exc:
                errors = _error_list(exc)
            else:
                return redirect("workspace:next", scenario_id=scenario.pk)
    view = services.task_view(assignment)
    return _render_task(
        request,
        scenario=scenario,
        view=view,
        chosen=_chosen(registry.of(scenario), view, data),
        errors=errors,
        assignment=assignment,
        previous=selectors.previous_judgment(request.user, scenario.pk),
    )


@login_required
def revise(request: HttpRequest, judgment_id: int) -> HttpResponse:
    """One of the evaluator's earlier answers, to revise while the scenario is open."""
    judgment = selectors.own_judgment(request.user, judgment_id)
    if judgment is None or not access.may_evaluate(request.user, judgment.scenario):
        raise Http404
    scenario = judgment.scenario
    errors: list[str] = []
    if scenario.status != ScenarioStatus.OPEN:
        message = f"The scenario is {scenario.status}: answers cannot change."
        return render(request, "evaluations/done.html", {"message": message}, status=409)
    view = services.shown_task(scenario, judgment.task, list(judgment.presented))
    if request.method == "POST":
        data = _answer_from_post(request, scenario)
        try:
            revisions.judgment_revise(user=request.user, judgment=judgment, data=data)
        except ApplicationError as exc:
            errors = _error_list(exc)
        else:
            messages.success(request, "Your answer was revised.")
            return redirect("workspace:next", scenario_id=scenario.pk)
    else:
        data = {
            "answer": registry.of(scenario).under_keys(judgment.payload, list(judgment.presented)),
            "rationale": judgment.rationale,
            "comment": judgment.comment,
        }
    return _render_task(
        request,
        scenario=scenario,
        view=view,
        chosen=_chosen(registry.of(scenario), view, data),
        errors=errors,
        judgment=judgment,
        previous=selectors.previous_judgment(request.user, scenario.pk, before=judgment.pk),
    )


@login_required
@require_POST
def flag(request: HttpRequest, assignment_id: int) -> HttpResponse:
    assignment = _assignment(request, assignment_id)
    data = {"reason": request.POST.get("reason"), "note": request.POST.get("note", "")}
    try:
        flags.task_flag(user=request.user, assignment=assignment, data=data)
    except ApplicationError as exc:
        messages.error(request, " ".join(_error_list(exc)))
        return redirect("workspace:task", assignment_id=assignment.pk)
    messages.success(request, "Thank you: the task is flagged for the managers.")
    return redirect("workspace:next", scenario_id=assignment.scenario_id)


@login_required
@require_POST
def skip(request: HttpRequest, assignment_id: int) -> HttpResponse:
    assignment = _assignment(request, assignment_id)
    with contextlib.suppress(ApplicationError):  # answered or skipped already: move on
        services.skip(user=request.user, assignment=assignment)
    return redirect("workspace:next", scenario_id=assignment.scenario_id)
