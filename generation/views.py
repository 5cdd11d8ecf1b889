"""The generation pages: the hub, the 5-step wizard and the job page (with live progress).

They use the same services and selectors as the API, so a page and a script get the same
validation, permissions and numbers. Every action is a POST with a CSRF token.
"""

from __future__ import annotations

import re
from typing import Any, cast
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import F, Prefetch
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from evalplatform import inputs, validation
from evalplatform.accounts import policy
from evalplatform.accounts.models import Notification
from evalplatform.accounts.roles import (
    GENERATION_CREATE,
    GENERATION_EXPORT,
    GENERATION_MANAGE,
    GENERATION_TO_SCENARIO,
    GENERATION_VIEW,
    PROMPTS_VIEW,
    PROVIDERS_VIEW,
    SCENARIOS_CREATE,
)
from evalplatform.api.uploads import read_upload
from evalplatform.errors import ApplicationError, FieldErrors, NotFound
from evalplatform.prompts.models import PromptTemplate, PromptVersion
from evalplatform.prompts.rendering import MissingVariables, variables_in
from evalplatform.providers.models import LLMModel
from evalplatform.web.fields import number_or_text
from evalplatform.web.redirects import safe_next
from generation import job_input, pilot, planning, replies, selectors, services, sources
from generation.models import GenerationJob, JobMode, JobStatus, OutputStatus, SourceKind

ACTIVE = (JobStatus.RUNNING, JobStatus.QUEUED, JobStatus.PAUSED)
OUTPUTS_PER_PAGE = 25
# Which wizard step shows an error about a field.
_STEP_OF = (("team", 1), ("source", 1), ("prompt_versions", 2), ("models", 3))
_TEMPERATURE_SPLIT = re.compile(r"[,\s;]+")
FORMAT_CHOICES = [
    ("", "Detect (by file name; pasted text: JSON, JSON lines or plain text)"),
    ("json", "JSON array"),
    ("jsonl", "JSON lines"),
    ("csv", "CSV with a header row"),
    ("text", "Plain text, one item per line"),
]


def _job(request: HttpRequest, job_id: int) -> GenerationJob:
    try:
        return policy.access(request.user, GENERATION_VIEW, selectors.jobs(), pk=job_id)
    except NotFound as exc:
        raise Http404 from exc


# --- hub ----------------------------------------------------------------------------------------
@login_required
def hub(request: HttpRequest) -> HttpResponse:
    """The user's own jobs, or with ``?jobs=team`` every job of the user's teams (where a
    user may not create jobs, as a viewer, the team's at once: they have none)."""
    if not policy.has_feature_anywhere(request.user, GENERATION_VIEW):
        raise PermissionDenied  # an evaluator's page is the workspace, not an empty hub
    can_create = policy.has_feature_anywhere(request.user, GENERATION_CREATE)
    team_wide = request.GET.get("jobs", "mine" if can_create else "team") == "team"
    visible = policy.visible(request.user, GENERATION_VIEW, selectors.jobs())
    owned = selectors.owned_by(visible, request.user, "all" if team_wide else "me")
    # Judge runs and judge files are generation jobs too, kept apart from the user's own
    # generation (their pages are the judges' and the judge files').
    judging = SourceKind.JUDGE, SourceKind.JUDGE_FILE
    jobs = list(owned.exclude(source_kind__in=judging)[:200])
    return render(
        request,
        "generation/hub.html",
        {
            "team_wide": team_wide,
            "others_exist": not team_wide and visible.exclude(owner_id=request.user.pk).exists(),
            "active": [j for j in jobs if j.status in ACTIVE],
            "others": [j for j in jobs if j.status not in ACTIVE],
            "judging": list(owned.filter(source_kind__in=judging)[:50]),
            "can_create": can_create,
            "manage": {j.pk for j in jobs if policy.may(request.user, GENERATION_MANAGE, j)},
            "notifications": Notification.objects.filter(
                user=cast(Any, request.user), read_at__isnull=True
            ).select_related("team")[:20],
        },
    )


# --- wizard -------------------------------------------------------------------------------------
def _wizard_team(request: HttpRequest):
    teams = list(policy.teams_with(request.user, GENERATION_CREATE).order_by("name"))
    if not teams:
        raise Http404
    wanted = request.POST.get("team") or request.GET.get("team")
    team = next((t for t in teams if t.slug == wanted), None) or _likely_team(request, teams)
    return team, teams


