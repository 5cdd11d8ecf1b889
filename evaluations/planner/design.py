"""The scheduler's model, as pure functions over numpy arrays (no database).

Every verdict compares two entities (models, or variants) i shown first and j second. A
rater r gives it by a Bradley-Terry draw with probability ``reliability`` and a coin flip
otherwise, with a position bias ``bias`` (logit) for whatever is shown first:

    P(first wins) = reliability * sigmoid(theta_i - theta_j + bias) + (1 - reliability) / 2

People are the reference: their reliability is 1 and they see the strengths theta. A judge
sees each entity's strength off by its own deviation (theta_i + delta_ri: a judge may
favour one model, its maker's say, by a prior N(0, DEVIATION_SD^2)); its reliability and
bias are free. All of it is one likelihood (``joint_fit``), maximized at once with weak
priors, so the strengths' covariance carries the uncertainty of every judge's reliability,
bias and deviations, and of the people's reference: a judge is calibrated by the very fit
that uses it, not by plugging in strengths fitted from a few people's verdicts. The R
verdicts of one task (a judge's repetitions and both orders, or the ``overlap`` people of a
task) count R / (1 + (R - 1) rho), rho their correlation; the covariance is the inverse of
the information, scaled up where the task-clustered sandwich finds it too narrow.

The question is a set of contrasts of the strengths: its interval half-width is 1.96 sd.
``plan`` adds, one task at a time, the (pair, rater) whose task removes the most of the
question's variance per unit of cost (dollars over the dollar budget plus hours over the
hour budget), in the joint parameters (so a people's task is worth what it tells about the
judges too), updating the covariance after each (two rank-one updates: a task is shown
either way round), until the budget is spent or the target is reached.
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
HUMAN = "human"
PRIOR_RELIABILITY = 0.7  # the prior's centre for a judge's reliability
RELIABILITY_PRIOR_SD = 1.5  # on the logit of the reliability
BIAS_PRIOR_SD = 2.0  # a position bias of 2 logits is one sd away
DEVIATION_SD = 0.3  # how far a judge sees one model from where people see it (logits)
DEFAULT_REPEAT_CORRELATION = 0.5
# Before planning for the question, a plan measures each judge until the sd of its
# reliability's logit is CALIBRATED_SD, with at most CALIBRATION_SHARE of the money.
CALIBRATED_SD = 0.5
CALIBRATION_SHARE = 0.2


def sigmoid(x: Any) -> np.ndarray:
    return 1 / (1 + np.exp(-np.asarray(x, float)))


def first_wins(delta: Any, reliability: Any, bias: Any) -> np.ndarray:
    """P(the first shown wins), ``delta`` = theta_first - theta_second."""
    return reliability * sigmoid(np.asarray(delta) + bias) + (1 - reliability) / 2


@dataclass(frozen=True)
class Rater:
    """One kind of work the plan can buy: a task for people (``human``) or for one judge
    (its quality is the fit's: ``Estimate``)."""

    key: str
    verdicts_per_task: int
    repeat_correlation: float
    usd_per_task: float
    hours_per_task: float

    @property
    def task_weight(self) -> float:
        r = self.verdicts_per_task
        return r / (1 + (r - 1) * self.repeat_correlation)


# --- the joint model ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """Where each parameter sits in the joint vector: the strengths (n), each judge's
    deviations from the people's strengths (judges x n), each judge's reliability logit,
    then the position bias of people and of each judge."""

    n: int
    judges: tuple[str, ...]

    @property
    def size(self) -> int:
        return self.n * (1 + len(self.judges)) + 2 * len(self.judges) + 1

    def deviation(self, judge: int) -> int:
        """The index of the judge's deviation of entity 0."""
        return self.n * (1 + judge)

    def reliability(self, judge: int) -> int:
        return self.n * (1 + len(self.judges)) + judge

    def bias(self, judge: int) -> int:
        """The index of a judge's bias; ``-1``: the people's."""
        return self.n * (1 + len(self.judges)) + len(self.judges) + 1 + judge

    def judge_index(self, key: str) -> int:
        return -1 if key == HUMAN else self.judges.index(key)

    def prior(self) -> tuple[np.ndarray, np.ndarray]:
        """The priors' means and precisions."""
        mean, precision = np.zeros(self.size), np.full(self.size, 1 / BIAS_PRIOR_SD**2)
        precision[: self.n] = PRIOR
        precision[self.n : self.reliability(0)] = 1 / DEVIATION_SD**2
        lam = slice(self.reliability(0), self.bias(-1))
        mean[lam] = np.log(PRIOR_RELIABILITY / (1 - PRIOR_RELIABILITY))
        precision[lam] = 1 / RELIABILITY_PRIOR_SD**2
        return mean, precision


def _gradients(
    layout: Layout, params: np.ndarray, first: np.ndarray, second: np.ndarray, judge: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per verdict (``judge``: the judge's index, -1 for people): P(first wins), and
    dP/dparams as six (column, value) pairs: the two strengths, the two deviations, the
    reliability logit and the bias (people have no deviation or reliability: value 0)."""
    is_judge = judge >= 0
    on = is_judge.astype(float)
    jj = np.where(is_judge, judge, 0)
    dev = layout.deviation(0) + jj * layout.n

    def judges_column(column: np.ndarray) -> np.ndarray:  # people's: a real one, value 0
        return np.where(is_judge, column, first)

    dev_first, dev_second = judges_column(dev + first), judges_column(dev + second)
    delta = params[first] - params[second] + on * (params[dev_first] - params[dev_second])
    beta_col = layout.bias(0) + judge  # the people's at bias(-1)
    eta_col = judges_column(layout.reliability(0) + jj)
    lam = np.where(is_judge, sigmoid(params[eta_col]), 1.0)
    g = sigmoid(delta + params[beta_col])
    p = np.clip(lam * g + (1 - lam) / 2, EPS, 1 - EPS)
    a = lam * g * (1 - g)
    columns = np.stack([first, second, dev_first, dev_second, eta_col, beta_col], axis=1)
    values = np.stack([a, -a, on * a, -on * a, on * (g - 0.5) * lam * (1 - lam), a], axis=1)
    return p, columns, values


def joint_fit(
    layout: Layout,
    first: np.ndarray,
    second: np.ndarray,
    outcome: np.ndarray,
    judge: np.ndarray,
    weight: np.ndarray,
    task: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The parameters maximizing the weighted likelihood of the verdicts plus the priors,
    and their covariance: the inverse of the information, scaled up where the
    task-clustered sandwich (robust to repeats alike beyond rho, and to raters off the
    model) finds the strengths' contrasts wider."""
    from scipy import sparse

    size = layout.size
    mean, precision = layout.prior()

    def objective(params: np.ndarray) -> tuple[float, np.ndarray]:
        p, columns, values = _gradients(layout, params, first, second, judge)
        value = -np.sum(weight * (outcome * np.log(p) + (1 - outcome) * np.log(1 - p)))
        value += float(np.sum(precision * (params - mean) ** 2) / 2)
        score = -weight * (outcome - p) / (p * (1 - p))
        grad = np.bincount(columns.ravel(), (values * score[:, None]).ravel(), size)
        return float(value), grad + precision * (params - mean)

    params = mean.copy()
    if len(first) == 0:
        return params, np.diag(1 / precision)
    found = optimize.minimize(
        objective, params, jac=True, method="L-BFGS-B", options={"maxiter": 3000}
    )
    params = np.asarray(found.x)
    rows = np.repeat(np.arange(len(first)), 6)
    for polish in range(3):  # Fisher scoring from L-BFGS's stop, and the information there
        p, columns, values = _gradients(layout, params, first, second, judge)
        scaled = values * np.sqrt(weight / (p * (1 - p)))[:, None]
        u = sparse.csr_matrix((scaled.ravel(), (rows, columns.ravel())), shape=(len(first), size))
        cov = np.linalg.inv((u.T @ u).toarray() + np.diag(precision))
        if polish == 2:
            break
        value, grad = objective(params)
        step = params - cov @ grad
        if not objective(step)[0] < value:  # only a step that improves the fit is taken
            break
        params = step
    # Each task's scores summed (a judge's repeats and orders, the people of one task).
    residual = weight * (outcome - p) / (p * (1 - p))
    _, cluster = np.unique(task, return_inverse=True)
    s = sparse.csr_matrix(
        ((values * residual[:, None]).ravel(), (cluster[rows], columns.ravel())),
        shape=(int(cluster.max()) + 1, size),
    )
    sandwich = cov @ (s.T @ s).toarray() @ cov + cov @ np.diag(precision) @ cov
    return params, _wider(cov, sandwich, layout.n)


def _wider(cov: np.ndarray, sandwich: np.ndarray, n: int) -> np.ndarray:
    """``cov`` scaled up by how much wider the sandwich finds the strengths' contrasts (the
    median ratio of their variances, when above 1): a dispersion correction."""
    i, j = np.triu_indices(n, 1)
    if len(i) == 0:
        return cov
    d0, d1 = np.diag(cov), np.diag(sandwich)
    v0 = np.maximum(d0[i] + d0[j] - 2 * cov[i, j], EPS)
    v1 = d1[i] + d1[j] - 2 * sandwich[i, j]
    return cov * max(1.0, float(np.median(v1 / v0)))


@dataclass
class Quality:
    """A rater's measured reliability, position bias and repeat correlation, and from how
    many verdicts (``against_people``: measured against people's verdicts)."""

    reliability: float
    bias: float
    repeat_correlation: float
    verdicts: int
    against_people: bool


@dataclass
class Estimate:
    """The strengths and their covariance (``cov``), each rater's quality, and the joint
    parameters with their covariance that the plan updates."""

    theta: np.ndarray
    cov: np.ndarray
    quality: dict[str, Quality]
    layout: Layout
    params: np.ndarray
    joint_cov: np.ndarray


def estimate(
    n: int,
    first: np.ndarray,
    second: np.ndarray,
    outcome: np.ndarray,
    rater: np.ndarray,
    task: np.ndarray,
    judges: tuple[str, ...] | None = None,
) -> Estimate:
    """Strengths, their covariance and each rater's quality from the verdicts (``rater``:
    ``HUMAN`` or a judge's key per verdict; ``task``: the task each is of), by the joint
    fit. ``judges``: the judges to fit, those without verdicts yet at their priors; the
    verdicts of any other judge are left out (None: every judge with verdicts)."""
    first, second = np.asarray(first, int), np.asarray(second, int)
    outcome, rater = np.asarray(outcome, float), np.asarray(rater, dtype=object)
    task = np.asarray(task, int)
    if judges is not None:
        kept = np.array([r == HUMAN or r in judges for r in rater.tolist()], bool)
        first, second, outcome = first[kept], second[kept], outcome[kept]
        rater, task = rater[kept], task[kept]
    keys = sorted(set(rater.tolist()) - {HUMAN} | set(judges or ()))
    layout = Layout(n, tuple(keys))
    against_people = bool((rater == HUMAN).any())
    rho: dict[str, float] = {HUMAN: 0.0}
    for key in keys:
        mine = rater == key
        groups = task[mine] * 2 + (first[mine] > second[mine])
        measured = repeat_correlation(groups, outcome[mine])
        rho[key] = DEFAULT_REPEAT_CORRELATION if measured is None else measured
    index = {key: k for k, key in enumerate(keys)} | {HUMAN: -1}
    judge = np.array([index[r] for r in rater.tolist()], int)
    weight = _repeat_weights(rater, task, first, second, rho)
    params, cov = joint_fit(layout, first, second, outcome, judge, weight, task)
    quality = {
        key: Quality(
            1.0 if key == HUMAN else float(sigmoid(params[layout.reliability(k)])),
            float(params[layout.bias(k)]),
            rho[key],
            int((rater == key).sum()),
            against_people,
        )
        for key, k in index.items()
        if key != HUMAN or against_people
    }
    return Estimate(params[:n].copy(), cov[:n, :n].copy(), quality, layout, params, cov)


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
    calibration: int = 0  # how many of the picks (the first) measure the judges
    usd: float = 0.0
    hours: float = 0.0
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    covariance: np.ndarray | None = None


@dataclass
class _Offers:
    """Every (pair, rater) task in each order as a scaled gradient u (its information
    w u u'): the columns of u's six nonzeros, (P, R, 6), in the first order's sequence (the
    other order's are the same, its two strengths and deviations swapped), their values,
    (P, R, 2, 6), and w per rater (the task's verdicts' worth, half in each order). For
    u'Mu: ``flat``, where the 21 products on and above the diagonal sit in M raveled, and
    ``products``, their coefficients."""

    columns: np.ndarray
    values: np.ndarray
    weight: np.ndarray
    flat: np.ndarray
    products: np.ndarray

    def quadratic(self, matrix: np.ndarray) -> np.ndarray:
        """u'Mu (M symmetric) for every task and order, (P, R, 2)."""
        block = matrix.ravel().take(self.flat)
        return np.einsum("proj,prj->pro", self.products, block)


_UPPER = np.triu_indices(6)
_TWICE = np.where(_UPPER[0] == _UPPER[1], 1.0, 2.0)
_SWAPPED = [1, 0, 3, 2, 4, 5]  # the second order's nonzeros in the first order's sequence


def _offers(
    fitted: Estimate, candidates: np.ndarray, raters: list[Rater], params: np.ndarray
) -> _Offers:
    """Every (pair, rater) task's information at ``params``."""
    layout = fitted.layout
    ci, cj = candidates[:, 0], candidates[:, 1]
    columns = np.zeros((len(ci), len(raters), 6), int)
    values = np.zeros((len(ci), len(raters), 2, 6))
    for r, rater in enumerate(raters):
        judge = np.full(len(ci), layout.judge_index(rater.key), int)
        p, c, v = _gradients(layout, params, ci, cj, judge)
        columns[:, r], values[:, r, 0] = c, v / np.sqrt(p * (1 - p))[:, None]
        p, _, v = _gradients(layout, params, cj, ci, judge)
        values[:, r, 1] = (v / np.sqrt(p * (1 - p))[:, None])[:, _SWAPPED]
    k, m = _UPPER
    return _Offers(
        columns,
        values,
        np.array([r.task_weight / 2 for r in raters]),
        columns[..., k] * layout.size + columns[..., m],
        values[..., k] * values[..., m] * _TWICE,
    )


def counted_on(fitted: Estimate, key: str) -> float:
    """The reliability the plan counts on from a judge (see ``cautious``)."""
    return float(
        sigmoid(cautious(fitted)[fitted.layout.reliability(fitted.layout.judge_index(key))])
    )


def cautious(fitted: Estimate) -> np.ndarray:
    """The parameters with each judge's reliability at the lower end of its 95% interval:
    what the plan counts on from a judge's verdicts. A verdict between close models looks
    the same from a good judge and a coin (both near 1/2), so a judge measured on such
    pairs alone keeps its prior's reliability, and counting on that would spend on noise."""
    layout, params = fitted.layout, fitted.params.copy()
    for k in range(len(layout.judges)):
        slot = layout.reliability(k)
        params[slot] -= Z * float(np.sqrt(max(fitted.joint_cov[slot, slot], 0.0)))
    return params


def _planning_contrasts(
    question: Question, theta: np.ndarray, cov: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The contrasts the plan narrows and how much each counts: the question's; for the
    top k, every pair across its boundary, each weighted as the ranking's adjacent pairs
    (the chance the fit misorders it over its variance: the set is right only if none is)."""
    if question.kind != "top_k":
        pi, pj = contrast_pairs(question, theta)
        return pi, pj, _weights(question, theta, cov)
    from scipy import stats as sps

    order = np.argsort(-theta, kind="stable")
    k = int(question.k or 1)
    pi, pj = (g.ravel() for g in np.meshgrid(order[:k], order[k:], indexing="ij"))
    var = np.maximum(_variance(cov, pi, pj), EPS)
    return pi, pj, sps.norm.cdf(-np.abs(theta[pi] - theta[pj]) / np.sqrt(var)) / var


class _Projection:
    """The joint covariance S as planned tasks add their information, with the question's
    contrasts' covariance with every parameter (A = C S) and Q = A' Omega A."""

    def __init__(self, cov: np.ndarray, pi: np.ndarray, pj: np.ndarray, omega: np.ndarray):
        self.cov, self.pi, self.pj, self.omega = cov, pi, pj, omega
        self.a_matrix = cov[pi] - cov[pj]
        self.q_matrix = self.a_matrix.T @ (omega[:, None] * self.a_matrix)

    def update(self, columns: np.ndarray, values: np.ndarray, weight: float) -> None:
        """Add the information weight u u' (Sherman-Morrison), u given by its nonzeros."""
        g = self.cov[:, columns] @ values  # S u
        k = weight / (1 + weight * float(values @ g[columns]))
        cg = g[self.pi] - g[self.pj]  # C S u
        h = self.a_matrix.T @ (self.omega * cg)
        # Q - k (g h' + h g') + k^2 (cg' Omega cg) g g', as one rank-two update.
        h = h - 0.5 * k * float(self.omega @ cg**2) * g
        self.q_matrix -= k * (np.outer(g, h) + np.outer(h, g))
        self.cov -= k * np.outer(g, g)
        self.a_matrix -= k * np.outer(cg, g)


def plan(
    *,
    fitted: Estimate,
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
    ``per_candidate``: the most tasks each candidate pair may get (its items x repeats).

    The variance a task removes from the contrasts c (weights omega) is, for each of its
    orders u with weight w, w u'Qu / (1 + w u'Su), Q = S C' Omega C S: both quadratic forms
    in u's six nonzeros, and S and Q follow each task by rank-one updates."""
    n, theta = fitted.layout.n, fitted.theta
    cov = fitted.joint_cov.copy()
    result = Plan(before=answer(question, theta, cov[:n, :n]))
    if len(candidates) == 0 or not raters:
        result.after, result.covariance = result.before, cov[:n, :n]
        return result
    pi, pj, omega = _planning_contrasts(question, theta, cov[:n, :n])
    state = _Projection(cov, pi, pj, omega)
    usd = np.array([r.usd_per_task for r in raters])
    hours = np.array([r.hours_per_task for r in raters])
    norm = usd / max(budget_usd, EPS) + hours / max(budget_hours, EPS)
    usable = ((usd == 0) | (budget_usd > 0)) & ((hours == 0) | (budget_hours > 0)) & (norm > 0)
    left = per_candidate.copy() if per_candidate is not None else np.full(len(candidates), 10**9)
    spent = np.zeros(2)  # dollars, hours

    def affordable(cap_usd: float = budget_usd) -> np.ndarray:
        return usable & (spent[0] + usd <= cap_usd + EPS) & (spent[1] + hours <= budget_hours + EPS)

    def take(p: int, r: int, offers: _Offers) -> None:
        result.picks.append((p, r))
        spent[:] += (usd[r], hours[r])
        left[p] -= 1
        for o in range(2):
            state.update(offers.columns[p, r], offers.values[p, r, o], offers.weight[r])

    # First, measure the judges: tasks that narrow each judge's reliability most, on the
    # pairs where it shows (far apart), until it is known to CALIBRATED_SD or the share of
    # the budget for it is spent.
    offers = _offers(fitted, candidates, raters, fitted.params)
    for r, rater in enumerate(raters):
        if rater.key == HUMAN:
            continue
        slot = fitted.layout.reliability(fitted.layout.judge_index(rater.key))
        w = offers.weight[r]
        while len(result.picks) < max_tasks and state.cov[slot, slot] > CALIBRATED_SD**2:
            fits = affordable(CALIBRATION_SHARE * budget_usd)[r] & (left > 0)
            if not fits.any():
                break
            along = np.einsum(
                "pk,pok->po", state.cov[slot][offers.columns[:, r]], offers.values[:, r]
            )
            spread = offers.quadratic(state.cov)[:, r]
            narrowed = (w * along**2 / (1 + w * spread)).sum(axis=1)
            take(int(np.argmax(np.where(fits, narrowed, -np.inf))), r, offers)
    result.calibration = len(result.picks)
    # Then the question: each task the most of its variance removed per unit of cost,
    # counting on each judge's cautious reliability.
    offers = _offers(fitted, candidates, raters, cautious(fitted))
    checked = question.kind == "ranking" or target_width is not None
    w = offers.weight[None, :, None]
    while len(result.picks) < max_tasks:
        if checked and reached(question, answer(question, theta, state.cov[:n, :n]), target_width):
            break
        removed = w * offers.quadratic(state.q_matrix)
        gain = (removed / (1 + w * offers.quadratic(state.cov))).sum(axis=2)  # (P, R)
        fits = affordable()[None, :] & (left > 0)[:, None]
        score = np.where(fits, gain / np.where(norm > 0, norm, 1.0)[None, :], -np.inf)
        best = int(np.argmax(score))
        p, r = divmod(best, len(raters))
        if not np.isfinite(score[p, r]) or gain[p, r] <= 0:
            break
        take(p, r, offers)
    cov = state.cov
    spent_usd, spent_hours = float(spent[0]), float(spent[1])
    result.usd, result.hours = spent_usd, spent_hours
    result.after, result.covariance = answer(question, theta, cov[:n, :n]), cov[:n, :n]
    return result


# --- repeats and agreement ---------------------------------------------------------------------
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


def _repeat_weights(
    rater: np.ndarray,
    task: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    rho_of: dict[str, float],
) -> np.ndarray:
    """1 / (1 + (R - 1) rho) per verdict, R the rater's alike verdicts of the task."""
    if len(rater) == 0:
        return np.zeros(0)
    _, code = np.unique(rater.astype(str), return_inverse=True)
    span = int(task.max(initial=0)) + 1
    keys = (code.astype(np.int64) * span + task) * 2 + (first > second)
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    size = counts[inverse].astype(float)
    rho = np.array([rho_of[r] for r in rater.tolist()])
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
