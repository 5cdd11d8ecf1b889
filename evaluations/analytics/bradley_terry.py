"""Bradley-Terry strengths and their bootstrap, fast at the sizes users bring.

A judgment is a pair (a, b) with an outcome s: 1 a won, ½ a tie (half a win each way), 0 b
won. P(i beats j) = 1 / (1 + exp(θj - θi)), θ the natural log-strengths.

The comparison graph falls apart into connected components (outputs are compared within
their item: one component per item); strengths are comparable only within one, so each is
fitted on its own and centred to mean 0. A component whose directed "beat or tied" graph is
strongly connected gets the maximum-likelihood strengths; any other has no finite maximum,
and each of its variants also gets half a win and half a loss against a fixed reference of
strength 1 (θ = 0): one virtual game each, ``REGULARIZATION``.

Small components (``SMALL`` variants or fewer) are fitted together, grouped by size, by one
batched Newton's method over dense matrices; larger ones by Newton's method on a sparse
information matrix, one variant of each unregularized component pinned (the strengths' free
shift). The bootstrap resamples the judgments within each component (with replacement,
seeded; each component keeps its number of judgments), and its resamples are fitted by the
same batched Newton, identical resamples once. A component too large for that (more than
``SMALL`` variants, one large design pairing across every output) gets intervals from the
inverse of its information matrix instead (``wald``: the asymptotic normal approximation),
so that the work stays bounded. The bootstrap is ``bradley_terry_bootstrap``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import splu

REGULARIZATION = 1.0  # virtual games against the reference, half won: when a fit needs it
RIDGE = 1e-3  # the same, tiny: keeps a resample finite when it leaves a variant without wins
SMALL = 100  # variants: components up to this size are bootstrapped (larger: ``wald``)
TINY = 12  # variants: components up to this size are bootstrapped together, grouped by size
BATCH_CELLS = 2_000_000  # dense entries per batch of fits (memory bound)


@dataclass
class Fit:
    """The strengths (centred in each component), each variant's component, which
    components are strongly connected, and which variants are regularized."""

    strength: np.ndarray  # (n,)
    component: np.ndarray  # (n,) 0 .. components - 1
    strongly_connected: np.ndarray  # (components,) bool
    regularized: np.ndarray  # (n,) bool
    converged: bool

    @property
    def components(self) -> int:
        return len(self.strongly_connected)

    @property
    def connected(self) -> bool:
        """One component, strongly connected: the maximum likelihood of the whole graph."""
        return self.components == 1 and bool(self.strongly_connected[0])


@dataclass
class _Edges:
    """The compared pairs (i < j) with the wins each way."""

    i: np.ndarray
    j: np.ndarray
    wij: np.ndarray
    wji: np.ndarray


def _edges(n: int, a: np.ndarray, b: np.ndarray, s: np.ndarray) -> _Edges:
    low, high = np.minimum(a, b), np.maximum(a, b)
    to_low = np.where(a == low, s, 1 - s)
    keys, inverse = np.unique(low * n + high, return_inverse=True)
    wij = np.bincount(inverse, weights=to_low, minlength=len(keys))
    wji = np.bincount(inverse, weights=1 - to_low, minlength=len(keys))
    return _Edges(keys // n, keys % n, wij, wji)


def _components(n: int, edges: _Edges) -> tuple[np.ndarray, np.ndarray]:
    """Each variant's component (in the order of their first variant), and whether each
    component is strongly connected by "beat or tied" edges."""
    if n == 0:
        return np.zeros(0, int), np.zeros(0, bool)
    graph = coo_matrix((np.ones(len(edges.i)), (edges.i, edges.j)), shape=(n, n)).tocsr()
    _, weak = connected_components(graph, directed=False)
    # Renumber by first appearance, so that the order does not depend on scipy's.
    _, first = np.unique(weak, return_index=True)
    order = np.argsort(np.argsort(first))
    component = order[weak]
    won = edges.wij > 0
    lost = edges.wji > 0
    rows = np.concatenate([edges.i[won], edges.j[lost]])
    cols = np.concatenate([edges.j[won], edges.i[lost]])
    beat = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n)).tocsr()
    _, strong = connected_components(beat, directed=True, connection="strong")
    count = component.max() + 1
    strong_per = np.zeros(count, int)
    pairs = np.unique(np.stack([component, strong]), axis=1)
    np.add.at(strong_per, pairs[0], 1)
    return component, strong_per == 1


def fit(n: int, a: np.ndarray, b: np.ndarray, s: np.ndarray, *, regularize: bool = False) -> Fit:
    """The strengths of ``n`` variants from the judgments (``a``, ``b``, ``s``);
    ``regularize``: every component gets the virtual games, connected or not."""
    return _fit_edges(n, _edges(n, a, b, s), regularize)


def fit_matrix(wins: np.ndarray, *, regularize: bool = False) -> Fit:
    """``fit`` from a win matrix (W[i, j]: the wins of i over j, ties as halves)."""
    i, j = np.nonzero(np.triu(wins + wins.T, 1))
    return _fit_edges(len(wins), _Edges(i, j, wins[i, j], wins[j, i]), regularize)


def _fit_edges(n: int, edges: _Edges, regularize: bool) -> Fit:
    component, strong = _components(n, edges)
    regularized = np.ones(n, bool) if regularize else ~strong[component]
    prior = np.where(regularized, REGULARIZATION, 0.0)
    theta, converged = _solve(n, edges, component, prior)
    return Fit(theta, component, strong, regularized, converged)


def _solve(
    n: int, edges: _Edges, component: np.ndarray, prior: np.ndarray
) -> tuple[np.ndarray, bool]:
    """The point estimate: small components by batched dense Newton, large ones by sparse
    Newton; centred per component."""
    theta = np.zeros(n)
    converged = True
    if n == 0:
        return theta, True
    sizes = np.bincount(component)
    edge_component = component[edges.i]
    for size in np.unique(sizes):
        chosen = np.nonzero(sizes == size)[0]
        if size == 1:
            continue
        members = members_of(component, chosen, size)  # (C, size)
        if size <= SMALL:
            wins = _dense_wins(members, edges, edge_component, chosen, size)
            fitted, ok = newton_dense(wins, prior[members])
            theta[members] = fitted
        else:
            mask = np.isin(edge_component, chosen)
            nodes = members.ravel()
            fitted, ok = _newton_sparse(n, edges, mask, nodes, component, prior)
            theta[nodes] = fitted[nodes]
        converged &= ok
    return _centred(theta, component), converged


def members_of(component: np.ndarray, chosen: np.ndarray, size: int) -> np.ndarray:
    """The variants of each chosen component, (C, size), in variant order."""
    index = np.nonzero(np.isin(component, chosen))[0]
    order = np.argsort(component[index], kind="stable")
    return index[order].reshape(len(chosen), size)


def _dense_wins(
    members: np.ndarray,
    edges: _Edges,
    edge_component: np.ndarray,
    chosen: np.ndarray,
    size: int,
) -> np.ndarray:
    """The (C, size, size) win matrices of the chosen components."""
    local = np.empty(members.max() + 1, int)
    local[members] = np.arange(size)[None, :].repeat(len(members), 0)
    slot = np.full(edge_component.max() + 1, -1)
    slot[chosen] = np.arange(len(chosen))
    mask = np.isin(edge_component, chosen)
    c = slot[edge_component[mask]]
    li, lj = local[edges.i[mask]], local[edges.j[mask]]
    wins = np.zeros((len(chosen), size, size))
    wins[c, li, lj] = edges.wij[mask]
    wins[c, lj, li] = edges.wji[mask]
    return wins


def newton_dense(
    wins: np.ndarray,
    prior: np.ndarray | float,
    start: np.ndarray | None = None,
    iterations: int = 200,
) -> tuple[np.ndarray, bool]:
    """Log-strengths of a batch of win matrices (B, n, n) by Newton's method from ``start``
    (B, n; default 0), each centred to mean 0, and whether all converged. ``prior``: each
    variant's virtual games against the reference (B, n), half won; 0 for a whole fit: pure
    maximum likelihood."""
    batch, n, _ = wins.shape
    prior = np.broadcast_to(np.asarray(prior, float), (batch, n))
    theta = np.zeros((batch, n)) if start is None else np.array(start, float)
    free = np.asarray(~(prior > 0).any(axis=1))  # fits blind to a common shift
    active = np.arange(batch)
    idx = np.arange(n)
    step_limit = max(1, BATCH_CELLS // max(1, n * n))
    for _ in range(iterations):
        if not len(active):
            return _centred_rows(theta), True
        done = []
        for offset in range(0, len(active), step_limit):
            rows = active[offset : offset + step_limit]
            w = wins[rows]
            games = w + np.transpose(w, (0, 2, 1))
            t = theta[rows]
            pr = prior[rows]
            p = 1 / (1 + np.exp(t[:, None, :] - t[:, :, None]))  # P(i beats j)
            own = 1 / (1 + np.exp(-t))
            grad = w.sum(axis=2) + pr / 2 - (games * p).sum(axis=2) - pr * own
            weight = games * p * (1 - p)
            info = -weight
            info[:, idx, idx] = weight.sum(axis=2) + pr * own * (1 - own) + 1e-12
            info += free[rows, None, None] / n  # fixes the free shift; changes no fit
            step = np.clip(np.linalg.solve(info, grad[..., None])[..., 0], -5, 5)
            theta[rows] = t + step
            done.append(np.abs(step).max(axis=1) < 1e-9)
        active = active[~np.concatenate(done)]
    return _centred_rows(theta), not len(active)


def _newton_sparse(
    n: int,
    edges: _Edges,
    mask: np.ndarray,
    nodes: np.ndarray,
    component: np.ndarray,
    prior: np.ndarray,
    iterations: int = 200,
) -> tuple[np.ndarray, bool]:
    """Newton's method on the sparse information matrix of the components holding
    ``nodes`` (their edges: ``mask``); one variant of each unregularized one pinned."""
    i, j = edges.i[mask], edges.j[mask]
    wij, wji = edges.wij[mask], edges.wji[mask]
    games = wij + wji
    won = (
        np.bincount(i, weights=wij, minlength=n)
        + np.bincount(j, weights=wji, minlength=n)
        + prior / 2
    )
    free = _free_nodes(nodes, component, prior)
    theta = np.zeros(n)
    for _ in range(iterations):
        p = 1 / (1 + np.exp(theta[j] - theta[i]))
        own = 1 / (1 + np.exp(-theta))
        expected = np.bincount(i, weights=games * p, minlength=n) + np.bincount(
            j, weights=games * (1 - p), minlength=n
        )
        grad = won - expected - prior * own
        info = _information(n, i, j, games * p * (1 - p), prior * own * (1 - own))
        step = np.zeros(n)
        step[free] = splu(info[free][:, free].tocsc()).solve(grad[free])
        step = np.clip(step, -5, 5)
        theta += step
        if np.abs(step).max() < 1e-10:
            return theta, True
    return theta, False


def _information(
    n: int, i: np.ndarray, j: np.ndarray, weight: np.ndarray, diagonal_extra: np.ndarray
) -> csr_matrix:
    diagonal = (
        np.bincount(i, weights=weight, minlength=n)
        + np.bincount(j, weights=weight, minlength=n)
        + diagonal_extra
    )
    rows = np.concatenate([i, j, np.arange(n)])
    cols = np.concatenate([j, i, np.arange(n)])
    values = np.concatenate([-weight, -weight, diagonal])
    return coo_matrix((values, (rows, cols)), shape=(n, n)).tocsr()


def _free_nodes(nodes: np.ndarray, component: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """``nodes`` less the first of each component without a prior (its pinned variant)."""
    unpinned = prior[nodes] > 0
    _, first = np.unique(component[nodes], return_index=True)
    pinned = np.zeros(len(nodes), bool)
    pinned[first] = ~unpinned[first]
    return np.sort(nodes[~pinned])


def _centred(theta: np.ndarray, component: np.ndarray) -> np.ndarray:
    count = np.bincount(component)
    means = np.bincount(component, weights=theta) / np.maximum(count, 1)
    return theta - means[component]


def _centred_rows(theta: np.ndarray) -> np.ndarray:
    return theta - theta.mean(axis=1, keepdims=True)


def wald(n: int, a: np.ndarray, b: np.ndarray, s: np.ndarray, fitted: Fit) -> np.ndarray:
    """(n,): the standard error of each centred strength from the inverse of the fit's
    information matrix (the asymptotic normal approximation), for the components too large
    to bootstrap (NaN elsewhere)."""
    error = np.full(n, np.nan)
    sizes = np.bincount(fitted.component)
    large = np.nonzero(sizes > SMALL)[0]
    if not len(large):
        return error
    edges = _edges(n, a, b, s)
    theta = fitted.strength
    prior = np.where(fitted.regularized, REGULARIZATION, 0.0)
    p = 1 / (1 + np.exp(theta[edges.j] - theta[edges.i]))
    own = 1 / (1 + np.exp(-theta))
    weight = (edges.wij + edges.wji) * p * (1 - p)
    info = _information(n, edges.i, edges.j, weight, prior * own * (1 - own)).tocsc()
    for c in large:
        nodes = np.nonzero(fitted.component == c)[0]
        block = info[nodes][:, nodes].toarray()
        covariance = np.zeros_like(block)
        if fitted.regularized[nodes[0]]:
            covariance = np.linalg.inv(block)
        else:  # the first variant pinned: the others' covariance, then centred
            covariance[1:, 1:] = np.linalg.inv(block[1:, 1:])
        centred = np.diag(covariance) - 2 * covariance.mean(axis=1) + covariance.mean()
        error[nodes] = np.sqrt(np.maximum(centred, 0))
    return error
