"""The analysis of comparisons (``PairwiseAnalysis``): the win / tie / loss matrix,
Bradley-Terry strengths with bootstrap intervals and ranks, Elo, position bias,
reverse-order consistency (by variant, and aggregated by model and by prompt), the
stability of a judge's verdicts and agreement on the winner.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from evaluations.analytics import bradley_terry, bradley_terry_bootstrap, joint_table, stats
from evaluations.analytics.agreement import category, unit_values, versus
from evaluations.analytics.common import (
    ELO_ROUNDS,
    Analysis,
    describe,
    groupings,
    label_of,
    strength_table,
    with_win_rates,
)
from evaluations.analytics.data import AnalysisData, Row
from evaluations.analytics.stats import rounded as _round
from scenarios.models import Variant

MATRIX_LIMIT = 50  # variants: above, the matrix is given as the list of compared pairs

Arrays = tuple[list[Any], np.ndarray, np.ndarray, np.ndarray]  # labels, first, second, outcome


def comparison_arrays(
    rows: list[Row], group: Callable[[int], Any]
) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[Row]]:
    """(labels, a, b, s, rows used): each judgment as first shown vs second shown, after
    mapping variants to groups (judgments within one group left out). Labels are sorted, so
    that the figures do not depend on the order of the rows."""
    pairs, used = [], []
    for row in rows:
        first, second = group(row.presented[0]), group(row.presented[1])
        if first == second:
            continue
        winner = row.payload.get("winner")
        pairs.append((first, second, 1.0 if winner == "A" else 0.0 if winner == "B" else 0.5))
        used.append(row)
    labels = sorted({x for first, second, _ in pairs for x in (first, second)}, key=str)
    index = {label: i for i, label in enumerate(labels)}
    a = np.array([index[first] for first, _, _ in pairs], int)
    b = np.array([index[second] for _, second, _ in pairs], int)
    s = np.array([outcome for _, _, outcome in pairs], float)
    return labels, a, b, s, used


def bt_table(
    arrays: Arrays, options: Mapping[str, Any], extra: Callable[[Any], dict] | None = None
) -> dict[str, Any]:
    """Bradley-Terry strengths with intervals and ranks, fitted per connected component
    (``bradley_terry``): ranks are within the component, which each item names when there
    are several."""
    labels, a, b, s = arrays
    n = len(labels)
    if n < 2 or len(a) == 0:
        return {"items": [], "connected": None, "regularized": False}
    fit = bradley_terry.fit(n, a, b, s)
    boot = bradley_terry_bootstrap.bootstrap(
        n, a, b, s, fit, resamples=options["resamples"], seed=options["seed"]
    )
    error = bradley_terry.wald(n, a, b, s, fit)
    return strength_table(labels, fit, boot, error, options, extra)


def _compared_pairs(arrays: Arrays) -> dict[str, Any]:
    """Wins, ties and losses of each pair of variants that were compared."""
    labels, a, b, s = arrays
    counts: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    for x, y, outcome in zip(a.tolist(), b.tolist(), s.tolist(), strict=True):
        low, high = min(x, y), max(x, y)
        won = outcome if x == low else 1 - outcome
        counts[(low, high)][0 if won == 1 else 1 if won == 0.5 else 2] += 1
    return {
        "variants": labels,
        "pairs": [
            {"variant": labels[x], "opponent": labels[y], "wins": w, "ties": t, "losses": lost}
            for (x, y), (w, t, lost) in sorted(counts.items())
        ],
    }


def win_matrix(arrays: Arrays) -> dict[str, Any]:
    """Wins, ties and losses of each variant (row) against each other (column); with more
    than ``MATRIX_LIMIT`` variants, only the pairs that were compared."""
    labels, a, b, s = arrays
    n = len(labels)
    if n > MATRIX_LIMIT:
        return _compared_pairs(arrays)
    wins = np.zeros((n, n), int)
    ties = np.zeros((n, n), int)
    np.add.at(wins, (a[s == 1], b[s == 1]), 1)
    np.add.at(wins, (b[s == 0], a[s == 0]), 1)
    np.add.at(ties, (a[s == 0.5], b[s == 0.5]), 1)
    ties = ties + ties.T
    return {
        "variants": labels,
        "wins": wins.tolist(),
        "ties": ties.tolist(),
        "losses": wins.T.tolist(),
    }


def elo(arrays: Arrays, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Elo ratings over ``ELO_ROUNDS`` orders of the judgments, highest median first."""
    labels, a, b, s = arrays
    if len(labels) < 2 or len(a) == 0:
        return []
    result = stats.elo(
        len(labels),
        a,
        b,
        s,
        k=options["elo_k"],
        order=options["elo_order"],
        rounds=ELO_ROUNDS,
        seed=options["seed"],
    )
    items = [
        {
            "variant": labels[i],
            "rating": _round(result["rating"][i]),
            "median": _round(result["median"][i]),
            "ci_low": _round(result["ci_low"][i]),
            "ci_high": _round(result["ci_high"][i]),
        }
        for i in range(len(labels))
    ]
    return sorted(items, key=lambda item: -item["median"])


