"""Re-planning as results arrive (issue 21, point 4): when an accepted plan's work produces
verdicts, a fresh proposal for the same question is computed with the budget the chain has
left, stored as a new ``BudgetPlan`` of the chain (``chain``: its first plan; ``replans``: the
accepted plan it follows). It is a proposal only: nobody's work is submitted until a manager
accepts it.

When: a judge run of an accepted plan completes (its job's end, heard through
``generation.results.when_finished`` once the transition commits), or people's answers on
its tasks come in, debounced by ``sweep``, a task scheduled every minute: at most once per
``PLANNER_REPLAN_EVERY_ANSWERS`` verdicts of the chain since its last re-plan, or after
``PLANNER_REPLAN_IDLE_MINUTES`` for fewer. Either queues ``replan`` (a django-q2 task within
the team's share of the workers); submitting an answer costs no query more.

Bounded: one pending re-plan per chain (a constraint; a newer re-plan refreshes the pending
one in place), nothing computed when no verdict of the chain arrived since the last one, and
a re-plan is recorded as skipped, with its ``reason``, when the remaining budget is spent,
the question's target is already reached, nothing more fits, or the scenario is closed.

Spending of a chain, over its accepted plans: ``committed`` is their projected cost,
``spent`` the cost of their judges' runs and people's time on their tasks (at the hourly rate
of the budget); each is charged at the larger of the two, and ``remaining`` is the chain's
budget (its first plan's) less that, never below zero.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from evalplatform.runs import fairshare
from evaluations.judgments.models import JudgeRun, Judgment, RaterKind
from evaluations.planner import selectors, services
from evaluations.planner.design import HUMAN
from evaluations.planner.models import BudgetPlan, PlanStatus
from generation import results
from generation.models import JobStatus
from scenarios.models import ScenarioStatus

logger = logging.getLogger(__name__)

EVERY_ANSWERS = 20  # default of settings.PLANNER_REPLAN_EVERY_ANSWERS
IDLE_MINUTES = 10.0  # default of settings.PLANNER_REPLAN_IDLE_MINUTES
ACTIVE_DAYS = 30
SWEEP_CHAINS = 200
EPS = 1e-9
REASONS = {
    "budget_exhausted": "The chain's budget is spent.",
    "target_reached": "The question's target is already reached.",
    "nothing_fits": "No more work fits the remaining budget.",
    "scenario_closed": "The scenario is closed.",
    "too_many_verdicts": f"More than {services.MAX_VERDICTS:,} verdicts: too many to plan from.",
    "too_many_models": f"More than {services.MAX_ENTITIES} models: too many to plan for.",
    "too_many_raters": (
        f"Too many judges for this many models (at most {services.MAX_PARAMETERS:,} "
        "parameters): plan with fewer judges."
    ),
    "entity_gone": "A model the question names is no longer in the scenario.",
    "error": "Computing the re-plan failed (logged); it is tried again when more results arrive.",
}


def every_answers() -> int:
    return max(1, int(getattr(settings, "PLANNER_REPLAN_EVERY_ANSWERS", EVERY_ANSWERS)))


def root_of(plan: BudgetPlan) -> int:
    return plan.chain_id or plan.pk


# --- reads of a chain ---------------------------------------------------------------------------
def _accepted(root_id: int) -> list[BudgetPlan]:
    return list(
        BudgetPlan.objects.filter(Q(pk=root_id) | Q(chain_id=root_id))
        .filter(status=PlanStatus.ACCEPTED)
        .order_by("accepted_at", "pk")
    )


def _tasks(plans: list[BudgetPlan]) -> tuple[set[int], set[int]]:
    """The chain's tasks: all, and those for people."""
    every: set[int] = set()
    people: set[int] = set()
    for plan in plans:
        for key, ids in ((plan.submitted or {}).get("tasks") or {}).items():
            every.update(ids)
            if key == HUMAN:
                people.update(ids)
    return every, people


