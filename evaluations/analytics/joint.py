"""One Bradley-Terry model of every pairwise verdict, people's and LLM judges' together, with
covariates: a logistic regression on a design matrix, as pure functions over numpy arrays.

A verdict compares the entity shown first (``a``) with the one shown second (``b``) with an
outcome ``y``: 1 the first won, 0 the second won, ½ a tie (half a win each way, as in
``bradley_terry``). With θ the entities' log-strengths and x the verdict's covariates
(the caller's columns: a rater's position, length and markdown differences, self-preference),

    P(first shown wins) = 1 / (1 + exp(-(θa - θb + x·β)))

and the log-likelihood is Σ y log p + (1 - y) log(1 - p). Verdicts with the same row and
outcome are fitted once, weighted by their count (``cells``).

The design: one column per entity but the first of each connected component of the
comparison graph (pinned at 0: the strengths' free shift), then one per covariate that is
not zero everywhere. A covariate column that is a linear combination of the columns before
it (the strengths first) cannot be told apart from them: it is left out and reported as not
identified (``aliased``), as R's ``glm`` does. When the maximum likelihood does not exist (a
separating direction: an entity that never lost, a rater who always chose the first shown),
found by a linear program, the parameters of that direction get the prior of
``bradley_terry``: one virtual game against θ = 0, half won (for a strength, its whole
component is then fitted without a pin, as ``bradley_terry`` does). Otherwise there is no
prior at all, so the fit is exactly the maximum likelihood of the design (statsmodels' Logit
on ``design`` gives the same coefficients).

Fitted by Newton's method (analytic gradient and information). Intervals: a bootstrap of
the verdicts (drawn as counts of the cells within each component, seeded), every resample
refitted by Newton's method from the fit, batched, with the tiny ``RIDGE`` prior on the
parameters the fit did not regularize (a resample may separate); several fits of the same
cells (with and without the covariates) share the resamples. When that would be more than
``BOOTSTRAP_WORK`` (``bootstrap_work``), Wald intervals from the information matrix
instead, so the work stays bounded (there are then many verdicts, where the normal
approximation holds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.special import expit

from evaluations.analytics.bradley_terry import REGULARIZATION, RIDGE

# Resamples x cells x columns²: a bootstrap of more work than this (about a second here)
# gives way to Wald intervals.
BOOTSTRAP_WORK = 500_000_000
_BATCH_CELLS = 2_000_000  # resamples x columns x cells per batch of Newton steps (memory)
_SEPARATION = 1e-7  # a linear program's optimum above this: a separating direction
_FINITE = 30.0  # log-odds: coefficients beyond, and the linear program looks for separation


@dataclass
class Cells:
    """The distinct verdicts (entity shown first, second, covariates, outcome) and how many
    times each was given; ``row``: each verdict's cell."""

    a: np.ndarray  # (K,)
    b: np.ndarray  # (K,)
    x: np.ndarray  # (K, q)
    y: np.ndarray  # (K,)
    count: np.ndarray  # (K,)
    row: np.ndarray  # (n,)


def cells(a: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray) -> Cells:
    """The verdicts aggregated into cells (sorted, so the row order changes nothing)."""
    x = np.asarray(x, float).reshape(len(a), -1)
    table = np.column_stack([a, b, x, y]).astype(float)
    if not len(table):
        return Cells(
            np.zeros(0, int), np.zeros(0, int), x, np.zeros(0), np.zeros(0), np.zeros(0, int)
        )
    # Each row's cell: the columns' codes folded into one key, recoded after each column
    # (much faster than sorting the rows).
    key = np.zeros(len(table), np.int64)
    for column in table.T:
        values, code = np.unique(column, return_inverse=True)
        _, key = np.unique(key * len(values) + code.ravel(), return_inverse=True)
        key = key.ravel().astype(np.int64)
    _, first, row, count = np.unique(
        key, return_index=True, return_inverse=True, return_counts=True
    )
    unique = table[first]
    return Cells(
        unique[:, 0].astype(int),
        unique[:, 1].astype(int),
        unique[:, 2:-1],
        unique[:, -1],
        count.astype(float),
        row.ravel(),
    )


