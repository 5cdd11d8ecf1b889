"""The judge comparison table (``judges`` of the analytics): every judge configuration on
a scenario with its figures overall and at each temperature, its accuracy on the
adjudicated answers and its trust.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from evaluations.analytics import cards
from evaluations.analytics.common import Analysis
from evaluations.analytics.data import AnalysisData, Row
from evaluations.analytics.stats import rounded as _round
from evaluations.judgments.models import LLMJudge, RaterKind


def _setting(judge: LLMJudge, mine: list[Row], failed: int) -> dict[str, Any]:
    """A judge's configuration, how many judgments it made and failed, and their cost."""
    calls = len(mine) + failed
    spent = sum((r.cost or Decimal(0) for r in mine), Decimal(0))
    return {
        "judge": judge.pk,
        "name": judge.name,
        "model": judge.llm_model.model_id,
        "params": judge.params,
        "thinking": cards.thinking_setting(judge.params),
        "prompt": f"{judge.prompt_version.template.name} v{judge.prompt_version.number}",
        "temperatures": judge.temperatures,
        "repetitions": judge.repetitions,
        "swap": judge.swap,
        "judgments": len(mine),
        "parse_failures": failed,
        "parse_failure_share": _round(failed / calls) if calls else None,
        "cost_per_judgment_usd": _round(float(spent) / len(mine)) if mine else None,
    }


def judges_table(
    loaded: AnalysisData,
    analysis: Analysis,
    options: dict[str, Any],
    *,
    held: Mapping[str, Any],
    judge_cards: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Every judge configuration on the scenario (prompt version, model, thinking and other
    parameters), with its figures overall and at each temperature (``by_temperature``),
    its figures on the adjudicated answers (``held``, ``adjudicated.adjudicated`` of every
    rater) and its trust from its cards."""
    rows, config = loaded.rows, loaded.scenario.config
    people = [r for r in rows if r.kind != RaterKind.JUDGE]
    adjudicated = {entry["rater"]: entry for entry in held["by_rater"]}
    table = []
    for judge in loaded.judges:
        mine = [r for r in rows if r.judge == judge.pk]
        temperatures = sorted({r.temperature for r in mine}, key=lambda t: t or 0)
        accuracy = adjudicated.get(f"judge:{judge.name}", {})
        table.append(
            _setting(judge, mine, loaded.unparseable.get(judge.pk, 0))
            | analysis.judge_figures(mine, people, config, options)
            | {
                "by_temperature": [
                    {"temperature": t, "judgments": len(at)}
                    | analysis.judge_figures(at, people, config, options)
                    for t in temperatures
                    if (at := [r for r in mine if r.temperature == t])
                ],
                "adjudicated_n": accuracy.get("n", 0),
                "adjudicated_accuracy": accuracy.get("accuracy"),
                "trust": cards.judge_trust(c for c in judge_cards if c["judge"] == judge.pk),
            }
        )
    return table
