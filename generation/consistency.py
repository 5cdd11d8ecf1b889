"""Consistency of repeated calls, per item: a job's scored fields (``generation.replies``)
summarised per item and condition, and the rank order of items compared between
conditions.

A condition is one model configuration, prompt and temperature. For each numeric field,
each item has in each condition its n calls, their mean, SD (sample, n-1), min and max. Two
conditions rank the items they share by their means; the agreement is Spearman's rho and
Kendall's tau-b, each with a 95% interval on Fisher's z scale: rho's standard error
sqrt((1 + rho²/2) / (n - 3)) (Bonett & Wright, 2000), tau's sqrt(0.437 / (n - 4))
(Fieller, Hartley & Pearson, 1957). ``bench/rank_agreement.py`` checks their coverage in
known worlds (continuous, tied, skewed scores; 10 to 100 items).

Pure: ``summarise`` takes the rows (``selectors.consistency_for`` reads a job's).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
from scipy import stats as sps

from generation import replies

Z95 = 1.959963984540054
# Items a condition pair needs for an interval (Spearman's needs n > 3, Kendall's n > 4).
MIN_ITEMS = 5
# Spearman's interval is the jackknife's from this many items.
SPEARMAN_JACKKNIFE_FROM = 30
# Up to this many items, the intervals' standard errors are the jackknife's (O(n²) time and
# memory), while the request's budget of n² lasts (about 2 s); beyond, normal theory's.
JACKKNIFE_MOST = 1000
JACKKNIFE_BUDGET = 30_000_000
# Pairs of conditions compared in one request, chosen among the first
# ``MAX_PAIRED_CONDITIONS`` conditions.
MAX_PAIRS = 100
MAX_PAIRED_CONDITIONS = 200


@dataclass(frozen=True)
class Row:
    """One completed output's parsed values, in its condition."""

    item: str
    model: str
    prompt: str
    temperature: float | None
    parsed: dict[str, Any] | None


def condition_label(model: str, prompt: str, temperature: float | None) -> str:
    t = "no temperature sent" if temperature is None else f"temperature {temperature:g}"
    return " · ".join(part for part in (model, prompt, t) if part)


def _interval(value: float, se: float, n: int, quantile: float = Z95) -> list[float]:
    """The 95% interval on Fisher's z scale. An observed ±1 (a perfect order among the n
    items) has no z: its interval runs from the end for 1 - 1/n (then ±1), so ten items in
    one order are no proof of a perfect agreement."""
    if abs(value) >= 1 - 1e-12:
        z = math.atanh(1 - 1 / n)
        low = round(math.tanh(z - quantile * se), 4)
        return [low, 1.0] if value > 0 else [-1.0, -low]
    z = math.atanh(value)
    return [round(math.tanh(z - quantile * se), 4), round(math.tanh(z + quantile * se), 4)]


def _ranks(x: np.ndarray) -> np.ndarray:
    return np.asarray(sps.rankdata(x), dtype=float)


def _loo_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each leave-one-out sample (row i leaves item i out): an item's
    midrank falls by 1 for each smaller value left out and by 1/2 for each tie."""
    n = len(x)

    def loo_ranks(v: np.ndarray) -> np.ndarray:
        r = _ranks(v)
        drop = (v[:, None] < v[None, :]) + 0.5 * (v[:, None] == v[None, :])
        np.fill_diagonal(drop, 0.0)
        return r[None, :] - drop

    rx, ry = loo_ranks(x), loo_ranks(y)
    keep = ~np.eye(n, dtype=bool)
    rx = rx[keep].reshape(n, n - 1)
    ry = ry[keep].reshape(n, n - 1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((rx * ry).sum(axis=1) / den)


def _loo_kendall(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each leave-one-out sample, from the pairs' signs: leaving item i
    out removes its row of concordances and of untied pairs."""
    sx = np.sign(x[:, None] - x[None, :])
    sy = np.sign(y[:, None] - y[None, :])
    concordance = (sx * sy).sum(axis=1)
    untied_x = np.abs(sx).sum(axis=1)
    untied_y = np.abs(sy).sum(axis=1)
    s, ux, uy = concordance.sum(), untied_x.sum(), untied_y.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(
            (s - 2 * concordance) / np.sqrt((ux - 2 * untied_x) * (uy - 2 * untied_y))
        )