def _verdicts(scenario_id: int, tasks: set[int]) -> int:
    return Judgment.objects.filter(scenario_id=scenario_id, task_id__in=tasks).count()


def _last_seen(root_id: int, accepted: list[BudgetPlan]) -> int:
    """The chain's verdicts when it was last re-planned (0 before its first re-plan)."""
    later = (
        BudgetPlan.objects.filter(chain_id=root_id)
        .exclude(status=PlanStatus.ACCEPTED)
        .values_list("verdicts_seen", flat=True)
    )
    return max([p.verdicts_seen for p in accepted] + list(later) + [0])


def spending(root: BudgetPlan, accepted: list[BudgetPlan]) -> dict[str, Any]:
    """What the chain's accepted plans committed and spent, and what is left of its budget."""
    budget = root.budget or {}
    rate = float(budget.get("hourly_rate_usd") or 0.0)
    committed_usd = sum(Decimal(str(p.proposal.get("cost", {}).get("usd", "0"))) for p in accepted)
    committed_hours = sum(float(p.proposal.get("cost", {}).get("human_hours", 0)) for p in accepted)
    runs = [r["run"] for p in accepted for r in (p.submitted or {}).get("judge_runs", [])]
    judge_usd = JudgeRun.objects.filter(pk__in=runs).aggregate(s=Sum("job__cost_usd"))["s"]
    _, people = _tasks(accepted)
    ms = Judgment.objects.filter(
        scenario_id=root.scenario_id, task_id__in=people, rater_kind=RaterKind.HUMAN
    ).aggregate(s=Sum("time_spent_ms"))["s"]
    spent_hours = (ms or 0) / 3_600_000
    spent_usd = Decimal(judge_usd or 0) + Decimal(str(spent_hours * rate))
    charged_usd = max(spent_usd, committed_usd)
    charged_hours = max(spent_hours, committed_hours)
    remaining_usd = max(Decimal(0), Decimal(str(budget.get("usd") or 0)) - charged_usd)
    remaining_hours = max(0.0, float(budget.get("hours") or 0) - charged_hours)
    return {
        "budget": {
            "usd": services._usd(float(budget.get("usd") or 0)),
            "hours": budget.get("hours"),
        },
        "committed": {
            "usd": services._usd(float(committed_usd)),
            "hours": round(committed_hours, 4),
        },
        "spent": {"usd": services._usd(float(spent_usd)), "hours": round(spent_hours, 4)},
        "remaining": {
            "usd": services._usd(float(remaining_usd)),
            "hours": round(remaining_hours, 4),
        },
    }


# --- the task -----------------------------------------------------------------------------------
def queue(root_id: int, team_id: int, trigger: str) -> None:
    """Queue a re-plan of the chain once the transaction commits."""
    transaction.on_commit(
        lambda: fairshare.submit(
            team_id=team_id,
            func=replan,
            args=[root_id, trigger],
            key=f"replan-{root_id}",
            name=f"replan-{root_id}-{time.time_ns()}",
        )
    )


