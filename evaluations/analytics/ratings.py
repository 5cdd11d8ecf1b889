"""The analysis of ratings (``RatingsAnalysis``): scores by dimension, model and prompt;
the stability of a judge's scores over repeated calls, and its tests between
temperatures; agreement on the scores of each dimension (the unit is the task).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from itertools import combinations
from typing import Any

import numpy as np

# scipy.stats is imported inside the functions that use it: it takes about a second to
# import, and the web server loads this module before answering its first request.
from evaluations.analytics import stats
from evaluations.analytics.agreement import task_name, unit_values, versus
from evaluations.analytics.common import Analysis, groupings
from evaluations.analytics.data import Row
from evaluations.analytics.stats import rounded as _round
from scenarios.models import Variant


def _score_rows(rows: list[Row]) -> list[tuple[Row, str, float]]:
    return [
        (row, dimension, float(score))
        for row in rows
        for dimension, score in (row.payload.get("scores") or {}).items()
    ]


def ratings(rows: list[Row], variants: dict[int, Variant], config: dict) -> dict[str, Any]:
    """Each dimension's scores: overall, their distribution, and by each grouping."""
    scored = _score_rows(rows)
    out: dict[str, Any] = {"dimensions": []}
    for dim in config.get("dimensions", []):
        name = dim["name"]
        values = [(row, score) for row, d, score in scored if d == name]
        entry: dict[str, Any] = {
            "dimension": name,
            "scale": [dim["min"], dim["max"]],
            "overall": _summary([score for _, score in values]),
            "distribution": {
                str(k): v for k, v in sorted(Counter(score for _, score in values).items())
            },
        }
        for key, group in groupings(variants):
            groups: dict[str, list[float]] = defaultdict(list)
            for row, score in values:
                groups[group[row.presented[0]]].append(score)
            entry[key] = [
                {"group": group, **_summary(scores), "distribution": dict(Counter(scores))}
                for group, scores in sorted(groups.items())
            ]
        out["dimensions"].append(entry)
    return out


def _summary(values: list[float]) -> dict[str, Any]:
    return {k: _round(v) for k, v in stats.summarize(np.array(values, float)).as_dict().items()}


def _condition(temperature: Any, repeated: dict[tuple, list[float]]) -> dict[str, Any]:
    """The figures of the items rated at least twice at one temperature."""
    sds = [float(np.std(v, ddof=1)) for v in repeated.values()]
    k = min(len(v) for v in repeated.values())
    table = np.array([v[:k] for v in repeated.values()])
    groups = list(repeated.values())
    return {
        "temperature": temperature,
        "items": len(repeated),
        "repetitions": k,
        "mean_of_item_means": _round(float(np.mean([np.mean(v) for v in groups]))),
        "mean_item_sd": _round(float(np.mean(sds))),
        "pooled_sd": _round(float(np.sqrt(np.mean([np.var(v, ddof=1) for v in groups])))),
        "mean_range": _round(float(np.mean([max(v) - min(v) for v in groups]))),
        "share_identical": _round(float(np.mean([len(set(v)) == 1 for v in groups]))),
        "icc": _round(stats.icc_oneway(table)),
    }


def rating_stability(rater: str, dimension: str, rows: list[Row]) -> dict[str, Any] | None:
    """A judge's scores on one dimension over repeated calls on an item (a task in one
    presentation order), at each temperature; None when nothing was repeated."""
    by_temperature: dict[Any, dict[tuple, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        score = (row.payload.get("scores") or {}).get(dimension)
        if score is not None:
            by_temperature[row.temperature][(row.task, row.swapped)].append(float(score))
    conditions = []
    per_item_sd: dict[Any, dict[tuple, float]] = {}
    for temperature, items in sorted(by_temperature.items(), key=lambda kv: kv[0] or 0):
        repeated = {k: v for k, v in items.items() if len(v) >= 2}
        if not repeated:
            continue
        per_item_sd[temperature] = {k: float(np.std(v, ddof=1)) for k, v in repeated.items()}
        conditions.append(_condition(temperature, repeated))
    if not conditions:
        return None
    return {
        "rater": rater,
        "dimension": dimension,
        "conditions": conditions,
        "temperature_tests": _temperature_tests(per_item_sd),
    }


def _temperature_tests(per_item_sd: dict[Any, dict[tuple, float]]) -> list[dict[str, Any]]:
    """Each pair of temperatures: the items' SDs compared pairwise (Wilcoxon signed-rank and
    paired t-test)."""
    from scipy import stats as sps

    tests = []
    for low, high in combinations(sorted(per_item_sd, key=lambda t: t or 0), 2):
        common = sorted(set(per_item_sd[low]) & set(per_item_sd[high]))
        x = np.array([per_item_sd[low][k] for k in common])
        y = np.array([per_item_sd[high][k] for k in common])
        entry: dict[str, Any] = {
            "temperatures": [low, high],
            "items": len(common),
            "mean_sd_difference": _round(float((y - x).mean())) if len(common) else None,
            "wilcoxon_p": None,
            "paired_t_p": None,
        }
        if len(common) >= 2 and np.any(x != y):
            entry["wilcoxon_p"] = _round(stats.wilcoxon_p(x, y))
            entry["paired_t_p"] = _round(float(sps.ttest_rel(x, y).pvalue))
        tests.append(entry)
    return tests


class RatingsAnalysis(Analysis):
    """Ratings: scores by dimension, model and prompt; their stability; agreement on the
    scores of each dimension (the unit is the task)."""

    scored = True

    def results(
        self, rows: list[Row], variants: dict[int, Variant], config: dict, options: dict
    ) -> dict[str, Any]:
        return {"ratings": ratings(rows, variants, config)}

    def unit_value(
        self, row: Row, dimension: str | None, names: Mapping[int, str]
    ) -> tuple[Any, Any] | None:
        value = (row.payload.get("scores") or {}).get(dimension)
        return None if value is None else (task_name(row, names), value)

    def stability(self, rater: str, rows: list[Row], config: dict) -> list[dict[str, Any] | None]:
        return [rating_stability(rater, dim["name"], rows) for dim in config.get("dimensions", [])]

    def judge_figures(
        self, subset: list[Row], people: list[Row], config: dict, options: dict
    ) -> dict[str, Any]:
        rhos = []
        for dim in config.get("dimensions", []):
            against = versus(
                unit_values(people, self, dim["name"]),
                unit_values(subset, self, dim["name"]),
                scored=True,
            )
            if against.get("spearman") is not None:
                rhos.append(against["spearman"])
        return {"mean_spearman_with_humans": _round(float(np.mean(rhos))) if rhos else None}
