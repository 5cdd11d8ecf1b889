"""The conversion of a generation job's outputs to a scenario, as a page: the scenario form
(the same as an upload's, with which outputs to take instead of a file), its design
previewed first, every value kept and every error named as the form names the field."""

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
from evalplatform.accounts.roles import GENERATION_TO_SCENARIO, GENERATION_VIEW, SCENARIOS_CREATE
from evalplatform.errors import ApplicationError, FieldErrors, Forbidden, NotFound
from generation.models import GenerationJob, SourceKind
from scenarios import forms, services
from scenarios.types import registry


def form_to_data(post: Any) -> dict[str, Any]:
    """The conversion's data (the API's shape) from the form."""
    kind = post.get("type", "")
    outputs: dict[str, Any] = {}
    for key in ("models", "prompts", "repetitions"):
        ids = [n for v in post.getlist(key) if (n := validation.digits(v, most=9)) is not None]
        if ids:
            outputs[key] = ids
    temperatures = [_temperature(v) for v in post.getlist("temperatures")]
    if temperatures:
        outputs["temperatures"] = temperatures
    fields = forms.scenario_fields(post)
    del fields["context_fields"]
    if text := post.get("context_fields", "").strip():
        # Blank: the fields the job's prompts read (the service's default); "*": all.
        fields["context_fields"] = None if text == "*" else forms.context_fields_from_text(text)
    seed = post.get("seed", "0").strip() or "0"
    return fields | {
        "type": kind,
        "config": forms.config_from_post(kind, post),
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


def may_convert(user: Any, job: GenerationJob) -> bool:
    """Whether ``user`` may make a scenario of the job's outputs (a judge run's outputs
    are verdicts, not texts to evaluate)."""
    return (
        job.source_kind != SourceKind.JUDGE
        and policy.may(user, GENERATION_TO_SCENARIO, job)
        and policy.has_feature(user, SCENARIOS_CREATE, job.team_id)
    )


@login_required
@require_POST
def preview_job(request: HttpRequest, job_id: int) -> HttpResponse:
    """The form's design, previewed (htmx): tasks, judgments and human time, or what is
    wrong with it; nothing is written."""
    job = _job(request, job_id)
    data = form_to_data(request.POST)
    try:
        preview = services.preview_from_job(user=request.user, job=job, data=data)
    except FieldErrors as exc:
        errors = forms.named_errors(exc.errors, data["type"], data["config"])[0]
        return render(request, "scenarios/_preview.html", {"errors": errors})
    except Forbidden as exc:
        raise PermissionDenied from exc
    except ApplicationError as exc:
        return render(request, "scenarios/_preview.html", {"errors": {"": exc.message}})
    return render(request, "scenarios/_preview.html", {"preview": preview})


@login_required
def from_job(request: HttpRequest, job_id: int) -> HttpResponse:
    """The conversion's page: the form (GET), or the scenario made (POST); a refused form
    comes back with what was typed and each problem named."""
    job = _job(request, job_id)
    if not may_convert(request.user, job):
        raise PermissionDenied
    errors: dict[str, str] = {}
    beside: dict[str, str] = {}
    if request.method == "POST":
        data = form_to_data(request.POST)
        kind, config = data["type"], data["config"]
        try:
            scenario = services.scenario_from_job(user=request.user, job=job, data=data)
        except FieldErrors as exc:
            errors, beside = forms.named_errors(exc.errors, kind, config)
        except ApplicationError as exc:
            errors = {"": exc.message}
        else:
            messages.success(request, forms.created(scenario))
            return redirect("manager:scenario-page", scenario_id=scenario.pk)
        fields = forms.scenario_fields(request.POST)
        fields["context_fields_text"] = request.POST.get("context_fields", "")
        chosen = {
            key: request.POST.getlist(key)
            for key in ("models", "prompts", "repetitions", "temperatures")
        }
        seed = request.POST.get("seed", "0")
    else:
        kind, config = registry.DEFAULT, forms.initial_config()
        fields = forms.INITIAL_FIELDS | {
            "name": f"{job.name} evaluation"[:200],
            "context_fields_text": "",
        }
        chosen, seed = {}, "0"
    return render(
        request,
        "evaluations/scenario_form.html",
        {
            "job": job,
            "values": forms.form_values(kind, fields, config),
            "errors": errors,
            "beside": beside,
            "editing": False,
            "chosen": chosen,
            "repetitions": [(r, str(r)) for r in range(job.repetitions)],
            "temperatures": [
                ("none" if t is None else str(t), "none sent" if t is None else str(t))
                for t in job.temperatures
            ],
            "seed": seed,
        },
        status=400 if errors else 200,
    )
