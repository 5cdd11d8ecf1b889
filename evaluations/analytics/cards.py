"""Judge cards and trust gates: the ``judge_cards`` part of a scenario's analytics
(docs/analytics.md, "Judge cards" and "Trust gates").

A card is one judge configuration: a judge (its prompt version, model, thinking and other
parameters) at one of its temperatures. It holds, from that configuration's valid verdicts
and unparseable replies: the chance-corrected agreement with the people's judgments on the
items both judged (Cohen's kappa and Krippendorff's alpha with bootstrap intervals, the
number of shared items and the base rates of the people's answers there), the agreement
with the adjudicated answers, the position-swap flip rate, the self-consistency of repeated
calls, self-preference for outputs of the judge's own model family, the parse-failure rate,
the cost per judgment, and whether the thinking it asked for was honoured (reasoning tokens
the provider reported). It records what it was measured with (``measured_with``: the
configuration each judge run recorded when it started, and the model snapshots the provider
reported), and is ``stale`` when the judge's configuration now differs.

``trust`` holds a card to its scenario's gate (``gate_for``: the scenario's own
``TrustGate``, else its team's default ``TeamTrustGate``); a card below it is untrusted,
and its verdicts are left out of the rankings unless a manager opted in (the gate's
``include_untrusted``, or the judge's).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from evalplatform.providers.llm import kinds
from evaluations.analytics import stats, style
from evaluations.analytics.adjudicated import held_to
from evaluations.analytics.agreement import Bootstrap, Reading, names_of, unit_values, versus
from evaluations.analytics.agreement_stats import rounded
from evaluations.analytics.data import AnalysisData, Row
from evaluations.analytics.data import gate_for as gate_for  # the gate a scenario holds to
from evaluations.analytics.judge_config import (
    configuration as configuration,
)
from evaluations.analytics.judge_config import (
    current_fingerprint,
    measured_with,
    reasoning,
)
from evaluations.analytics.judge_config import (
    fingerprint as fingerprint,
)
from evaluations.analytics.judge_config import (
    thinking_setting as thinking_setting,
)
from evaluations.analytics.models import GateThresholds, TeamTrustGate
from evaluations.judgments.models import LLMJudge, RaterKind
from scenarios.types import registry
from scenarios.types.base import ScenarioKind

MAX_RESAMPLES = 1000  # the bootstrap resamples of a card's agreement intervals, at most
GATE_FIELDS = (
    "min_kappa",
    "min_shared_items",
    "max_flip_rate",
    "max_parse_failure_rate",
    "min_self_consistency",
    "min_adjudicated_accuracy",
)


# --- the figures --------------------------------------------------------------------------------
def _winner(row: Row, answers_of: ScenarioKind) -> Any:
    """A comparison's winning variant, or "tie" (the scenario type's ``answer_value``)."""
    found = answers_of.answer_value(row.payload, row.presented)
    return "tie" if found is None else found


def _verdict(row: Row, answers_of: ScenarioKind) -> str:
    """A verdict as one value, whatever the order it was shown in (self-consistency): the
    scenario type's ``answer_value``."""
    return json.dumps(answers_of.answer_value(row.payload, row.presented), sort_keys=True)


def _share(k: int, n: int) -> dict[str, Any]:
    """k of n with the exact (Clopper-Pearson) 95% interval of the share."""
    found = stats.binomial(k, n)
    return {
        "n": n,
        "k": k,
        "rate": rounded(found["share"]),
        "ci_low": rounded(found["ci_low"]),
        "ci_high": rounded(found["ci_high"]),
    }