def position(rows: list[Row]) -> dict[str, Any]:
    """First-position wins among the verdicts that are not ties: exact binomial test."""

    def count(subset: Iterable[Row]) -> dict[str, Any]:
        winners = [r.payload.get("winner") for r in subset]
        decided = [w for w in winners if w in ("A", "B")]
        return stats.binomial(decided.count("A"), len(decided)) | {"ties": winners.count("tie")}

    by_rater = defaultdict(list)
    for row in rows:
        by_rater[row.rater].append(row)
    return {
        "overall": count(rows),
        "by_rater": {rater: count(group) for rater, group in sorted(by_rater.items())},
    }


def reverse_pairs(rows: list[Row]) -> list[tuple[Row, Row]]:
    """Judgments of the same two variants by the same rater (same repetition and
    temperature) in both presentation orders, paired in the order they were made."""
    orders: dict[tuple, tuple[list[Row], list[Row]]] = defaultdict(lambda: ([], []))
    for row in rows:
        u, v = row.presented
        low, high = min(u, v), max(u, v)
        key = (row.rater, row.repetition, row.temperature, low, high)
        orders[key][0 if u == low else 1].append(row)
    return [
        pair
        for forward, backward in orders.values()
        for pair in zip(forward, backward, strict=False)
    ]


def winner_variant(row: Row) -> Any:
    """The variant a verdict names the winner, or "tie"."""
    winner = row.payload.get("winner")
    return "tie" if winner not in ("A", "B") else row.presented["AB".index(winner)]


def consistency(pairs: list[tuple[Row, Row]], options: Mapping[str, Any]) -> dict[str, Any]:
    """The share of pairs in both orders with the same winner, with a bootstrap interval;
    the inconsistent ones that chose the same position twice."""
    flags, first, second = [], 0, 0
    for one, other in pairs:
        same = winner_variant(one) == winner_variant(other)
        flags.append(1.0 if same else 0.0)
        if not same:
            w1, w2 = one.payload.get("winner"), other.payload.get("winner")
            first += w1 == w2 == "A"
            second += w1 == w2 == "B"
    array = np.array(flags)
    low, high = stats.bootstrap_share(array, resamples=options["resamples"], seed=options["seed"])
    return {
        "pairs": len(flags),
        "consistent": int(array.sum()) if len(array) else 0,
        "share": _round(array.mean()) if len(array) else None,
        "ci_low": _round(low),
        "ci_high": _round(high),
        "inconsistent_first_position": first,
        "inconsistent_second_position": second,
    }


def reverse_consistency(rows: list[Row], options: Mapping[str, Any]) -> dict[str, Any]:
    """Reverse-order consistency, overall and by rater."""
    pairs = reverse_pairs(rows)
    by_rater = defaultdict(list)
    for pair in pairs:
        by_rater[pair[0].rater].append(pair)
    return {
        "overall": consistency(pairs, options),
        "by_rater": {r: consistency(p, options) for r, p in sorted(by_rater.items())},
    }


def _grouped(rows: list[Row], group: dict[int, str], options: Mapping[str, Any]) -> dict:
    """Bradley-Terry, win rates and the win matrix of groups of variants (models, ...)."""
    labels, a, b, s, _ = comparison_arrays(rows, group.__getitem__)
    table = bt_table((labels, a, b, s), options)
    return {
        "bradley_terry": with_win_rates(table["items"], labels, a, b, s),
        "connected": table["connected"],
        "regularized": table["regularized"],
        "intervals": table.get("intervals"),
        "judgments": len(a),
        "win_matrix": win_matrix((labels, a, b, s)),
    }


