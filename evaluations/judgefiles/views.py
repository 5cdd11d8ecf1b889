"""The judge files pages: the team's batches with an upload form (a JSONL file in, a batch
running), a batch's page (status and counts, its job, the input, output and error files,
its verdicts searched and paged, cancel, re-submit the failures, compare with another), and
the regression report of two batches. The same services as the API."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from evalplatform import inputs
from evalplatform.accounts import policy
from evalplatform.accounts.roles import EVALUATIONS_JUDGE_FILES, EVALUATIONS_VIEW_ALL
from evalplatform.api.uploads import download
from evalplatform.errors import ApplicationError, FieldErrors, Forbidden, NotFound
from evaluations.judgefiles import services
from evaluations.judgefiles.api import batch_for
from evaluations.judgefiles.compare import compare
from evaluations.judgefiles.inputs import BatchInput
from evaluations.judgefiles.models import JudgeBatch, JudgeFile, JudgeVerdict

PER_PAGE = 50


def _batch(request: HttpRequest, batch_id: str, feature: str = EVALUATIONS_VIEW_ALL) -> JudgeBatch:
    try:
        return batch_for(request.user, batch_id, feature)
    except NotFound as exc:
        raise Http404 from exc
    except Forbidden as exc:
        raise PermissionDenied from exc


def _problems(exc: ApplicationError) -> str:
    if isinstance(exc, FieldErrors):
        return inputs.sentence(exc.errors, BatchInput)
    return exc.message


@login_required
def batch_list(request: HttpRequest) -> HttpResponse:
    if not any(
        policy.has_feature_anywhere(request.user, f)
        for f in (EVALUATIONS_JUDGE_FILES, EVALUATIONS_VIEW_ALL)
    ):
        raise PermissionDenied  # the page would be empty and its form refused
    teams = policy.teams_with(request.user, EVALUATIONS_JUDGE_FILES)
    if request.method == "POST":
        if not teams.exists():
            raise PermissionDenied
        team = teams.filter(slug=request.POST.get("team", "")).first()
        if team is None:
            messages.error(request, "Choose one of your teams with judge files.")
            return redirect("judge-files:list")
        try:
            if file_id := request.POST.get("file_id"):  # an estimated file, now submitted
                if not services.is_public_id(file_id):
                    raise JudgeFile.DoesNotExist
                upload = JudgeFile.objects.written().get(
                    team=team, public_id=file_id, purpose="batch"
                )
            else:
                upload = services.file_create(
                    user=request.user,
                    team=team,
                    upload=request.FILES.get("file"),
                    purpose="batch",
                )
            if request.POST.get("action") == "estimate":
                estimate = services.estimate(user=request.user, file=upload)
                return _list(request, teams, estimate=estimate, team=team)
            batch = services.batch_create(
                user=request.user,
                team=team,
                data={
                    "input_file_id": upload.public_id,
                    "endpoint": services.ENDPOINT,
                    "completion_window": "24h",
                    "budget_usd": request.POST.get("budget_usd", "").strip() or None,
                    "live": request.POST.get("live") == "1",
                },
            )
        except JudgeFile.DoesNotExist:
            messages.error(request, "That file is gone: upload it again.")
            return redirect("judge-files:list")
        except ApplicationError as exc:
            messages.error(request, _problems(exc))
            return redirect("judge-files:list")
        messages.success(request, f"{upload.lines} lines uploaded: the batch is being validated.")
        return redirect("judge-files:batch", batch_id=batch.public_id)
    return _list(request, teams)


def _list(request: HttpRequest, teams: Any, **shown: Any) -> HttpResponse:
    """The batches page (``shown``: an ``estimate`` of an uploaded file and its ``team``)."""
    batches = policy.visible(
        request.user,
        EVALUATIONS_VIEW_ALL,
        JudgeBatch.objects.select_related("job", "team", "input_file", "parent"),
    ).order_by("-pk")
    page = Paginator(batches, PER_PAGE).get_page(request.GET.get("page"))
    synced = [services.sync(batch) for batch in page]
    return render(
        request,
        "evaluations/judgefiles/list.html",
        {"page": page, "batches": synced, "teams": list(teams), **shown},
    )


@login_required
def batch_page(request: HttpRequest, batch_id: str) -> HttpResponse:
    batch = services.sync(_batch(request, batch_id))
    verdicts = JudgeVerdict.objects.filter(batch=batch).select_related("output").order_by("line")
    search = request.GET.get("q", "").replace("\x00", "").strip()[:200]
    if search:
        verdicts = verdicts.filter(
            Q(custom_id__icontains=search)
            | Q(verdict__iexact=search)
            | Q(rationale__icontains=search)
        )
    if request.GET.get("unparsed") == "1":
        verdicts = verdicts.filter(parsed=False)
    page = Paginator(verdicts, PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    ended_with_failures = batch.status not in services.OPEN and bool(batch.failed)
    others = (
        policy.visible(request.user, EVALUATIONS_VIEW_ALL, JudgeBatch.objects.all())
        .filter(team=batch.team)
        .exclude(pk=batch.pk)
        .order_by("-pk")[:50]
    )
    return render(
        request,
        "evaluations/judgefiles/batch.html",
        {
            "batch": batch,
            "page": page,
            "search": search,
            "query": query.urlencode(),
            "others": others,
            "lineage": services.lineage(batch),
            "row_errors": batch.row_errors.order_by("line")[:20],
            "can_run": policy.has_feature(request.user, EVALUATIONS_JUDGE_FILES, batch.team),
            "is_open": batch.status in services.OPEN,
            "resumable": services.resumable(batch),
            # A re-submission runs the failed rows that may succeed; the lines refused for
            # their own content are listed to fix instead.
            "rerunnable": len(services.failed_lines(batch)) if ended_with_failures else 0,
            "left_out": services.left_out(batch) if ended_with_failures else [],
        },
    )


@login_required
@require_POST
def batch_action(request: HttpRequest, batch_id: str, action: str) -> HttpResponse:
    batch = _batch(request, batch_id, EVALUATIONS_JUDGE_FILES)
    if action not in ("cancel", "resubmit", "resume"):
        raise Http404
    try:
        if action == "cancel":
            services.batch_cancel(user=request.user, batch=batch)
            messages.success(request, "Cancelling: what finished is kept in the output file.")
        elif action == "resume":
            services.batch_resume(user=request.user, batch=batch)
            messages.success(request, "Resumed: the batch's step is queued again.")
        else:
            made = services.resubmit(user=request.user, batch=services.sync(batch))
            messages.success(request, f"A new batch of the {made.total} failed rows.")
            return redirect("judge-files:batch", batch_id=made.public_id)
    except ApplicationError as exc:
        messages.error(request, _problems(exc))
    return redirect("judge-files:batch", batch_id=batch.public_id)


@login_required
def file_content(request: HttpRequest, file_id: str) -> StreamingHttpResponse:
    if not policy.has_feature_anywhere(request.user, EVALUATIONS_VIEW_ALL):
        raise PermissionDenied
    try:
        file = policy.access(
            request.user, EVALUATIONS_VIEW_ALL, JudgeFile.objects.written(), public_id=file_id
        )
    except NotFound as exc:
        raise Http404 from exc
    return download(services.file_lines(file), "application/jsonl", file.filename)


@login_required
def compare_page(request: HttpRequest, batch_id: str, other_id: str) -> HttpResponse:
    a, b = _batch(request, batch_id), _batch(request, other_id)
    report = compare(services.sync(a), services.sync(b))
    rows = report["rows"]
    if request.GET.get("changed") == "1":
        rows = [r for r in rows if r["changed"]]
    page = Paginator(rows, PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "evaluations/judgefiles/compare.html",
        {"a": a, "b": b, "summary": report["summary"], "page": page},
    )


@login_required
def compare_choose(request: HttpRequest, batch_id: str) -> HttpResponse:
    """The batch page's compare form: to the report with the batch chosen."""
    _batch(request, batch_id)
    other = request.GET.get("other", "")
    if not other:
        return redirect("judge-files:batch", batch_id=batch_id)
    chosen = _batch(request, other)
    return redirect("judge-files:compare", batch_id=batch_id, other_id=chosen.public_id)
