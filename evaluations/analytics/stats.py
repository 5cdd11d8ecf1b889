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
from scipy import stats as sps
from scipy.sparse.csgraph import connected_components

from evaluations.analytics.agreement_stats import cohen_kappa as cohen_kappa
from evaluations.analytics.agreement_stats import fleiss_kappa as fleiss_kappa
from evaluations.analytics.agreement_stats import krippendorff_alpha as krippendorff_alpha

# --- Bradley-Terry ------------------------------------------------------------------------------
# A pair (a, b) with outcome s: 1 a won, 0.5 tie, 0 b won. Ties count as half a win each way.

REGULARIZATION = 0.5  # virtual comparisons against a reference of strength 1, when needed
_RIDGE = 1e-6  # keeps bootstrap fits finite when a resample leaves an item without wins


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


def _newton(wins: np.ndarray, prior: float, iterations: int = 200) -> tuple[np.ndarray, bool]:
    """Log-strengths by Newton's method, batched: ``wins`` is (B, n, n). ``prior``: virtual
    half-win / half-loss comparisons of every item against a reference of strength 1
    (0 = pure maximum likelihood). Returns the centred log-strengths and whether all fits
    converged."""
    batch, n, _ = wins.shape
    games = wins + np.transpose(wins, (0, 2, 1))
    won = wins.sum(axis=2) + prior / 2
    theta = np.zeros((batch, n))
    idx = np.arange(n)
    for _ in range(iterations):
        p = 1 / (1 + np.exp(theta[:, None, :] - theta[:, :, None]))  # P(i beats j)
        own = 1 / (1 + np.exp(-theta))  # P(i beats the reference)
        grad = won - (games * p).sum(axis=2) - prior * own
        weight = games * p * (1 - p)
        info = -weight  # the information matrix: minus the Hessian of the log-likelihood
        info[:, idx, idx] = weight.sum(axis=2) + prior * own * (1 - own) + 1e-12
        if prior == 0:
            info += 1.0 / n  # fixes the free shift (the strengths' mean); changes no fit
        step = np.clip(np.linalg.solve(info, grad[..., None])[..., 0], -5, 5)
        theta = theta + step
        if np.abs(step).max() < 1e-10:
            return theta - theta.mean(axis=1, keepdims=True), True
    return theta - theta.mean(axis=1, keepdims=True), False


DENSE_LIMIT = 100  # items: above, fits work on the compared pairs only (see _mm)


def _mm(
    n: int, i: np.ndarray, j: np.ndarray, wij: np.ndarray, wji: np.ndarray, prior: float
) -> tuple[np.ndarray, bool]:
    """Hunter's MM algorithm over the compared pairs only (``i < j`` with ``wij`` / ``wji``
    wins each way, batched as (B, E)), for many items compared sparsely. ``prior`` as in
    ``_newton``. Returns centred log-strengths (B, n) and whether all converged."""
    from scipy.sparse import csr_matrix

    batch = wij.shape[0]
    edges = len(i)
    incidence = csr_matrix(
        (np.ones(2 * edges), (np.concatenate([np.arange(edges)] * 2), np.concatenate([i, j]))),
        shape=(edges, n),
    )
    won = (
        np.stack([np.bincount(i, weights=w, minlength=n) for w in wij])
        + np.stack([np.bincount(j, weights=w, minlength=n) for w in wji])
        + prior / 2
    )
    games = wij + wji
    p = np.ones((batch, n))
    for _ in range(3000):
        share = games / (p[:, i] + p[:, j])  # (B, E)
        denominator = (incidence.T @ share.T).T + prior / (p + 1)
        fresh = np.where(denominator > 0, won / np.maximum(denominator, 1e-300), p)
        fresh = np.maximum(fresh, 1e-300)
        if prior == 0:  # only then is the model blind to a common shift
            fresh /= np.exp(np.log(fresh).mean(axis=1, keepdims=True))
        change = np.abs(np.log(fresh) - np.log(p)).max()
        p = fresh
        if change < 1e-9:
            theta = np.log(p)
            return theta - theta.mean(axis=1, keepdims=True), True
    theta = np.log(p)
    return theta - theta.mean(axis=1, keepdims=True), False