def comparisons(
    rows: list[Row], variants: dict[int, Variant], options: Mapping[str, Any]
) -> dict[str, Any]:
    """The comparison sections: by variant, then by each grouping (``groupings``)."""
    label = label_of(variants)
    by_label = {label[pk]: v for pk, v in variants.items()}

    def named(name: str) -> dict[str, Any]:
        variant = by_label.get(name)
        return describe(variant) if variant else {}

    labels, a, b, s, used = comparison_arrays(rows, lambda pk: label[pk])
    arrays = (labels, a, b, s)
    table = bt_table(arrays, options, named)
    result: dict[str, Any] = {
        "win_matrix": win_matrix(arrays),
        "bradley_terry": table["items"],
        "bradley_terry_fit": {k: v for k, v in table.items() if k != "items"}
        | {"resamples": options["resamples"], "seed": options["seed"]},
        "elo": [item | named(item["variant"]) for item in elo(arrays, options)],
        "position_bias": position(used),
        "reverse_consistency": reverse_consistency(used, options),
    }
    return result | {name: _grouped(rows, group, options) for name, group in groupings(variants)}


def verdict_stability(rater: str, rows: list[Row]) -> dict[str, Any] | None:
    """The share of a judge's repeated calls on an item that gave the same verdict, at
    each temperature; None when nothing was repeated."""
    groups: dict[tuple, list[Any]] = defaultdict(list)
    for row in rows:
        groups[(row.temperature, row.task, row.swapped)].append(winner_variant(row))
    conditions = []
    for temperature in sorted({k[0] for k in groups}, key=lambda t: t or 0):
        repeated = [v for k, v in groups.items() if k[0] == temperature and len(v) >= 2]
        if repeated:
            conditions.append(
                {
                    "temperature": temperature,
                    "items": len(repeated),
                    "share_identical": _round(float(np.mean([len(set(v)) == 1 for v in repeated]))),
                }
            )
    return {"rater": rater, "dimension": None, "conditions": conditions} if conditions else None


class PairwiseAnalysis(Analysis):
    """Comparisons: win matrix, Bradley-Terry, Elo, position bias, reverse-order
    consistency; verdict stability; agreement on the winner."""

    def results(
        self, rows: list[Row], variants: dict[int, Variant], config: dict, options: dict
    ) -> dict[str, Any]:
        return comparisons(rows, variants, options)

    def unit_value(
        self, row: Row, dimension: str | None, names: Mapping[int, str]
    ) -> tuple[Any, Any] | None:
        # The unit is the unordered pair of variants by their names in sorted order, its
        # value "first", "second" (the pair's variant whose name sorts first or second won)
        # or "tie": categories mean the same in every unit, whatever the ids or the order.
        unit = tuple(sorted(names[pk] for pk in row.presented))
        winner = winner_variant(row)
        return unit, category("tie" if winner == "tie" else names[winner], unit)

    def stability(self, rater: str, rows: list[Row], config: dict) -> list[dict[str, Any] | None]:
        return [verdict_stability(rater, rows)]

    def joint_model(
        self, rows: list[Row], loaded: AnalysisData, options: dict
    ) -> dict[str, Any] | None:
        return joint_table.joint_model(
            rows,
            loaded.variants,
            loaded.judges,
            loaded.sources,
            groupings(loaded.variants),
            options,
        )

    def judge_figures(
        self, subset: list[Row], people: list[Row], config: dict, options: dict
    ) -> dict[str, Any]:
        overall = position(subset)["overall"]
        consistent = consistency(reverse_pairs(subset), options | {"resamples": 0})
        against = versus(
            unit_values(people, self), unit_values(subset, self), scored=False, per_verdict=True
        )
        return {
            "reverse_consistency": consistent["share"],
            "reverse_pairs": consistent["pairs"],
            "first_position_share": _round(overall["share"]),
            "first_position_p_value": _round(overall["p_value"]),
            "agreement_with_human_majority": against["agreement_with_human_majority"],
        }
