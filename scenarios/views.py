"""The job page's "Convert to scenario" dialog posts here (the spec's conversion, as a form),
and previews its design first."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from evalplatform import inputs, validation
from evalplatform.accounts import policy
from evalplatform.accounts.roles import GENERATION_VIEW
from evalplatform.errors import ApplicationError, FieldErrors, Forbidden, NotFound
from generation.models import GenerationJob
from scenarios import services
from scenarios.forms import context_fields_from_text
from scenarios.inputs import ScenarioFromJobInput
from scenarios.types import registry


def form_to_data(post: Any) -> dict[str, Any]:
    kind = post.get("type", "")
    found = registry.find(kind)
    config = found.config_from_dialog(post) if found is not None else {}
    outputs: dict[str, Any] = {}
    for key in ("models", "prompts", "repetitions"):
        ids = [n for v in post.getlist(key) if (n := validation.digits(v, most=9)) is not None]
        if ids:
            outputs[key] = ids
    temperatures = [_temperature(v) for v in post.getlist("temperatures")]
    if temperatures:
        outputs["temperatures"] = temperatures
    overlap, seed = post.get("overlap", "1"), post.get("seed", "0").strip() or "0"
    shown: dict[str, Any] = {}
    if text := post.get("context_fields", "").strip():
        # Blank: the fields the job's prompts read (the service's default); "*": all.
        shown["context_fields"] = None if text == "*" else context_fields_from_text(text)
    return shown | {
        "name": post.get("name", ""),
        "type": kind,
        "instructions": post.get("instructions", ""),
        "config": config,
        "blind": post.get("blind") == "1",
        "overlap": _or_text(overlap),
        "seed": _or_text(seed),
        "outputs": outputs,
    }


def _or_text(value: str) -> int | str:
    """A whole number, or the text as it came (so that the check names the problem)."""
    number = validation.digits(value)
    return value if number is None else number


def _temperature(value: str) -> float | str | None:
    """A checkbox's temperature: a number, or "none" (no temperature was sent)."""
    if value == "none":
        return None
    try:
        return float(value)
    except ValueError:
        return value


def _job(request: HttpRequest, job_id: int) -> GenerationJob:
    try:
        return policy.access(
            request.user, GENERATION_VIEW, GenerationJob.objects.filter(writing=False), pk=job_id
        )
    except NotFound as exc:
        raise Http404 from exc


@login_required
@require_POST
def preview_job(request: HttpRequest, job_id: int) -> HttpResponse:
    """The dialog's design, previewed (htmx): tasks, judgments and human time, or what is
    wrong with it; nothing is written."""
    job = _job(request, job_id)
    try:
        preview = services.preview_from_job(
            user=request.user, job=job, data=form_to_data(request.POST)
        )
    except FieldErrors as exc:
        errors = inputs.relabelled(exc.errors, ScenarioFromJobInput)
        return render(request, "scenarios/_preview.html", {"errors": errors})
    except Forbidden as exc:
        raise PermissionDenied from exc
    except ApplicationError as exc:
        return render(request, "scenarios/_preview.html", {"errors": {"": [exc.message]}})
    return render(request, "scenarios/_preview.html", {"preview": preview})


@login_required
@require_POST
def from_job(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job(request, job_id)
    try:
        scenario = services.scenario_from_job(
            user=request.user, job=job, data=form_to_data(request.POST)
        )
    except FieldErrors as exc:
        detail = inputs.sentence(exc.errors, ScenarioFromJobInput)
        messages.error(request, f"No scenario was created. {detail}")
        return redirect("generation-job", job_id=job.pk)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect("generation-job", job_id=job.pk)
    messages.success(
        request, f"Scenario “{scenario.name}” created ({scenario.tasks.count()} tasks)."
    )
    return redirect("manager:scenario-page", scenario_id=scenario.pk)