def flip_rate(rows: list[Row], answers_of: ScenarioKind) -> dict[str, Any] | None:
    """Pairs of verdicts on the same two variants in both orders (same repetition and
    temperature): the share whose winner changed with the order. A pair is the judge's own
    position swap (one task asked in both orders) or the design's reversal (a task and the
    task that mirrors it, ``reverse_of``): own swaps are paired first, then the verdicts
    left in either order, oldest first; the counts of each are given. None without such
    pairs (or for a type whose tasks are no pairs)."""
    if not answers_of.is_pairwise:
        return None
    orders: dict[tuple, tuple[list[Row], list[Row]]] = defaultdict(lambda: ([], []))
    for row in rows:
        if len(row.presented) != 2:
            continue
        u, v = row.presented
        key = (row.repetition, row.temperature, min(u, v), max(u, v))
        orders[key][0 if u < v else 1].append(row)
    own: list[tuple[Row, Row]] = []
    design: list[tuple[Row, Row]] = []
    for forward, backward in orders.values():
        left_forward, left_backward = [], list(backward)
        for row in forward:
            mate = next((r for r in left_backward if r.task == row.task), None)
            if mate is None:
                left_forward.append(row)
            else:
                left_backward.remove(mate)
                own.append((row, mate))
        design += list(zip(left_forward, left_backward, strict=False))
    pairs = own + design
    if not pairs:
        return None
    flips = sum(_winner(one, answers_of) != _winner(other, answers_of) for one, other in pairs)
    return {
        "pairs": len(pairs),
        "flips": flips,
        "own_swaps": len(own),
        "design_reversals": len(design),
    } | _share(flips, len(pairs))


def self_consistency(rows: list[Row], answers_of: ScenarioKind) -> dict[str, Any] | None:
    """Repeated calls (the same task in the same order at the same temperature): the share
    of such groups whose calls all gave the same verdict. None without repeated calls."""
    groups: dict[tuple, list[str]] = defaultdict(list)
    for row in rows:
        groups[(row.task, row.swapped)].append(_verdict(row, answers_of))
    repeated = [v for v in groups.values() if len(v) >= 2]
    if not repeated:
        return None
    same = sum(len(set(v)) == 1 for v in repeated)
    return {"groups": len(repeated), "identical": same} | _share(same, len(repeated))


def self_preference(
    rows: list[Row],
    people: list[Row],
    family: str | None,
    families: Mapping[int, str | None],
    answers_of: ScenarioKind,
) -> dict[str, Any] | None:
    """Comparisons of an output of the judge's model family with one of another: the share
    the judge's family won (ties as halves), and the people's on comparisons of the same
    kind. None when the family is unknown or no such comparison was judged."""
    if family is None or not answers_of.is_pairwise:
        return None

    def won(subset: Iterable[Row]) -> tuple[int, float]:
        n, wins = 0, 0.0
        for row in subset:
            if len(row.presented) != 2:
                continue
            own = [families.get(pk) == family for pk in row.presented]
            if own[0] == own[1]:
                continue
            n += 1
            winner = _winner(row, answers_of)
            wins += 0.5 if winner == "tie" else float(winner == row.presented[own.index(True)])
        return n, wins

    n, wins = won(rows)
    if n == 0:
        return None
    m, people_wins = won(people)
    share = wins / n
    theirs = people_wins / m if m else None
    return {
        "family": family,
        "comparisons": n,
        "own_family_win_share": rounded(share),
        "people_comparisons": m,
        "people_own_family_win_share": rounded(theirs),
        "difference": rounded(share - theirs) if theirs is not None else None,
    }


def _base_rates(
    people_units: Mapping[Any, Mapping[str, list]], judged_units: Mapping[Any, Any]
) -> dict[str, float]:
    """The people's majority answers on the units both judged, as shares (the agreement a
    judge that always gave one answer would get with them)."""
    found: Counter[str] = Counter()
    for unit in judged_units:
        if unit not in people_units:
            continue
        counts = Counter(str(v) for vs in people_units[unit].values() for v in vs).most_common()
        if counts and (len(counts) == 1 or counts[0][1] > counts[1][1]):
            found[counts[0][0]] += 1
    total = sum(found.values())
    return {k: rounded(v / total) for k, v in sorted(found.items())} if total else {}