@dataclass
class Columns:
    """The design's columns: the entities with a column, then the covariates kept."""

    entities: np.ndarray  # entity indices
    effects: np.ndarray  # covariate indices

    @property
    def size(self) -> int:
        return len(self.entities) + len(self.effects)


def design(
    a: np.ndarray, b: np.ndarray, x: np.ndarray, columns: Columns, entities: int
) -> np.ndarray:
    """The design matrix (one row per verdict or cell): +1 in the column of the entity
    shown first, -1 in that of the one shown second (0 when they are the same entity or
    pinned), then the covariates kept."""
    slot = np.full(entities, -1)
    slot[columns.entities] = np.arange(len(columns.entities))
    matrix = np.zeros((len(a), columns.size))
    rows = np.arange(len(a))
    first, second = slot[a], slot[b]
    np.add.at(matrix, (rows[first >= 0], first[first >= 0]), 1.0)
    np.add.at(matrix, (rows[second >= 0], second[second >= 0]), -1.0)
    matrix[:, len(columns.entities) :] = np.asarray(x, float).reshape(len(a), -1)[
        :, columns.effects
    ]
    return matrix


@dataclass
class JointFit:
    """A fit: the strengths (centred to mean 0 in each component; 0 for an entity compared
    with no other), the covariates' effects (NaN where not identified or absent), and how
    they were found."""

    strength: np.ndarray  # (m,)
    effect: np.ndarray  # (q,)
    component: np.ndarray  # (m,)
    compared: np.ndarray  # (m,) bool: in a component of two entities or more
    present: np.ndarray  # (q,) bool: the covariate is not zero everywhere
    aliased: np.ndarray  # (q,) bool: present, but a combination of the columns before it
    regularized_entities: np.ndarray  # (m,) bool
    regularized_effects: np.ndarray  # (q,) bool
    converged: bool
    columns: Columns
    coefficients: np.ndarray  # (p,) of ``design(..., columns)``
    prior: np.ndarray  # (p,) each column's virtual games

    @property
    def components(self) -> int:
        return len(np.unique(self.component[self.compared])) if self.compared.any() else 0


