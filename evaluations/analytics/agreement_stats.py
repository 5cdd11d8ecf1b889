"""The agreement statistics, as pure functions over numpy arrays (no database, no pandas).

Most take the units as rows of a table (how many values of each category a unit received;
``categories`` is its columns) and ``weights``, a (B, P) array: each row says how many times
each of the P distinct units is counted. One call then gives the figure (a row of the units'
multiplicities) and its bootstrap resamples (rows drawn by ``draws``) at once, vectorized;
undefined figures are NaN. The list-based ``krippendorff_alpha``, ``cohen_kappa`` and
``fleiss_kappa`` take plain values. docs/analytics.md says how each figure is computed;
the tests validate them against krippendorff, scikit-learn, statsmodels, pingouin and irrCAC.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import sparse


def rounded(value: Any, digits: int = 7) -> Any:
    """Floats to ``digits`` significant digits (within 1e-12 of 0: 0, the rounding noise
    of a figure that is 0); NaN and infinities become None."""
    if value is None:
        return None
    if isinstance(value, float | np.floating):
        number = float(value)
        if not np.isfinite(number):
            return None
        return 0.0 if abs(number) < 1e-12 else float(f"{number:.{digits}g}")
    return value


# --- resampling ---------------------------------------------------------------------------------
def draws(multiplicity: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """``resamples`` bootstrap resamples of the units (drawn with replacement, as many as
    there are), as (resamples, P) counts of each of the P distinct units, ``multiplicity``
    saying how many units each stands for."""
    total = int(multiplicity.sum())
    if resamples <= 0 or total == 0:
        return np.zeros((0, len(multiplicity)))
    rng = np.random.default_rng(seed)
    if len(multiplicity) * 8 < total:  # few distinct units: draw how many of each
        return rng.multinomial(total, multiplicity / total, size=resamples).astype(float)
    owner = np.repeat(np.arange(len(multiplicity)), multiplicity.astype(int))
    drawn = owner[rng.integers(0, total, size=(resamples, total))]
    offsets = (np.arange(resamples) * len(multiplicity))[:, None]
    flat = np.bincount((drawn + offsets).ravel(), minlength=resamples * len(multiplicity))
    return flat.reshape(resamples, len(multiplicity)).astype(float)


def interval(values: np.ndarray) -> list[float] | None:
    """The 2.5th and 97.5th percentiles of the resamples' figures (the percentile bootstrap
    95% interval); None when fewer than half of them are defined."""
    finite = values[np.isfinite(values)]
    if len(values) == 0 or len(finite) * 2 < len(values):
        return None
    low, high = np.percentile(finite, [2.5, 97.5])
    return [float(low), float(high)]


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0."""
    numerator = np.asarray(numerator, float)
    denominator = np.asarray(denominator, float)
    safe = np.where(denominator == 0, 1.0, denominator)
    return np.where(denominator == 0, np.nan, numerator / safe)


# --- weights ------------------------------------------------------------------------------------
def agreement_weights(values: np.ndarray, kind: str | None) -> np.ndarray:
    """Gwet's agreement weights between the categories' values: identity (None), "linear"
    1 - |k - l| / (max - min), or "quadratic" 1 - (k - l)² / (max - min)²."""
    q = len(values)
    if kind is None or q < 2:
        return np.eye(q)
    span = float(values.max() - values.min())
    gap = np.abs(values[:, None] - values[None, :]) / span
    return 1 - (gap if kind == "linear" else gap**2)


def disagreement_weights(q: int, kind: str | None) -> np.ndarray:
    """Cohen's disagreement weights between category positions (as scikit-learn): 0 on the
    diagonal, else 1 (None), |i - j| ("linear") or (i - j)² ("quadratic")."""
    positions = np.arange(q)
    gap = np.abs(positions[:, None] - positions[None, :]).astype(float)
    if kind is None:
        return (gap > 0).astype(float)
    return gap if kind == "linear" else gap**2


# --- Krippendorff's alpha -----------------------------------------------------------------------
def _ordinal_distance(totals: np.ndarray) -> np.ndarray:
    """Krippendorff's ordinal distances (B, q, q) between ranks c < k: (the values from c to
    k minus (n_c + n_k) / 2)², from each resample's category totals (B, q)."""
    q = totals.shape[1]
    cum = np.concatenate([np.zeros((len(totals), 1)), np.cumsum(totals, axis=1)], axis=1)
    idx = np.arange(q)
    lo, hi = np.minimum.outer(idx, idx), np.maximum.outer(idx, idx)
    between = cum[:, hi + 1] - cum[:, lo] - (totals[:, lo] + totals[:, hi]) / 2
    return between**2


