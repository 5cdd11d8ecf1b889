"""The job page's "Convert to scenario" dialog posts here (the spec's conversion, as a form)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from evalplatform.accounts import policy
from evalplatform.accounts.roles import GENERATION_VIEW
from evalplatform.errors import ApplicationError, FieldErrors, NotFound
from generation.models import GenerationJob
from scenarios import services
from scenarios.types import registry


def form_to_data(post: Any) -> dict[str, Any]:
    kind = post.get("type", "")
    found = registry.find(kind)
    config = found.config_from_dialog(post) if found is not None else {}
    outputs: dict[str, Any] = {}
    for key in ("models", "prompts"):
        ids = [int(v) for v in post.getlist(key) if v.isdigit()]
        if ids:
            outputs[key] = ids
    overlap = post.get("overlap", "1")
    return {
        "name": post.get("name", ""),
        "type": kind,
        "instructions": post.get("instructions", ""),
        "config": config,
        "blind": post.get("blind") == "1",
        "overlap": int(overlap) if overlap.isdigit() else overlap,
        "outputs": outputs,
    }


@login_required
@require_POST
def from_job(request: HttpRequest, job_id: int) -> HttpResponse:
    try:
        job = policy.access(request.user, GENERATION_VIEW, GenerationJob.objects.all(), pk=job_id)
    except NotFound as exc:
        raise Http404 from exc
    try:
        scenario = services.scenario_from_job(
            user=request.user, job=job, data=form_to_data(request.POST)
        )
    except FieldErrors as exc:
        detail = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.errors.items())
        messages.error(request, f"No scenario was created. {detail}")
        return redirect("generation-job", job_id=job.pk)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect("generation-job", job_id=job.pk)
    messages.success(
        request, f"Scenario “{scenario.name}” created ({scenario.tasks.count()} tasks)."
    )
    return redirect("manager:scenario-page", scenario_id=scenario.pk)
