"""The people's agreement figures (``figures_of``) of units coded as arrays (``code``):
each distinct unit (the same values from the same raters) once, with its multiplicity, and
the bootstrap over the units as weights of the distinct ones (``Bootstrap``). The
statistics are ``agreement_stats``'; ``agreement`` reads the units from the judgments.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
from scipy import sparse

from evaluations.analytics import agreement_stats as ags
from evaluations.analytics.agreement_stats import rounded

FEW_UNITS = 10  # units: a figure on fewer carries ``few_units`` and a warning
RATER_LIMIT = 30  # people: above, no Conger's or Light's kappa


# --- coding -------------------------------------------------------------------------------------
@dataclass
class Bootstrap:
    """The intervals' resamples (none: no intervals) and seed."""

    resamples: int = 0
    seed: int = 0

    def weights(self, multiplicity: np.ndarray) -> np.ndarray:
        """The full data (first row: each distinct unit's multiplicity), then the resamples."""
        drawn = ags.draws(multiplicity, self.resamples, self.seed)
        return np.vstack([multiplicity[None].astype(float), drawn])


@dataclass
class Coded:
    """A set of units as arrays: the distinct units (the same values from the same raters),
    each with the number of units it stands for, and their counts of each category."""

    categories: list[Any]
    raters: list[str]
    contents: list[tuple[tuple[int, int], ...]]  # per distinct unit: (rater, category) values
    multiplicity: np.ndarray
    counts: np.ndarray

    @property
    def values(self) -> np.ndarray:
        return np.array(self.categories, float)

    def by_rater(self, pattern: tuple[tuple[int, int], ...]) -> dict[int, list[int]]:
        grouped: dict[int, list[int]] = defaultdict(list)
        for rater, value in pattern:
            grouped[rater].append(value)
        return grouped


def code(
    units: dict[Any, dict[str, list]], *, numeric: bool, scale: list[float] | None = None
) -> Coded:
    """The units coded: categories sorted (numbers by value, anything else by repr; ``scale``
    adds a rating scale's unused points), raters sorted by name."""
    raters = sorted({r for per in units.values() for r in per})
    seen = {v for per in units.values() for vs in per.values() for v in vs}
    if numeric:
        categories: list[Any] = sorted({float(v) for v in seen} | set(scale or []))
    else:
        categories = sorted(seen, key=repr)
    r_index = {r: i for i, r in enumerate(raters)}
    c_index = {c: i for i, c in enumerate(categories)}  # a score's int finds its float
    found: Counter[tuple[tuple[int, int], ...]] = Counter()
    for per in units.values():
        values = [(r_index[r], c_index[v]) for r, vs in per.items() for v in vs]
        values.sort()
        found[tuple(values)] += 1
    return coded_of(categories, raters, found)


def coded_of(
    categories: list[Any], raters: list[str], found: Counter[tuple[tuple[int, int], ...]]
) -> Coded:
    """The distinct units, sorted, as ``Coded``."""
    contents = sorted(c for c in found if c)
    counts = np.zeros((len(contents), len(categories)))
    for row, content in enumerate(contents):
        for _, value in content:
            counts[row, value] += 1
    multiplicity = np.array([found[c] for c in contents], float)
    return Coded(categories, raters, contents, multiplicity, counts)


def recode(coded: Coded, mapping: list[int], categories: list[Any]) -> Coded:
    """The same units with each category ``c`` read as ``categories[mapping[c]]``."""
    found: Counter[tuple[tuple[int, int], ...]] = Counter()
    for content, times in zip(coded.contents, coded.multiplicity, strict=True):
        found[tuple(sorted((rater, mapping[value]) for rater, value in content))] += int(times)
    return coded_of(categories, coded.raters, found)


def _by_rater_matrix(coded: Coded) -> sparse.csr_matrix:
    """(P, raters x q): each rater's values on each distinct unit, several as fractions."""
    q = len(coded.categories)
    rows, cols, vals = [], [], []
    for row, content in enumerate(coded.contents):
        for rater, values in coded.by_rater(content).items():
            for value in values:
                rows.append(row)
                cols.append(rater * q + value)
                vals.append(1 / len(values))
    shape = (len(coded.contents), len(coded.raters) * q)
    return sparse.csr_matrix((vals, (rows, cols)), shape=shape)