def _alpha(observed: np.ndarray, expected: np.ndarray, total: np.ndarray) -> np.ndarray:
    """alpha = 1 - D_o / D_e, with ``expected`` already divided by n - 1; 1 when nothing varies."""
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1 - _ratio(observed, expected)
    alpha = np.where((expected == 0) & (observed == 0), 1.0, alpha)
    return np.where(total <= 1, np.nan, alpha)


def krippendorff_alpha_table(
    counts: np.ndarray, weights: np.ndarray, metric: str, values: np.ndarray | None = None
) -> np.ndarray:
    """Krippendorff's alpha from the units' category counts (P, q), nominal or ordinal
    (categories in order), or interval (``values``: the categories' numbers), per row of
    ``weights``. Units with fewer than two values do not count."""
    sizes = counts.sum(axis=1)
    keep = sizes >= 2
    counts, weights, sizes = counts[keep], weights[:, keep], sizes[keep]
    if metric == "interval":
        assert values is not None
        return krippendorff_alpha_moments(sizes, counts @ values, counts @ values**2, weights)
    p, q = counts.shape
    pairs = counts[:, :, None] * counts[:, None, :]
    pairs[:, np.arange(q), np.arange(q)] -= counts
    coincidence = weights @ (pairs / np.maximum(sizes - 1, 1)[:, None, None]).reshape(p, q * q)
    coincidence = coincidence.reshape(-1, q, q)
    totals = coincidence.sum(axis=2)
    total = totals.sum(axis=1)
    if metric == "nominal":
        delta = np.broadcast_to(1 - np.eye(q), coincidence.shape)
    elif metric == "ordinal":
        delta = _ordinal_distance(totals)
    else:
        raise ValueError(metric)
    observed = (coincidence * delta).sum(axis=(1, 2))
    products = totals[:, :, None] * totals[:, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = (products * delta).sum(axis=(1, 2)) / np.where(total > 1, total - 1, 1)
    return _alpha(observed, expected, total)


def krippendorff_alpha_moments(
    sizes: np.ndarray, sums: np.ndarray, squares: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """Interval alpha from each unit's number of values (two or more), their sum and their
    sum of squares: D_o from the squared differences within units, D_e from those of every
    two values, Σ over ordered pairs of (x - y)² being 2 n Σx² - 2 (Σx)²."""
    spread = 2 * sizes * squares - 2 * sums**2
    n = weights @ sizes
    observed = weights @ (spread / np.maximum(sizes - 1, 1))
    all_pairs = 2 * n * (weights @ squares) - 2 * (weights @ sums) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = all_pairs / np.where(n > 1, n - 1, 1)
    return _alpha(observed, expected, n)


def tabulate(units: Sequence[Sequence[Any]], numeric: bool) -> tuple[list[Any], np.ndarray]:
    """The distinct values (sorted: as numbers, or by repr) and the units' counts of each."""
    if numeric:
        categories: list[Any] = sorted({float(v) for u in units for v in u})
        index = {v: i for i, v in enumerate(categories)}
        code = [[index[float(v)] for v in u] for u in units]
    else:
        categories = sorted({v for u in units for v in u}, key=repr)
        index = {v: i for i, v in enumerate(categories)}
        code = [[index[v] for v in u] for u in units]
    counts = np.zeros((len(units), len(categories)))
    for row, coded in enumerate(code):
        np.add.at(counts[row], coded, 1)
    return categories, counts


def krippendorff_alpha(units: Sequence[Sequence[Any]], metric: str = "nominal") -> float | None:
    """Krippendorff's alpha from the values each unit received (missing values left out;
    units with fewer than two values do not count). Values are numbers for the interval and
    ordinal metrics, anything hashable for nominal."""
    pairable = [list(u) for u in units if len(u) >= 2]
    if not pairable:
        return None
    categories, counts = tabulate(pairable, numeric=metric != "nominal")
    values = np.array(categories, float) if metric != "nominal" else None
    value = krippendorff_alpha_table(counts, np.ones((1, len(pairable))), metric, values)[0]
    return float(value) if np.isfinite(value) else None


# --- kappas -------------------------------------------------------------------------------------
def cohen_kappa_tables(tables: np.ndarray, disagreement: np.ndarray) -> np.ndarray:
    """Cohen's kappa of (B, q, q) contingency tables (rows: the first rater's category),
    with ``disagreement_weights``."""
    total = tables.sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = tables / np.where(total == 0, 1, total)[:, None, None]
    expected = share.sum(axis=2)[:, :, None] * share.sum(axis=1)[:, None, :]
    chance = (disagreement * expected).sum(axis=(1, 2))
    seen = (disagreement * share).sum(axis=(1, 2))
    return np.where(total == 0, np.nan, 1 - _ratio(seen, chance))


def cohen_kappa(
    x: Sequence[Any],
    y: Sequence[Any],
    weights: str | None = None,
    sample_weight: Sequence[float] | None = None,
) -> float | None:
    """Cohen's kappa of two raters over the same units; ``weights`` "linear" or "quadratic"
    for ordered (numeric) categories; ``sample_weight``: each unit's weight (default 1)."""
    if len(x) == 0:
        return None
    labels = sorted(set(x) | set(y), key=lambda v: (not isinstance(v, int | float), v))
    index = {v: i for i, v in enumerate(labels)}
    m = len(labels)
    table = np.zeros((m, m))
    unit_weights = np.ones(len(x)) if sample_weight is None else np.asarray(sample_weight, float)
    for u, v, w in zip(x, y, unit_weights, strict=True):
        table[index[u], index[v]] += w
    value = cohen_kappa_tables(table[None], disagreement_weights(m, weights))[0]
    return float(value) if np.isfinite(value) else None


def fleiss_kappa_table(counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Fleiss' kappa from the units' category counts, every unit with the same number of
    values (two or more), per row of ``weights``."""
    n = counts.sum(axis=1)
    if len(n) == 0 or n.min() != n.max() or n[0] < 2:
        return np.full(len(weights), np.nan)
    per_unit = (counts * (counts - 1)).sum(axis=1) / (n * (n - 1))
    shares = _ratio(weights @ counts, (weights @ n)[:, None])
    agreement = _ratio(weights @ per_unit, weights.sum(axis=1))
    chance = (shares**2).sum(axis=1)
    return np.where(chance == 1, np.nan, _ratio(agreement - chance, 1 - chance))


def fleiss_kappa(counts: np.ndarray) -> float | None:
    """Fleiss' kappa from a (units x categories) table of how many raters chose each
    category; every unit must have the same number of ratings (two or more)."""
    if counts.size == 0:
        return None
    value = fleiss_kappa_table(np.asarray(counts, float), np.ones((1, len(counts))))[0]
    return float(value) if np.isfinite(value) else None


def _percent_agreement(counts: np.ndarray, weights: np.ndarray, agree: np.ndarray) -> np.ndarray:
    """Gwet's weighted percent agreement p_a: over the units with two or more values, the
    mean of Σ_k n_uk (n*_uk - 1) / (n_u (n_u - 1)), n*_uk = Σ_l w_kl n_ul."""
    n = counts.sum(axis=1)
    pairable = n >= 2
    weighted = counts @ agree.T
    per_unit = np.where(
        pairable, (counts * (weighted - 1)).sum(axis=1) / np.where(pairable, n * (n - 1), 1), 0
    )
    return _ratio(weights @ per_unit, weights @ pairable.astype(float))


def gwet_ac(counts: np.ndarray, weights: np.ndarray, agree: np.ndarray) -> np.ndarray:
    """Gwet's AC1 (``agree`` the identity) or AC2 (weighted): (p_a - p_e) / (1 - p_e), with
    p_e = Σ w_kl / (q (q - 1)) · Σ_k π_k (1 - π_k), π_k the mean over the units of the
    share of their values in category k."""
    q = counts.shape[1]
    pa = _percent_agreement(counts, weights, agree)
    if q < 2:
        return np.where(pa == 1, 1.0, np.nan)
    n = counts.sum(axis=1)
    pi = _ratio(weights @ (counts / n[:, None]), weights.sum(axis=1)[:, None])
    pe = agree.sum() / (q * (q - 1)) * (pi * (1 - pi)).sum(axis=1)
    return _ratio(pa - pe, 1 - pe)


def conger_kappa(
    counts: np.ndarray, by_rater: sparse.csr_matrix, raters: int, weights: np.ndarray
) -> np.ndarray:
    """Conger's kappa: Fleiss' percent agreement against the chance agreement of the raters'
    own category distributions, Σ_k (p̄_k² - s²_k / r) with p̄_k the raters' mean share of
    category k and s²_k its variance across raters. ``by_rater``: (P, raters x q) each
    rater's values on each unit (a rater's several values on a unit as equal fractions)."""
    q = counts.shape[1]
    pa = _percent_agreement(counts, weights, np.eye(q))
    classified = np.asarray(by_rater.T.dot(weights.T).T).reshape(len(weights), raters, q)
    rated = classified.sum(axis=2)
    present = rated > 0
    shares = classified / np.where(present, rated, 1)[:, :, None]
    r = present.sum(axis=1).astype(float)
    mean = _ratio(shares.sum(axis=1), r[:, None])
    cross = np.einsum("bgk,bgl->bkl", shares, shares)
    outer = mean[:, :, None] * mean[:, None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = (cross - r[:, None, None] * outer) / (r - 1)[:, None, None]
        pe = (outer - spread / r[:, None, None])[:, np.arange(q), np.arange(q)].sum(axis=1)
    pe = np.where(r >= 2, pe, np.nan)
    return _ratio(pa - pe, 1 - pe)


def pair_kappas(
    pair_cells: list[sparse.csr_matrix], weights: np.ndarray, disagreement: np.ndarray
) -> np.ndarray:
    """Cohen's kappa of each pair of raters, (B, pairs): ``pair_cells`` holds, per pair, its
    (P, q x q) contingency cells of each unit."""
    q = len(disagreement)
    out = np.full((len(weights), len(pair_cells)), np.nan)
    for column, cells in enumerate(pair_cells):
        tables = np.asarray(cells.T.dot(weights.T).T).reshape(len(weights), q, q)
        out[:, column] = cohen_kappa_tables(tables, disagreement)
    return out


def mean_defined(values: np.ndarray) -> np.ndarray:
    """The mean of each row's defined (finite) values; NaN where there are none."""
    finite = np.isfinite(values)
    return _ratio(np.where(finite, values, 0).sum(axis=1), finite.sum(axis=1))


# --- ICC ----------------------------------------------------------------------------------------
def icc_two_way(table: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ICC(2,1) (two-way random effects, absolute agreement, single rater) and ICC(3,1)
    (two-way mixed, consistency, single rater) of a complete (targets x k raters) table, per
    row of ``weights``: from the mean squares of targets (MSR), raters (MSC) and error
    (MSE), ICC(2,1) = (MSR - MSE) / (MSR + (k - 1) MSE + k (MSC - MSE) / n) and ICC(3,1) =
    (MSR - MSE) / (MSR + (k - 1) MSE)."""
    targets, k = table.shape
    nan = np.full(len(weights), np.nan)
    if k < 2 or targets < 2:
        return nan, nan
    n = weights.sum(axis=1)
    sums = table.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):  # a resample without a complete unit
        grand = (weights @ sums) ** 2 / (n * k)
        total = weights @ (table**2).sum(axis=1) - grand
        rows = weights @ sums**2 / k - grand
        columns = ((weights @ table) ** 2).sum(axis=1) / n - grand
        error = total - rows - columns
        msr = rows / (n - 1)
        msc = columns / (k - 1)
        mse = error / ((n - 1) * (k - 1))
    icc2 = _ratio(msr - mse, msr + (k - 1) * mse + k * (msc - mse) / n)
    icc3 = _ratio(msr - mse, msr + (k - 1) * mse)
    return icc2, icc3


def icc(table: np.ndarray) -> dict[str, float | None]:
    """ICC(2,1) and ICC(3,1) of a complete (targets x raters) table of scores."""
    icc2, icc3 = icc_two_way(np.asarray(table, float), np.ones((1, len(table))))
    return {
        "icc2_1": float(icc2[0]) if np.isfinite(icc2[0]) else None,
        "icc3_1": float(icc3[0]) if np.isfinite(icc3[0]) else None,
    }


# --- per category -------------------------------------------------------------------------------
def specific_agreement(counts: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """Each category's specific agreement: of the pairs of values of one unit (units with two
    or more values) where one is in the category, the share where both are:
    Σ_u n_uk (n_uk - 1) / Σ_u n_uk (n_u - 1)."""
    n = counts.sum(axis=1)
    pairable = (n >= 2) * multiplicity
    both = pairable @ (counts * (counts - 1))
    one = pairable @ (counts * (n - 1)[:, None])
    return _ratio(both, one)