def _jackknife_se(values: np.ndarray) -> float | None:
    """The jackknife standard error on Fisher's z scale of leave-one-out coefficients, each
    held within 1/n² of ±1 (a leave-one-out sample in a perfect order has no z)."""
    if not np.all(np.isfinite(values)):
        return None
    n = len(values)
    edge = 1 - 1 / (n * n)
    z = np.arctanh(np.clip(values, -edge, edge))
    return float(math.sqrt((n - 1) / n * float(((z - z.mean()) ** 2).sum())))


def rank_agreement(
    a: Sequence[float], b: Sequence[float], *, jackknife: bool = True
) -> dict[str, Any]:
    """Spearman's rho and Kendall's tau-b of two paired lists, with 95% intervals (None
    where undefined: fewer than ``MIN_ITEMS`` pairs, or one list constant), and how each
    interval was made (``spearman_interval``, ``kendall_interval``): ``"jackknife"``
    (standard error of the leave-one-out coefficients on Fisher's z scale, t quantile) or
    ``"normal_theory"`` (Bonett-Wright's for rho, Fieller's for tau). Spearman's takes the
    jackknife from ``SPEARMAN_JACKKNIFE_FROM`` items (below, normal theory covered as well
    with half the width), Kendall's at any size (normal theory undercovered with ties);
    normal theory for both past ``JACKKNIFE_MOST`` items, with ``jackknife=False``, and for a
    perfect order (leaving any item out changes nothing)."""
    n = len(a)
    out: dict[str, Any] = {
        "items": n,
        "spearman": None,
        "spearman_ci": None,
        "kendall": None,
        "kendall_ci": None,
        "spearman_interval": None,
        "kendall_interval": None,
    }
    if n < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return out
    rho = float(sps.spearmanr(a, b).statistic)
    tau = float(sps.kendalltau(a, b).statistic)
    out["spearman"], out["kendall"] = round(rho, 4), round(tau, 4)
    if n < MIN_ITEMS:
        return out
    t = float(sps.t.ppf(0.975, n - 1))
    methods = {
        "spearman": (rho, math.sqrt((1 + rho * rho / 2) / (n - 3)), _loo_spearman),
        "kendall": (tau, math.sqrt(0.437 / (n - 4)), _loo_kendall),
    }
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    for name, (value, se, leave_one_out) in methods.items():
        used, q = "normal_theory", Z95
        wanted = name == "kendall" or n >= SPEARMAN_JACKKNIFE_FROM
        if jackknife and wanted and n <= JACKKNIFE_MOST:
            found = _jackknife_se(leave_one_out(x, y))
            if found is not None and found > 1e-9:  # 0: a perfect order
                used, q, se = "jackknife", t, found
        out[f"{name}_ci"] = _interval(value, se, n, q)
        out[f"{name}_interval"] = used
    return out


def _describe(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "mean": round(statistics.fmean(values), 4),
        "sd": round(statistics.stdev(values), 4) if len(values) > 1 else None,
        "min": min(values),
        "max": max(values),
    }


def _order(first: dict[str, Any], second: dict[str, Any]) -> int:
    """How many of model, prompt and temperature two conditions differ in."""
    return sum(first[k] != second[k] for k in ("model", "prompt", "temperature"))