def _pair_cells(coded: Coded) -> list[sparse.csr_matrix]:
    """For every pair of raters who share a unit (in order of their names), the (P, q x q)
    contingency cells of each distinct unit both rated: each pairing of their values there,
    weighted so that a unit counts once."""
    q = len(coded.categories)
    cells: dict[tuple[int, int], tuple[list, list, list]] = defaultdict(lambda: ([], [], []))
    for row, content in enumerate(coded.contents):
        grouped = coded.by_rater(content)
        for one, other in combinations(sorted(grouped), 2):
            share = 1 / (len(grouped[one]) * len(grouped[other]))
            rows, cols, vals = cells[(one, other)]
            for x in grouped[one]:
                for y in grouped[other]:
                    rows.append(row)
                    cols.append(x * q + y)
                    vals.append(share)
    shape = (len(coded.contents), q * q)
    return [
        sparse.csr_matrix((cells[p][2], (cells[p][0], cells[p][1])), shape) for p in sorted(cells)
    ]


def _icc_table(coded: Coded) -> tuple[np.ndarray, np.ndarray]:
    """The distinct units every rater rated, as a (units x raters) table of each rater's
    mean score there, and their rows' indices."""
    values = coded.values
    complete, table = [], []
    for row, content in enumerate(coded.contents):
        grouped = coded.by_rater(content)
        if len(grouped) == len(coded.raters):
            complete.append(row)
            table.append([values[grouped[r]].mean() for r in range(len(coded.raters))])
    return np.array(table, float).reshape(len(complete), len(coded.raters)), np.array(complete)


# --- figures ------------------------------------------------------------------------------------
def put(out: dict[str, Any], key: str, values: np.ndarray, boot: Bootstrap) -> None:
    """A figure and its interval (``key_ci``: [low, high], None without resamples)."""
    out[key] = rounded(float(values[0]))
    found = ags.interval(values[1:]) if boot.resamples > 0 else None
    out[f"{key}_ci"] = [rounded(v) for v in found] if found else None


def put_none(out: dict[str, Any], *keys: str) -> None:
    """Figures not measured: each key and its interval None."""
    for key in keys:
        out[key] = None
        out[f"{key}_ci"] = None


def shown_value(value: Any) -> Any:
    """A value as the JSON shows it: a label set as its labels joined, a score as a number."""
    if isinstance(value, tuple):
        return ", ".join(value) or "(none)"
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def people_figures(
    units: dict[Any, dict[str, list]],
    *,
    scored: bool,
    boot: Bootstrap,
    scale: list[float] | None = None,
) -> dict[str, Any]:
    """The agreement of several raters on ``units``: Krippendorff's alpha (nominal; interval
    and ordinal for scores), Cohen's kappa (two raters; weighted too for scores), Fleiss',
    Conger's and Light's kappa, Gwet's AC1 (and AC2 for scores), ICC(2,1) and ICC(3,1)
    (scores), each with its interval; and each category's specific agreement."""
    return figures_of(code(units, numeric=scored, scale=scale), scored=scored, boot=boot)


def _alphas(coded: Coded, units: int, weights: np.ndarray, scored: bool, boot: Bootstrap) -> dict:
    """Krippendorff's alpha, nominal (interval and ordinal for scores)."""
    out: dict[str, Any] = {}
    for metric in ("interval", "ordinal") if scored else ("nominal",):
        key = f"krippendorff_alpha_{metric}"
        if units and coded.categories:
            values = coded.values if scored else None
            alpha = ags.krippendorff_alpha_table(coded.counts, weights, metric, values)
            put(out, key, alpha, boot)
        else:
            put_none(out, key)
    return out


def _cohen(
    coded: Coded,
    cells: list[sparse.csr_matrix],
    plain: np.ndarray | None,
    weights: np.ndarray,
    scored: bool,
    boot: Bootstrap,
) -> dict[str, Any]:
    """Cohen's kappa of two raters (weighted too for scores); None for more or fewer."""
    out: dict[str, Any] = {}
    if len(coded.raters) != 2 or plain is None:
        weighted = ["cohen_kappa_weighted", "cohen_kappa_linear", "cohen_kappa_quadratic"]
        put_none(out, "cohen_kappa", *(weighted if scored else []))
        return out
    put(out, "cohen_kappa", plain[:, 0], boot)
    if scored:
        q = len(coded.categories)
        for key, kind in (
            ("cohen_kappa_weighted", "quadratic"),
            ("cohen_kappa_linear", "linear"),
            ("cohen_kappa_quadratic", "quadratic"),
        ):
            put(out, key, weighted_kappa(cells[0], weights, q, kind), boot)
    return out


