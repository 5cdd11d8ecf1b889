"""The statistics, as pure functions over numpy arrays (no database, no pandas).

Every function here is validated against a reference implementation in the tests (choix,
krippendorff, statsmodels, scikit-learn, scipy) or by hand on small cases; docs/analytics.md
says how each figure is computed. The agreement statistics are in agreement_stats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

# scipy.stats is imported inside the functions that use it: it takes about a second to
# import, and the web server loads this module before answering its first request.
from scipy.sparse.csgraph import connected_components

from evaluations.analytics import bradley_terry
from evaluations.analytics.agreement_stats import cohen_kappa as cohen_kappa
from evaluations.analytics.agreement_stats import fleiss_kappa as fleiss_kappa
from evaluations.analytics.agreement_stats import krippendorff_alpha as krippendorff_alpha
from evaluations.analytics.bradley_terry import REGULARIZATION


def rounded(value: Any, digits: int = 7) -> Any:
    """Floats to ``digits`` significant digits (small p-values keep theirs); NaN and
    infinities become None; anything else as it is."""
    if value is None:
        return None
    if isinstance(value, float | np.floating):
        return float(f"{float(value):.{digits}g}") if np.isfinite(value) else None
    return value


# --- Bradley-Terry ------------------------------------------------------------------------------
# A pair (a, b) with outcome s: 1 a won, 0.5 tie, 0 b won. Ties count as half a win each way.
# The fits and their bootstrap are in ``bradley_terry``.


def win_matrix(n: int, a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """W[i, j]: the wins of i over j, ties as halves."""
    wins = np.zeros((n, n))
    np.add.at(wins, (a, b), s)
    np.add.at(wins, (b, a), 1 - s)
    return wins


def strongly_connected(wins: np.ndarray) -> bool:
    """The maximum-likelihood strengths exist (finite) only when every item can be reached
    from every other through "beat or tied" edges."""
    if len(wins) <= 1:
        return True
    count, _ = connected_components(wins > 0, directed=True, connection="strong")
    return bool(count == 1)


def ranks(values: np.ndarray) -> np.ndarray:
    """1 = highest; ties share the better rank."""
    from scipy import stats as sps

    return sps.rankdata(-values, method="min").astype(int)


# --- Elo ----------------------------------------------------------------------------------------
def elo(
    n: int,
    a: np.ndarray,
    b: np.ndarray,
    s: np.ndarray,
    *,
    k: float = 4.0,
    base: float = 1000.0,
    scale: float = 400.0,
    rounds: int = 100,
    seed: int = 0,
    order: str = "chronological",
) -> dict[str, np.ndarray]:
    """Online Elo over the judgments in ``order`` ("chronological" as given, or "random"),
    and over ``rounds`` bootstrap resamples (drawn with replacement, in random order): the
    single pass, and the resamples' median and 2.5 / 97.5 percentiles."""
    rng = np.random.default_rng(seed)
    sequence = np.arange(len(a)) if order == "chronological" else rng.permutation(len(a))

    def single_pass(order: np.ndarray) -> np.ndarray:
        rating = [base] * n
        firsts, seconds, outcomes = a.tolist(), b.tolist(), s.tolist()
        for j in order.tolist():
            x, y = firsts[j], seconds[j]
            delta = k * (outcomes[j] - 1 / (1 + 10 ** ((rating[y] - rating[x]) / scale)))
            rating[x] += delta
            rating[y] -= delta
        return np.array(rating)

    def rounds_at_once(indices: np.ndarray) -> np.ndarray:
        """Every round's pass, one step of all rounds at a time, on one flat array."""
        count = indices.shape[0]
        rating = np.full(count * n, base)
        offset = (np.arange(count) * n)[:, None]
        first = np.ascontiguousarray((offset + a[indices]).T.astype(np.int64))
        second = np.ascontiguousarray((offset + b[indices]).T.astype(np.int64))
        outcome = np.ascontiguousarray(s[indices].T)
        for ia, ib, st in zip(first, second, outcome, strict=True):
            delta = k * (st - 1 / (1 + 10 ** ((rating[ib] - rating[ia]) / scale)))
            rating[ia] += delta
            rating[ib] -= delta
        return rating.reshape(count, n)

    single = single_pass(sequence)
    if rounds > 0 and len(a):
        boot = rounds_at_once(rng.integers(0, len(a), size=(rounds, len(a))))
        low, median, high = np.percentile(boot, [2.5, 50, 97.5], axis=0)
    else:
        low = median = high = single
    return {"rating": single, "median": median, "ci_low": low, "ci_high": high}


