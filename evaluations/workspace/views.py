"""The evaluator workspace: the queue, and one page per task type. The pages go through the
same services as the API (assignment, answer checks, blind task views)."""

from __future__ import annotations

import contextlib
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from evalplatform.errors import ApplicationError, FieldErrors, NotFound
from evaluations.models import Assignment, AssignmentStatus
from evaluations.workspace import access, selectors, services
from scenarios.types import registry


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


@login_required
def task(request: HttpRequest, assignment_id: int) -> HttpResponse:
    assignment = _assignment(request, assignment_id)
    if assignment.status != AssignmentStatus.RESERVED:
        return redirect("workspace:next", scenario_id=assignment.scenario_id)
    context: dict[str, Any] = {"errors": [], "form": request.POST}
    if request.method == "POST":
        scenario = assignment.scenario
        raw_time = request.POST.get("time_spent_ms", "")
        data = {
            "answer": registry.of(scenario).answer_from_form(request.POST, scenario.config),
            "rationale": request.POST.get("rationale", ""),
            "time_spent_ms": int(raw_time) if raw_time.isdigit() else None,
        }
        try:
            services.submit(user=request.user, assignment=assignment, data=data)
        except FieldErrors as exc:
            context["errors"] = [m for ms in exc.errors.values() for m in ms]
        except ApplicationError as exc:
            context["errors"] = [exc.message]
        else:
            return redirect("workspace:next", scenario_id=scenario.pk)
    view = services.task_view(assignment)
    progress = selectors.progress(user=request.user, scenario=assignment.scenario)
    context |= {
        "assignment": assignment,
        "scenario": assignment.scenario,
        "view": view,
        "progress": progress,
        "context_rows": [
            (key, value if isinstance(value, str) else repr(value))
            for key, value in (view["context"] or {}).items()
        ],
        "scale": [
            (index, dim, list(range(dim["min"], dim["max"] + 1)))
            for index, dim in enumerate(view["config"].get("dimensions", []))
        ],
    }
    status = 400 if context["errors"] else 200
    return render(
        request, f"evaluations/task_{assignment.scenario.type}.html", context, status=status
    )


@login_required
@require_POST
def skip(request: HttpRequest, assignment_id: int) -> HttpResponse:
    assignment = _assignment(request, assignment_id)
    with contextlib.suppress(ApplicationError):  # answered or skipped already: move on
        services.skip(user=request.user, assignment=assignment)
    return redirect("workspace:next", scenario_id=assignment.scenario_id)
