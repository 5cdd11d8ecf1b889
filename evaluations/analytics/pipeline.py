"""The computation of a scenario's analytics as named steps (``run``), each a function of
the loaded data and the steps before it, into one typed result (``Analyzed``) that is the
analytics JSON (``Analyzed.as_dict``).

The steps, in order: the options and the rows each part reads (``select``); every judge
configuration's card held to the scenario's trust gate (``judge_trust``); the type's
sections from the rows the gate counts; people's and judges' verdicts in one model; the
cards with the joint model's self-preference effects; repeat-call stability; agreement;
the adjudicated answers and the judge table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evaluations.analytics import cards
from evaluations.analytics.adjudicated import adjudicated
from evaluations.analytics.agreement import agreement
from evaluations.analytics.common import (
    DEFAULTS,
    ELO_ROUNDS,
    Analysis,
    rater_filter,
    stability,
    whose,
)
from evaluations.analytics.data import AnalysisData, Row
from evaluations.analytics.judge_table import judges_table
from evaluations.judgments.models import RaterKind
from scenarios.types import registry

Progress = Callable[[str, float], None]  # (what is being computed, share done so far)

# The keys of the analytics JSON up to the trust block, in the order stored analyses have
# always had them (a type's sections not named here follow, then agreement, the judge table
# and the adjudicated answers). The sections a scenario's type has none of are None.
LAYOUT = (
    "win_matrix",
    "bradley_terry",
    "elo",
    "position_bias",
    "reverse_consistency",
    "by_model",
    "by_prompt",
    "by_configuration",
    "ratings",
    "stability",
    "rankings",
    "labels",
    "joint_model",
    "judge_cards",
    "trust",
)


@dataclass(frozen=True)
class Selection:
    """The rows each part of the analysis reads."""

    # The filter's rows: the rankings and the type's other sections (those the gate counts).
    rows: list[Row]
    # Stability: each judge's, whatever the filter (a judge filter narrows them to its own).
    judged: list[Row]
    # Agreement and the joint model: the people's, and the judges' of ``judged``.
    among: list[Row]


@dataclass(frozen=True)
class Trust:
    """Every judge configuration's card held to the scenario's trust gate: the verdicts of
    an untrusted one (no manager opted in) are left out of the rankings and the joint
    model, never out of the agreement, the stability or the cards."""

    cards: list[dict[str, Any]]  # each with its ``trust``
    gate: dict[str, Any] | None
    left_out: frozenset[tuple[int, float | None]]  # (judge, temperature) not counted

    def counted(self, row: Row) -> bool:
        """Whether a row counts in the rankings and the joint model."""
        return row.judge is None or (row.judge, row.temperature) not in self.left_out

    def block(self, rows: list[Row], ranked: list[Row]) -> dict[str, Any]:
        """The ``trust`` part of the analytics: the gate and the judges left out."""
        return {
            "gate": self.gate,
            "excluded": [
                {"judge": c["judge"], "name": c["name"], "temperature": c["temperature"]}
                for c in self.cards
                if not c["trust"]["counted_in_rankings"]
            ],
            "judgments_excluded": len(rows) - len(ranked),
        }


@dataclass(frozen=True)
class Analyzed:
    """A scenario's analytics, every part computed."""

    scenario: dict[str, Any]
    raters: dict[str, Any]
    options: dict[str, Any]
    sections: dict[str, Any]  # the type's (``Analysis.results``)
    joint_model: dict[str, Any] | None
    judge_cards: list[dict[str, Any]]
    trust: dict[str, Any]
    stability: list[dict[str, Any]]
    agreement: dict[str, Any]
    judges: list[dict[str, Any]]
    adjudicated: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """The analytics JSON."""
        own = {
            "stability": self.stability,
            "joint_model": self.joint_model,
            "judge_cards": self.judge_cards,
            "trust": self.trust,
        }
        laid = {key: own[key] if key in own else self.sections.get(key) for key in LAYOUT}
        return {
            "scenario": self.scenario,
            "raters": self.raters,
            "options": self.options,
            **laid,
            **{key: value for key, value in self.sections.items() if key not in laid},
            "agreement": self.agreement,
            "judges": self.judges,
            "adjudicated": self.adjudicated,
        }


# --- the steps ----------------------------------------------------------------------------------
def options_of(given: dict[str, Any]) -> dict[str, Any]:
    """The options given (None: not given) over the defaults."""
    return DEFAULTS | {k: v for k, v in given.items() if v is not None}