def _likely_team(request: HttpRequest, teams: list[Any]) -> Any:
    """The team the wizard opens on when none is asked for: that of the user's latest
    job, else the first with prompt templates (a new admin's empty "Default team" sorts
    before the demo's), else the first."""
    ids = [t.pk for t in teams]
    last = (
        GenerationJob.objects.filter(owner_id=request.user.pk, team_id__in=ids)
        .order_by("-created_at", "-pk")
        .values_list("team_id", flat=True)
        .first()
    )
    with_prompts = set(
        PromptTemplate.objects.filter(team_id__in=ids).values_list("team_id", flat=True)
    )
    return next(
        (t for t in teams if t.pk == last),
        next((t for t in teams if t.pk in with_prompts), teams[0]),
    )


def _choices(request: HttpRequest, team) -> dict[str, Any]:
    prompts: list[dict[str, Any]] = []
    if policy.has_feature(request.user, PROMPTS_VIEW, team):
        templates = PromptTemplate.objects.filter(team=team).prefetch_related(
            Prefetch(
                "versions",
                queryset=PromptVersion.objects.order_by("-number").prefetch_related("blocks"),
            )
        )
        for template in templates.order_by("name"):
            versions = list(template.versions.all())
            if versions:
                latest = versions[0]
                prompts.append(
                    {
                        "template": template,
                        "version": latest,
                        "older": versions[1:6],
                        "variables": variables_in(latest.as_blocks()),
                    }
                )
    models = (
        LLMModel.objects.filter(connection__team=team, active=True)
        .select_related("connection")
        .order_by("connection__name", "display_name")
        if policy.has_feature(request.user, PROVIDERS_VIEW, team)
        else LLMModel.objects.none()
    )
    # Other apps' sources users may choose (never an internal one, such as a judge's).
    extra_sources = [
        {
            "kind": kind,
            "label": label,
            "choices": choices(user=request.user, team=team),
            "selected": request.POST.get(kind, ""),
        }
        for kind, (label, choices) in sources.SOURCE_CHOICES.items()
    ]
    return {"prompts": prompts, "models": list(models), "extra_sources": extra_sources}


def _config_from_form(request: HttpRequest, team) -> tuple[dict[str, Any], dict[str, str]]:
    """The API's job configuration from the wizard's fields (and errors of form shape)."""
    post = request.POST
    errors: dict[str, str] = {}
    temperatures: Any = []
    if post.get("no_temperature") == "1":
        temperatures.append(None)  # "none (provider default)": no temperature is sent
    for part in _TEMPERATURE_SPLIT.split(post.get("temperatures", "").strip()):
        if part.lower() in ("none", "null"):
            temperatures.append(None)
        elif part:
            temperatures.append(number_or_text(part))
    models: list[Any] = [
        n for m in post.getlist("models") if (n := validation.digits(m)) is not None
    ]
    extra = post.get("model_configs", "").strip()
    if extra:
        try:
            configs = validation.json_value(extra)
        except ValueError:
            configs = None
        if not isinstance(configs, list):
            errors["models"] = (
                'Extra configurations are a JSON list: [{"model": id, "params": {...}}].'
            )
        else:
            models.extend(configs)
    source_type = post.get("source_type", SourceKind.MANUAL)
    content, fmt = post.get("content", ""), post.get("format", "")
    if not fmt and content and "file" not in request.FILES:
        # Pasted text without a declared format: JSON and JSON lines show by their start.
        start = content.lstrip()[:1]
        fmt = "json" if start == "[" else "jsonl" if start == "{" else "text"
    source: dict[str, Any] = {"type": source_type, "format": fmt, "content": content}
    if source_type in sources.SOURCE_CHOICES:
        source = {"type": source_type, source_type: number_or_text(post.get(source_type))}
    # What each step needs, said in the form's words before the plan is checked.
    if source_type == SourceKind.MANUAL and not content.strip() and "file" not in request.FILES:
        errors["source"] = "Upload a file or paste the items."
    if not post.getlist("prompt_versions"):
        errors["prompt_versions"] = "Choose at least one prompt template."
    if not models and "models" not in errors:
        errors["models"] = "Choose at least one model."
    config = {
        "team": team.slug,
        "name": post.get("name", ""),
        "mode": post.get("mode", "live"),
        "source": source,
        "prompt_versions": [
            n for p in post.getlist("prompt_versions") if (n := validation.digits(p)) is not None
        ],
        "models": models,
        "temperatures": temperatures or [0.7],
        "repetitions": number_or_text(post.get("repetitions", "")) or 1,
        "max_tokens": number_or_text(post.get("max_tokens", "")),
        "budget_usd": post.get("budget_usd", "").strip() or None,
        "max_retries": number_or_text(post.get("max_retries", "")),
        "concurrency": number_or_text(post.get("concurrency", "")) or 8,
        "finish_live": post.get("finish_live") == "1",
    }
    if config["max_retries"] is None:
        config["max_retries"] = 3
    reply_format = post.get("reply_format", "").strip()[:10_000]
    if reply_format.startswith("{"):
        try:
            config["reply_format"] = validation.json_value(reply_format)
        except ValueError:
            config["reply_format"] = reply_format  # refused by the plan, naming the field
    elif reply_format:  # names of a JSON reply's fields, by commas or lines
        names = [n.strip() for n in re.split(r"[,\n]", reply_format) if n.strip()]
        config["reply_format"] = {"kind": "json", "fields": names}
    return config, errors