def _chance_corrected(
    coded: Coded, units: int, weights: np.ndarray, scored: bool, boot: Bootstrap
) -> dict[str, Any]:
    """Fleiss' kappa and Gwet's AC1 (AC2 for scores, quadratic weights)."""
    out: dict[str, Any] = {}
    q = len(coded.categories)
    if not (units and q):
        put_none(out, "fleiss_kappa", "gwet_ac1", *(["gwet_ac2"] if scored else []))
        return out
    put(out, "fleiss_kappa", ags.fleiss_kappa_table(coded.counts, weights), boot)
    put(out, "gwet_ac1", ags.gwet_ac(coded.counts, weights, np.eye(q)), boot)
    if scored:
        agree = ags.agreement_weights(coded.values, "quadratic")
        put(out, "gwet_ac2", ags.gwet_ac(coded.counts, weights, agree), boot)
    return out


def _conger_light(
    coded: Coded, units: int, plain: np.ndarray | None, weights: np.ndarray, boot: Bootstrap
) -> dict[str, Any]:
    """Conger's kappa and Light's (the mean of the pairs' Cohen's kappas)."""
    out: dict[str, Any] = {}
    raters = len(coded.raters)
    if units and 2 <= raters <= RATER_LIMIT and plain is not None:
        by_rater = _by_rater_matrix(coded)
        conger = ags.conger_kappa(coded.counts, by_rater, raters, weights)
        put(out, "conger_kappa", conger, boot)
        put(out, "light_kappa", ags.mean_defined(plain), boot)
    else:
        put_none(out, "conger_kappa", "light_kappa")
    return out


def _iccs(coded: Coded, weights: np.ndarray, boot: Bootstrap) -> dict[str, Any]:
    """ICC(2,1) and ICC(3,1) of the units every rater scored."""
    out: dict[str, Any] = {}
    table, complete = _icc_table(coded)
    icc2, icc3 = ags.icc_two_way(table, weights[:, complete] if len(complete) else weights[:, :0])
    put(out, "icc2_1", icc2, boot)
    put(out, "icc3_1", icc3, boot)
    out["icc_units"] = int(coded.multiplicity[complete].sum()) if len(complete) else 0
    out["icc_raters"] = len(coded.raters)
    return out


def _by_category(coded: Coded) -> list[dict[str, Any]]:
    """Each category used: how many values, and its specific agreement."""
    q = len(coded.categories)
    specific = ags.specific_agreement(coded.counts, coded.multiplicity) if q else np.zeros(0)
    totals = coded.multiplicity @ coded.counts if q else np.zeros(0)
    return [
        {
            "category": shown_value(c),
            "values": int(totals[i]),
            "specific_agreement": rounded(specific[i]),
        }
        for i, c in enumerate(coded.categories)
        if totals[i] > 0
    ]


def figures_of(coded: Coded, *, scored: bool, boot: Bootstrap) -> dict[str, Any]:
    """``people_figures`` of coded units."""
    raters = len(coded.raters)
    pairable = coded.counts.sum(axis=1) >= 2 if len(coded.contents) else np.zeros(0, bool)
    units = int(coded.multiplicity[pairable].sum())
    weights = boot.weights(coded.multiplicity)
    cells = _pair_cells(coded) if 2 <= raters <= RATER_LIMIT else []
    q = len(coded.categories)
    plain = ags.pair_kappas(cells, weights, ags.disagreement_weights(q, None)) if cells else None
    return (
        {"units": units}
        | _alphas(coded, units, weights, scored, boot)
        | {"raters": raters}
        | _cohen(coded, cells, plain, weights, scored, boot)
        | _chance_corrected(coded, units, weights, scored, boot)
        | _conger_light(coded, units, plain, weights, boot)
        | (_iccs(coded, weights, boot) if scored else {})
        | {"few_units": units < FEW_UNITS, "by_category": _by_category(coded)}
    )


def weighted_kappa(cells: sparse.csr_matrix, weights: np.ndarray, q: int, kind: str) -> np.ndarray:
    """Weighted Cohen's kappa of two raters, the weights by position among the categories
    their shared units use (as scikit-learn does)."""
    tables = np.asarray(cells.T.dot(weights.T).T).reshape(len(weights), q, q)
    used = np.flatnonzero(tables[0].sum(axis=0) + tables[0].sum(axis=1))
    tables = tables[:, used][:, :, used]
    return ags.cohen_kappa_tables(tables, ags.disagreement_weights(len(used), kind))