def components(entities: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each entity's connected component of the comparison graph, numbered by first
    appearance in entity order."""
    if entities == 0:
        return np.zeros(0, int)
    other = a != b
    graph = coo_matrix(
        (np.ones(int(other.sum())), (a[other], b[other])), shape=(entities, entities)
    )
    _, label = connected_components(graph, directed=False)
    _, first = np.unique(label, return_index=True)
    return np.argsort(np.argsort(first))[label]


def fit(entities: int, found: Cells, *, effects: bool = True) -> JointFit:
    """The joint fit of ``entities`` entities to the cells ``found``; ``effects`` False:
    the strengths alone (the same verdicts, no covariates)."""
    q = found.x.shape[1]
    component = components(entities, found.a, found.b)
    sizes = np.bincount(component, minlength=1)
    compared = sizes[component] >= 2 if entities else np.zeros(0, bool)
    _, first = np.unique(component, return_index=True)
    pinned = np.zeros(entities, bool)
    pinned[first] = True
    present = (found.x != 0).any(axis=0) if effects else np.zeros(q, bool)
    columns = Columns(np.nonzero(~pinned)[0], np.nonzero(present)[0])
    aliased = np.zeros(q, bool)
    matrix = design(found.a, found.b, found.x, columns, entities)
    dependent = _aliased(matrix)
    if dependent.any():
        aliased[columns.effects[dependent[len(columns.entities) :]]] = True
        columns = Columns(columns.entities, columns.effects[~aliased[columns.effects]])
        matrix = design(found.a, found.b, found.x, columns, entities)
    # Separation: the parameters of a separating direction get the prior; a strength's
    # whole component is then unpinned, as in ``bradley_terry``. First the quick way: when
    # Newton's method converges to finite coefficients, the gradient is nil there and the
    # (concave) likelihood has its maximum: no linear program needed.
    regularized_entities = np.zeros(entities, bool)
    regularized_effects = np.zeros(q, bool)
    penalized = np.zeros(columns.size, bool)
    start = np.zeros((1, columns.size))
    coefficients, converged = newton(
        matrix, found.y, found.count[None, :], np.zeros(columns.size), start, bound=_FINITE
    )
    maximum = converged and np.abs(coefficients).max(initial=0) <= _FINITE
    while not maximum:
        support = _separating(matrix, found.y, ~penalized)
        if not support.any():
            break
        count = len(columns.entities)
        for entity in columns.entities[support[:count]]:
            regularized_entities[component == component[entity]] = True
        regularized_effects[columns.effects[support[count:]]] = True
        columns = Columns(
            np.nonzero(~pinned | regularized_entities)[0], np.nonzero(present & ~aliased)[0]
        )
        matrix = design(found.a, found.b, found.x, columns, entities)
        penalized = np.concatenate(
            [regularized_entities[columns.entities], regularized_effects[columns.effects]]
        )
    prior = np.where(penalized, REGULARIZATION, 0.0)
    if not maximum:
        coefficients, converged = newton(
            matrix, found.y, found.count[None, :], prior, np.zeros((1, columns.size))
        )
    strength, effect = _unpack(coefficients, columns, entities, q, component)
    return JointFit(
        strength[0],
        effect[0],
        component,
        compared,
        present,
        aliased,
        regularized_entities,
        regularized_effects,
        converged,
        columns,
        coefficients[0],
        prior,
    )


def _aliased(matrix: np.ndarray) -> np.ndarray:
    """The columns that are linear combinations of the columns before them (the kept
    ones): those left with nothing after projecting those out (Gram-Schmidt, twice)."""
    flags = np.zeros(matrix.shape[1], bool)
    basis = np.zeros((matrix.shape[0], 0))
    for j, column in enumerate(matrix.T):
        norm = np.linalg.norm(column)
        rest = column.copy()
        for _ in range(2):
            rest -= basis @ (basis.T @ rest)
        left = np.linalg.norm(rest)
        if norm == 0 or left <= 1e-9 * norm:
            flags[j] = True
            continue
        basis = np.column_stack([basis, rest / left])
    return flags


def _separating(matrix: np.ndarray, y: np.ndarray, free: np.ndarray) -> np.ndarray:
    """The support of a direction d of the ``free`` columns along which the likelihood
    keeps rising (X d ≥ 0 where the first won, ≤ 0 where the second won, = 0 on ties, not
    all zero), or nothing when there is none: then the maximum likelihood exists."""
    support = np.zeros(matrix.shape[1], bool)
    if not free.any() or not len(y):
        return support
    x = matrix[:, free]
    decided = y != 0.5
    sign = np.where(y[decided] == 1, 1.0, -1.0)
    signed = x[decided] * sign[:, None]
    ties = x[~decided]
    found = linprog(
        -signed.sum(axis=0),
        A_ub=-signed if len(signed) else None,
        b_ub=np.zeros(len(signed)) if len(signed) else None,
        A_eq=ties if len(ties) else None,
        b_eq=np.zeros(len(ties)) if len(ties) else None,
        bounds=(-1, 1),
        method="highs",
    )
    if found.status != 0 or -found.fun <= _SEPARATION * max(1.0, len(y)):
        return support
    support[np.nonzero(free)[0]] = np.abs(found.x) > 1e-7
    return support


def newton(
    matrix: np.ndarray,
    y: np.ndarray,
    counts: np.ndarray,
    prior: np.ndarray,
    start: np.ndarray,
    iterations: int = 100,
    tolerance: float = 1e-10,
    bound: float = np.inf,
) -> tuple[np.ndarray, bool]:
    """The coefficients maximizing, for each row of ``counts`` (B, K: each cell's
    verdicts in one data set), Σ count (y log p + (1 - y) log(1 - p)) plus ``prior`` (p,)
    virtual games per coefficient, half won; Newton's method from ``start`` (B, p), steps
    clipped to ±5, batched over the data sets. Returns them and whether all converged
    (a data set whose coefficients pass ``bound`` is given up: not converged)."""
    batch, p = start.shape
    coef = np.array(start, float)
    if p == 0:
        return coef, True
    active = np.arange(batch)
    diverged = False
    chunk = max(1, _BATCH_CELLS // max(1, p * len(y)))
    # Each cell's outer product x xᵀ, when small enough: the information of a whole batch
    # is then one matrix product.
    outer = (
        (matrix[:, :, None] * matrix[:, None, :]).reshape(len(y), p * p)
        if len(y) * p * p <= _BATCH_CELLS
        else None
    )
    for _ in range(iterations):
        if not len(active):
            return coef, not diverged
        done = []
        if np.isfinite(bound):
            beyond = np.abs(coef[active]).max(axis=1) > bound
            diverged |= bool(beyond.any())
            active = active[~beyond]
        for offset in range(0, len(active), chunk):
            rows = active[offset : offset + chunk]
            c, n = coef[rows], counts[rows]
            fitted = expit(c @ matrix.T)  # (b, K)
            own = expit(c)
            grad = (n * (y - fitted)) @ matrix + prior * (0.5 - own)
            weight = n * fitted * (1 - fitted)
            if outer is not None:
                info = (weight @ outer).reshape(len(rows), p, p)
            else:
                info = np.matmul(matrix.T[None, :, :] * weight[:, None, :], matrix)
            info[:, np.arange(p), np.arange(p)] += prior * own * (1 - own) + 1e-12
            step = np.clip(np.linalg.solve(info, grad[..., None])[..., 0], -5, 5)
            coef[rows] = c + step
            done.append(np.abs(step).max(axis=1) < tolerance)
        if done:
            active = active[~np.concatenate(done)]
    return coef, not len(active) and not diverged


def _unpack(
    coef: np.ndarray, columns: Columns, entities: int, q: int, component: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(B, m) strengths centred per component, (B, q) effects (NaN where no column)."""
    batch = coef.shape[0]
    strength = np.zeros((batch, entities))
    strength[:, columns.entities] = coef[:, : len(columns.entities)]
    if entities:
        count = np.bincount(component)
        means = np.stack([np.bincount(component, weights=row) for row in strength]) / count
        strength = strength - means[:, component]
    effect = np.full((batch, q), np.nan)
    effect[:, columns.effects] = coef[:, len(columns.entities) :]
    return strength, effect


# --- intervals ---------------------------------------------------------------------------------
def bootstrap_work(fits: list[JointFit], found: Cells, resamples: int) -> int:
    """The bootstrap's work (resamples x cells x columns², the widest fit's)."""
    widest = max((f.columns.size for f in fits), default=0)
    return resamples * len(found.y) * widest * widest


def bootstrap(
    fits: list[JointFit],
    found: Cells,
    entities: int,
    *,
    resamples: int,
    seed: int = 0,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each fit of the same cells: its strengths (B, m) and effects (B, q) refitted on
    ``resamples`` resamples of the verdicts, the same resamples for every fit. The
    verdicts are drawn with replacement within each component (each keeps its number)."""
    q = found.x.shape[1]
    out = [
        (np.zeros((max(resamples, 0), entities)), np.full((max(resamples, 0), q), np.nan))
        for _ in fits
    ]
    if resamples <= 0 or not len(found.y) or not fits:
        return out
    rng = np.random.default_rng(seed)
    stratum = fits[0].component[found.a]
    groups = [np.nonzero(stratum == s)[0] for s in np.unique(stratum)]
    matrices = [design(found.a, found.b, found.x, f.columns, entities) for f in fits]
    chunk = max(1, _BATCH_CELLS // len(found.y))  # resamples drawn at once (memory)
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        counts = np.zeros((size, len(found.y)))
        for group in groups:
            total = int(found.count[group].sum())
            counts[:, group] = rng.multinomial(total, found.count[group] / total, size=size)
        for (strengths, effects), fitted, matrix in zip(out, fits, matrices, strict=True):
            prior = np.maximum(fitted.prior, RIDGE)
            coef, _ = newton(
                matrix,
                found.y,
                counts,
                prior,
                np.repeat(fitted.coefficients[None, :], size, 0),
                iterations=50,
                tolerance=1e-8,
            )
            s, e = _unpack(coef, fitted.columns, entities, q, fitted.component)
            strengths[start : start + size] = s
            effects[start : start + size] = e
    return out


def wald(fitted: JointFit, found: Cells, entities: int) -> tuple[np.ndarray, np.ndarray]:
    """Standard errors of the centred strengths (m,) and the effects (q,; NaN where not
    fitted) from the inverse of the information matrix at the fit."""
    matrix = design(found.a, found.b, found.x, fitted.columns, entities)
    p = len(fitted.coefficients)
    fitted_p = expit(matrix @ fitted.coefficients)
    own = expit(fitted.coefficients)
    info = (matrix.T * (found.count * fitted_p * (1 - fitted_p))) @ matrix
    info[np.arange(p), np.arange(p)] += fitted.prior * own * (1 - own)
    covariance = np.linalg.pinv(info)
    # Strengths: a linear map of the coefficients (pinned entities 0), centred per component.
    transform = np.zeros((entities, p))
    transform[fitted.columns.entities, np.arange(len(fitted.columns.entities))] = 1.0
    if entities:
        same = fitted.component[:, None] == fitted.component[None, :]
        centring = np.eye(entities) - same / same.sum(axis=1, keepdims=True)
        transform = centring @ transform
    strength_error = np.sqrt(
        np.maximum(np.einsum("ip,pq,iq->i", transform, covariance, transform), 0)
    )
    effect_error = np.full(found.x.shape[1], np.nan)
    count = len(fitted.columns.entities)
    effect_error[fitted.columns.effects] = np.sqrt(np.maximum(np.diag(covariance)[count:], 0))
    return strength_error, effect_error


# --- a scale per rater --------------------------------------------------------------------------
# Raters need not share one scale: a judge may be more decisive than people (judges usually
# are), which a shared scale reads as an effect of whatever goes with strength (the judge's
# own family when it made the strongest models, length, markdown, the position shown first;
# bench/validity.py). So each rater group g but the reference (the people, else the first
# judge) has its discrimination s_g = exp(gamma_g):
#
#     P(first shown wins) = 1 / (1 + exp(-(s_g (θa - θb) + x·β)))
#
# fitted by Fisher scoring from the shared-scale fit, with a weak normal prior on each gamma
# (standard deviation ``SCALE_PRIOR_SD``: a rater who always agrees stays finite).
SCALE_PRIOR_SD = 2.0


@dataclass
class ScaledFit:
    """A fit with a scale per rater group: the strengths (the reference group's scale,
    centred per component), the effects, each group's log-scale gamma (0 for the reference and
    for a group whose scale cannot be told: ``scaled`` False), and the standard errors of
    them all (Wald, from the information at the fit)."""

    strength: np.ndarray  # (m,)
    effect: np.ndarray  # (q,)
    log_scale: np.ndarray  # (G,)
    scaled: np.ndarray  # (G,) bool
    strength_error: np.ndarray  # (m,)
    effect_error: np.ndarray  # (q,)
    log_scale_error: np.ndarray  # (G,)
    converged: bool


def scaled_fit(
    entities: int,
    found: Cells,
    group: np.ndarray,
    fitted: JointFit,
    *,
    counts: np.ndarray | None = None,
    iterations: int = 100,
    tolerance: float = 1e-9,
) -> ScaledFit:
    """The fit of ``fitted``'s design with a scale per rater ``group`` (K,: each cell's
    group, 0 the reference); ``counts`` another weighting of the cells (a resample)."""
    counts = found.count if counts is None else counts
    matrix = design(found.a, found.b, found.x, fitted.columns, entities)
    n_entities = len(fitted.columns.entities)
    between, covariates = matrix[:, :n_entities], matrix[:, n_entities:]
    groups = int(group.max()) + 1 if len(group) else 1
    # A group's scale is told only from its verdicts between entities of other strengths.
    shown = (between != 0).any(axis=1)
    free = [g for g in range(1, groups) if (counts[(group == g) & shown] > 0).any()]
    member = np.stack([group == g for g in free], axis=1).astype(float) if free else None
    coef = np.array(fitted.coefficients, float)
    gamma = np.zeros(len(free))
    p = len(coef)
    prior = fitted.prior
    precision = 1 / SCALE_PRIOR_SD**2

    def terms(coef: np.ndarray, gamma: np.ndarray) -> tuple[np.ndarray, ...]:
        scale = np.exp(member @ gamma) if member is not None else np.ones(len(group))
        difference = between @ coef[:n_entities]
        eta = scale * difference + covariates @ coef[n_entities:]
        return scale, difference, eta

    def objective(coef: np.ndarray, gamma: np.ndarray) -> float:
        _, _, eta = terms(coef, gamma)
        fitted_p = np.clip(expit(eta), 1e-300, 1)
        other = np.clip(expit(-eta), 1e-300, 1)
        own = expit(coef)
        return float(
            (counts * (found.y * np.log(fitted_p) + (1 - found.y) * np.log(other))).sum()
            + (
                prior
                * (
                    0.5 * np.log(np.clip(own, 1e-300, 1))
                    + 0.5 * np.log(np.clip(1 - own, 1e-300, 1))
                )
            ).sum()
            - 0.5 * precision * (gamma**2).sum()
        )

    def information(coef: np.ndarray, gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        scale, difference, eta = terms(coef, gamma)
        fitted_p = expit(eta)
        jacobian = np.hstack(
            [
                between * scale[:, None],
                covariates,
                (member * (scale * difference)[:, None])
                if member is not None
                else np.zeros((len(group), 0)),
            ]
        )
        own = expit(coef)
        grad = jacobian.T @ (counts * (found.y - fitted_p))
        grad[:p] += prior * (0.5 - own)
        grad[p:] -= precision * gamma
        info = (jacobian.T * (counts * fitted_p * (1 - fitted_p))) @ jacobian
        info[np.arange(p), np.arange(p)] += prior * own * (1 - own)
        info[np.arange(p, p + len(gamma)), np.arange(p, p + len(gamma))] += precision
        info[np.arange(len(info)), np.arange(len(info))] += 1e-12
        return grad, info

    converged = False
    current = objective(coef, gamma)
    for _ in range(iterations):
        grad, info = information(coef, gamma)
        step = np.clip(np.linalg.lstsq(info, grad, rcond=None)[0], -2, 2)
        size = 1.0
        while size > 1e-4:
            trial_coef, trial_gamma = coef + size * step[:p], gamma + size * step[p:]
            value = objective(trial_coef, trial_gamma)
            if value >= current - 1e-12:
                break
            size /= 2
        coef, gamma, current = trial_coef, trial_gamma, value
        if np.abs(size * step).max(initial=0) < tolerance:
            converged = True
            break
    _, info = information(coef, gamma)
    covariance = np.linalg.pinv(info)
    strength, effect = _unpack(
        coef[None, :], fitted.columns, entities, found.x.shape[1], fitted.component
    )
    transform = np.zeros((entities, p))
    transform[fitted.columns.entities, np.arange(n_entities)] = 1.0
    if entities:
        same = fitted.component[:, None] == fitted.component[None, :]
        transform = (np.eye(entities) - same / same.sum(axis=1, keepdims=True)) @ transform
    block = covariance[:p, :p]
    strength_error = np.sqrt(np.maximum(np.einsum("ip,pq,iq->i", transform, block, transform), 0))
    effect_error = np.full(found.x.shape[1], np.nan)
    effect_error[fitted.columns.effects] = np.sqrt(np.maximum(np.diag(block)[n_entities:], 0))
    log_scale = np.zeros(groups)
    log_scale_error = np.full(groups, np.nan)
    scaled = np.zeros(groups, bool)
    log_scale[free] = gamma
    log_scale_error[free] = np.sqrt(np.maximum(np.diag(covariance)[p:], 0))
    scaled[free] = True
    return ScaledFit(
        strength[0], effect[0], log_scale, scaled, strength_error, effect_error,
        log_scale_error, converged,
    )  # fmt: skip