def replan(root_id: int, trigger: str) -> int | None:
    """The task: re-plan the chain from its first plan ``root_id``; the re-plan's id (None
    when nothing new arrived since the last one, or another re-plan or an accept came
    first). The proposal is computed outside any lock (it may read 200,000 verdicts and run
    the analysis the judges' trust comes from); a short transaction then re-checks that
    nothing moved and writes it, refreshing a pending or skipped re-plan only while it is
    still pending or skipped (an accept in between wins)."""
    root = BudgetPlan.objects.select_related("scenario").filter(pk=root_id).first()
    if root is None:
        return None
    accepted = _accepted(root_id)
    if not accepted:
        return None
    scenario = root.scenario
    every, _ = _tasks(accepted)
    seen = _verdicts(scenario.pk, every)
    last_seen = _last_seen(root_id, accepted)
    if seen <= last_seen:
        return None
    values = _replanned(root, accepted, trigger, seen=seen, last_seen=last_seen)
    with transaction.atomic():
        # The root alone is locked (re-plans of one chain take turns); not the scenario.
        BudgetPlan.objects.select_for_update().filter(pk=root_id).first()
        now_accepted = _accepted(root_id)
        if [p.pk for p in now_accepted] != [p.pk for p in accepted]:
            return None  # accepted meanwhile: its own results re-plan it
        if _last_seen(root_id, now_accepted) >= seen:
            return None  # another re-plan saw these verdicts
        later = BudgetPlan.objects.filter(chain_id=root_id).exclude(status=PlanStatus.ACCEPTED)
        # The pending re-plan (one per chain), else the latest if it was skipped.
        latest = later.order_by("-created_at", "-pk").first()
        row = later.filter(status=PlanStatus.PROPOSED).first() or (
            latest if latest and latest.status == PlanStatus.SKIPPED else None
        )
        if row is None:
            row = BudgetPlan.objects.create(
                scenario=scenario, chain_id=root_id, question=root.question, **values
            )
        else:
            # Refreshed in place: its time is that of the proposal it now holds (the sweep
            # debounces from it).
            changed = BudgetPlan.objects.filter(
                pk=row.pk, status__in=[PlanStatus.PROPOSED, PlanStatus.SKIPPED]
            ).update(**values, created_at=timezone.now())
            if not changed:
                return None
    logger.info("re-plan %s of chain %s: %s", row.pk, root_id, values["reason"] or "proposed")
    return row.pk


def _replanned(
    root: BudgetPlan, accepted: list[BudgetPlan], trigger: str, *, seen: int, last_seen: int
) -> dict[str, Any]:
    """The fields of the chain's re-plan: the proposal with what is left of the budget, or
    why there is none (``reason``; ``error`` when computing it failed, logged: the verdicts
    are counted as seen all the same, so a failing chain is not re-planned every minute)."""
    scenario = root.scenario
    values: dict[str, Any] = {
        "replans": accepted[-1],
        "trigger": trigger,
        "new_verdicts": seen - last_seen,
        "verdicts_seen": seen,
        "spending": spending(root, accepted),
        "reason": "",
        "proposal": {},
    }
    remaining = values["spending"]["remaining"]
    budget = {
        **(root.budget or {}),
        "usd": float(remaining["usd"]),
        "hours": float(remaining["hours"]),
    }
    values["budget"] = budget
    try:
        left_out = selectors.judges_left_out(scenario)
        judges = {
            f"judge:{pk}"
            for pk in selectors.usable_judges(scenario, left_out).values_list("pk", flat=True)
        }
        budget["raters"] = [r for r in budget.get("raters", []) if r == HUMAN or r in judges]
        values["fingerprint"] = selectors.fingerprint(scenario, left_out)
        if scenario.status == ScenarioStatus.CLOSED:
            values["reason"] = "scenario_closed"
        elif budget["usd"] <= EPS and budget["hours"] <= EPS:
            values["reason"] = "budget_exhausted"
        elif selectors.verdict_count(scenario) > services.MAX_VERDICTS:
            values["reason"] = "too_many_verdicts"
        else:
            found = selectors.planning_data(scenario, left_out)
            question = root.question or {}
            named = [question.get(k) for k in ("a", "b") if question.get(k) is not None]
            if not 2 <= len(found.entities) <= services.MAX_ENTITIES:
                values["reason"] = "too_many_models" if found.entities else "nothing_fits"
            elif any(name not in found.entities for name in named):
                values["reason"] = "entity_gone"
            elif services.too_many_parameters(len(found.entities), budget["raters"]):
                values["reason"] = "too_many_raters"
            else:
                proposal = services._propose(scenario, found, question, budget)
                proposal["judges_left_out"] = left_out
                values["proposal"] = proposal
                if proposal.get("reached"):
                    values["reason"] = "target_reached"
                elif not proposal.get("work"):
                    values["reason"] = "nothing_fits"
    except Exception:
        logger.exception("re-plan of chain %s failed", root.pk)
        values["reason"], values["proposal"] = "error", {}
        values.setdefault("fingerprint", "")
    values["status"] = PlanStatus.SKIPPED if values["reason"] else PlanStatus.PROPOSED
    return values