def _sparse_newton(
    n: int, i: np.ndarray, j: np.ndarray, wij: np.ndarray, wji: np.ndarray, prior: float
) -> tuple[np.ndarray, bool]:
    """One fit by Newton's method with a sparse information matrix (many items)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.linalg import spsolve

    games = wij + wji
    won: np.ndarray = (
        np.bincount(i, weights=wij, minlength=n)
        + np.bincount(j, weights=wji, minlength=n)
        + prior / 2
    )
    theta = np.zeros(n)
    for _ in range(200):
        p = 1 / (1 + np.exp(theta[j] - theta[i]))  # P(i beats j) per pair
        own = 1 / (1 + np.exp(-theta))
        expected = np.bincount(i, weights=games * p, minlength=n) + np.bincount(
            j, weights=games * (1 - p), minlength=n
        )
        grad = won - expected - prior * own
        weight = games * p * (1 - p)
        diagonal = (
            np.bincount(i, weights=weight, minlength=n)
            + np.bincount(j, weights=weight, minlength=n)
            + prior * own * (1 - own)
            + (1e-9 if prior == 0 else 0.0)  # the free shift, when nothing else fixes it
        )
        rows = np.concatenate([i, j, np.arange(n)])
        cols = np.concatenate([j, i, np.arange(n)])
        values = np.concatenate([-weight, -weight, diagonal])
        info = coo_matrix((values, (rows, cols)), shape=(n, n)).tocsc()
        step = np.clip(spsolve(info, grad), -5, 5)
        if prior == 0:
            step -= step.mean()
        theta = theta + step
        if np.abs(step).max() < 1e-10:
            return theta - theta.mean(), True
    return theta - theta.mean(), False


def _pairs(wins: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    games = wins + wins.T
    i, j = np.nonzero(np.triu(games, 1))
    return i, j, wins[i, j], wins[j, i]


def bradley_terry(wins: np.ndarray, *, regularize: bool | None = None) -> dict[str, Any]:
    """Maximum-likelihood log-strengths (natural log, centred to mean 0). When the
    comparison graph is not strongly connected (or ``regularize``), each item also gets a
    virtual half win and half loss against a reference of strength 1 (``REGULARIZATION``),
    so that every strength is finite; ``regularized`` says so."""
    connected = strongly_connected(wins)
    prior = REGULARIZATION if (regularize if regularize is not None else not connected) else 0.0
    if len(wins) > DENSE_LIMIT:
        i, j, wij, wji = _pairs(wins)
        single, converged = _sparse_newton(len(wins), i, j, wij, wji, prior)
        theta = single[None]
    else:
        theta, converged = _newton(wins[None], prior)
    return {
        "strength": theta[0],
        "connected": connected,
        "regularized": prior > 0,
        "converged": converged,
    }


def bootstrap_bradley_terry(
    n: int,
    a: np.ndarray,
    b: np.ndarray,
    s: np.ndarray,
    *,
    resamples: int = 1000,
    seed: int = 0,
    regularized: bool = False,
) -> np.ndarray:
    """Log-strengths of ``resamples`` bootstrap resamples of the judgments (drawn with
    replacement, as counts over the distinct (pair, outcome) cells), shape (resamples, n)."""
    if resamples <= 0 or len(a) == 0:
        return np.zeros((0, n))
    cells, counts = np.unique(np.stack([a, b, s * 2]).T, axis=0, return_counts=True)
    rng = np.random.default_rng(seed)
    drawn = rng.multinomial(len(a), counts / counts.sum(), size=resamples)  # (B, K)
    ca, cb, cs = cells[:, 0].astype(int), cells[:, 1].astype(int), cells[:, 2] / 2
    prior = REGULARIZATION if regularized else _RIDGE
    if n > DENSE_LIMIT:
        # Per compared pair (low, high): the wins each way of every resample.
        low, high = np.minimum(ca, cb), np.maximum(ca, cb)
        pair_ids, pair_of_cell = np.unique(low * n + high, return_inverse=True)
        to_low = np.where(ca == low, cs, 1 - cs)
        from scipy.sparse import csr_matrix

        def collect(weight: np.ndarray) -> np.ndarray:
            cells_to_pairs = csr_matrix(
                (weight, (np.arange(len(cells)), pair_of_cell)), shape=(len(cells), len(pair_ids))
            )
            return np.asarray((cells_to_pairs.T @ drawn.T).T)

        wij, wji = collect(to_low), collect(1 - to_low)
        theta, _ = _mm(n, pair_ids // n, pair_ids % n, wij, wji, prior)
        return theta
    # Each cell's contribution to W, as a (K, n*n) map.
    spread = np.zeros((len(cells), n * n))
    spread[np.arange(len(cells)), ca * n + cb] += cs
    spread[np.arange(len(cells)), cb * n + ca] += 1 - cs
    wins = (drawn @ spread).reshape(resamples, n, n)
    theta, _ = _newton(wins, prior)
    return theta


def ranks(values: np.ndarray) -> np.ndarray:
    """1 = highest; ties share the better rank."""
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

    def run(indices: np.ndarray) -> np.ndarray:
        rating = np.full((indices.shape[0], n), base)
        rows = np.arange(indices.shape[0])
        for step in range(indices.shape[1]):
            j = indices[:, step]
            ra, rb = rating[rows, a[j]], rating[rows, b[j]]
            expected = 1 / (1 + 10 ** ((rb - ra) / scale))
            delta = k * (s[j] - expected)
            rating[rows, a[j]] += delta
            rating[rows, b[j]] -= delta
        return rating

    single = run(sequence[None])[0]
    if rounds > 0 and len(a):
        boot = run(rng.integers(0, len(a), size=(rounds, len(a))))
        low, median, high = np.percentile(boot, [2.5, 50, 97.5], axis=0)
    else:
        low = median = high = single
    return {"rating": single, "median": median, "ci_low": low, "ci_high": high}


# --- position -----------------------------------------------------------------------------------
def binomial(successes: int, trials: int) -> dict[str, Any]:
    """The share of successes with its exact (Clopper-Pearson) 95% interval and the exact
    two-sided binomial test against one half."""
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
    if candidates is None:
        i_all, j_all = np.triu_indices(n, 1)
        candidates = np.stack([i_all, j_all], axis=1)
    if len(candidates) == 0 or count <= 0:
        return []
    wins = win_matrix(n, a, b, s) if len(a) else np.zeros((n, n))
    theta, _ = _newton(wins[None], REGULARIZATION)
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
