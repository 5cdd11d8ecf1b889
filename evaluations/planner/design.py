"""The scheduler's model, as pure functions over numpy arrays (no database).

Every verdict compares two entities (models, or variants) i shown first and j second. A
rater r gives it by a Bradley-Terry draw with probability ``reliability`` and a coin flip
otherwise, with a position bias ``bias`` (logit) for whatever is shown first:

    P(first wins) = reliability * sigmoid(theta_i - theta_j + bias) + (1 - reliability) / 2

People are the reference (their reliability is 1); each judge's reliability and position bias
are estimated from its verdicts against the strengths fitted from people's (``rater_quality``).
One verdict carries the Fisher information ``information`` about theta_i - theta_j; the R
verdicts of one task (a judge's repetitions and both orders, or the ``overlap`` people of a
task) carry R w / (1 + (R - 1) rho), rho their correlation (a judge repeating itself at
temperature 0 says the same thing again). The strengths' covariance is the inverse of the
summed information (with a weak prior), and the question is a set of contrasts of the
strengths: its interval half-width is 1.96 sd. ``plan`` adds, one task at a time, the
(pair, rater) whose task removes the most of the question's variance per unit of cost
(dollars over the dollar budget plus hours over the hour budget), updating the covariance
after each (Sherman-Morrison), until the budget is spent or the target is reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

# scipy.stats is imported inside the functions that use it: it takes about a second to
# import, and the web server loads this module before answering its first request.
from scipy import optimize

Z = NormalDist().inv_cdf(0.975)
PRIOR = 0.25  # precision of the N(0, 4) prior on each strength: one virtual game, half won
EPS = 1e-9
# The grid ``rater_quality`` searches, and the prior it shrinks towards (weight in verdicts).
RELIABILITY_GRID = np.linspace(0.0, 1.0, 26)
BIAS_GRID = np.linspace(-2.0, 2.0, 21)
PRIOR_RELIABILITY = 0.7
PRIOR_WEIGHT = 20.0
DEFAULT_REPEAT_CORRELATION = 0.5
QUALITY_SAMPLE = 3000  # verdicts of one rater the quality grids read at most


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def first_wins(delta: Any, reliability: Any, bias: Any) -> np.ndarray:
    """P(the first shown wins), ``delta`` = theta_first - theta_second."""
    return reliability * sigmoid(np.asarray(delta) + bias) + (1 - reliability) / 2


def information(delta: Any, reliability: Any, bias: Any) -> np.ndarray:
    """Fisher information of one verdict about ``delta`` (first minus second shown)."""
    g = sigmoid(np.asarray(delta, float) + bias)
    p = np.clip(reliability * g + (1 - reliability) / 2, EPS, 1 - EPS)
    slope = reliability * g * (1 - g)
    return slope**2 / (p * (1 - p))


def balanced_information(delta: Any, reliability: Any, bias: Any) -> np.ndarray:
    """``information`` averaged over the two presentation orders (tasks are shown either
    way round at random, or both with a judge's swap)."""
    delta = np.asarray(delta, float)
    return (information(delta, reliability, bias) + information(-delta, reliability, bias)) / 2


@dataclass(frozen=True)
class Rater:
    """One kind of work the plan can buy: a task for people (``human``) or for one judge."""

    key: str
    reliability: float
    bias: float
    verdicts_per_task: int
    repeat_correlation: float
    usd_per_task: float
    hours_per_task: float

    def task_information(self, delta: np.ndarray) -> np.ndarray:
        r = self.verdicts_per_task
        w = balanced_information(delta, self.reliability, self.bias)
        return r * w / (1 + (r - 1) * self.repeat_correlation)


# --- the fit ------------------------------------------------------------------------------------
def fit(
    n: int,
    first: np.ndarray,
    second: np.ndarray,
    outcome: np.ndarray,
    reliability: np.ndarray,
    bias: np.ndarray,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """The strengths maximizing the (weighted) likelihood of the verdicts under the raters'
    reliabilities and biases, plus the N(0, 1/PRIOR) prior."""
    weight = np.ones(len(first)) if weight is None else weight

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        g = sigmoid(theta[first] - theta[second] + bias)
        p = np.clip(reliability * g + (1 - reliability) / 2, EPS, 1 - EPS)
        value = -np.sum(weight * (outcome * np.log(p) + (1 - outcome) * np.log(1 - p)))
        value += PRIOR * theta @ theta / 2
        # d(-loglik)/dp times dp/d(delta)
        dp = -weight * (outcome / p - (1 - outcome) / (1 - p)) * reliability * g * (1 - g)
        grad = np.bincount(first, dp, n) - np.bincount(second, dp, n) + PRIOR * theta
        return float(value), grad

    if len(first) == 0:
        return np.zeros(n)
    found = optimize.minimize(objective, np.zeros(n), jac=True, method="L-BFGS-B")
    return np.asarray(found.x)


def rater_quality(
    theta: np.ndarray, first: np.ndarray, second: np.ndarray, outcome: np.ndarray
) -> tuple[float, float]:
    """A judge's (reliability, position bias): the maximum of its verdicts' likelihood given
    the people's strengths ``theta`` (a coarse grid over [0, 1] x [-2, 2], then a fine one
    around its best point), shrunk towards (PRIOR_RELIABILITY, 0) with the weight of
    PRIOR_WEIGHT verdicts. At most QUALITY_SAMPLE verdicts are read (a seeded sample)."""
    n = len(first)
    if n == 0:
        return PRIOR_RELIABILITY, 0.0
    if n > QUALITY_SAMPLE:  # the grid's work is bounded
        chosen = np.random.default_rng(0).choice(n, QUALITY_SAMPLE, replace=False)
        first, second, outcome = first[chosen], second[chosen], outcome[chosen]
    delta = theta[first] - theta[second]
    lam, beta = _grid_best(delta, outcome, RELIABILITY_GRID, BIAS_GRID)
    lam, beta = _grid_best(
        delta,
        outcome,
        np.clip(lam + np.linspace(-0.04, 0.04, 9), 0.0, 1.0),
        beta + np.linspace(-0.1, 0.1, 9),
    )
    shrink = n / (n + PRIOR_WEIGHT)
    return float(shrink * lam + (1 - shrink) * PRIOR_RELIABILITY), float(shrink * beta)


def _grid_best(
    delta: np.ndarray, outcome: np.ndarray, lams: np.ndarray, betas: np.ndarray
) -> tuple[float, float]:
    g = sigmoid(delta[None, None, :] + betas[None, :, None])
    lam = lams[:, None, None]
    p = np.clip(lam * g + (1 - lam) / 2, EPS, 1 - EPS)
    loglik = (outcome * np.log(p) + (1 - outcome) * np.log(1 - p)).sum(axis=2)
    i, j = np.unravel_index(int(np.argmax(loglik)), loglik.shape)
    return float(lams[i]), float(betas[j])


def repeat_correlation(groups: np.ndarray, outcome: np.ndarray) -> float | None:
    """How alike a rater's verdicts on the same task and order are: 2 a - 1, a the share of
    agreeing pairs among them (None without repeats)."""
    if len(groups) == 0:
        return None
    order = np.argsort(groups, kind="stable")
    g, s = groups[order], outcome[order]
    agree = pairs = 0.0
    for start, stop in _runs(g):
        values = s[start:stop]
        k = len(values)
        if k < 2:
            continue
        wins = float(values.sum())
        pairs += k * (k - 1) / 2
        agree += wins * (wins - 1) / 2 + (k - wins) * (k - wins - 1) / 2
    if pairs == 0:
        return None
    return float(np.clip(2 * agree / pairs - 1, 0.0, 1.0))


def _runs(sorted_keys: np.ndarray) -> list[tuple[int, int]]:
    if len(sorted_keys) == 0:
        return []
    edges = np.nonzero(np.diff(sorted_keys))[0] + 1
    starts = np.concatenate([[0], edges])
    stops = np.concatenate([edges, [len(sorted_keys)]])
    return list(zip(starts.tolist(), stops.tolist(), strict=True))


def covariance(
    n: int,
    theta: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    reliability: np.ndarray,
    bias: np.ndarray,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """The strengths' covariance: the inverse of the verdicts' summed Fisher information
    (each verdict's ``weight``: 1 / (1 + (R - 1) rho) for R alike verdicts) plus the prior."""
    w = information(theta[first] - theta[second], reliability, bias)
    if weight is not None:
        w = w * weight
    info = np.zeros((n, n))
    np.add.at(info, (first, first), w)
    np.add.at(info, (second, second), w)
    np.add.at(info, (first, second), -w)
    np.add.at(info, (second, first), -w)
    info[np.diag_indices(n)] += PRIOR
    return np.linalg.inv(info)


# --- the question -------------------------------------------------------------------------------
QUESTIONS = ("pair", "top_k", "ranking")


@dataclass(frozen=True)
class Question:
    """``pair``: is ``a`` better than ``b`` (the interval on theta_a - theta_b); ``top_k``:
    the separation of the k-th from the (k+1)-th; ``ranking``: the whole order, to an
    expected Kendall tau of ``tau`` with the truth."""

    kind: str
    a: int | None = None
    b: int | None = None
    k: int | None = None
    tau: float = 0.9


def contrast_pairs(question: Question, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The question's contrasts theta_i - theta_j as index arrays (i, j), by the current
    ordering."""
    order = np.argsort(-theta, kind="stable")
    if question.kind == "pair":
        return np.array([question.a]), np.array([question.b])
    if question.kind == "top_k":
        k = int(question.k or 1)
        return order[k - 1 : k], order[k : k + 1]
    return order[:-1], order[1:]


def contrasts(question: Question, theta: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """The question's contrasts of the strengths as rows (+1 at i, -1 at j)."""
    pi, pj = contrast_pairs(question, theta)
    rows = np.zeros((len(pi), len(theta)))
    rows[np.arange(len(pi)), pi] += 1.0
    rows[np.arange(len(pi)), pj] -= 1.0
    return rows


def _variance(cov: np.ndarray, pi: np.ndarray, pj: np.ndarray) -> np.ndarray:
    return cov[pi, pi] + cov[pj, pj] - 2 * cov[pi, pj]


def _weights(question: Question, theta: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """How much each contrast's variance counts: 1 for a single contrast; for the ranking,
    the chance the fit misorders the pair over its variance (the share of it one verdict
    removes, weighted by how likely it is wrong: as ``stats.next_pairs``)."""
    from scipy import stats as sps

    pi, pj = contrast_pairs(question, theta)
    if question.kind != "ranking":
        return np.ones(len(pi))
    var = np.maximum(_variance(cov, pi, pj), EPS)
    return sps.norm.cdf(-np.abs(theta[pi] - theta[pj]) / np.sqrt(var)) / var


def expected_tau(theta: np.ndarray, cov: np.ndarray) -> float:
    """The expected Kendall tau between the fitted order and the truth: 1 - 2 x the mean
    chance a pair is misordered, each pair's difference normal around the estimate."""
    from scipy import stats as sps

    n = len(theta)
    if n < 2:
        return 1.0
    i, j = np.triu_indices(n, 1)
    d = np.diag(cov)
    var = np.maximum(d[i] + d[j] - 2 * cov[i, j], EPS)
    wrong = sps.norm.cdf(-np.abs(theta[i] - theta[j]) / np.sqrt(var))
    return float(1 - 2 * wrong.mean())


def answer(question: Question, theta: np.ndarray, cov: np.ndarray) -> dict[str, Any]:
    """The question's estimate, interval half-width and (ranking) expected tau."""
    pi, pj = contrast_pairs(question, theta)
    sd = np.sqrt(np.maximum(_variance(cov, pi, pj), 0))
    found: dict[str, Any] = {"width": float(2 * Z * sd.mean())}
    if question.kind != "ranking":
        estimate = float(theta[pi[0]] - theta[pj[0]])
        found |= {
            "estimate": estimate,
            "ci_low": estimate - Z * float(sd[0]),
            "ci_high": estimate + Z * float(sd[0]),
        }
    else:
        found["expected_tau"] = expected_tau(theta, cov)
    return found


def reached(question: Question, found: dict[str, Any], target_width: float | None) -> bool:
    if question.kind == "ranking":
        tau_ok = found["expected_tau"] >= question.tau
        return tau_ok and (target_width is None or found["width"] <= target_width)
    return target_width is not None and found["width"] <= target_width


# --- the plan -----------------------------------------------------------------------------------
@dataclass
class Plan:
    """The tasks chosen, in order: (candidate index, rater index) each; the money and hours
    they cost; the question's answer before and after (projected)."""

    picks: list[tuple[int, int]] = field(default_factory=list)
    usd: float = 0.0
    hours: float = 0.0
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    covariance: np.ndarray | None = None


def plan(
    *,
    theta: np.ndarray,
    cov: np.ndarray,
    question: Question,
    candidates: np.ndarray,
    raters: list[Rater],
    budget_usd: float,
    budget_hours: float,
    target_width: float | None = None,
    max_tasks: int = 500,
    per_candidate: np.ndarray | None = None,
) -> Plan:
    """Greedy tasks, each the (pair, rater) with the most of the question's variance removed
    per unit of normalized cost, until the budget, ``max_tasks`` or the target stops it.
    ``per_candidate``: the most tasks each candidate pair may get (its items x repeats)."""
    cov = cov.copy()
    result = Plan(before=answer(question, theta, cov))
    if len(candidates) == 0 or not raters:
        result.after, result.covariance = result.before, cov
        return result
    ci, cj = candidates[:, 0], candidates[:, 1]
    rows = contrasts(question, theta, cov)
    pi, pj = contrast_pairs(question, theta)
    omega = _weights(question, theta, cov)
    a_matrix = rows @ cov  # (M, n): rows' covariance with every strength
    delta = theta[ci] - theta[cj]
    units = np.stack([r.task_information(delta) for r in raters], axis=1)  # (P, R)
    usd = np.array([r.usd_per_task for r in raters])
    hours = np.array([r.hours_per_task for r in raters])
    norm = usd / max(budget_usd, EPS) + hours / max(budget_hours, EPS)
    usable = ((usd == 0) | (budget_usd > 0)) & ((hours == 0) | (budget_hours > 0)) & (norm > 0)
    left = per_candidate.copy() if per_candidate is not None else np.full(len(candidates), 10**9)
    spent_usd = spent_hours = 0.0
    checked = question.kind == "ranking" or target_width is not None
    for _ in range(max_tasks):
        if checked and reached(question, answer(question, theta, cov), target_width):
            break
        spread = np.maximum(cov[ci, ci] + cov[cj, cj] - 2 * cov[ci, cj], EPS)  # d' S d
        cross = a_matrix[:, ci] - a_matrix[:, cj]  # (M, P): c' S d
        q = (omega[:, None] * cross**2).sum(axis=0)  # (P,)
        gain = units * q[:, None] / (1 + units * spread[:, None])  # (P, R)
        affordable = (
            usable
            & (spent_usd + usd <= budget_usd + EPS)
            & (spent_hours + hours <= budget_hours + EPS)
        )
        fits = affordable[None, :] & (left > 0)[:, None]
        score = np.where(fits, gain / np.where(norm > 0, norm, 1.0)[None, :], -np.inf)
        best = int(np.argmax(score))
        p, r = divmod(best, len(raters))
        if not np.isfinite(score[p, r]) or gain[p, r] <= 0:
            break
        result.picks.append((p, r))
        spent_usd += usd[r]
        spent_hours += hours[r]
        left[p] -= 1
        g = cov[:, ci[p]] - cov[:, cj[p]]  # cov @ (e_i - e_j)
        k = units[p, r] / (1 + units[p, r] * spread[p])
        cov -= k * np.outer(g, g)
        a_matrix -= k * np.outer(g[pi] - g[pj], g)
    result.usd, result.hours = spent_usd, spent_hours
    result.after, result.covariance = answer(question, theta, cov), cov
    return result


# --- from verdicts to the model -----------------------------------------------------------------
HUMAN = "human"


@dataclass
class Quality:
    """A rater's measured reliability, position bias and repeat correlation, and from how
    many verdicts (``against_people``: measured against the people's strengths)."""

    reliability: float
    bias: float
    repeat_correlation: float
    verdicts: int
    against_people: bool


@dataclass
class Estimate:
    theta: np.ndarray
    cov: np.ndarray
    quality: dict[str, Quality]


def estimate(
    n: int,
    first: np.ndarray,
    second: np.ndarray,
    outcome: np.ndarray,
    rater: np.ndarray,
    task: np.ndarray,
) -> Estimate:
    """Strengths, their covariance and each rater's quality from the verdicts (``rater``:
    ``HUMAN`` or a judge's key per verdict; ``task``: the task each is of). The people's
    verdicts alone give the reference strengths (all verdicts when there are none); each
    judge is measured against them; then one fit of every verdict, each weighted by its
    rater's reliability, bias and repeats."""
    first, second = np.asarray(first, int), np.asarray(second, int)
    outcome, rater = np.asarray(outcome, float), np.asarray(rater, dtype=object)
    task = np.asarray(task, int)
    people = rater == HUMAN
    against_people = bool(people.any())
    ref = people if against_people else np.ones(len(first), bool)
    ones = np.ones(int(ref.sum()))
    reference = fit(n, first[ref], second[ref], outcome[ref], ones, 0 * ones)
    quality: dict[str, Quality] = {}
    for key in sorted(set(rater.tolist())):
        mine = rater == key
        # Alike verdicts: the same rater on the same task in the same order.
        groups = task[mine] * 2 + (first[mine] > second[mine])
        rho = repeat_correlation(groups, outcome[mine]) if key != HUMAN else 0.0
        if key == HUMAN:
            lam, beta = 1.0, _bias(reference, first[mine], second[mine], outcome[mine])
        else:
            lam, beta = rater_quality(reference, first[mine], second[mine], outcome[mine])
        quality[key] = Quality(
            lam,
            beta,
            DEFAULT_REPEAT_CORRELATION if rho is None else rho,
            int(mine.sum()),
            against_people,
        )
    lams = np.array([quality[k].reliability for k in rater.tolist()])
    betas = np.array([quality[k].bias for k in rater.tolist()])
    weight = _repeat_weights(rater, task, first, second, quality)
    theta = fit(n, first, second, outcome, lams, betas, weight)
    return Estimate(theta, covariance(n, theta, first, second, lams, betas, weight), quality)


def _bias(theta: np.ndarray, first: np.ndarray, second: np.ndarray, outcome: np.ndarray) -> float:
    """People's position bias (their reliability 1), on the same grid."""
    if len(first) == 0:
        return 0.0
    if len(first) > QUALITY_SAMPLE:
        chosen = np.random.default_rng(0).choice(len(first), QUALITY_SAMPLE, replace=False)
        first, second, outcome = first[chosen], second[chosen], outcome[chosen]
    g = sigmoid((theta[first] - theta[second])[None, :] + BIAS_GRID[:, None])
    p = np.clip(g, EPS, 1 - EPS)
    loglik = (outcome * np.log(p) + (1 - outcome) * np.log(1 - p)).sum(axis=1)
    shrink = len(first) / (len(first) + PRIOR_WEIGHT)
    return float(shrink * BIAS_GRID[int(np.argmax(loglik))])


def _repeat_weights(
    rater: np.ndarray,
    task: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    quality: dict[str, Quality],
) -> np.ndarray:
    """1 / (1 + (R - 1) rho) per verdict, R the rater's alike verdicts of the task."""
    _, code = np.unique(rater.astype(str), return_inverse=True)
    span = int(task.max(initial=0)) + 1
    keys = (code.astype(np.int64) * span + task) * 2 + (first > second)
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    size = counts[inverse].astype(float)
    rho = np.array([quality[r].repeat_correlation for r in rater.tolist()])
    return 1 / (1 + (size - 1) * rho)


def agreement_with_people(
    first: np.ndarray,
    second: np.ndarray,
    outcome: np.ndarray,
    rater: np.ndarray,
    task: np.ndarray,
) -> dict[str, tuple[float | None, int]]:
    """Each judge's raw agreement with people: the share of its decisive verdicts on tasks
    people decided (a strict majority) that name the same winner, and how many were
    compared. Shown beside the model's reliability, which corrects it for chance."""
    winner = np.where(outcome == 1, first, np.where(outcome == 0, second, -1))
    people = (rater == HUMAN) & (winner >= 0)
    votes: dict[int, dict[int, int]] = {}
    for t, w in zip(task[people].tolist(), winner[people].tolist(), strict=True):
        votes.setdefault(t, {})
        votes[t][w] = votes[t].get(w, 0) + 1
    majority = {}
    for t, counts in votes.items():
        ranked = sorted(counts.values(), reverse=True)
        if len(ranked) == 1 or ranked[0] > ranked[1]:
            majority[t] = max(counts, key=counts.__getitem__)
    found: dict[str, tuple[float | None, int]] = {}
    for key in sorted(set(rater.tolist()) - {HUMAN}):
        mine = (rater == key) & (winner >= 0)
        pairs = [
            (majority[t], w)
            for t, w in zip(task[mine].tolist(), winner[mine].tolist(), strict=True)
            if t in majority
        ]
        agree = sum(1 for m, w in pairs if m == w)
        found[key] = (agree / len(pairs) if pairs else None, len(pairs))
    return found
