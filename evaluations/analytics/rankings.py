"""The analysis of rankings (``RankingsAnalysis``): mean ranks, Kendall's W, Plackett-Luce
per item, and Bradley-Terry of the models (prompts, configurations) from the pairs the
rankings imply, bootstrapped by whole rankings.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from itertools import combinations
from typing import Any

import numpy as np

from evaluations.analytics import bradley_terry, plackett_luce, stats
from evaluations.analytics.common import (
    Analysis,
    describe,
    groupings,
    label_of,
    strength_table,
    with_win_rates,
)
from evaluations.analytics.data import Row
from evaluations.analytics.stats import rounded as _round
from scenarios.models import Variant

# Distinct rankings x resamples drawn at once (memory bound of the rankings' bootstrap).
_RANKING_CELLS = 2_000_000


def _mean_ranks(
    rows: list[Row], variants: dict[int, Variant], label: dict[int, str]
) -> list[dict[str, Any]]:
    """Each ranked variant's mean place, best first."""
    places: dict[int, list[int]] = defaultdict(list)
    for row in rows:
        for place, pk in enumerate(row.payload.get("ranking") or [], 1):
            places[pk].append(place)
    return sorted(
        (
            {
                "variant": label[pk],
                **describe(variants[pk]),
                "mean_rank": _round(float(np.mean(v))),
                "n": len(v),
            }
            for pk, v in places.items()
        ),
        key=lambda item: item["mean_rank"],
    )


def _kendall_w(rows: list[Row]) -> list[float]:
    """Kendall's W of each task ranked completely at least twice."""
    by_task: dict[int, list[list[int]]] = defaultdict(list)
    for row in rows:
        by_task[row.task].append(row.payload.get("ranking") or [])
    per_task_w: list[float] = []
    for rankings_of_task in by_task.values():
        complete = [r for r in rankings_of_task if sorted(r) == sorted(rankings_of_task[0])]
        if len(complete) >= 2:
            order = sorted(complete[0])
            matrix = np.array([[r.index(pk) + 1 for pk in order] for r in complete])
            w = stats.kendall_w(matrix)
            if w is not None:
                per_task_w.append(w)
    return per_task_w