# --- paired tests -------------------------------------------------------------------------------
EXACT_WILCOXON = 25  # nonzero differences: up to this many, without ties, the exact test


def wilcoxon_p(x: np.ndarray, y: np.ndarray) -> float | None:
    """The two-sided Wilcoxon signed-rank test of paired ``x`` and ``y``, its method fixed
    (SciPy's default changed between versions): zero differences dropped; up to
    ``EXACT_WILCOXON`` nonzero differences without ties, the exact distribution; otherwise
    the normal approximation with the tie correction of the variance, no continuity
    correction."""
    from scipy import stats as sps

    d = np.asarray(y, float) - np.asarray(x, float)
    d = d[d != 0]
    n = len(d)
    if n == 0:
        return None
    magnitude = np.abs(d)
    if n <= EXACT_WILCOXON and len(np.unique(magnitude)) == n:
        return float(sps.wilcoxon(d, method="exact").pvalue)
    ranked = sps.rankdata(magnitude)
    positive = ranked[d > 0].sum()
    _, ties = np.unique(magnitude, return_counts=True)
    variance = n * (n + 1) * (2 * n + 1) / 24 - (ties**3 - ties).sum() / 48
    if variance <= 0:
        return None
    z = (positive - n * (n + 1) / 4) / math.sqrt(variance)
    return float(2 * sps.norm.sf(abs(z)))


# --- position -----------------------------------------------------------------------------------
def binomial(successes: int, trials: int) -> dict[str, Any]:
    """The share of successes with its exact (Clopper-Pearson) 95% interval and the exact
    two-sided binomial test against one half."""
    from scipy import stats as sps

    if trials == 0:
        return {"n": 0, "k": 0, "share": None, "ci_low": None, "ci_high": None, "p_value": None}
    test = sps.binomtest(successes, trials, 0.5, alternative="two-sided")
    interval = test.proportion_ci(confidence_level=0.95, method="exact")
    return {
        "n": trials,
        "k": successes,
        "share": successes / trials,
        "ci_low": float(interval.low),
        "ci_high": float(interval.high),
        "p_value": float(test.pvalue),
    }


def bootstrap_share(flags: np.ndarray, *, resamples: int = 1000, seed: int = 0) -> tuple:
    """Percentile bootstrap 95% interval of the mean of 0/1 ``flags``."""
    if len(flags) == 0 or resamples <= 0:
        return None, None
    rng = np.random.default_rng(seed)
    means = rng.binomial(len(flags), flags.mean(), size=resamples) / len(flags)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


# --- agreement ----------------------------------------------------------------------------------
# Krippendorff's alpha, Cohen's and Fleiss' kappa are in agreement_stats (imported above).


def kendall_w(ranks_matrix: np.ndarray) -> float | None:
    """Kendall's W of m raters ranking the same n objects (rows: raters; no ties)."""
    m, n = ranks_matrix.shape
    if m < 2 or n < 2:
        return None
    totals = ranks_matrix.sum(axis=0)
    spread = ((totals - totals.mean()) ** 2).sum()
    return float(12 * spread / (m**2 * (n**3 - n)))