def _collect(
    rows: Iterable[Row], fields: Sequence[str]
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[tuple[str, str], list[float]]]]:
    """The conditions seen (label → model, prompt, temperature) and each field's numeric
    values by (item, condition)."""
    values: dict[str, dict[tuple[str, str], list[float]]] = {f: defaultdict(list) for f in fields}
    conditions: dict[str, dict[str, Any]] = {}
    for row in rows:
        label = condition_label(row.model, row.prompt, row.temperature)
        if label not in conditions:
            conditions[label] = {
                "condition": label,
                "model": row.model,
                "prompt": row.prompt,
                "temperature": row.temperature,
            }
        for field in fields:
            number = replies.numeric((row.parsed or {}).get(field))
            if number is not None:
                values[field][(row.item, label)].append(number)
    return conditions, {f: v for f, v in values.items() if v}


def item_rows(rows: Iterable[Row], fields: Sequence[str]) -> list[dict[str, Any]]:
    """Every numeric field's per-item table: field, item, condition (and its model, prompt
    and temperature), n, mean, SD, min, max."""
    conditions, values = _collect(rows, fields)
    return [
        {"field": field, "item": item} | conditions[label] | _describe(found)
        for field, cells in values.items()
        for (item, label), found in cells.items()
    ]


def summarise(
    rows: Iterable[Row], fields: Sequence[str], field: str | None = None
) -> dict[str, Any]:
    """One numeric field's consistency (``field``, else the first numeric one): its
    per-item table, each condition's summary, and the rank agreement of pairs of conditions
    (those differing in one of model, prompt and temperature first, at most ``MAX_PAIRS``).
    ``fields``: the job's; ``numeric_fields`` in the result: those with a number."""
    conditions, values = _collect(rows, fields)
    numeric_fields = list(values)
    report: dict[str, Any] = {
        "numeric_fields": numeric_fields,
        "field": None,
        "conditions": list(conditions.values()),
    }
    if field is None and numeric_fields:
        field = numeric_fields[0]
    if field is None or field not in values:
        return report
    cells = values[field]
    items = [{"item": i, "condition": c, **_describe(v)} for (i, c), v in cells.items()]
    means: dict[str, dict[str, float]] = defaultdict(dict)
    sds: dict[str, list[float]] = defaultdict(list)
    calls: dict[str, int] = defaultdict(int)
    for entry in items:
        means[entry["condition"]][entry["item"]] = entry["mean"]
        calls[entry["condition"]] += entry["n"]
        if entry["sd"] is not None:
            sds[entry["condition"]].append(entry["sd"])
    by_condition = [
        {
            "condition": label,
            "items": len(means[label]),
            "calls": calls[label],
            "mean_sd": round(statistics.fmean(sds[label]), 4) if sds[label] else None,
            "max_sd": max(sds[label]) if sds[label] else None,
            "items_with_sd_0": sum(sd == 0 for sd in sds[label]),
        }
        for label in conditions
        if means[label]
    ]
    # Pairs of the first ``MAX_PAIRED_CONDITIONS`` conditions only: every pair of tens of
    # thousands of conditions would be a quadratic list before any is computed.
    compared = [c for c in conditions.values() if means[c["condition"]]]
    pairs_total = len(compared) * (len(compared) - 1) // 2
    pairs = sorted(
        combinations(compared[:MAX_PAIRED_CONDITIONS], 2), key=lambda pair: _order(*pair)
    )
    budget = JACKKNIFE_BUDGET
    agreement = []
    for first, second in pairs[:MAX_PAIRS]:
        a, b = means[first["condition"]], means[second["condition"]]
        shared = [i for i in a if i in b]
        jackknife = len(shared) <= JACKKNIFE_MOST and len(shared) ** 2 <= budget
        if jackknife:
            budget -= len(shared) ** 2
        found = rank_agreement([a[i] for i in shared], [b[i] for i in shared], jackknife=jackknife)
        agreement.append({"a": first["condition"], "b": second["condition"]} | found)
    return report | {
        "field": field,
        "by_condition": by_condition,
        "rank_agreement": agreement,
        "pairs_total": pairs_total,
        "items": items,
    }
