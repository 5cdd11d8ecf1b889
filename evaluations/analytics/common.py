"""What every analysis type shares: the options' defaults, the rater filters and their
words, how an output is named and grouped (by model, prompt, configuration), the table of
strengths with intervals and ranks, and ``Analysis``, the base of the types' analyses
(``pairwise``, ``ratings``, ``rankings``, ``labels``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from evalplatform import validation
from evaluations.analytics import stats
from evaluations.analytics.data import AnalysisData, Row
from evaluations.analytics.stats import rounded as _round
from evaluations.judgments.models import LLMJudge, RaterKind
from scenarios.models import Variant

DEFAULTS = {"resamples": 1000, "seed": 0, "elo_k": 4.0, "elo_order": "chronological"}
ELO_ROUNDS = 100


# --- whose judgments ----------------------------------------------------------------------------
def rater_filter(raters: str) -> Callable[[Row], bool]:
    """The judgments a filter keeps: "all", "humans", "judges" or "judge:<id>"."""
    if raters == "all":
        return lambda r: True
    if raters == "humans":
        return lambda r: r.kind != RaterKind.JUDGE
    if raters == "judges":
        return lambda r: r.kind == RaterKind.JUDGE
    if raters.startswith("judge:") and validation.digits(raters[6:]) is not None:
        wanted = int(raters[6:])
        return lambda r: r.judge == wanted
    raise ValueError(raters)


def whose(raters: str, judges: Iterable[LLMJudge]) -> str:
    """Whose judgments a filter keeps, in words (every table says it)."""
    if raters == "humans":
        return "people's judgments (evaluators and imported raters)"
    if raters == "judges":
        return "the LLM judges' judgments"
    if raters.startswith("judge:"):
        names = {f"judge:{j.pk}": j.name for j in judges}
        return f"judge {names.get(raters, raters[6:])}'s judgments"
    return "everyone's judgments (people and LLM judges together)"


# --- outputs and their groups -------------------------------------------------------------------
def label_of(variants: dict[int, Variant]) -> dict[int, str]:
    """Each output's name in the tables: "item id/variant id"."""
    return {pk: f"{v.item.item_id}/{v.variant_id}" for pk, v in variants.items()}


def describe(variant: Variant) -> dict[str, Any]:
    """What names an output in the tables: its item, the model and prompt that made it,
    its repetition and temperature when a generation job made it, and its own id."""
    meta = variant.meta if isinstance(variant.meta, dict) else {}
    return {
        "item": variant.item.item_id,
        "model": variant.model_label,
        "prompt": variant.prompt_label,
        **{key: meta[key] for key in ("repetition", "temperature") if key in meta},
        "variant_id": variant.variant_id,
    }


def configuration(variant: Variant) -> str:
    """What made an output but its repetition: model (configuration), prompt, temperature."""
    meta = variant.meta if isinstance(variant.meta, dict) else {}
    parts = [variant.model_label or "(none)", variant.prompt_label or "(none)"]
    if meta.get("temperature") is not None:
        parts.append(f"t={meta['temperature']}")
    return " · ".join(parts)


def groupings(variants: dict[int, Variant]) -> list[tuple[str, dict[int, str]]]:
    """The groups the model-level answers rank: ``by_model``, ``by_prompt`` and, when it
    tells more than either, ``by_configuration`` (each a label for every variant)."""
    model = {pk: v.model_label or "(none)" for pk, v in variants.items()}
    prompt = {pk: v.prompt_label or "(none)" for pk, v in variants.items()}
    found = [("by_model", model), ("by_prompt", prompt)]
    config = {pk: configuration(v) for pk, v in variants.items()}
    if len(set(config.values())) > max(len(set(model.values())), len(set(prompt.values()))):
        found.append(("by_configuration", config))
    return found


# --- strengths ----------------------------------------------------------------------------------
def _intervals(fit: Any, boot: np.ndarray, error: np.ndarray) -> tuple[Any, Any, np.ndarray]:
    """(low, high, by Wald): the 95% intervals, by the bootstrap percentiles where every
    resample gives a strength, by Wald where ``error`` is finite."""
    n = len(fit.strength)
    low, high = np.full(n, np.nan), np.full(n, np.nan)
    booted = np.isfinite(boot).all(axis=0) if len(boot) else np.zeros(n, bool)
    if booted.any():
        low[booted], high[booted] = np.percentile(boot[:, booted], [2.5, 97.5], axis=0)
    by_wald = np.isfinite(error)
    low = np.where(by_wald, fit.strength - 1.959964 * error, low)
    high = np.where(by_wald, fit.strength + 1.959964 * error, high)
    return low, high, by_wald


