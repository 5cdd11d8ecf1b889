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
so that the work stays bounded.
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
_BATCH_CELLS = 2_000_000  # dense entries per batch of fits (memory bound)


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
        members = _members(component, chosen, size)  # (C, size)
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


def _members(component: np.ndarray, chosen: np.ndarray, size: int) -> np.ndarray:
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
    step_limit = max(1, _BATCH_CELLS // max(1, n * n))
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


# --- the bootstrap -------------------------------------------------------------------------------
def bootstrap(
    n: int,
    a: np.ndarray,
    b: np.ndarray,
    s: np.ndarray,
    fitted: Fit,
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> np.ndarray:
    """Log-strengths of ``resamples`` bootstrap resamples, (resamples, n), centred per
    component like the fit. Resampled within each component; a variant regularized in the
    fit stays so, the others get the tiny ``RIDGE`` (a resample may leave one unbeaten)."""
    if resamples <= 0 or len(a) == 0:
        return np.zeros((0, n))
    component = fitted.component
    cells, counts = np.unique(np.stack([a, b, np.round(s * 2)]), axis=1, return_counts=True)
    ca, cb, cs = cells[0].astype(int), cells[1].astype(int), cells[2] / 2
    cell_component = component[ca]
    drawn = _resample(cell_component, counts, resamples, seed)  # (B, K)
    prior = np.where(fitted.regularized, REGULARIZATION, RIDGE)
    theta = np.zeros((resamples, n))
    sizes = np.bincount(component)
    for size in np.unique(sizes):
        if size == 1:
            continue
        chosen = np.nonzero(sizes == size)[0]
        members = _members(component, chosen, size)
        in_group = np.isin(cell_component, chosen)
        if size > SMALL:
            theta[:, members.ravel()] = np.nan  # too large to refit: ``wald`` gives its intervals
        elif size <= TINY:
            theta[:, members] = _bootstrap_small(
                fitted.strength[members],
                members,
                chosen,
                ca[in_group],
                cb[in_group],
                cs[in_group],
                cell_component[in_group],
                drawn[:, in_group],
                prior[members],
            )
        else:
            for c, nodes in zip(chosen, members, strict=True):
                mine = cell_component == c
                theta[:, nodes] = _bootstrap_component(
                    nodes, ca[mine], cb[mine], cs[mine], drawn[:, mine], prior, fitted.strength
                )
    count = np.bincount(component)
    means = (theta @ _indicator(component)) / np.maximum(count, 1)
    return theta - means[:, component]


def _indicator(component: np.ndarray) -> csr_matrix:
    n = len(component)
    return csr_matrix((np.ones(n), (np.arange(n), component)), shape=(n, component.max() + 1))


def _resample(
    cell_component: np.ndarray, counts: np.ndarray, resamples: int, seed: int
) -> np.ndarray:
    """(B, K): each resample's count of every cell, drawn within each component."""
    rng = np.random.default_rng(seed)
    drawn = np.zeros((resamples, len(counts)), np.int64)
    order = np.argsort(cell_component, kind="stable")
    bounds = np.flatnonzero(np.diff(cell_component[order])) + 1
    groups = np.split(order, bounds)
    # Components with the same number of cells are drawn in one call.
    by_width: dict[int, list[np.ndarray]] = {}
    for group in groups:
        by_width.setdefault(len(group), []).append(group)
    for width, same in by_width.items():
        columns = np.stack(same)  # (C, width)
        totals = counts[columns].sum(axis=1)
        if width == 1:
            drawn[:, columns[:, 0]] = totals[None, :]
            continue
        shares = counts[columns] / totals[:, None]
        draws = rng.multinomial(totals, shares, size=(resamples, len(same)))  # (B, C, width)
        drawn[:, columns.ravel()] = draws.reshape(resamples, -1)
    return drawn


def _bootstrap_small(
    fits: np.ndarray,
    members: np.ndarray,
    chosen: np.ndarray,
    ca: np.ndarray,
    cb: np.ndarray,
    cs: np.ndarray,
    cell_component: np.ndarray,
    drawn: np.ndarray,
    prior: np.ndarray,
) -> np.ndarray:
    """(B, C, size): the resamples of same-size components, by batched dense Newton from
    their ``fits`` (C, size), each distinct (wins, prior) fitted once."""
    resamples = drawn.shape[0]
    count, size = members.shape
    local = np.empty(members.max() + 1, int)
    local[members] = np.arange(size)[None, :].repeat(count, 0)
    slot = np.full(cell_component.max() + 1, -1)
    slot[chosen] = np.arange(count)
    c = slot[cell_component]
    # Twice the wins are whole numbers: each cell adds 2s to W[a, b] and 2(1 - s) to W[b, a].
    into_ab = c * size * size + local[ca] * size + local[cb]
    into_ba = c * size * size + local[cb] * size + local[ca]
    spread = csr_matrix(
        (
            np.concatenate([2 * cs, 2 * (1 - cs)]),
            (np.concatenate([np.arange(len(ca))] * 2), np.concatenate([into_ab, into_ba])),
        ),
        shape=(len(ca), count * size * size),
    )
    out = np.zeros((resamples, count, size))
    flags = (prior[:, 0] > RIDGE).astype(np.int64)  # (C,) the component is regularized
    per_chunk = max(1, _BATCH_CELLS // (count * size * size))
    for start in range(0, resamples, per_chunk):
        block = drawn[start : start + per_chunk]
        twice = np.rint(np.asarray((spread.T @ block.T).T)).astype(np.int64)
        twice = twice.reshape(-1, size * size)  # (b * C, size * size)
        flag = np.tile(flags, len(block))
        rows = np.concatenate([twice, flag[:, None]], axis=1)
        unique, inverse = _unique_rows(rows)
        wins = unique[:, :-1].reshape(-1, size, size) / 2
        # Each distinct resample starts from the fit of a component it came from.
        first = np.zeros(len(unique), int)
        first[inverse.ravel()[::-1]] = np.arange(len(rows))[::-1]
        fitted, _ = newton_dense(
            wins,
            np.where(unique[:, -1:] == 1, REGULARIZATION, RIDGE) * np.ones(size),
            fits[first % count],
        )
        out[start : start + len(block)] = fitted[inverse.ravel()].reshape(len(block), count, size)
    return out


def _bootstrap_component(
    nodes: np.ndarray,
    ca: np.ndarray,
    cb: np.ndarray,
    cs: np.ndarray,
    drawn: np.ndarray,
    prior: np.ndarray,
    strength: np.ndarray,
    iterations: int = 200,
) -> np.ndarray:
    """(B, m): the resamples of one component of ``nodes``, by Newton's method batched over
    the resamples, from the fit, working on its compared pairs only."""
    m = len(nodes)
    local = np.empty(max(nodes.max(), ca.max(), cb.max()) + 1, int)
    local[nodes] = np.arange(m)
    a, b = local[ca], local[cb]
    low, high = np.minimum(a, b), np.maximum(a, b)
    keys, edge = np.unique(low * m + high, return_inverse=True)
    i, j = keys // m, keys % m
    to_low = np.where(a == low, cs, 1 - cs)
    cells = np.arange(len(ca))
    shape = (len(ca), len(keys))
    won_low = drawn @ csr_matrix((to_low, (cells, edge)), shape=shape)  # (B, E)
    games = drawn @ csr_matrix((np.ones(len(ca)), (cells, edge)), shape=shape)
    incidence = csr_matrix(
        (
            np.concatenate([np.ones(len(i)), -np.ones(len(i))]),
            (np.concatenate([np.arange(len(i))] * 2), np.concatenate([i, j])),
        ),
        shape=(len(i), m),
    )
    both = abs(incidence)
    pr = prior[nodes]
    shift = 0.0 if (pr > 0).any() else 1.0 / m  # fixes the free shift; changes no fit
    theta = np.tile(strength[nodes], (drawn.shape[0], 1))
    active = np.arange(drawn.shape[0])
    diagonal = np.arange(m)
    for _ in range(iterations):
        if not len(active):
            break
        t = theta[active]
        p = 1 / (1 + np.exp(t[:, j] - t[:, i]))  # (b, E)
        g = games[active]
        grad = (won_low[active] - g * p) @ incidence + pr * (0.5 - 1 / (1 + np.exp(-t)))
        weight = g * p * (1 - p)
        own = 1 / (1 + np.exp(-t))
        info = np.full((len(active), m, m), shift)
        info[:, i, j] -= weight
        info[:, j, i] -= weight
        info[:, diagonal, diagonal] += weight @ both + pr * own * (1 - own) + 1e-12
        step = np.clip(np.linalg.solve(info, grad[..., None])[..., 0], -5, 5)
        theta[active] = t + step
        active = active[np.abs(step).max(axis=1) >= 1e-9]
    return theta


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a non-negative integer matrix and each row's index among them:
    by one integer key per row when it fits in 62 bits (much faster than sorting rows)."""
    base = int(rows.max()) + 1 if rows.size else 1
    if rows.shape[1] * np.log2(max(base, 2)) < 62:
        weights = base ** np.arange(rows.shape[1], dtype=np.int64)
        _, first, inverse = np.unique(rows @ weights, return_index=True, return_inverse=True)
        return rows[first], inverse
    return np.unique(rows, axis=0, return_inverse=True)


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
