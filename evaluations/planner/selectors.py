"""Reads of the budget scheduler: a scenario's verdicts as the model's arrays (by entity:
the variants' models, or their variant ids when the variants name fewer than two models),
its items and pairs, what a task costs each rater, the fingerprint that makes a proposal
stale, and the stored proposals."""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db.models import Avg, Count, Max, QuerySet

from evalplatform.providers.estimate import CHARS_PER_TOKEN
from evaluations.analytics import data
from evaluations.analytics.cards import configuration, judge_trust
from evaluations.analytics.data import gate_for
from evaluations.analytics.trust import latest_cards, scenario_cards
from evaluations.judges import selectors as judge_selectors
from evaluations.judgments.models import Judgment, LLMJudge, ParseStatus, RaterKind
from evaluations.planner.design import HUMAN
from evaluations.planner.models import BudgetPlan
from scenarios.models import Scenario, Task, Variant
from scenarios.services import JUDGE_PROMPT_CHARS, JUDGE_REPLY_TOKENS

# People's time per judgment when the scenario has none timed yet (docs/analytics.md).
DEFAULT_SECONDS = 60.0


@dataclass
class JudgeCost:
    judge: LLMJudge
    verdicts_per_task: int
    usd_per_task: float
    measured: bool  # tokens from its own calls (else those of a typical call)
    mode: str  # how its tasks are sent: batch where its model has a batch API


@dataclass
class PlanningData:
    """What a proposal is computed from."""

    entities: list[str]
    # The verdicts: entity indices shown first and second, outcome (1 first won, 0.5 tie),
    # rater ("human" or "judge:<id>"), task id.
    first: np.ndarray
    second: np.ndarray
    outcome: np.ndarray
    rater: np.ndarray
    task: np.ndarray
    # Each entity pair (i < j) with the items where both have a variant: (item pk, item id,
    # variant of i, variant of j), and how many tasks each item's pair has already.
    pairs: dict[tuple[int, int], list[tuple[int, str, int, int]]] = field(default_factory=dict)
    tasks_per_pair_item: Counter[tuple[int, int, int]] = field(default_factory=Counter)
    seconds_per_judgment: float = DEFAULT_SECONDS
    seconds_measured: int = 0
    judges: list[JudgeCost] = field(default_factory=list)


def entity_names(variants: list[Variant]) -> dict[int, str]:
    """Each variant's entity: its model, or its variant id when the variants name fewer than
    two models (uploads without models)."""
    models = {v.model_label for v in variants if v.model_label}
    if len(models) >= 2:
        return {v.pk: v.model_label or "(none)" for v in variants}
    return {v.pk: v.variant_id for v in variants}


def entity_list(scenario: Scenario) -> list[str]:
    """The scenario's entities by name, sorted."""
    return sorted(set(entity_names(list(Variant.objects.filter(scenario=scenario))).values()))


def usable_judges(
    scenario: Scenario, left_out: list[dict[str, Any]] | None = None
) -> QuerySet[LLMJudge]:
    """The judges a proposal may use: those whose model is active and that are not
    untrusted under the scenario's trust gate (its own, else its team's), unless a manager
    opted in (the judge's ``include_untrusted`` or the gate's). ``judges_left_out`` says
    which are not, and why (``left_out``: its answer when the caller has it: it may run
    the analysis the judges' cards come from)."""
    if left_out is None:
        left_out = judges_left_out(scenario)
    untrusted = [row["judge"] for row in left_out if row["reason"] == "untrusted"]
    return (
        LLMJudge.objects.filter(scenario=scenario, llm_model__active=True)
        .exclude(pk__in=untrusted)
        .order_by("pk")
    )


NO_CARD = (
    "No judge card yet (no stored analysis holds its verdicts): under the gate a judge is "
    "planned for once its card passes, or when a manager opts it in."
)


