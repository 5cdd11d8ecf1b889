"""Agreement between raters: the ``agreement`` part of a scenario's analytics.

Between people (evaluators and imported raters) on the values their scenario type reads
from each judgment (``unit_value``: a comparison's winner, a label set, a score), and
between people and each judge. Every figure is computed from the units sorted by their
readable names and from the raters sorted by name, so the same judgments give the same
figures whatever the rows' order, database ids or presentation order; every interval is a
percentile bootstrap over the units, seeded. docs/analytics.md ("Agreement") has the
formulas; the statistics are in ``agreement_stats``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from itertools import combinations
from typing import Any, Protocol

import numpy as np

# scipy.stats is imported inside the functions that use it: it takes about a second to
# import, and the web server loads this module before answering its first request.
from scipy import sparse

from evaluations.analytics import agreement_stats as ags
from evaluations.analytics.agreement_figures import (
    FEW_UNITS,
    RATER_LIMIT,
    Bootstrap,
    code,
    coded_of,
    figures_of,
    people_figures,
    put,
    put_none,
    recode,
    shown_value,
    weighted_kappa,
)
from evaluations.analytics.agreement_stats import rounded
from evaluations.analytics.data import Row
from evaluations.judgments.models import RaterKind
from scenarios.models import Variant

MAX_RESAMPLES = 1000  # the bootstrap resamples of the agreement intervals, at most
BY_ITEM_LIMIT = 200  # the most disputed units listed in ``by_item``


class Reading(Protocol):
    """How a scenario type's judgments are read for agreement (``analyze.Analysis``)."""

    scored: bool
    label_sets: bool

    def unit_value(
        self, row: Row, dimension: str | None, names: Mapping[int, str]
    ) -> tuple[Any, Any] | None: ...


class Names(dict[int, str]):
    """Variant id → readable name ("item id/variant id"); an unknown id is named by itself."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.tasks: dict[tuple[int, ...], str] = {}

    def __missing__(self, key: int) -> str:
        return str(key)


def names_of(variants: Mapping[int, Variant]) -> Names:
    return Names({pk: f"{v.item.item_id}/{v.variant_id}" for pk, v in variants.items()})


def task_name(row: Row, names: Mapping[int, str]) -> str:
    """A judgment's task by the names of the variants it shows, in their order."""
    shown = tuple(row.presented)
    known = names.tasks if isinstance(names, Names) else {}
    if shown not in known:
        known[shown] = " vs ".join(names[pk] for pk in shown)
    return known[shown]


def category(winner: Any, unit: tuple[str, ...]) -> str:
    """A comparison's winner (a variant's name, or "tie") as the first or second variant of
    its unit (the pair's names in sorted order), or a tie."""
    return "tie" if winner == "tie" else ("first" if winner == unit[0] else "second")


def unit_values(
    rows: list[Row],
    analysis: Reading,
    dimension: str | None = None,
    names: Mapping[int, str] | None = None,
) -> dict[Any, dict[str, list]]:
    """unit → rater → values, each judgment's unit and value as its analysis reads them
    (``unit_value``); units and raters sorted, each rater's values oldest first."""
    names = names if names is not None else Names()
    units: dict[Any, dict[str, list]] = {}
    read = analysis.unit_value
    for row in rows:
        found = read(row, dimension, names)
        if found is not None:
            unit, value = found
            per = units.get(unit)
            if per is None:
                per = units[unit] = {}
            per.setdefault(row.rater, []).append(value)
    return {unit: dict(sorted(units[unit].items())) for unit in sorted(units)}


def _only(units: dict[Any, dict[str, list]], raters: set[str]) -> dict[Any, dict[str, list]]:
    """The values of some raters only (units they did not rate left out)."""
    kept = {unit: {r: vs for r, vs in per.items() if r in raters} for unit, per in units.items()}
    return {unit: per for unit, per in kept.items() if per}


def _pairable(units: dict[Any, dict[str, list]]) -> int:
    """The units with two or more values."""
    return sum(1 for per in units.values() if sum(len(vs) for vs in per.values()) >= 2)


