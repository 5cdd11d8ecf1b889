"""The prompt pages: the templates of my teams, one template with its versions, and the
editor that creates a template, makes a new version or edits a draft, with a live preview.

They call the same services as the API and the admin, so a page gets the same checks: the
pages only parse what a form cannot carry as it is (``forms``). Viewers read; editing needs
``feature:prompts:edit`` in the template's team; another team's template is a 404.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import IntegrityError
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from evalplatform import validation
from evalplatform.accounts import policy
from evalplatform.accounts.roles import PROMPTS_EDIT, PROMPTS_VIEW
from evalplatform.errors import ApplicationError, Conflict, FieldErrors, Forbidden, NotFound
from evalplatform.prompts import forms, selectors, services
from evalplatform.prompts.models import PromptTemplate, PromptVersion
from evalplatform.prompts.rendering import variables_in

TEMPLATES_PER_PAGE = 50
_BLOCK_FIELD = re.compile(r"blocks\[(\d+)\](?:\.(title|body))?")


def _access(request: HttpRequest, feature: str, queryset: Any, **lookup: Any) -> Any:
    """The object when the user may see it (else 404, whatever the reason) and do
    ``feature`` to it (else 403)."""
    try:
        return policy.access(request.user, feature, queryset, view_feature=PROMPTS_VIEW, **lookup)
    except NotFound as exc:
        raise Http404 from exc
    except Forbidden as exc:
        raise PermissionDenied from exc


def _templates() -> Any:
    return PromptTemplate.objects.select_related("team")


# --- reading --------------------------------------------------------------------------------
@login_required
def template_list(request: HttpRequest) -> HttpResponse:
    if not policy.has_feature_anywhere(request.user, PROMPTS_VIEW):
        raise PermissionDenied
    search = request.GET.get("q", "").strip()[:200]
    templates = policy.visible(
        request.user, PROMPTS_VIEW, selectors.templates_with_latest_version()
    ).order_by("-updated_at", "pk")
    if search:
        templates = templates.filter(Q(name__icontains=search) | Q(description__icontains=search))
    return render(
        request,
        "prompts/template_list.html",
        {
            "page": Paginator(templates, TEMPLATES_PER_PAGE).get_page(request.GET.get("page")),
            "search": search,
            "can_create": policy.has_feature_anywhere(request.user, PROMPTS_EDIT),
        },
    )


@login_required
def template_page(request: HttpRequest, template_id: int) -> HttpResponse:
    template = _access(request, PROMPTS_VIEW, _templates(), pk=template_id)
    versions = [
        {
            "version": v,
            "variables": variables_in(v.as_blocks()),
            **{
                name: json.dumps(getattr(v, name), indent=2, ensure_ascii=False)
                for name in forms.JSON_FIELDS
                if getattr(v, name)
            },
        }
        for v in selectors.template_versions(template).order_by("-number")
    ]
    return render(
        request,
        "prompts/template_page.html",
        {
            "template": template,
            "latest": versions[0] if versions else None,
            "older": versions[1:],
            "can_edit": policy.may(request.user, PROMPTS_EDIT, template),
        },
    )


# --- the editor -----------------------------------------------------------------------------
def _block_label(index: int, blocks: list[dict[str, Any]]) -> str:
    title = blocks[index].get("title", "").strip() if index < len(blocks) else ""
    return f"Block {index + 1}" + (f" ({title})" if title else "")


def _placed(errors: dict[str, list[str]], blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """The errors where the editor shows them: per block and field, and per other field."""
    per_block: dict[int, dict[str, str]] = {}
    fields: dict[str, str] = {}
    for key, problems in errors.items():
        text = " ".join(problems)
        if (match := _BLOCK_FIELD.fullmatch(key)) and int(match[1]) < len(blocks):
            per_block.setdefault(int(match[1]), {})[match[2] or "block"] = text
        else:
            fields[key] = text
    shown = [{**block, "errors": per_block.get(index, {})} for index, block in enumerate(blocks)]
    return {"blocks": shown, "errors": fields, "has_errors": bool(errors)}


def _editor(
    request: HttpRequest,
    context: dict[str, Any],
    values: dict[str, Any],
    errors: dict[str, list[str]],
    status: int = 200,
) -> HttpResponse:
    context = context | {"values": values} | _placed(errors, values["blocks"])
    return render(request, "prompts/editor.html", context, status=status)


def _save(
    data: dict[str, Any], form_errors: dict[str, list[str]], write: Callable[[], Any]
) -> tuple[Any, dict[str, list[str]], int]:
    """``write()``'s result, or the errors (by field) and the status to answer with. With
    JSON that does not parse nothing is written, and the services' checks of the other fields
    are shown at once."""
    if form_errors:
        preview = services.version_preview(
            blocks=data["blocks"],
            default_variables=data["default_variables"],
            sample_item=data["sample_item"],
        )
        return None, preview.errors | form_errors, 400
    try:
        return write(), {}, 200
    except FieldErrors as exc:
        return None, exc.errors, 400
    except Forbidden as exc:
        raise PermissionDenied from exc
    except ApplicationError as exc:
        return None, {"non_field_errors": [exc.message]}, 409 if isinstance(exc, Conflict) else 400


def _posted(request: HttpRequest) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[str]]]:
    """What the editor posted: the fields to show again, the services' input, JSON errors."""
    data, errors = forms.version_fields(request.POST)
    return forms.shown(request.POST), data, errors


