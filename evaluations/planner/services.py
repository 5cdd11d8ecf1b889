"""The budget scheduler: propose the next batch of work for a question on a comparison
scenario and a budget (``plan_propose``), and accept a proposal (``plan_accept``): its
people's tasks become tasks of the scenario that evaluators are handed like any other, its
judges' tasks are made for the judges only (no evaluator is handed them) and each judge runs
over its tasks at once, in its own mode (a batch judge through its provider's batch API).
A proposal is computed from the verdicts and tasks of one moment (``selectors.fingerprint``);
once they change (results arrived, tasks were added), accepting it is refused: propose again,
and the new proposal is computed from the current verdicts.

Bounded per request: at most ``MAX_ENTITIES`` entities, ``MAX_CANDIDATES`` candidate pairs,
``MAX_TASKS`` tasks per proposal and ``MAX_VERDICTS`` verdicts read (docs/analytics.md).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np
from django.db import transaction
from django.utils import timezone

from evalplatform import inputs
from evalplatform.accounts import audit, policy
from evalplatform.accounts.roles import EVALUATIONS_JUDGE, SCENARIOS_MANAGE
from evalplatform.errors import Conflict, FieldErrors, Forbidden
from evaluations.judges import selectors as judge_selectors
from evaluations.judges import services as judge_services
from evaluations.judgments.models import LLMJudge
from evaluations.planner import design, selectors
from evaluations.planner.design import HUMAN
from evaluations.planner.inputs import MAX_ENTITIES, PlanInput
from evaluations.planner.models import BudgetPlan, PlanStatus
from scenarios import selectors as scenario_selectors
from scenarios import services as scenario_services
from scenarios.models import Scenario, ScenarioStatus
from scenarios.types import registry

MAX_CANDIDATES = 2000
MAX_VERDICTS = 200_000
# The joint fit's parameters (each judge has one per model): bounds the fit and the plan.
MAX_PARAMETERS = 1200
REPEATS_PER_ITEM = 3


def _may_manage(user: Any, scenario: Scenario) -> None:
    if not policy.may(user, SCENARIOS_MANAGE, scenario):
        raise Forbidden()


def _usd(value: float) -> str:
    return str(Decimal(str(value)).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))


# A proposal's request: read as ``inputs.PlanInput`` declares it, then checked against the
# scenario's models and judges.
def _checked_question(
    given: dict[str, Any], entities: list[str], errors: dict[str, str]
) -> dict[str, Any]:
    """The question asked: ``kind`` with the fields it uses (``a`` and ``b``, ``k``, ``tau``)."""
    kind = given["question"]
    question: dict[str, Any] = {"kind": kind}
    n = len(entities)
    if kind == "pair":
        question |= _checked_pair(given, entities, errors)
    elif kind == "top_k":
        if n < 3:
            errors["question"] = "The top k needs at least three models."
        elif given["k"] is None and "k" not in errors:
            errors["k"] = f"A whole number from 1 to {n - 1}."
        question["k"] = given["k"]
    elif kind == "ranking":
        question["tau"] = given["tau"]
    return question


def _checked_pair(
    given: dict[str, Any], entities: list[str], errors: dict[str, str]
) -> dict[str, str]:
    """The two models of a pair question, ``a`` and ``b``."""
    pair: dict[str, str] = {}
    for key in ("a", "b"):
        name = given[key]
        if not isinstance(name, str) or name not in entities:
            shown = ", ".join(entities[:20]) + (" …" if len(entities) > 20 else "")
            errors[key] = f"One of the scenario's models: {shown}."
        else:
            pair[key] = name
    if "a" in pair and pair.get("a") == pair.get("b"):
        errors["b"] = "Another model than a."
    return pair


def _checked_budget(given: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    """The budget (money, people's hours, or both) and the proposal's bounds."""
    budget: dict[str, Any] = {
        "usd": given["budget_usd"],
        "hours": given["budget_hours"],
        "hourly_rate_usd": given["hourly_rate_usd"],
        "seconds_per_judgment": given["seconds_per_judgment"],
        "target_width": given["target_width"],
        "max_tasks": given["max_tasks"],
    }
    both_read = "budget_usd" not in errors and "budget_hours" not in errors
    if both_read and not budget["usd"] and not budget["hours"]:
        errors["budget_usd"] = "A budget in money, in people's hours, or both."
    return budget


def _checked_raters(
    raters: Any, judges: list[LLMJudge], errors: dict[str, str]
) -> list[str] | None:
    """The raters the proposal may use, by key (people, ``judge:<id>``); default all."""
    keys = [HUMAN, *(f"judge:{j.pk}" for j in judges)]
    if raters is None or raters == "":
        return keys
    if (
        not isinstance(raters, list)
        or not raters
        or not all(isinstance(r, str) and r in keys for r in raters)
    ):
        errors["raters"] = f"A list of raters among: {', '.join(keys)}."
        return None
    return list(dict.fromkeys(raters))


def check_request(
    data: Mapping[str, Any], entities: list[str], judges: list[LLMJudge]
) -> dict[str, Any]:
    """The question, the budget and the options of a proposal; field errors for bad input,
    in the input's order."""
    errors: dict[str, str] = {}
    given = PlanInput.read(data, errors, entities=entities)
    question = _checked_question(given, entities, errors)
    budget = _checked_budget(given, errors)
    raters = _checked_raters(given["raters"], judges, errors)
    if errors:
        raise FieldErrors(inputs.in_order(errors, PlanInput))
    return {"question": question, "budget": budget | {"raters": raters}}


def plan_propose(*, user: Any, scenario: Scenario, data: Mapping[str, Any]) -> BudgetPlan:
    """Compute and store a proposal (``feature:scenarios:manage``)."""
    _may_manage(user, scenario)
    if not registry.of(scenario).is_pairwise:
        raise FieldErrors({"scenario": "The scheduler plans comparison scenarios."})
    if not isinstance(data, Mapping):
        raise FieldErrors({"non_field_errors": "Send a JSON object."})
    if scenario.status == ScenarioStatus.CLOSED:
        raise Conflict("The scenario is closed.")
    if selectors.verdict_count(scenario) > MAX_VERDICTS:
        raise Conflict(f"More than {MAX_VERDICTS:,} verdicts: too many to plan from here.")
    # Which judges may be used, once: it may run the analysis their cards come from.
    left_out = selectors.judges_left_out(scenario)
    stamp = selectors.fingerprint(scenario, left_out)
    found = selectors.planning_data(scenario, left_out)
    if len(found.entities) < 2:
        raise FieldErrors({"scenario": "The scheduler needs at least two models to compare."})
    if len(found.entities) > MAX_ENTITIES:
        raise FieldErrors({"scenario": f"At most {MAX_ENTITIES} models can be planned for."})
    checked = check_request(data, found.entities, [c.judge for c in found.judges])
    if problem := too_many_parameters(len(found.entities), checked["budget"]["raters"]):
        raise FieldErrors({"raters": problem})
    proposal = _propose(scenario, found, checked["question"], checked["budget"])
    # The judges planned for none of the work, and why (an inactive model; untrusted under
    # the trust gate with no manager's opt-in).
    proposal["judges_left_out"] = left_out
    return BudgetPlan.objects.create(
        scenario=scenario,
        created_by=user,
        question=checked["question"],
        budget=checked["budget"],
        fingerprint=stamp,
        proposal=proposal,
    )


def too_many_parameters(models: int, raters: list[str]) -> str | None:
    """Why the joint fit of ``models`` and these raters is too big to plan for, or None."""
    judges = sum(1 for r in raters if r != HUMAN)
    if design.Layout(models, ("",) * judges).size <= MAX_PARAMETERS:
        return None
    most = max(0, (MAX_PARAMETERS - 1 - models) // (models + 2))
    return (
        f"With {models} models, at most {most} judges can be planned for at once (each judge "
        f"has a parameter per model; at most {MAX_PARAMETERS:,}): name fewer in raters."
    )


def _raters(
    scenario: Scenario, found: selectors.PlanningData, estimate: design.Estimate, budget: dict
) -> tuple[list[design.Rater], list[dict[str, Any]]]:
    """The kinds of work on offer with their measured quality and cost per task, and how
    the proposal describes them."""
    seconds = budget["seconds_per_judgment"] or found.seconds_per_judgment
    agreement = design.agreement_with_people(
        found.first, found.second, found.outcome, found.rater, found.task
    )
    offered: list[design.Rater] = []
    described: list[dict[str, Any]] = []

    def quality(key: str) -> design.Quality:
        return estimate.quality.get(key) or design.Quality(
            1.0 if key == HUMAN else design.PRIOR_RELIABILITY,
            0.0,
            0.0 if key == HUMAN else design.DEFAULT_REPEAT_CORRELATION,
            0,
            False,
        )

    if HUMAN in budget["raters"]:
        q = quality(HUMAN)
        hours = scenario.overlap * seconds / 3600
        offered.append(
            design.Rater(HUMAN, scenario.overlap, 0.0, hours * budget["hourly_rate_usd"], hours)
        )
        described.append(
            {
                "rater": HUMAN,
                "name": "People",
                "reliability": 1.0,
                "position_bias": round(q.bias, 4),
                "verdicts": q.verdicts,
                "verdicts_per_task": scenario.overlap,
                "seconds_per_judgment": round(seconds, 2),
                "seconds_measured_from": 0
                if budget["seconds_per_judgment"]
                else found.seconds_measured,
                "usd_per_task": _usd(hours * budget["hourly_rate_usd"]),
                "hours_per_task": round(hours, 6),
            }
        )
    for cost in found.judges:
        key = f"judge:{cost.judge.pk}"
        if key not in budget["raters"]:
            continue
        q = quality(key)
        offered.append(
            design.Rater(
                key,
                cost.verdicts_per_task,
                q.repeat_correlation,
                cost.usd_per_task,
                0.0,
            )
        )
        described.append(
            {
                "rater": key,
                "name": cost.judge.name,
                "mode": cost.mode,
                "reliability": round(q.reliability, 4),
                "reliability_counted_on": round(design.counted_on(estimate, key), 4),
                "position_bias": round(q.bias, 4),
                "repeat_correlation": round(q.repeat_correlation, 4),
                "verdicts": q.verdicts,
                "measured_against_people": q.against_people,
                "agreement_with_people": (
                    None
                    if agreement.get(key, (None, 0))[0] is None
                    else round(float(agreement[key][0] or 0), 4)
                ),
                "compared_with_people": agreement.get(key, (None, 0))[1],
                "verdicts_per_task": cost.verdicts_per_task,
                "usd_per_task": _usd(cost.usd_per_task),
                "tokens_measured": cost.measured,
                "hours_per_task": 0.0,
            }
        )
    return offered, described


def _candidates(found: selectors.PlanningData, question: dict[str, Any], index: dict):
    """The entity pairs with an item where both have a variant; for a pair question the
    pairs touching its two models first, then the least compared; at most MAX_CANDIDATES."""
    compared: Counter[tuple[int, int]] = Counter()
    for (i, j, _item), count in found.tasks_per_pair_item.items():
        compared[(i, j)] += count
    touching = {index.get(question.get("a")), index.get(question.get("b"))} - {None}
    pairs = sorted(
        found.pairs,
        key=lambda p: (-(len(touching & set(p))), compared[p], p),
    )[:MAX_CANDIDATES]
    return pairs


def _propose(
    scenario: Scenario, found: selectors.PlanningData, question: dict[str, Any], budget: dict
) -> dict[str, Any]:
    index = {name: n for n, name in enumerate(found.entities)}
    estimate = design.estimate(
        len(found.entities),
        found.first,
        found.second,
        found.outcome,
        found.rater,
        found.task,
        # The judges planned for; other judges' verdicts (left out, or not named in
        # raters) are not fitted.
        judges=tuple(r for r in budget["raters"] if r != HUMAN),
    )
    asked = design.Question(
        question["kind"],
        a=index.get(str(question.get("a"))),
        b=index.get(str(question.get("b"))),
        k=question.get("k"),
        tau=question.get("tau") or 0.9,
    )
    offered, described = _raters(scenario, found, estimate, budget)
    pairs = _candidates(found, question, index)
    candidates = np.array(pairs, int).reshape(-1, 2)
    per_candidate = np.array(
        [len(found.pairs[p]) * REPEATS_PER_ITEM * max(1, len(offered)) for p in pairs], int
    )
    chosen = design.plan(
        fitted=estimate,
        question=asked,
        candidates=candidates,
        raters=offered,
        budget_usd=budget["usd"],
        budget_hours=budget["hours"],
        target_width=budget["target_width"],
        max_tasks=budget["max_tasks"],
        per_candidate=per_candidate,
    )
    work = _work(found, pairs, offered, chosen.picks)
    for row in described:
        row["tasks"] = sum(w["tasks"] for w in work if w["rater"] == row["rater"])
    judge_usd = sum(offered[r].usd_per_task for _, r in chosen.picks if offered[r].key != HUMAN)
    return {
        "entities": found.entities,
        "strengths": [
            {
                "entity": name,
                "strength": round(float(estimate.theta[n]), 4),
                "sd": round(float(np.sqrt(estimate.cov[n, n])), 4),
            }
            for n, name in sorted(enumerate(found.entities), key=lambda e: -estimate.theta[e[0]])
        ],
        "before": _rounded(chosen.before),
        "after": _rounded(chosen.after),
        "cost": {
            "usd": _usd(chosen.usd),
            "judge_usd": _usd(judge_usd),
            "human_usd": _usd(chosen.usd - judge_usd),
            "human_hours": round(chosen.hours, 4),
        },
        "tasks": len(chosen.picks),
        # The first tasks, bought to measure the judges' reliability before the question.
        "calibration_tasks": chosen.calibration,
        # The question's target (target_width, or tau for a ranking) is met already.
        "reached": bool(design.reached(asked, chosen.before, budget["target_width"])),
        "verdicts": sum(offered[r].verdicts_per_task for _, r in chosen.picks),
        "raters": described,
        "work": work,
        "candidates": len(pairs),
    }


def _rounded(found: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in found.items()}


def _work(
    found: selectors.PlanningData,
    pairs: list[tuple[int, int]],
    offered: list[design.Rater],
    picks: list[tuple[int, int]],
) -> list[dict[str, Any]]:
    """The picks as work: each (pair, rater) task on the pair's item with the fewest tasks
    so far (counting those planned), grouped by pair, item and rater."""
    planned: Counter[tuple[int, int, int]] = Counter(found.tasks_per_pair_item)
    grouped: dict[tuple[int, int, int, int], int] = defaultdict(int)
    items: dict[int, tuple[int, str, int, int]] = {}
    for p, r in picks:
        i, j = pairs[p]
        options = found.pairs[(i, j)]
        item, name, vi, vj = min(options, key=lambda o: (planned[(i, j, o[0])], o[0]))
        planned[(i, j, item)] += 1
        items[item] = (item, name, vi, vj)
        grouped[(i, j, item, r)] += 1
    work = []
    for (i, j, item, r), tasks in sorted(grouped.items()):
        rater = offered[r]
        variants = next(o for o in found.pairs[(i, j)] if o[0] == item)
        work.append(
            {
                "rater": rater.key,
                "entity_a": found.entities[i],
                "entity_b": found.entities[j],
                "item": variants[1],
                "variant_a": variants[2],
                "variant_b": variants[3],
                "tasks": tasks,
                "verdicts": tasks * rater.verdicts_per_task,
                "usd": _usd(tasks * rater.usd_per_task),
                "human_hours": round(tasks * rater.hours_per_task, 4),
            }
        )
    return work


def is_stale(plan: BudgetPlan) -> bool:
    return plan.status == PlanStatus.PROPOSED and plan.fingerprint != selectors.fingerprint(
        plan.scenario
    )


def _check_acceptable(
    user: Any,
    plan: BudgetPlan,
    scenario: Scenario,
    seen: str | None,
    left_out: list[dict[str, Any]],
) -> None:
    """Refuse a proposal (read under its locks) that cannot be accepted now."""
    # From the locked row: a pending re-plan may have been refreshed since it was read.
    judge_keys = {w["rater"] for w in plan.proposal.get("work", [])} - {HUMAN}
    if judge_keys and not policy.may(user, EVALUATIONS_JUDGE, scenario):
        raise Forbidden()
    if plan.status == PlanStatus.SKIPPED:
        raise Conflict("This re-plan was skipped: there is nothing to accept.")
    if plan.status != PlanStatus.PROPOSED:
        raise Conflict("This proposal was accepted already.")
    if scenario.status == ScenarioStatus.CLOSED:
        raise Conflict("The scenario is closed.")
    if seen is not None and seen != plan.fingerprint:
        raise Conflict(
            "This proposal was computed again since you read it: read it again.",
            extra={"stale": True},
        )
    if plan.fingerprint != selectors.fingerprint(scenario, left_out):
        raise Conflict(
            "The verdicts, tasks or judges changed since this proposal: propose again.",
            extra={"stale": True},
        )
    if not plan.proposal.get("work"):
        raise Conflict("This proposal has no work to submit.")
    if judge_keys and scenario.status != ScenarioStatus.OPEN:
        raise Conflict("Open the scenario first: its judges' tasks wait for it to open.")


def _planned_tasks(
    scenario: Scenario, plan: BudgetPlan
) -> tuple[list[scenario_services.NewTask], list[str]]:
    """The proposal's work as new tasks (each pair in a seeded random order; a judges' task
    holds every place of the overlap), with the rater of each."""
    shuffle = random.Random(f"{scenario.seed}:plan:{plan.pk}")  # noqa: S311 - order shown
    wanted = {v for line in plan.proposal["work"] for v in (line["variant_a"], line["variant_b"])}
    item_of = dict(
        scenario_selectors.variants(scenario).filter(pk__in=wanted).values_list("pk", "item_id")
    )
    if len(item_of) != len(wanted):
        raise Conflict("A variant of this proposal is gone: propose again.")
    specs: list[scenario_services.NewTask] = []
    raters: list[str] = []
    for line in plan.proposal["work"]:
        held = 0 if line["rater"] == HUMAN else scenario.overlap
        for _ in range(line["tasks"]):
            first, second = line["variant_a"], line["variant_b"]
            if shuffle.random() < 0.5:
                first, second = second, first
            specs.append(
                scenario_services.NewTask(
                    item_id=item_of[first], variant_a_id=first, variant_b_id=second, held=held
                )
            )
            raters.append(line["rater"])
    return specs, raters


def _run_judges(
    user: Any, scenario: Scenario, by_rater: Mapping[str, list[int]]
) -> list[dict[str, Any]]:
    """Each judge of the proposal run over its tasks, in batch where its model has a batch
    API (else in its own mode)."""
    judges = {
        f"judge:{j.pk}": j
        for j in LLMJudge.objects.filter(scenario=scenario).select_related(
            "scenario__team", "llm_model__connection"
        )
    }
    runs = []
    for key, task_ids in sorted(by_rater.items()):
        if key == HUMAN:
            continue
        judge = judges.get(key)
        if judge is None:
            raise Conflict("A judge of this proposal is gone: propose again.")
        mode = "batch" if judge_selectors.batch_capable(judge) else judge.mode
        run = judge_services.judge_run(user=user, judge=judge, data={"tasks": task_ids}, mode=mode)
        runs.append({"judge": judge.pk, "run": run.pk, "job": run.job_id, "mode": mode})
    return runs


def plan_accept(*, user: Any, plan: BudgetPlan, seen: str | None = None) -> BudgetPlan:
    """Submit a proposal: its tasks are made and its judges run over theirs, all or
    nothing. Refused (409) once accepted, when the scenario is closed, when it is stale,
    when ``seen`` (the fingerprint of the proposal as its reader saw it) is not the
    proposal's now (a pending re-plan is refreshed in place), and for judges' tasks unless
    the scenario is open (they hold every place of the overlap, which a draft's settings
    may still raise, opening them to people)."""
    if seen is not None and not isinstance(seen, str):
        raise FieldErrors({"fingerprint": "The fingerprint of the proposal you read."})
    scenario = plan.scenario
    _may_manage(user, scenario)
    # The judges' trust, read before the locks (it may run the analysis their cards come
    # from); the verdicts and tasks are compared under them.
    left_out = selectors.judges_left_out(scenario)
    with transaction.atomic():
        scenario = Scenario.objects.select_for_update().get(pk=scenario.pk)
        plan = BudgetPlan.objects.select_for_update().get(pk=plan.pk)
        plan.scenario = scenario
        _check_acceptable(user, plan, scenario, seen, left_out)
        start = scenario_selectors.next_task_position(scenario)
        specs, raters = _planned_tasks(scenario, plan)
        made = scenario_services.tasks_add(scenario=scenario, tasks=specs, start=start)
        by_rater: dict[str, list[int]] = defaultdict(list)
        for task, rater in zip(made, raters, strict=True):
            by_rater[rater].append(task.pk)
        runs = _run_judges(user, scenario, by_rater)
        plan.status = PlanStatus.ACCEPTED
        plan.accepted_at = timezone.now()
        plan.accepted_by = user
        plan.submitted = {"tasks": dict(by_rater), "judge_runs": runs}
        plan.save(update_fields=["status", "accepted_at", "accepted_by", "submitted"])
        audit.record(
            user=user,
            team=scenario.team_id,
            action="evaluations.plan.accept",
            target=scenario,
            plan=plan.pk,
            tasks=len(made),
        )
    return plan