def rankings(
    rows: list[Row], variants: dict[int, Variant], options: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``rankings`` section and the groupings' (``by_model``, ...) tables."""
    label = label_of(variants)
    per_task_w = _kendall_w(rows)
    result: dict[str, Any] = {
        "mean_rank": _mean_ranks(rows, variants, label),
        "kendall_w_mean": _round(float(np.mean(per_task_w))) if per_task_w else None,
        "kendall_w_tasks": len(per_task_w),
        "bradley_terry": _plackett_luce_table(rows, variants, label, options),
    }
    models = {name: _ranked_groups(rows, group, options) for name, group in groupings(variants)}
    # Kept in the rankings block too, as before: the rows of the models' table.
    result["by_model"] = models["by_model"]["bradley_terry"]
    return {"rankings": result, **models}


def _bootstrap(
    fit: Any, counts: np.ndarray, implied: np.ndarray, resamples: int, seed: int
) -> np.ndarray:
    """(resamples, g) strengths of whole rankings drawn again (each resample's implied
    pairs refitted by Newton's method from the fit), centred within each component."""
    g = implied.shape[1]
    rng = np.random.default_rng(seed)
    prior = np.where(fit.regularized, bradley_terry.REGULARIZATION, bradley_terry.RIDGE)
    total = int(counts.sum())
    chunk = max(1, _RANKING_CELLS // max(len(counts), g * g))
    parts = []
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        drawn = rng.multinomial(total, counts / total, size=size).astype(float)
        batch = np.tensordot(drawn, implied, axes=1)  # (size, g, g)
        theta, _ = bradley_terry.newton_dense(
            batch, prior[None, :], start=np.repeat(fit.strength[None, :], size, 0)
        )
        parts.append(theta)
    boot = np.concatenate(parts)
    # Centred within each component, like the fit.
    sizes = np.bincount(fit.component)
    means = np.stack([np.bincount(fit.component, weights=row) / sizes for row in boot])
    return boot - means[:, fit.component]


def _ranked_groups(
    rows: list[Row], group: dict[int, str], options: Mapping[str, Any]
) -> dict[str, Any]:
    """Bradley-Terry of groups (models, prompts) from the pairs each ranking implies between
    outputs of different groups. A ranking's pairs are not independent judgments, so the
    intervals resample whole rankings (``_bootstrap``), not pairs."""
    orders = [
        tuple(group[pk] for pk in row.payload.get("ranking") or [] if pk in group) for row in rows
    ]
    names = sorted({name for order in orders for name in order}, key=str)
    index = {name: i for i, name in enumerate(names)}
    g = len(names)
    empty: dict[str, Any] = {
        "bradley_terry": [],
        "connected": None,
        "regularized": False,
        "judgments": 0,
    }
    if g < 2:
        return empty
    distinct: dict[tuple[int, ...], int] = Counter(
        tuple(index[name] for name in order) for order in orders
    )
    keys = [k for k in sorted(distinct) if len(set(k)) > 1]
    if not keys:
        return empty
    counts = np.array([distinct[k] for k in keys], float)
    implied = np.zeros((len(keys), g, g))  # each distinct ranking's wins between groups
    for d, order in enumerate(keys):
        for x, y in combinations(order, 2):
            if x != y:
                implied[d, x, y] += 1
    wins = np.tensordot(counts, implied, axes=1)
    fit = bradley_terry.fit_matrix(wins)
    resamples = options["resamples"] if g <= bradley_terry.SMALL else 0
    boot = np.zeros((0, g))
    if resamples:
        boot = _bootstrap(fit, counts, implied, resamples, options["seed"])
    table = strength_table(names, fit, boot, np.full(g, np.nan), options)
    a, b = np.nonzero(wins)
    weights = wins[a, b]
    items = with_win_rates(
        table["items"],
        names,
        np.repeat(a, weights.astype(int)),
        np.repeat(b, weights.astype(int)),
        np.ones(int(weights.sum())),
    )
    return {
        "bradley_terry": items,
        "connected": table["connected"],
        "regularized": table["regularized"],
        "intervals": "bootstrap of whole rankings" if resamples else None,
        "judgments": len(orders),
        "win_matrix": None,
    }


def _plackett_luce_table(
    rows: list[Row], variants: dict[int, Variant], label: dict[int, str], options: Mapping
) -> list[dict[str, Any]]:
    """Each item's variants by Plackett-Luce, fitted per item and bootstrapped by whole
    rankings (``plackett_luce``); ranks within the item, which each row names."""
    groups: dict[tuple, list[list[int]]] = defaultdict(list)
    for row in rows:
        ranking = [pk for pk in row.payload.get("ranking") or [] if pk in variants]
        if len(ranking) >= 2:
            groups[tuple(sorted(ranking, key=lambda pk: label[pk]))].append(ranking)
    keys = sorted(groups, key=lambda members: [label[pk] for pk in members])
    local = [{pk: i for i, pk in enumerate(members)} for members in keys]
    fits = plackett_luce.fit(
        [
            [[index[pk] for pk in r] for r in groups[members]]
            for members, index in zip(keys, local, strict=True)
        ],
        resamples=options["resamples"],
        seed=options["seed"],
    )
    table = []
    for component, (members, fitted) in enumerate(zip(keys, fits, strict=True)):
        strength, boot = fitted.strength, fitted.boot
        low, high = np.full(len(strength), np.nan), np.full(len(strength), np.nan)
        if len(boot):
            low, high = np.percentile(boot, [2.5, 97.5], axis=0)
        order = stats.ranks(strength)
        table += [
            {
                "variant": label[pk],
                "strength": _round(strength[i]),
                "ci_low": _round(low[i]),
                "ci_high": _round(high[i]),
                "rank": int(order[i]),
                "component": component,
                **describe(variants[pk]),
                "regularized": fitted.regularized,
            }
            for i, pk in enumerate(members)
        ]
    table.sort(key=lambda item: (item["component"], item["rank"], item["variant"]))
    return table


class RankingsAnalysis(Analysis):
    """Rankings: mean ranks, Kendall's W, Plackett-Luce per item, Bradley-Terry of the
    models (prompts, configurations) from the pairs the rankings imply, bootstrapped by
    whole rankings."""

    def results(
        self, rows: list[Row], variants: dict[int, Variant], config: dict, options: dict
    ) -> dict[str, Any]:
        found = rankings(rows, variants, options)
        table = found["rankings"]["bradley_terry"]
        return found | {
            "bradley_terry": table,
            "bradley_terry_fit": {
                "model": "plackett_luce",
                "components": len({row["component"] for row in table}),
                "regularized": any(row["regularized"] for row in table),
                "intervals": "bootstrap",
                "resamples": options["resamples"],
                "seed": options["seed"],
            },
        }