def select(loaded: AnalysisData, raters: str) -> Selection:
    """The rows of a rater filter ("all", "humans", "judges", "judge:<id>")."""
    keep = rater_filter(raters)
    everything = loaded.rows
    rows = [r for r in everything if keep(r)]
    judged = rows if raters.startswith("judge") else everything
    people = [r for r in everything if r.kind != RaterKind.JUDGE]
    return Selection(
        rows=rows, judged=judged, among=people + [r for r in judged if r.kind == RaterKind.JUDGE]
    )


def judge_trust(loaded: AnalysisData, analysis: Analysis, options: dict[str, Any]) -> Trust:
    """Every judge configuration's card (``cards.judge_cards``) with its trust."""
    gate = cards.gate_of(loaded.gate)
    opted = {j.pk: j.include_untrusted for j in loaded.judges}
    held = [
        card | {"trust": cards.trust(card, gate, judge_opt_in=opted.get(card["judge"], False))}
        for card in cards.judge_cards(loaded, analysis, options)
    ]
    left_out = frozenset(
        (c["judge"], c["temperature"]) for c in held if not c["trust"]["counted_in_rankings"]
    )
    return Trust(cards=held, gate=gate, left_out=left_out)


def raters_block(
    raters: str, loaded: AnalysisData, rows: list[Row], ranked: list[Row]
) -> dict[str, Any]:
    """The ``raters`` part: the filter, whose judgments it keeps, how many, by whom."""
    return {
        "filter": raters,
        "label": whose(raters, loaded.judges),
        "judgments": len(rows),
        "by_rater": dict(sorted(Counter(r.rater for r in rows).items())),
        "judgments_in_rankings": len(ranked),
    }


def with_joint_effects(
    judge_cards: list[dict[str, Any]], joint_model: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The cards, each judge's self-preference with its effect in the joint model
    (``joint_model_effect``) where both were measured."""
    effects = {
        e["rater"]: e
        for e in (joint_model or {}).get("effects", [])
        if e["effect"] == "self_preference"
    }
    out = []
    for card in judge_cards:
        effect = effects.get(f"judge:{card['name']}")
        if card["self_preference"] is not None and effect is not None:
            joint = {k: effect.get(k) for k in ("estimate", "ci_low", "ci_high")}
            card = card | {
                "self_preference": card["self_preference"] | {"joint_model_effect": joint}
            }
        out.append(card)
    return out


def run(
    loaded: AnalysisData,
    *,
    raters: str,
    analysis: Analysis,
    progress: Progress,
    options: dict[str, Any],
) -> Analyzed:
    """Every step, in order, telling ``progress`` what it computes and how far it got."""
    options = options_of(options)
    scenario, variants, config = loaded.scenario, loaded.variants, loaded.scenario.config
    selected = select(loaded, raters)
    scenario_kind = registry.of(scenario)
    progress("judge cards and trust", 0.05)
    trust = judge_trust(loaded, analysis, options)
    ranked = [r for r in selected.rows if trust.counted(r)]
    progress("strengths, rankings and bootstrap intervals", 0.1)
    sections = analysis.results(ranked, variants, config, options)
    progress("people and judges in one model", 0.5)
    joint = analysis.joint_model([r for r in selected.among if trust.counted(r)], loaded, options)
    judge_cards = with_joint_effects(trust.cards, joint)
    progress("repeat-call stability", 0.6)
    stable = stability(selected.judged, config, analysis)
    progress("agreement between raters", 0.65)
    agreed = agreement(selected.among, analysis, config, variants, options)
    progress("the judges compared", 0.9)
    # Every rater held to the adjudicated answers, whatever the filter; each judge's
    # figures also in its row of the judge table.
    held = adjudicated(scenario_kind, loaded.rows, loaded.adjudications, config)
    judges = judges_table(loaded, analysis, options, held=held, judge_cards=judge_cards)
    return Analyzed(
        scenario={"id": scenario.pk, "name": scenario.name, "type": scenario.type},
        raters=raters_block(raters, loaded, selected.rows, ranked),
        options=options | {"elo_rounds": ELO_ROUNDS},
        sections=sections,
        joint_model=joint,
        judge_cards=judge_cards,
        trust=trust.block(selected.rows, ranked),
        stability=stable,
        agreement=agreed,
        judges=judges,
        adjudicated=held,
    )