def icc_oneway(table: np.ndarray) -> float | None:
    """ICC(1): one-way random effects, single measurement, for a (targets x k) table of
    repeated measurements (complete rows)."""
    targets, k = table.shape
    if targets < 2 or k < 2:
        return None
    grand = table.mean()
    between = k * ((table.mean(axis=1) - grand) ** 2).sum() / (targets - 1)
    within = ((table - table.mean(axis=1, keepdims=True)) ** 2).sum() / (targets * (k - 1))
    if between + (k - 1) * within == 0:
        return None
    return float((between - within) / (between + (k - 1) * within))


@dataclass
class Summary:
    n: int
    mean: float | None
    sd: float | None
    ci_low: float | None
    ci_high: float | None

    def as_dict(self) -> dict[str, Any]:
        return vars(self)


def summarize(values: np.ndarray) -> Summary:
    """Mean, SD (n - 1) and the t-based 95% interval of the mean."""
    from scipy import stats as sps

    n = len(values)
    if n == 0:
        return Summary(0, None, None, None, None)
    mean = float(values.mean())
    if n == 1:
        return Summary(1, mean, None, None, None)
    sd = float(values.std(ddof=1))
    half = float(sps.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return Summary(n, mean, sd, mean - half, mean + half)


# --- adaptive design ----------------------------------------------------------------------------
def next_pairs(
    n: int,
    a: np.ndarray,
    b: np.ndarray,
    s: np.ndarray,
    count: int,
    candidates: np.ndarray | None = None,
) -> list[tuple[int, int]]:
    """The ``count`` pairs to compare next, by their expected information under the current
    Bradley-Terry fit: each pair (i, j) is worth log(1 + w d'Σd), the increase of the log
    determinant of the Fisher information (D-optimality), with w = p(1 - p) its outcome's
    variance, d = e_i - e_j and Σ the strengths' covariance (the inverse information of the
    regularized fit, so that it exists from the first comparison). Pairs are chosen one by
    one, the covariance updated after each (Sherman-Morrison), so a batch spreads out.
    ``candidates``: the pairs allowed (rows i, j); default every pair."""
    from scipy import stats as sps

    if candidates is None:
        i_all, j_all = np.triu_indices(n, 1)
        candidates = np.stack([i_all, j_all], axis=1)
    if len(candidates) == 0 or count <= 0:
        return []
    wins = win_matrix(n, a, b, s) if len(a) else np.zeros((n, n))
    theta, _ = bradley_terry.newton_dense(wins[None], REGULARIZATION)
    theta = theta[0]
    # The information matrix of the regularized fit, and its inverse.
    games = wins + wins.T
    p = 1 / (1 + np.exp(theta[None, :] - theta[:, None]))
    weight = games * p * (1 - p)
    own = 1 / (1 + np.exp(-theta))
    info = -weight
    info[np.arange(n), np.arange(n)] = weight.sum(axis=1) + REGULARIZATION * own * (1 - own)
    cov = np.linalg.inv(info)
    ci, cj = candidates[:, 0], candidates[:, 1]
    pair_w = 1 / (1 + np.exp(theta[cj] - theta[ci]))
    pair_w = pair_w * (1 - pair_w)
    chosen: list[tuple[int, int]] = []
    available = np.ones(len(candidates), bool)
    for _ in range(min(count, len(candidates))):
        spread = np.maximum(cov[ci, ci] + cov[cj, cj] - 2 * cov[ci, cj], 1e-12)
        # How likely the fit orders the two wrongly, times the share of their contrast's
        # variance one more comparison removes.
        misordered = sps.norm.cdf(-np.abs(theta[ci] - theta[cj]) / np.sqrt(spread))
        gain = np.where(available, misordered * pair_w * spread / (1 + pair_w * spread), -np.inf)
        best = int(np.argmax(gain))
        i, j = int(ci[best]), int(cj[best])
        chosen.append((i, j))
        available[best] = False  # one comparison of a pair per batch
        d = np.zeros(n)
        d[i], d[j] = 1.0, -1.0
        cd = cov @ d
        cov = cov - np.outer(cd, cd) * pair_w[best] / (1 + pair_w[best] * d @ cd)
    return chosen
