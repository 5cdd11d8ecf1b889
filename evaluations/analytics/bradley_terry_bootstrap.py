"""The bootstrap of Bradley-Terry strengths (``bootstrap``): the judgments resampled
within each connected component (with replacement, seeded; each component keeps its number
of judgments), and each resample refitted by the batched Newton's method of
``bradley_terry``, identical resamples once. Components of ``TINY`` variants or fewer are
refitted together, grouped by size; larger ones up to ``SMALL`` one at a time, batched over
the resamples; larger still get no resamples (NaN: ``bradley_terry.wald`` gives their
intervals).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix

from evaluations.analytics import bradley_terry as bt
from evaluations.analytics.bradley_terry import Fit


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
    prior = np.where(fitted.regularized, bt.REGULARIZATION, bt.RIDGE)
    theta = np.zeros((resamples, n))
    sizes = np.bincount(component)
    for size in np.unique(sizes):
        if size == 1:
            continue
        chosen = np.nonzero(sizes == size)[0]
        members = bt.members_of(component, chosen, size)
        in_group = np.isin(cell_component, chosen)
        if size > bt.SMALL:
            theta[:, members.ravel()] = np.nan  # too large to refit: ``wald`` gives its intervals
        elif size <= bt.TINY:
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
    flags = (prior[:, 0] > bt.RIDGE).astype(np.int64)  # (C,) the component is regularized
    per_chunk = max(1, bt.BATCH_CELLS // (count * size * size))
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
        fitted, _ = bt.newton_dense(
            wins,
            np.where(unique[:, -1:] == 1, bt.REGULARIZATION, bt.RIDGE) * np.ones(size),
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