def pairwise(units: dict[Any, dict[str, list]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every pair of raters on the units both rated: the share of their values that are the
    same (``pairwise``: each pairing of their values on a unit, a unit counting once) and
    Cohen's kappa (``pairwise_kappa``, from the same pairings)."""
    raters = sorted({r for per in units.values() for r in per})
    categories = sorted({v for per in units.values() for vs in per.values() for v in vs}, key=repr)
    c_index = {c: i for i, c in enumerate(categories)}
    q = len(categories)
    cells: dict[tuple[str, str, int, int], float] = defaultdict(float)
    shared: Counter[tuple[str, str]] = Counter()
    for per in units.values():
        coded = {r: [c_index[v] for v in vs] for r, vs in per.items()}
        for one, other in combinations(sorted(coded), 2):
            xs, ys = coded[one], coded[other]
            share = 1 / (len(xs) * len(ys))
            for x in xs:
                for y in ys:
                    cells[(one, other, x, y)] += share
            shared[(one, other)] += 1
    tables: dict[tuple[str, str], np.ndarray] = {}
    same: dict[tuple[str, str], float] = defaultdict(float)
    for (one, other, x, y), share in cells.items():
        tables.setdefault((one, other), np.zeros((q, q)))[x, y] += share
        if x == y:
            same[(one, other)] += share
    disagreement = ags.disagreement_weights(q, None)
    agreement: list[list[float | None]] = []
    kappa: list[list[float | None]] = []
    for one in raters:
        agreement_row: list[float | None] = []
        kappa_row: list[float | None] = []
        for other in raters:
            key = (min(one, other), max(one, other))
            if one == other:
                agreement_row.append(1.0)
                kappa_row.append(1.0)
            elif shared[key]:
                agreement_row.append(rounded(same[key] / shared[key]))
                kappa_row.append(
                    rounded(float(ags.cohen_kappa_tables(tables[key][None], disagreement)[0]))
                )
            else:
                agreement_row.append(None)
                kappa_row.append(None)
        agreement.append(agreement_row)
        kappa.append(kappa_row)
    return {"raters": raters, "agreement": agreement}, {"raters": raters, "kappa": kappa}


def _spread(values: list) -> tuple[float, float, float]:
    """Mean, SD (n - 1) and range of two or more scores."""
    numbers = [float(v) for v in values]
    mean = sum(numbers) / len(numbers)
    variance = sum((x - mean) ** 2 for x in numbers) / (len(numbers) - 1)
    return mean, variance**0.5, max(numbers) - min(numbers)


def by_item(units: dict[Any, dict[str, list]], *, scored: bool) -> tuple[list[dict[str, Any]], int]:
    """The units whose values differ, the most disputed first (the lowest share of agreeing
    pairs of values; for scores the largest SD), at most ``BY_ITEM_LIMIT``, and the number
    left out. A comparison's values are named by the winning variant; scores' units are
    (name, dimension)."""
    ranked = []
    for unit, per in units.items():
        values = [v for vs in per.values() for v in vs]
        n = len(values)
        if n < 2:
            continue
        found = Counter(values)
        if len(found) == 1:  # all alike: not disputed
            continue
        share = sum(c * (c - 1) for c in found.values()) / (n * (n - 1))
        name, dimension = unit if scored else (unit, None)
        shown = " vs ".join(name) if isinstance(name, tuple) else str(name)
        if scored:
            spread = _spread(values)
            key: tuple = (-spread[1], share, shown, dimension)
        else:
            spread = None
            key = (share, -n, shown)
        ranked.append((key, unit, per, found, share, spread))
    ranked.sort(key=lambda entry: entry[0])
    entries = []
    for _, unit, per, found, share, spread in ranked[:BY_ITEM_LIMIT]:
        name, dimension = unit if scored else (unit, None)
        entry: dict[str, Any] = {}
        if isinstance(name, tuple):  # a comparison: the pair of variants
            entry["unit"] = " vs ".join(name)
            entry["variants"] = list(name)
            named = {
                (name[0] if v == "first" else name[1] if v == "second" else v): c
                for v, c in found.items()
            }
        else:
            entry["unit"] = name
            named = {shown_value(v): c for v, c in found.items()}
        if dimension is not None:
            entry["dimension"] = dimension
        entry |= {
            "raters": len(per),
            "judgments": sum(found.values()),
            "values": {str(k): v for k, v in sorted(named.items(), key=lambda kv: str(kv[0]))},
            "agreement_share": rounded(share),
        }
        if spread is not None:
            entry |= {"mean": rounded(spread[0]), "sd": rounded(spread[1])}
            entry["range"] = rounded(spread[2])
        entries.append(entry)
    return entries, max(0, len(ranked) - BY_ITEM_LIMIT)


def by_label(
    units: dict[Any, dict[str, list]], labels: list[str], boot: Bootstrap
) -> list[dict[str, Any]]:
    """For each label, the people's agreement on "has this label" (yes / no per judgment);
    a label nobody chose has no figures."""
    coded = code(units, numeric=False)
    empty = coded_of([False, True], coded.raters, Counter())
    out = []
    for label in labels:
        mapping = [int(label in value) for value in coded.categories]
        used = int(coded.multiplicity @ coded.counts @ np.array(mapping, float)) if mapping else 0
        figures = figures_of(
            recode(coded, mapping, [False, True]) if used else empty, scored=False, boot=boot
        )
        if not used:
            figures["units"] = _pairable(units)
        figures["raters"] = len(coded.raters)
        figures["few_units"] = figures["units"] < FEW_UNITS
        positive = next((c for c in figures.pop("by_category") if c["category"] is True), None)
        out.append(
            {"label": label, "judgments_with_label": used}
            | figures
            | {"specific_agreement_positive": positive["specific_agreement"] if positive else None}
        )
    return out


def _mean(per: dict[str, list]) -> float:
    values = [float(v) for vs in per.values() for v in vs]
    return sum(values) / len(values)


def _majority(values: list[Any]) -> Any:
    counts = Counter(values).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def _paired(
    pairs: list[tuple[Any, Any]], boot: Bootstrap, units: list[Any] | None = None
) -> tuple[np.ndarray, np.ndarray, sparse.csr_matrix, int] | None:
    """(people, judge) pairs of values coded: each distinct pair's category counts (P, q),
    the weights (the data, then the resamples), the pairs' contingency cells, q. With
    ``units`` (each pair's unit), the resamples draw units, each with all its pairs (the
    verdicts on one item are not independent: a judge asked in both orders that answers
    alike gives two pairs of one observation)."""
    if not pairs:
        return None
    if units is None:
        found = Counter(pairs)
        distinct = sorted(found, key=repr)
        multiplicity = np.array([found[p] for p in distinct], float)
        weights = boot.weights(multiplicity)
    else:
        # Each unit's pairs make its pattern; the resamples draw patterns (as units), and a
        # distinct pair of a pattern weighs what its pattern drew times its count in it.
        by_unit: dict[Any, list[tuple[Any, Any]]] = defaultdict(list)
        for unit, pair in zip(units, pairs, strict=True):
            by_unit[unit].append(pair)
        patterns = Counter(tuple(sorted(found, key=repr)) for found in by_unit.values())
        shapes = sorted(patterns, key=repr)
        draws = boot.weights(np.array([patterns[s] for s in shapes], float))
        rows: list[tuple[Any, Any]] = []
        columns = []
        for k, shape in enumerate(shapes):
            for pair, count in Counter(shape).items():
                rows.append(pair)
                columns.append(draws[:, k] * count)
        distinct, weights = rows, np.stack(columns, axis=1)
    categories = sorted({v for pair in distinct for v in pair}, key=repr)
    index = {c: i for i, c in enumerate(categories)}
    q = len(categories)
    counts = np.zeros((len(distinct), q))
    cell_rows, cols = [], []
    for row, (a, b) in enumerate(distinct):
        counts[row, index[a]] += 1
        counts[row, index[b]] += 1
        cell_rows.append(row)
        cols.append(index[a] * q + index[b])
    cells = sparse.csr_matrix(
        (np.ones(len(cell_rows)), (cell_rows, cols)), shape=(len(distinct), q * q)
    )
    return counts, weights, cells, q


def versus(
    humans: dict,
    judged: dict,
    *,
    scored: bool,
    boot: Bootstrap | None = None,
    per_verdict: bool = False,
) -> dict[str, Any]:
    """A judge against the people on the units both judged: for verdicts and labels the
    people's majority against the judge's most frequent verdict, or with ``per_verdict``
    against each of the judge's verdicts (a unit where the judge contradicts itself, as
    when asked in both orders, then counts its disagreement instead of being dropped for
    want of a most frequent verdict; ``units`` is then every unit both judged, ``verdicts``
    the pairs counted); for scores (``scored``) the people's mean against the judge's mean.
    Intervals with ``boot`` (per verdict: resampling units, each with all its verdicts)."""
    from scipy import stats as sps

    boot = boot or Bootstrap()
    common = [u for u in judged if u in humans]
    if scored:
        x = np.array([_mean(humans[u]) for u in common], float)
        y = np.array([_mean(judged[u]) for u in common], float)
        entry: dict[str, Any] = {"units": len(common)}
        if len(common) >= 3 and x.std() > 0 and y.std() > 0:
            entry["spearman"] = rounded(float(sps.spearmanr(x, y).statistic))
            entry["kendall_tau"] = rounded(float(sps.kendalltau(x, y).statistic))
        else:
            entry["spearman"] = entry["kendall_tau"] = None
        _interval_alpha_of_pairs(entry, x, y, boot)
        whole = _paired([(round(a), round(b)) for a, b in zip(x, y, strict=True)], boot)
        if whole is not None:
            _, weights, cells, q = whole
            kappa = weighted_kappa(cells, weights, q, "quadratic")
            put(entry, "cohen_kappa_weighted", kappa, boot)
        else:
            put_none(entry, "cohen_kappa_weighted")
        entry["few_units"] = len(common) < FEW_UNITS
        return entry
    pairs, units = [], []
    for unit in common:
        majority = _majority([v for vs in humans[unit].values() for v in vs])
        if per_verdict:
            if majority is not None:
                verdicts = [(majority, v) for vs in judged[unit].values() for v in vs]
                pairs += verdicts
                units += [unit] * len(verdicts)
            continue
        mode = _majority([v for vs in judged[unit].values() for v in vs])
        if majority is not None and mode is not None:
            pairs.append((majority, mode))
    entry = {
        "units": len(common) if per_verdict else len(pairs),
        **({"verdicts": len(pairs)} if per_verdict else {}),
        "agreement_with_human_majority": rounded(float(np.mean([a == b for a, b in pairs])))
        if pairs
        else None,
    }
    coded = _paired(pairs, boot, units if per_verdict else None)
    if coded is not None:
        counts, weights, cells, q = coded
        plain = ags.pair_kappas([cells], weights, ags.disagreement_weights(q, None))
        put(entry, "cohen_kappa", plain[:, 0], boot)
        alpha = ags.krippendorff_alpha_table(counts, weights, "nominal")
        put(entry, "krippendorff_alpha_nominal", alpha, boot)
    else:
        put_none(entry, "cohen_kappa", "krippendorff_alpha_nominal")
    entry["few_units"] = entry["units"] < FEW_UNITS
    return entry


def _interval_alpha_of_pairs(
    entry: dict[str, Any], x: np.ndarray, y: np.ndarray, boot: Bootstrap
) -> None:
    """Interval alpha of the (people, judge) pairs of means, with its interval."""
    if len(x) == 0:
        put_none(entry, "krippendorff_alpha_interval")
        return
    distinct, multiplicity = np.unique(np.stack([x, y], axis=1), axis=0, return_counts=True)
    alpha = ags.krippendorff_alpha_moments(
        np.full(len(distinct), 2.0),
        distinct.sum(axis=1),
        (distinct**2).sum(axis=1),
        boot.weights(multiplicity.astype(float)),
    )
    put(entry, "krippendorff_alpha_interval", alpha, boot)


# --- the whole part -----------------------------------------------------------------------------
def _scale(config: dict, dimensions: list[str]) -> list[float]:
    """Every whole point of the named dimensions' scales."""
    points: set[float] = set()
    for dim in config.get("dimensions", []):
        if dim.get("name") in dimensions and isinstance(dim.get("min"), int | float):
            low, high = dim["min"], dim.get("max", dim["min"])
            points |= {float(v) for v in range(int(low), int(high) + 1)}
    return sorted(points)


def _warnings(result: dict[str, Any]) -> list[str]:
    def few(where: str, figures: dict[str, Any]) -> list[str]:
        n = figures.get("units") or 0
        if 0 < n < FEW_UNITS:
            return [f"{where} rests on {n} unit{'s' if n != 1 else ''} (fewer than {FEW_UNITS})."]
        return []

    out = few("The people's agreement", result)
    for dimension, figures in (result.get("by_dimension") or {}).items():
        out += few(f"The people's agreement on {dimension}", figures)
    for entry in result.get("by_label") or []:
        out += few(f"The people's agreement on the label {entry['label']}", entry)
    for judge, figures in result["human_vs_judge"].items():
        nested = figures if all(isinstance(v, dict) for v in figures.values()) else {"": figures}
        for dimension, values in nested.items():
            of = f" on {dimension}" if dimension else ""
            out += few(f"The agreement of {judge} with the people{of}", values)
    if result.get("raters", 0) > RATER_LIMIT:
        out.append(
            f"Conger's and Light's kappa are left out: more than {RATER_LIMIT} people rated."
        )
    return out


def agreement(
    rows: list[Row],
    analysis: Reading,
    config: dict,
    variants: Mapping[int, Variant] | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Between people (evaluators and imported raters), and between people and each judge.
    The top-level figures are the people's agreement on the verdicts (comparisons), labels
    (labeling) or scores (ratings: every dimension's scores together, a unit being a task
    and a dimension; ``by_dimension`` has each one). Intervals: ``min(resamples,
    MAX_RESAMPLES)`` bootstrap resamples of the units, seeded by ``seed``."""
    options = options or {}
    boot = Bootstrap(
        min(int(options.get("resamples") or 0), MAX_RESAMPLES), int(options.get("seed") or 0)
    )
    names = names_of(variants or {})
    people = {r.rater for r in rows if r.kind != RaterKind.JUDGE}
    judges = sorted({r.rater for r in rows if r.kind == RaterKind.JUDGE})
    result: dict[str, Any]
    if analysis.scored:
        dimensions = [d["name"] for d in config.get("dimensions", [])]
        pooled: dict[Any, dict[str, list]] = {}
        everyone: dict[Any, dict[str, list]] = {}
        by_dimension: dict[str, Any] = {}
        against: dict[str, dict[str, Any]] = defaultdict(dict)
        for dimension in dimensions:
            all_units = unit_values(rows, analysis, dimension, names)
            units = _only(all_units, people)
            pooled |= {(unit, dimension): raters for unit, raters in units.items()}
            everyone |= {(unit, dimension): raters for unit, raters in all_units.items()}
            by_dimension[dimension] = people_figures(
                units, scored=True, boot=boot, scale=_scale(config, [dimension])
            )
            for judge in judges:
                judged = _only(all_units, {judge})
                against[judge][dimension] = versus(units, judged, scored=True, boot=boot)
        pooled = dict(sorted(pooled.items()))
        shares, kappas = pairwise(dict(sorted(everyone.items())))
        disputed, omitted = by_item(pooled, scored=True)
        result = people_figures(pooled, scored=True, boot=boot, scale=_scale(config, dimensions))
        result |= {
            "pairwise": shares,
            "pairwise_kappa": kappas,
            "by_dimension": by_dimension,
            "human_vs_judge": dict(against),
            "by_item": disputed,
            "by_item_omitted": omitted,
        }
    else:
        all_units = unit_values(rows, analysis, None, names)
        units = _only(all_units, people)
        shares, kappas = pairwise(all_units)
        disputed, omitted = by_item(units, scored=False)
        result = people_figures(units, scored=False, boot=boot)
        result |= {
            "pairwise": shares,
            "pairwise_kappa": kappas,
            "human_vs_judge": {
                judge: versus(
                    units, _only(all_units, {judge}), scored=False, boot=boot, per_verdict=True
                )
                for judge in judges
            },
            "by_item": disputed,
            "by_item_omitted": omitted,
        }
        if analysis.label_sets:
            used = {
                label for per in units.values() for vs in per.values() for v in vs for label in v
            }
            labels = list(config.get("labels") or []) + sorted(
                used - set(config.get("labels") or [])
            )
            result["by_label"] = by_label(units, labels, boot)
    result["resamples"] = boot.resamples
    result["seed"] = boot.seed
    result["warnings"] = _warnings(result)
    return result