def _post_version(
    request: HttpRequest, context: dict[str, Any], write: Callable[[dict[str, Any]], Any]
) -> HttpResponse:
    """The version editor's POST: a block operation redraws the page (nothing saved);
    otherwise ``write`` saves the version, or the page comes back with the errors."""
    values, data, form_errors = _posted(request)
    if op := request.POST.get("op"):
        return _editor(
            request, context, values | {"blocks": forms.apply_op(values["blocks"], op)}, {}
        )
    version, errors, status = _save(data, form_errors, lambda: write(data))
    if version is None:
        return _editor(request, context, values, errors, status)
    messages.success(request, f"Version {version.number} saved.")
    return redirect("prompts:template", template_id=context["template"].pk)


@login_required
def template_new(request: HttpRequest) -> HttpResponse:
    teams = list(policy.teams_with(request.user, PROMPTS_EDIT).order_by("name"))
    if not teams:
        raise PermissionDenied
    context: dict[str, Any] = {"mode": "template", "teams": teams}
    if request.method != "POST":
        values = forms.initial(None) | {"name": "", "description": "", "team": teams[0].slug}
        return _editor(request, context, values, {})
    values, data, form_errors = _posted(request)
    values |= {key: request.POST.get(key, "") for key in ("name", "description", "team")}
    if op := request.POST.get("op"):
        return _editor(
            request, context, values | {"blocks": forms.apply_op(values["blocks"], op)}, {}
        )
    team = next((t for t in teams if t.slug == values["team"]), None)

    def write() -> PromptTemplate:
        if team is None:
            raise FieldErrors({"team": "Choose one of your teams."})
        try:
            return services.template_create(
                user=request.user,
                team=team,
                name=values["name"],
                description=values["description"],
                **data,
            )
        except IntegrityError as exc:  # the same name, created at the same moment
            raise FieldErrors({"name": "The team has a template of this name."}) from exc

    template, errors, status = _save(data, form_errors, write)
    if template is None:
        return _editor(request, context, values, errors, status)
    messages.success(request, f"Template “{template.name}” created with version 1.")
    return redirect("prompts:template", template_id=template.pk)


@login_required
def version_new(request: HttpRequest, template_id: int) -> HttpResponse:
    """The next version of a template, starting from its latest (or ``?from=<number>``)."""
    template = _access(request, PROMPTS_EDIT, _templates(), pk=template_id)
    context: dict[str, Any] = {"mode": "new_version", "template": template}
    if request.method != "POST":
        versions = selectors.template_versions(template)
        wanted = request.GET.get("from", "")
        source = (
            versions.filter(number=number).first()
            if (number := validation.digits(wanted, most=9)) is not None
            else None
        ) or versions.last()
        context["source"] = source
        return _editor(request, context, forms.initial(source) | {"note": ""}, {})
    return _post_version(
        request,
        context,
        lambda data: services.version_create(user=request.user, template=template, **data),
    )


@login_required
def version_edit(request: HttpRequest, version_id: int) -> HttpResponse:
    """Edit a draft version in place; a used one is locked, and the page offers to save the
    edits as a new version instead."""
    version: PromptVersion = _access(
        request, PROMPTS_EDIT, selectors.versions_with_blocks(), pk=version_id
    )
    template = version.template
    context: dict[str, Any] = {"mode": "edit", "template": template, "version": version}
    if request.method != "POST":
        if version.is_locked:
            messages.error(
                request,
                f"Version {version.number} is used by a job and can no longer change; "
                "save your edits as a new version.",
            )
            new = reverse("prompts:version-new", kwargs={"template_id": template.pk})
            return redirect(f"{new}?from={version.number}")
        return _editor(request, context, forms.initial(version), {})
    return _post_version(
        request,
        context,
        lambda data: services.version_update(user=request.user, version=version, **data),
    )


@login_required
@require_POST
def preview(request: HttpRequest) -> HttpResponse:
    """The editor's live preview (htmx): the messages the blocks would send for the sample
    item, the variables they use, and what is wrong; nothing is written."""
    if not policy.has_feature_anywhere(request.user, PROMPTS_EDIT):
        raise PermissionDenied
    data, form_errors = forms.version_fields(request.POST)
    result = services.version_preview(
        blocks=data["blocks"],
        default_variables=data["default_variables"],
        sample_item=data["sample_item"],
    )
    errors = result.errors | form_errors
    # A form nothing was written in yet is no mistake: a hint, not "to fix".
    blank = not any(b["body"] for b in data["blocks"]) and not form_errors
    if blank:
        errors = {}
    labels = {"default_variables": "Default variables", "sample_item": "Sample item"}
    problems = []
    for key, messages_ in errors.items():
        if match := _BLOCK_FIELD.fullmatch(key):
            label = _block_label(int(match[1]), data["blocks"])
            label += f", {match[2]}" if match[2] else ""
        else:
            label = labels.get(key, "Blocks" if key == "blocks" else key)
        problems.append((label, " ".join(messages_)))
    return render(
        request,
        "prompts/_preview.html",
        {
            "preview": result,
            "problems": problems,
            "sample_ok": "sample_item" not in errors,
            "blank": blank,
        },
    )
