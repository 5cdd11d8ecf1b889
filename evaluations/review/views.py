"""The review page of a scenario (``feature:evaluations:view_all``): its tasks, the most
disputed first, each opening onto every rater's answer and rationale side by side; managers
(``feature:scenarios:manage``) set or remove the adjudicated answer from it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from evalplatform import validation
from evalplatform.accounts import policy
from evalplatform.accounts.roles import EVALUATIONS_VIEW_ALL, SCENARIOS_MANAGE, SCENARIOS_VIEW
from evalplatform.errors import ApplicationError, FieldErrors, Forbidden, NotFound
from evaluations.quality import attention
from evaluations.quality import services as quality
from evaluations.review import selectors, services
from scenarios.models import GoldKind, GoldTask, Scenario, Task
from scenarios.types import registry
from scenarios.types.base import ScenarioKind

PAGE_SIZE = 25
FILTER_KEYS = ("raters", "min_answers", "unadjudicated", "ordering")


def _scenario(request: HttpRequest, scenario_id: int, feature: str) -> Scenario:
    try:
        return policy.access(
            request.user,
            feature,
            Scenario.objects.select_related("team"),
            view_feature=SCENARIOS_VIEW,
            pk=scenario_id,
        )
    except NotFound as exc:
        raise Http404 from exc
    except Forbidden as exc:
        raise PermissionDenied from exc


def _tally(row: dict[str, Any]) -> str:
    """The answers of a row in a few words: "A (2) · B"."""
    counts = Counter(a["summary"] for a in row["answers"])
    return " · ".join(f"{text} ({n})" if n > 1 else text for text, n in counts.most_common())


def _form(
    answer: Mapping[str, Any] | None, row: dict[str, Any], kind: ScenarioKind, config: Any
) -> dict[str, Any]:
    """What a row's answer form starts with: ``answer`` under the task's keys, when there is
    one (the type's fields of it, ``review_form``), the keys and the answer as JSON."""
    current = answer or {}
    keys = [v["key"] for v in row["variants"]]
    return kind.review_form(current, config, keys) | {
        "keys": keys,
        "json": json.dumps(current) if current else "",
    }


@login_required
def review_page(request: HttpRequest, scenario_id: int) -> HttpResponse:
    scenario = _scenario(request, scenario_id, EVALUATIONS_VIEW_ALL)
    errors: dict[str, list[str]] = {}
    try:
        filters = selectors.filters_from(request.GET)
    except FieldErrors as exc:
        errors, filters = exc.errors, selectors.Filters()
    found = selectors.review_tasks(scenario, filters)
    page = Paginator(found, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = selectors.review_rows(scenario, list(page.object_list), filters.raters)
    kind = registry.of(scenario)
    gold = {
        g.task_id: g.answer
        for g in GoldTask.objects.filter(
            task_id__in=[row["task"]["id"] for row in rows], kind=GoldKind.GOLD
        )
    }
    for row in rows:
        row["tally"] = _tally(row)
        adjudicated = (row["adjudication"] or {}).get("answer")
        row["form"] = _form(adjudicated, row, kind, scenario.config)
        if row["task"]["id"] in gold:
            # Stored in the task's own order: its keys are the task's (A shown first).
            order = [v["id"] for v in row["variants"]]
            answer = gold[row["task"]["id"]]
            row["gold"] = {
                "summary": kind.summary(answer, order, order),
                "form": _form(kind.in_task_keys(answer, order, order), row, kind, scenario.config),
            }
    query = urlencode({k: request.GET[k] for k in FILTER_KEYS if request.GET.get(k)})
    return render(
        request,
        "evaluations/review.html",
        {
            "scenario": scenario,
            "kind": kind,
            "rows": rows,
            "page": page,
            "filters": filters,
            "errors": errors,
            "query": query,
            "tasks": len(found),
            "disputed": sum(1 for t in found if t.disagreement),
            "adjudicated": sum(1 for t in found if t.adjudicated),
            "can_manage": policy.may(request.user, SCENARIOS_MANAGE, scenario),
            # The type's own form of an answer when it has one, else the answer as JSON.
            "answer_form": [
                f"evaluations/review/answer_{scenario.type}.html",
                "evaluations/review/answer_json.html",
            ],
        },
        status=400 if errors else 200,
    )


def _answer(scenario: Scenario, post: QueryDict) -> Any:
    """The answer a review form posts: the type's answer fields (``answer_from_form``), or
    ``answer_json``."""
    if "answer_json" in post:
        raw = post.get("answer_json", "")
        try:
            return validation.json_value(raw)
        except ValueError:
            return raw  # not an object: the check says so
    return registry.of(scenario).answer_from_form(post, scenario.config)


def _back(scenario: Scenario, post: QueryDict, task_id: int) -> HttpResponse:
    back = QueryDict(post.get("back", ""))
    query = urlencode({k: back[k] for k in (*FILTER_KEYS, "page") if back.get(k)})
    url = reverse("review:page", kwargs={"scenario_id": scenario.pk})
    return redirect(f"{url}{'?' + query if query else ''}#task-{task_id}")


def _label(scenario: Scenario, task_id: int) -> str:
    """A task as the review page numbers it (its position in the scenario, not its id)."""
    position = (
        Task.objects.filter(scenario=scenario, pk=task_id)
        .values_list("position", flat=True)
        .first()
    )
    return f"Task {position if position is not None else task_id}"


def _refused(request: HttpRequest, exc: ApplicationError, what: str) -> None:
    """A refused form of the review page as a message: ``what`` was not done, and why."""
    if isinstance(exc, FieldErrors):
        problems = " ".join(m for ms in exc.errors.values() for m in ms)
        messages.error(request, f"{what} {problems}")
    else:
        messages.error(request, exc.message)


@login_required
@require_POST
def adjudicate(request: HttpRequest, scenario_id: int, task_id: int) -> HttpResponse:
    scenario = _scenario(request, scenario_id, SCENARIOS_MANAGE)
    data = {"answer": _answer(scenario, request.POST), "note": request.POST.get("note", "")}
    try:
        services.adjudication_set(user=request.user, scenario=scenario, task_id=task_id, data=data)
    except NotFound as exc:
        raise Http404 from exc
    except ApplicationError as exc:
        _refused(request, exc, f"{_label(scenario, task_id)}: the answer was not saved.")
    else:
        messages.success(request, f"{_label(scenario, task_id)}: adjudicated answer saved.")
    return _back(scenario, request.POST, task_id)


@login_required
@require_POST
def adjudication_delete(request: HttpRequest, scenario_id: int, task_id: int) -> HttpResponse:
    scenario = _scenario(request, scenario_id, SCENARIOS_MANAGE)
    try:
        removed = services.adjudication_delete(
            user=request.user, scenario=scenario, task_id=task_id
        )
    except NotFound as exc:
        raise Http404 from exc
    if removed:
        messages.success(request, f"{_label(scenario, task_id)}: adjudicated answer removed.")
    return _back(scenario, request.POST, task_id)


@login_required
@require_POST
def gold(request: HttpRequest, scenario_id: int, task_id: int) -> HttpResponse:
    """``action``: ``set`` (the task's gold answer, from the type's answer form) or
    ``remove``."""
    scenario = _scenario(request, scenario_id, SCENARIOS_MANAGE)
    label = _label(scenario, task_id)
    if not Task.objects.filter(scenario=scenario, pk=task_id).exists():
        raise Http404
    try:
        if request.POST.get("action") == "remove":
            if quality.gold_unmark(user=request.user, scenario=scenario, task_id=task_id):
                messages.success(request, f"{label}: no longer gold.")
        else:
            quality.gold_mark(
                user=request.user,
                scenario=scenario,
                task_id=task_id,
                answer=_answer(scenario, request.POST),
            )
            messages.success(
                request,
                f"{label}: gold answer saved (mixed in at the gold rate, "
                f"{scenario.gold_rate:g}; set it on the scenario's page).",
            )
    except ApplicationError as exc:
        _refused(request, exc, f"{label}: the gold answer was not saved.")
    return _back(scenario, request.POST, task_id)


@login_required
@require_POST
def attention_check(request: HttpRequest, scenario_id: int, task_id: int) -> HttpResponse:
    """An attention check built from this task's item and variants: ``instruction`` and
    the expected answer from the type's answer form."""
    scenario = _scenario(request, scenario_id, SCENARIOS_MANAGE)
    label = _label(scenario, task_id)
    if not Task.objects.filter(scenario=scenario, pk=task_id).exists():
        raise Http404
    data = {
        "instruction": request.POST.get("instruction", ""),
        "answer": _answer(scenario, request.POST),
        "task": task_id,
    }
    try:
        attention.attention_add(user=request.user, scenario=scenario, data=data)
    except ApplicationError as exc:
        _refused(request, exc, f"{label}: no attention check was added.")
    else:
        messages.success(
            request,
            f"{label}: attention check added (mixed in at the attention rate, "
            f"{scenario.attention_rate:g}; set it on the scenario's page).",
        )
    return _back(scenario, request.POST, task_id)