def judges_left_out(scenario: Scenario) -> list[dict[str, Any]]:
    """The scenario's judges a proposal may not use, each with its ``reason``
    ("model_inactive"; "untrusted" with the gate's ``reasons``; "no_card"): the trust of the
    judge cards as the judge pages show them (``trust.scenario_cards``: the stored analysis
    of the default options, computed when small), else as the latest analysis stored with
    any options has them (a card does not depend on the options but for its intervals'
    resampling). Under a gate, a judge with no card at all is left out unless a manager
    opted it in (the judge's or the gate's ``include_untrusted``)."""
    _, stored = scenario_cards(scenario)
    found_cards = stored if stored is not None else latest_cards(scenario)
    gate = gate_for(scenario)
    gate_opt_in = bool(gate is not None and gate.include_untrusted)
    found: list[dict[str, Any]] = []
    rows = LLMJudge.objects.filter(scenario=scenario).order_by("pk")
    for pk, name, active, opted in rows.values_list(
        "pk", "name", "llm_model__active", "include_untrusted"
    ):
        mine = [c for c in found_cards if c["judge"] == pk]
        held = judge_trust(mine) if mine else {}
        if not active:
            found.append({"judge": pk, "name": name, "reason": "model_inactive", "reasons": []})
        elif held.get("state") == "untrusted" and not held.get("counted_in_rankings"):
            reasons = list(held.get("reasons") or [])
            found.append({"judge": pk, "name": name, "reason": "untrusted", "reasons": reasons})
        elif not mine and gate is not None and not (opted or gate_opt_in):
            found.append({"judge": pk, "name": name, "reason": "no_card", "reasons": [NO_CARD]})
    return found