def _upload(request: HttpRequest) -> tuple[bytes | None, str]:
    """The uploaded file, unread (see ``api._job_input`` on the cast)."""
    if request.POST.get("source_type") != SourceKind.MANUAL:
        return None, ""
    upload = read_upload(request, error_key="source.file")
    return (cast("bytes", upload[0]), upload[1]) if upload else (None, "")


def _plan(request: HttpRequest, team):
    """The job's plan from the wizard; every step's problems at once, a field's in the
    form's words where the form has its own (they replace the API's for that field)."""
    config, errors = _config_from_form(request, team)
    try:
        upload, filename = _upload(request)
        plan = planning.job_plan(user=request.user, data=config, upload=upload, filename=filename)
    except FieldErrors as exc:
        found: dict[str, Any] = {
            k: v for k, v in exc.errors.items() if re.split(r"[.\[]", k)[0] not in errors
        }
        raise FieldErrors(found | errors) from exc
    except ApplicationError:
        if errors:  # the form's own problems first (missing variables, a refused upload)
            raise FieldErrors(errors) from None
        raise
    if errors:
        raise FieldErrors(errors)
    return plan


def _error_steps(errors: dict[str, list[str]]) -> dict[int, list[tuple[str, str]]]:
    steps: dict[int, list[tuple[str, str]]] = {}
    for field, messages_ in errors.items():
        step = next((s for prefix, s in _STEP_OF if field.startswith(prefix)), 4)
        shown = inputs.shown(field, job_input.JobInput)
        steps.setdefault(step, []).extend((shown, m) for m in messages_)
    return steps


@login_required
def wizard(request: HttpRequest) -> HttpResponse:
    team, teams = _wizard_team(request)
    context: dict[str, Any] = {"team": team, "teams": teams, "form": request.POST}
    context |= _choices(request, team)
    if request.method == "POST":
        try:
            plan = _plan(request, team)
            job = services.job_create(user=request.user, plan=plan)
            if request.POST.get("start"):
                services.job_start(user=request.user, job=job)
        except FieldErrors as exc:
            context["errors"] = _error_steps(exc.errors)
        except MissingVariables as exc:
            context["missing"] = exc.missing
        except ApplicationError as exc:
            context["errors"] = {4: [("", exc.message)]}
        else:
            messages.success(request, f"Job “{job.name}” created ({job.total_cells:,} outputs).")
            return redirect("generation-job", job_id=job.pk)
        first = min(context.get("errors") or {1: []}) if "errors" in context else 1
        context["open_step"] = first
    context["selected_prompts"] = {
        n
        for p in request.POST.getlist("prompt_versions")
        if (n := validation.digits(p)) is not None
    }
    context["selected_models"] = {
        n for m in request.POST.getlist("models") if (n := validation.digits(m)) is not None
    }
    context["upload_limit"] = settings.UPLOAD_MAX_BYTES
    context["formats"] = FORMAT_CHOICES
    status = 400 if request.method == "POST" else 200
    return render(request, "generation/wizard.html", context, status=status)


@login_required
@require_POST
def wizard_estimate(request: HttpRequest) -> HttpResponse:
    """The wizard's last step: the plan's size and cost (an HTML fragment for htmx)."""
    team, _ = _wizard_team(request)
    context: dict[str, Any] = {}
    try:
        plan = _plan(request, team)
    except FieldErrors as exc:
        context["errors"] = _error_steps(exc.errors)
    except MissingVariables as exc:
        context["missing"] = exc.missing
    except ApplicationError as exc:
        context["errors"] = {4: [("", exc.message)]}
    else:
        try:
            context["estimate"] = pilot.job_estimate_with_pilot(
                plan, request.POST, user=request.user
            )
        except FieldErrors as exc:
            context["errors"] = _error_steps(exc.errors)
        context["plan"] = plan
    return render(request, "generation/_estimate.html", context)