def strength_table(
    labels: list[Any],
    fit: Any,
    boot: np.ndarray,
    error: np.ndarray,
    options: Mapping[str, Any],
    extra: Callable[[Any], dict] | None = None,
) -> dict[str, Any]:
    """The rows and the fit block of strengths ``fit`` with bootstrap resamples ``boot``
    (B, n) and Wald standard errors ``error`` (n,; NaN where the bootstrap gives them)."""
    n = len(labels)
    low, high, by_wald = _intervals(fit, boot, error)
    order = np.zeros(n, int)
    for c in range(fit.components):
        members = np.nonzero(fit.component == c)[0]
        order[members] = stats.ranks(fit.strength[members])
    several = fit.components > 1
    items = [
        {
            "variant": labels[i],
            "strength": _round(fit.strength[i]),
            "ci_low": _round(low[i]),
            "ci_high": _round(high[i]),
            "rank": int(order[i]),
            **({"component": int(fit.component[i])} if several else {}),
            **(extra(labels[i]) if extra else {}),
        }
        for i in range(n)
    ]
    items.sort(key=lambda item: (item.get("component", 0), item["rank"], str(item["variant"])))
    return {
        "items": items,
        "connected": fit.connected,
        "regularized": bool(fit.regularized.any()),
        "converged": fit.converged,
        "components": fit.components,
        "regularized_components": int((~fit.strongly_connected).sum()),
        "intervals": "wald"
        if by_wald.all()
        else "bootstrap+wald"
        if by_wald.any()
        else "bootstrap",
        "resamples": options["resamples"],
        "seed": options["seed"],
    }


def with_win_rates(
    items: list[dict], labels: list[Any], a: np.ndarray, b: np.ndarray, s: np.ndarray
) -> list[dict[str, Any]]:
    """Each group's judgments against other groups and its win rate (ties as halves), added
    to its row of ``items``."""
    index = {label: i for i, label in enumerate(labels)}
    n = len(labels)
    games = np.bincount(a, minlength=n) + np.bincount(b, minlength=n)
    wins = np.bincount(a, weights=s, minlength=n) + np.bincount(b, weights=1 - s, minlength=n)
    for item in items:
        i = index[item["variant"]]
        item["judgments"] = int(games[i])
        item["win_rate"] = _round(wins[i] / games[i]) if games[i] else None
    return items


# --- the analyses -------------------------------------------------------------------------------
class Analysis:
    """What a scenario type's judgments are analysed with. A type names its analysis
    (``ScenarioKind.analysis``, a key of ``analyze.ANALYSES``); this base, for a type that
    names none, adds nothing of its own to the figures every scenario gets."""

    # The values are scores on the dimensions of a rubric: agreement is interval-scaled and
    # per dimension, and a judge is compared with the people by correlation.
    scored = False
    # The values are sets of labels: agreement is also given per label.
    label_sets = False

    def results(
        self, rows: list[Row], variants: dict[int, Variant], config: dict, options: dict
    ) -> dict[str, Any]:
        """The type's sections of the analysis (``win_matrix``, ``ratings``, ...)."""
        return {}

    def unit_value(
        self, row: Row, dimension: str | None, names: Mapping[int, str]
    ) -> tuple[Any, Any] | None:
        """A judgment's unit of agreement (named by ``names`` of its variants, never by
        database ids) and its value there; None: it has none."""
        return None

    def stability(self, rater: str, rows: list[Row], config: dict) -> list[dict[str, Any] | None]:
        """Repeat-call stability of one judge's rows (None entries are dropped)."""
        return []

    def judge_figures(
        self, subset: list[Row], people: list[Row], config: dict, options: dict
    ) -> dict[str, Any]:
        """The judge-comparison figures of some of a judge's judgments."""
        return {}

    def joint_model(
        self, rows: list[Row], loaded: AnalysisData, options: dict
    ) -> dict[str, Any] | None:
        """People's and judges' verdicts (``rows``) in one model (``joint_table``)."""
        return None


def stability(rows: list[Row], config: dict, analysis: Analysis) -> list[dict[str, Any]]:
    """Repeat-call stability of each judge: per item (a task in one presentation order),
    its repeated calls at one temperature."""
    per_judge: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if row.kind == RaterKind.JUDGE:
            per_judge[row.rater].append(row)
    report = []
    for rater, judge_rows in sorted(per_judge.items()):
        report += analysis.stability(rater, judge_rows, config)
    return [r for r in report if r is not None]