def fingerprint(scenario: Scenario, left_out: list[dict[str, Any]] | None = None) -> str:
    """What a proposal is computed from: the valid verdicts (count, newest), the tasks
    (count, newest), and the judges: each one's configuration (``cards.configuration``:
    model, prompt, parameters, temperatures, repetitions, both orders), its model's prices,
    and whether a proposal may use it (trust, an active model). Any change makes a stored
    proposal stale: accepting it would run work at a cost or by a judge it never priced."""
    verdicts = data.judgments(scenario).aggregate(n=Count("pk"), last=Max("pk"))
    tasks = Task.objects.filter(scenario=scenario).aggregate(n=Count("pk"), last=Max("pk"))
    if left_out is None:
        left_out = judges_left_out(scenario)
    reasons = {row["judge"]: row["reason"] for row in left_out}
    judges = [
        (
            judge.pk,
            configuration(judge),
            str(judge.llm_model.input_price_per_mtok),
            str(judge.llm_model.output_price_per_mtok),
            str(judge.llm_model.batch_discount),
            judge.llm_model.supports_batch,
            reasons.get(judge.pk),
        )
        for judge in LLMJudge.objects.filter(scenario=scenario)
        .select_related("llm_model__connection", "prompt_version__template")
        .order_by("pk")
    ]
    text = json.dumps(judges, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"v{verdicts['n']}:{verdicts['last'] or 0}/t{tasks['n']}:{tasks['last'] or 0}/j{digest}"


def verdict_count(scenario: Scenario) -> int:
    return data.judgments(scenario).exclude(parse_status=ParseStatus.FAILED).count()


def planning_data(scenario: Scenario, left_out: list[dict[str, Any]] | None = None) -> PlanningData:
    variants = list(
        Variant.objects.filter(scenario=scenario)
        .select_related("item")
        .order_by("item__position", "position")
    )
    entity_of_variant = entity_names(variants)
    entities = sorted(set(entity_of_variant.values()))
    index = {name: n for n, name in enumerate(entities)}
    var_entity = {pk: index[name] for pk, name in entity_of_variant.items()}

    # Pairs of entities within each item (the first variant of each entity in the item).
    pairs: dict[tuple[int, int], list[tuple[int, str, int, int]]] = defaultdict(list)
    by_item: dict[int, dict[int, int]] = defaultdict(dict)
    item_name: dict[int, str] = {}
    for v in variants:
        by_item[v.item_id].setdefault(var_entity[v.pk], v.pk)
        item_name[v.item_id] = v.item.item_id
    for item, members in by_item.items():
        ordered = sorted(members.items())
        for n, (ei, vi) in enumerate(ordered):
            for ej, vj in ordered[n + 1 :]:
                pairs[(ei, ej)].append((item, item_name[item], vi, vj))

    counts: Counter[tuple[int, int, int]] = Counter()
    for item, a, b in Task.objects.filter(scenario=scenario, variant_b__isnull=False).values_list(
        "item_id", "variant_a_id", "variant_b_id"
    ):
        ea, eb = var_entity.get(a), var_entity.get(b)
        if ea is not None and eb is not None and ea != eb and item is not None:
            counts[(min(ea, eb), max(ea, eb), item)] += 1

    rows, _ = data.verdicts(scenario)
    first, second, outcome, rater, task = [], [], [], [], []
    scores = {"A": 1.0, "B": 0.0}
    for row in rows:
        if len(row.presented) != 2:
            continue
        x, y = var_entity.get(row.presented[0]), var_entity.get(row.presented[1])
        if x is None or y is None or x == y:
            continue
        first.append(x)
        second.append(y)
        outcome.append(scores.get(str(row.payload.get("winner")), 0.5))
        rater.append(f"judge:{row.judge}" if row.kind == RaterKind.JUDGE else HUMAN)
        task.append(row.task)

    timed = [
        ms
        for ms in data.judgments(scenario)
        .filter(rater_kind=RaterKind.HUMAN, time_spent_ms__isnull=False, time_spent_ms__gt=0)
        .order_by("-pk")
        .values_list("time_spent_ms", flat=True)[:5000]
        if ms is not None
    ]
    found = PlanningData(
        entities=entities,
        first=np.array(first, int),
        second=np.array(second, int),
        outcome=np.array(outcome, float),
        rater=np.array(rater, dtype=object),
        task=np.array(task, int),
        pairs=dict(pairs),
        tasks_per_pair_item=counts,
        seconds_per_judgment=statistics.median(timed) / 1000 if timed else DEFAULT_SECONDS,
        seconds_measured=len(timed),
        judges=judge_costs(scenario, variants, left_out),
    )
    return found


def judge_costs(
    scenario: Scenario, variants: list[Variant], left_out: list[dict[str, Any]] | None = None
) -> list[JudgeCost]:
    """Each usable judge (its model active) of the scenario, with its verdicts per task, the
    mode its tasks are sent in (batch where its model has a batch API) and the cost of a
    task: its model's prices in that mode x the typical tokens of a call x its calls per
    task. Typical tokens: the mean of its calls so far; before it has run, the default judge
    prompt with two outputs of the scenario's mean length (one token per four characters)
    and a 150-token reply."""
    judges = usable_judges(scenario, left_out).select_related("llm_model__connection")
    mean_variant = sum(len(v.content) for v in variants) / max(1, len(variants))
    guessed_input = math.ceil((JUDGE_PROMPT_CHARS + 2 * mean_variant) / CHARS_PER_TOKEN)
    tokens = {
        row["judge_id"]: row
        for row in Judgment.objects.filter(judge__scenario=scenario, output__isnull=False)
        .values("judge_id")
        .annotate(
            calls=Count("pk"),
            input=Avg("output__input_tokens"),
            output=Avg("output__output_tokens"),
        )
    }
    found = []
    for judge in judges.order_by("pk"):
        calls = judge.repetitions * max(1, len(judge.temperatures or [0.0]))
        calls *= 2 if judge.swap else 1
        mode = "batch" if judge_selectors.batch_capable(judge) else judge.mode
        seen = tokens.get(judge.pk)
        measured = bool(seen and seen["calls"] and (seen["input"] or seen["output"]))
        input_tokens = round(seen["input"] or 0) if measured and seen else guessed_input
        output_tokens = round(seen["output"] or 0) if measured and seen else JUDGE_REPLY_TOKENS
        per_call = float(
            judge.llm_model.cost_usd(input_tokens, output_tokens, batch=mode == "batch")
        )
        found.append(JudgeCost(judge, calls, per_call * calls, measured, mode))
    return found


def plans(scenario: Scenario) -> QuerySet[BudgetPlan]:
    return BudgetPlan.objects.filter(scenario=scenario).select_related("created_by")


def latest_plan(scenario: Scenario) -> BudgetPlan | None:
    return plans(scenario).order_by("-created_at", "-pk").first()


def plan_of(scenario: Scenario, pk: int) -> BudgetPlan | None:
    return plans(scenario).filter(pk=pk).first()