# --- job page -----------------------------------------------------------------------------------
def _outputs_context(request: HttpRequest, job: GenerationJob) -> dict[str, Any]:
    # The newest results first, then what is still to come.
    qs = selectors.outputs(job).order_by(F("completed_at").desc(nulls_last=True), "-pk")
    filters = {
        "status": request.GET.get("status", ""),
        "model": request.GET.get("model", ""),
        "prompt": request.GET.get("prompt", ""),
        "item": request.GET.get("item", "").strip(),
        "parse_status": request.GET.get("parse_status", ""),
    }
    if filters["parse_status"] in replies.STATUSES:
        qs = qs.filter(parse_status=filters["parse_status"])
    if filters["status"] in OutputStatus.values:
        qs = qs.filter(status=filters["status"])
    if (model := validation.digits(filters["model"])) is not None:
        qs = qs.filter(model_config_id=model)
    if (prompt := validation.digits(filters["prompt"])) is not None:
        qs = qs.filter(prompt_id=prompt)
    if filters["item"]:
        qs = qs.filter(item__item_id=filters["item"])
    page = Paginator(qs, OUTPUTS_PER_PAGE).get_page(request.GET.get("page"))
    query = urlencode({k: v for k, v in filters.items() if v})
    fields = selectors.reply_fields(job)
    # Each output with its scored fields, in the reply format's order.
    rows = [(o, [(n, (o.parsed or {}).get(n)) for n in fields]) for o in page]
    return {
        "job": job,
        "page": page,
        "rows": rows,
        "filters": filters,
        "query": query,
        "reply_fields": fields,
        "parse_statuses": replies.STATUSES,
    }


@login_required
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job(request, job_id)
    user = request.user
    context = _outputs_context(request, job) | {
        "statistics": selectors.statistics_for(job),
        "batches": selectors.job_batches(job) if job.mode == JobMode.BATCH else [],
        "statuses": OutputStatus.choices,
        "can_manage": policy.may(user, GENERATION_MANAGE, job),
        "can_export": policy.may(user, GENERATION_EXPORT, job),
        # A judge run's outputs are verdicts, not texts to evaluate.
        "can_convert": job.source_kind != SourceKind.JUDGE
        and policy.may(user, GENERATION_TO_SCENARIO, job)
        and policy.has_feature(user, SCENARIOS_CREATE, job.team_id),
    }
    return render(request, "generation/job.html", context)


@login_required
def job_statistics(request: HttpRequest, job_id: int) -> HttpResponse:
    """The statistics tables alone (refreshed as cells finish)."""
    job = _job(request, job_id)
    return render(
        request, "generation/_statistics.html", {"statistics": selectors.statistics_for(job)}
    )


# Items the consistency page lists (the CSV has every one).
CONSISTENCY_ITEMS_SHOWN = 500


@login_required
def job_consistency(request: HttpRequest, job_id: int) -> HttpResponse:
    """Consistency of repeated calls, per item, for one of the job's scored fields."""
    job = _job(request, job_id)
    field = request.GET.get("field") or None
    names = selectors.reply_fields(job)
    if field not in names:
        field = None  # an unknown field shows the first with numbers
    found = selectors.consistency_for(job, field)
    labels = [c["condition"] for c in found.get("by_condition", [])]
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    for entry in found.get("items", []):
        cells.setdefault(entry["item"], {})[entry["condition"]] = entry
    table = [(item, [by.get(label) for label in labels]) for item, by in cells.items()]
    return render(
        request,
        "generation/consistency.html",
        {
            "job": job,
            "found": found,
            "labels": labels,
            "table": table[:CONSISTENCY_ITEMS_SHOWN],
            "items_total": len(table),
        },
    )


@login_required
def job_outputs(request: HttpRequest, job_id: int) -> HttpResponse:
    """The outputs table alone (htmx refreshes it as cells finish, and on filter changes)."""
    job = _job(request, job_id)
    return render(request, "generation/_outputs.html", _outputs_context(request, job))


def _retry_failed(*, user: Any, job: GenerationJob) -> GenerationJob:
    return services.job_retry_failed(user=user, job=job)[0]


_ACTIONS = {
    "start": services.job_start,
    "pause": services.job_pause,
    "cancel": services.job_cancel,
    "retry-failed": _retry_failed,
}


@login_required
@require_POST
def job_action(request: HttpRequest, job_id: int, action: str) -> HttpResponse:
    job = _job(request, job_id)
    back = safe_next(request, reverse("generation-job", kwargs={"job_id": job.pk}))
    try:
        if action == "delete":
            services.job_delete(user=request.user, job=job)
            messages.success(request, f"Job “{job.name}” deleted.")
            return redirect("generation-hub")
        if action == "budget":
            services.job_update(
                user=request.user, job=job, data={"budget_usd": request.POST.get("budget_usd")}
            )
            messages.success(request, "Budget updated.")
        elif action in _ACTIONS:
            job = _ACTIONS[action](user=request.user, job=job)
            messages.success(request, f"Job {job.status}.", extra_tags="job-status")
        else:
            raise Http404
    except FieldErrors as exc:
        messages.error(request, " ".join(m for ms in exc.errors.values() for m in ms))
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect(back)