def human_agreement(
    rows: list[Row],
    people_units: Mapping[str | None, dict[Any, dict[str, list]]],
    reading: Reading,
    config: dict,
    boot: Bootstrap,
    names: Mapping[int, str],
) -> dict[str, Any]:
    """The card's agreement with the people. Verdicts and labels: Cohen's kappa and
    nominal Krippendorff's alpha of the people's majority against each of the judge's
    verdicts on the shared items (every item both judged). Scores: per dimension the
    quadratic-weighted kappa and the interval alpha of the means; the card's figures are its
    weakest dimension's."""
    empty: dict[str, Any] = {
        "shared_items": 0,
        "kappa": None,
        "kappa_ci": None,
        "alpha": None,
        "alpha_ci": None,
        "base_rate": None,
        "base_rates": {},
    }
    if reading.scored:
        by_dimension = {}
        for dim in config.get("dimensions", []):
            name = dim["name"]
            judged = unit_values(rows, reading, name, names)
            found = versus(people_units.get(name, {}), judged, scored=True, boot=boot)
            by_dimension[name] = {
                "shared_items": found["units"],
                "kappa": found.get("cohen_kappa_weighted"),
                "kappa_ci": found.get("cohen_kappa_weighted_ci"),
                "alpha": found.get("krippendorff_alpha_interval"),
                "alpha_ci": found.get("krippendorff_alpha_interval_ci"),
            }
        measured = [d for d in by_dimension.values() if d["kappa"] is not None]
        weakest = min(measured, key=lambda d: d["kappa"]) if measured else None
        shared = min((d["shared_items"] for d in by_dimension.values()), default=0)
        return (
            empty
            | ({k: v for k, v in weakest.items() if k != "shared_items"} if weakest else {})
            | {"shared_items": shared, "metric": "quadratic", "by_dimension": by_dimension}
        )
    judged = unit_values(rows, reading, None, names)
    units = people_units.get(None, {})
    if not judged:
        return empty | {"metric": "nominal"}
    # Per verdict: a judge that contradicts itself between orders (a position push) counts
    # the disagreement, where a most frequent verdict would drop the item and so reward it.
    found = versus(units, judged, scored=False, boot=boot, per_verdict=True)
    rates = _base_rates(units, judged)
    return {
        "shared_items": found["units"],
        "verdicts": found["verdicts"],
        "kappa": found.get("cohen_kappa"),
        "kappa_ci": found.get("cohen_kappa_ci"),
        "alpha": found.get("krippendorff_alpha_nominal"),
        "alpha_ci": found.get("krippendorff_alpha_nominal_ci"),
        "base_rate": max(rates.values()) if rates else None,
        "base_rates": rates,
        "agreement": found.get("agreement_with_human_majority"),
        "metric": "nominal",
    }