# --- when results arrive ------------------------------------------------------------------------
def _chains_of_scenario(scenario_id: int) -> list[BudgetPlan]:
    return list(
        BudgetPlan.objects.filter(scenario_id=scenario_id, status=PlanStatus.ACCEPTED).only(
            "pk", "chain_id", "submitted", "verdicts_seen", "scenario_id"
        )
    )


def judge_run_finished(job_id: int, status: str) -> None:
    """A judge run's job ended (``generation.results.when_finished``): when it completed
    and the run is an accepted plan's, re-plan its chain."""
    if status != JobStatus.COMPLETED:
        return
    run = (
        JudgeRun.objects.filter(job_id=job_id)
        .values("pk", "judge__scenario_id", "job__team_id")
        .first()
    )
    if run is None:
        return
    for plan in _chains_of_scenario(run["judge__scenario_id"]):
        if any(r.get("run") == run["pk"] for r in (plan.submitted or {}).get("judge_runs", [])):
            queue(root_of(plan), run["job__team_id"], "judge_run")
            return


def sweep() -> list[int]:
    """The scheduled task (every minute, migration 0019): re-plan the chains whose people's
    tasks got at least ``PLANNER_REPLAN_EVERY_ANSWERS`` verdicts since their last re-plan,
    or any once ``PLANNER_REPLAN_IDLE_MINUTES`` passed since it (the last few answers are
    not left out). Reads the ``SWEEP_CHAINS`` chains with people's work accepted most
    recently (within ``ACTIVE_DAYS``); answering costs nothing more. The chains queued."""
    since = timezone.now() - timedelta(days=ACTIVE_DAYS)
    accepted = list(
        BudgetPlan.objects.filter(status=PlanStatus.ACCEPTED, accepted_at__gte=since)
        .select_related("scenario")
        .order_by("-accepted_at", "-pk")[: SWEEP_CHAINS * 4]
    )
    chains: dict[int, list[BudgetPlan]] = {}
    for plan in accepted:
        chains.setdefault(root_of(plan), []).append(plan)
    idle = timezone.now() - timedelta(
        minutes=float(getattr(settings, "PLANNER_REPLAN_IDLE_MINUTES", IDLE_MINUTES))
    )
    queued = []
    for root, plans in list(chains.items())[:SWEEP_CHAINS]:
        people = _tasks(plans)[1]
        if not people:
            continue
        runs = [r["run"] for p in plans for r in (p.submitted or {}).get("judge_runs", [])]
        if (
            runs
            and JudgeRun.objects.filter(pk__in=runs)
            .exclude(job__status__in=[JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED])
            .exists()
        ):
            # A judge run of the chain is still producing verdicts: its completion re-plans
            # (``judge_run_finished``); counting its verdicts as answers would re-plan every minute.
            continue
        latest = (
            BudgetPlan.objects.filter(chain_id=root)
            .exclude(status=PlanStatus.ACCEPTED)
            .order_by("-created_at", "-pk")
            .values_list("created_at", flat=True)
            .first()
        )
        last = max([p.accepted_at for p in plans if p.accepted_at] + ([latest] if latest else []))
        new = _verdicts(plans[0].scenario_id, _tasks(plans)[0]) - _last_seen(root, plans)
        if new >= every_answers() or (new > 0 and last < idle):
            queue(root, plans[0].scenario.team_id, "answers")
            queued.append(root)
    return queued


def connect() -> None:
    """Re-plan as the judge runs of accepted plans complete."""
    from evaluations.judges.services import SOURCE_KIND

    results.when_finished(SOURCE_KIND, judge_run_finished)


def reason_text(code: str) -> str:
    return REASONS.get(code, code)
