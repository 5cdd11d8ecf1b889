"""The scenario page's LLM judges: add one (model, prompt, temperatures, repetitions, swap,
mode, budget), estimate its run, run it (its live progress is the job page), retry its
failed calls, delete it. The same services as the API."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from evalplatform import inputs, validation
from evalplatform.accounts import policy
from evalplatform.accounts.roles import (
    EVALUATIONS_JUDGE,
    EVALUATIONS_VIEW_ALL,
    SCENARIOS_MANAGE,
    SCENARIOS_VIEW,
)
from evalplatform.errors import ApplicationError, FieldErrors, Forbidden, NotFound
from evalplatform.web.fields import number_or_text
from evaluations.analytics import trust
from evaluations.judges import selectors
from evaluations.judges import services as judges
from evaluations.judges.inputs import JudgeInput
from evaluations.judgments.models import LLMJudge
from evaluations.pages import scenario_or_404


def _judge(request: HttpRequest, judge_id: int, feature: str = EVALUATIONS_JUDGE) -> LLMJudge:
    try:
        return policy.access(
            request.user,
            feature,
            LLMJudge.objects.select_related("scenario__team"),
            view_feature=SCENARIOS_VIEW,
            pk=judge_id,
        )
    except NotFound as exc:
        raise Http404 from exc
    except Forbidden as exc:
        raise PermissionDenied from exc


def form_data(post: Any) -> dict[str, Any]:
    """The API's judge fields from the form."""
    temperatures = [
        None if t.strip().lower() == "none" else number_or_text(t)
        for t in post.get("temperatures", "0").split(",")
        if t.strip()
    ]
    budget = post.get("budget_usd", "").strip()
    data: dict[str, Any] = {
        "name": post.get("name", ""),
        "model": number_or_text(post.get("model", "")),
        "temperatures": temperatures,
        "repetitions": number_or_text(post.get("repetitions", "1")),
        "swap": post.get("swap") == "1",
        "mode": post.get("mode", "live"),
        "max_tokens": number_or_text(post.get("max_tokens", "")),
        "budget_usd": budget or None,
    }
    if post.get("prompt_version"):
        data["prompt_version"] = number_or_text(post["prompt_version"])
    reply_format = post.get("reply_format", "").strip()
    if reply_format:
        try:
            data["reply_format"] = validation.json_value(reply_format[:5000])
        except ValueError:
            data["reply_format"] = reply_format  # refused by the service, naming the field
    return data


def _errors_message(exc: FieldErrors) -> str:
    return inputs.sentence(exc.errors, JudgeInput)


@login_required
@require_POST
def judge_add(request: HttpRequest, scenario_id: int) -> HttpResponse:
    scenario = scenario_or_404(request, scenario_id)
    try:
        judge = judges.judge_create(
            user=request.user, scenario=scenario, data=form_data(request.POST)
        )
    except FieldErrors as exc:
        messages.error(request, f"No judge was added. {_errors_message(exc)}")
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Judge “{judge.name}” added: estimate its run, then run it.")
    return redirect(f"/scenarios/{scenario.pk}#judges")


@login_required
@require_POST
def judge_estimate(request: HttpRequest, judge_id: int) -> HttpResponse:
    """htmx: the run's calls and cost, in place."""
    judge = _judge(request, judge_id)
    context: dict[str, Any] = {"judge": judge}
    try:
        context["estimate"] = judges.judge_estimate(user=request.user, judge=judge, data={})
    except FieldErrors as exc:
        context["error"] = _errors_message(exc)
    except ApplicationError as exc:
        context["error"] = exc.message
    return render(request, "evaluations/_judge_estimate.html", context)


@login_required
@require_POST
def judge_action(request: HttpRequest, judge_id: int, action: str) -> HttpResponse:
    judge = _judge(request, judge_id)
    back = f"/scenarios/{judge.scenario_id}#judges"
    try:
        if action == "run":
            budget = request.POST.get("budget_usd", "").strip()
            data = {"budget_usd": str(Decimal(budget))} if budget else {}
            run = judges.judge_run(user=request.user, judge=judge, data=data)
            messages.success(
                request, f"Judge “{judge.name}” is running: {run.job.total_cells} calls."
            )
            return redirect("generation-job", job_id=run.job_id)
        if action == "retry-failed":
            retried = judges.judge_retry_failed(user=request.user, judge=judge)
            messages.success(
                request, f"{retried} failed call{'s' if retried != 1 else ''} asked again."
            )
        elif action == "delete":
            judges.judge_delete(user=request.user, judge=judge)
            messages.success(request, f"Judge “{judge.name}” and its judgments deleted.")
        else:
            raise Http404
    except FieldErrors as exc:
        messages.error(request, _errors_message(exc))
    except (ApplicationError, ArithmeticError) as exc:
        messages.error(request, getattr(exc, "message", "A budget in US dollars."))
    return redirect(back)


@login_required
def judge_page(request: HttpRequest, judge_id: int) -> HttpResponse:
    """A judge's page: its configuration, its cards (one per temperature) and its trust,
    with the manager's opt-in."""
    judge = _judge(request, judge_id, EVALUATIONS_VIEW_ALL)
    found = trust.judge_card(judge)
    repeated = None
    if judge.scenario.type == "rating":  # scores per call: their consistency per task
        dimensions = [d["name"] for d in judge.scenario.config.get("dimensions") or []]
        field = request.GET.get("field")
        repeated = selectors.consistency_for(judge, field if field in dimensions else None)
    return render(
        request,
        "evaluations/judge_page.html",
        {
            "judge": judge,
            "scenario": judge.scenario,
            "found": found,
            "repeated": repeated,
            "can_manage": policy.may(request.user, SCENARIOS_MANAGE, judge.scenario),
        },
    )


@login_required
@require_POST
def judge_trust_opt_in(request: HttpRequest, judge_id: int) -> HttpResponse:
    """The judge page's opt-in form: count its verdicts even when untrusted, or not."""
    judge = _judge(request, judge_id, SCENARIOS_MANAGE)
    include = request.POST.get("include_untrusted") == "1"
    try:
        trust.judge_opt_in(
            user=request.user,
            judge=judge,
            data={"include_untrusted": include, "reason": request.POST.get("reason", "")},
        )
    except FieldErrors as exc:
        messages.error(request, _errors_message(exc))
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            f"“{judge.name}” now counts in the rankings even when untrusted."
            if include
            else f"“{judge.name}” counts in the rankings only when trusted.",
        )
    return redirect(f"/judges/{judge.pk}")