# --- the cards ----------------------------------------------------------------------------------
def judge_cards(
    loaded: AnalysisData,
    reading: Reading,
    options: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """One card per judge and temperature its verdicts or failures were made at, in the
    order of the judges (then temperatures)."""
    if not loaded.judges:
        return []
    scenario, config = loaded.scenario, loaded.scenario.config
    answers_of = registry.of(scenario)  # the scenario type: what its answers mean
    boot = Bootstrap(
        min(int(options.get("resamples") or 0), MAX_RESAMPLES), int(options.get("seed") or 0)
    )
    names = names_of(loaded.variants)
    people = [r for r in loaded.rows if r.kind != RaterKind.JUDGE]
    dimensions: list[str | None] = (
        [d["name"] for d in config.get("dimensions", [])] if reading.scored else [None]
    )
    people_units = {d: unit_values(people, reading, d, names) for d in dimensions}
    families = {
        pk: style.family(
            loaded.sources.get(pk, ("", ""))[0],
            v.model_label,
            kind=loaded.sources.get(pk, ("", ""))[1] or None,
        )
        for pk, v in loaded.variants.items()
    }
    by_config: dict[tuple[int, float | None], list[Row]] = defaultdict(list)
    for row in loaded.rows:
        if row.judge is not None:
            by_config[(row.judge, row.temperature)].append(row)
    cards = []
    for judge in loaded.judges:
        config_now = configuration(judge)
        asked = kinds.reasoning_in(judge.llm_model.connection.kind, judge.params or {})
        temperatures = {t for (j, t) in by_config if j == judge.pk}
        temperatures |= {t for (j, t) in loaded.failures if j == judge.pk}
        family = style.family(
            judge.llm_model.model_id,
            judge.llm_model.display_name,
            kind=judge.llm_model.connection.kind,
        )
        for temperature in sorted(temperatures, key=lambda t: (t is not None, t or 0)):
            rows = by_config.get((judge.pk, temperature), [])
            failed = loaded.failures.get((judge.pk, temperature), 0)
            calls = len(rows) + failed
            measured = measured_with(rows, loaded.run_configurations, config_now, temperature)
            now = current_fingerprint(judge, temperature)
            preference = self_preference(rows, people, family, families, answers_of)
            card: dict[str, Any] = {
                "judge": judge.pk,
                "name": judge.name,
                "temperature": temperature,
                "model": judge.llm_model.model_id,
                "prompt": config_now["prompt"],
                "thinking": config_now["thinking"],
                "params": config_now["params"],
                "measured_with": measured,
                "current_fingerprint": now,
                "stale": any(f != now for f in measured["fingerprints"]),
                "judgments": len(rows),
                "calls": calls,
                "human_agreement": human_agreement(rows, people_units, reading, config, boot, names)
                | {"humans_blind": scenario.blind},
                "adjudicated": held_to(answers_of, rows, loaded.adjudications, config),
                "flip_rate": flip_rate(rows, answers_of),
                "self_consistency": self_consistency(rows, answers_of),
                "self_preference": preference,
                "parse_failures": _parse_failures(calls, failed),
                "cost": _cost(rows),
                "reasoning": reasoning(rows, config_now["thinking"], asked),
            }
            cards.append(card)
    return cards


def _parse_failures(calls: int, failed: int) -> dict[str, Any]:
    return {"calls": calls, "failures": failed, "rate": rounded(failed / calls) if calls else None}


def _cost(rows: list[Row]) -> dict[str, Any]:
    """The configuration's spend, in all and per judgment."""
    spent = sum((r.cost or Decimal(0) for r in rows), Decimal(0))
    return {
        "total_usd": rounded(float(spent)),
        "per_judgment_usd": rounded(float(spent) / len(rows)) if rows else None,
    }


# --- trust --------------------------------------------------------------------------------------
def source_of(gate: GateThresholds | None) -> str | None:
    """Which gate it is: "scenario", "team", or None without one."""
    if gate is None:
        return None
    return "team" if isinstance(gate, TeamTrustGate) else "scenario"


def gate_of(gate: GateThresholds | None) -> dict[str, Any] | None:
    """A gate's thresholds, its opt-in for every judge, and its ``source`` (the
    scenario's own or the team's default), as the JSON shows them."""
    if gate is None:
        return None
    return {name: getattr(gate, name) for name in GATE_FIELDS} | {
        "include_untrusted": gate.include_untrusted,
        "source": source_of(gate),
    }


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def trust(card: Mapping[str, Any], gate: Mapping[str, Any] | None, *, judge_opt_in: bool) -> dict:
    """A card held to a gate: ``state`` ("trusted", "untrusted", or "ungated" without a
    gate), the ``reasons`` it is untrusted, the thresholds it could not be held to for want
    of data (``unchecked``), and whether its verdicts count in the rankings (and by whose
    opt-in when untrusted). Agreement with people is required: without shared items or a
    kappa, a gate on it is failed; the other figures are checked where they were measured."""
    if gate is None:
        return {
            "state": "ungated",
            "reasons": [],
            "unchecked": [],
            "counted_in_rankings": True,
            "opt_in": None,
        }
    reasons: list[str] = []
    unchecked: list[str] = []
    people = card.get("human_agreement") or {}
    shared = people.get("shared_items") or 0
    if gate.get("min_shared_items") and shared < gate["min_shared_items"]:
        reasons.append(
            f"{shared} item(s) shared with people; the gate asks for {gate['min_shared_items']}."
        )
    if gate.get("min_kappa") is not None:
        kappa = people.get("kappa")
        if kappa is None:
            reasons.append("No kappa with people (no shared items, or one answer only).")
        elif kappa < gate["min_kappa"]:
            reasons.append(f"Kappa with people {_fmt(kappa)} is below {_fmt(gate['min_kappa'])}.")

    def ceiling(key: str, figure: Mapping[str, Any] | None, field: str, what: str) -> None:
        limit = gate.get(key)
        if limit is None:
            return
        value = (figure or {}).get(field)
        if value is None:
            unchecked.append(key)
        elif value > limit:
            reasons.append(f"{what} {_fmt(value)} is above {_fmt(limit)}.")

    def floor(key: str, value: float | None, what: str) -> None:
        limit = gate.get(key)
        if limit is None:
            return
        if value is None:
            unchecked.append(key)
        elif value < limit:
            reasons.append(f"{what} {_fmt(value)} is below {_fmt(limit)}.")

    ceiling("max_flip_rate", card.get("flip_rate"), "rate", "Position-swap flip rate")
    ceiling("max_parse_failure_rate", card.get("parse_failures"), "rate", "Parse-failure rate")
    floor(
        "min_self_consistency",
        (card.get("self_consistency") or {}).get("rate"),
        "Self-consistency",
    )
    floor(
        "min_adjudicated_accuracy",
        (card.get("adjudicated") or {}).get("accuracy"),
        "Accuracy on adjudicated answers",
    )
    if card.get("stale"):
        reasons.append("Measured with another configuration than the judge's now (stale).")
    untrusted = bool(reasons)
    opt_in = None
    if untrusted and gate.get("include_untrusted"):
        opt_in = gate.get("source") or "scenario"
    elif untrusted and judge_opt_in:
        opt_in = "judge"
    return {
        "state": "untrusted" if untrusted else "trusted",
        "reasons": reasons,
        "unchecked": unchecked,
        "counted_in_rankings": not untrusted or opt_in is not None,
        "opt_in": opt_in,
    }


def judge_trust(cards: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A judge's trust from its cards': untrusted when any of them is (its reasons named by
    temperature), ungated when there is no gate, else trusted; ``counted_in_rankings``
    when all its cards count."""
    cards = list(cards)
    if not cards:
        return {"state": "unmeasured", "reasons": [], "counted_in_rankings": True}
    states = {c["trust"]["state"] for c in cards}
    reasons = [
        f"At temperature {c['temperature']}: {reason}" if len(cards) > 1 else reason
        for c in cards
        for reason in c["trust"]["reasons"]
    ]
    state = (
        "untrusted" if "untrusted" in states else "ungated" if "ungated" in states else "trusted"
    )
    return {
        "state": state,
        "reasons": reasons,
        "counted_in_rankings": all(c["trust"]["counted_in_rankings"] for c in cards),
    }


def refresh(
    cards: list[dict[str, Any]],
    judges: Iterable[LLMJudge],
    gate: GateThresholds | None,
) -> list[dict[str, Any]]:
    """Stored cards as of now: ``stale`` against each judge's configuration now, and their
    trust under the gate and opt-ins now (a stored analysis keeps what it was computed
    with until it is recomputed). Cards of judges gone are left out."""
    found = {j.pk: j for j in judges}
    shown = gate_of(gate)
    out = []
    for card in cards:
        judge = found.get(int(card.get("judge") or 0))
        if judge is None:
            continue
        now = current_fingerprint(judge, card.get("temperature"))
        fresh = dict(card)
        fresh["current_fingerprint"] = now
        fresh["stale"] = any(f != now for f in card["measured_with"]["fingerprints"])
        fresh["trust"] = trust(fresh, shown, judge_opt_in=judge.include_untrusted)
        out.append(fresh)
    return out
