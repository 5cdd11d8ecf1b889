"""Plackett-Luce strengths of rankings, and their bootstrap by whole rankings.

A ranking (v1 > v2 > ... > vm) of one item's variants has the probability
prod_t exp(θ_vt) / sum_{u >= t} exp(θ_vu): the best chosen from all, the next from the rest,
and so on. Each item is fitted on its own (variants are ranked within their item), centred
to mean 0; an item whose "ranked above" graph is not strongly connected (a variant always
last, say) has no finite maximum, and its variants also play one virtual game each against
a reference of strength 1, half won (as ``bradley_terry``). The bootstrap resamples whole
rankings within each item (the places of one ranking are not independent), seeded, and
refits each distinct resample by Newton's method from the fit, all of an item's at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evaluations.analytics import stats
from evaluations.analytics.bradley_terry import REGULARIZATION, RIDGE


@dataclass
class ItemFit:
    strength: np.ndarray  # (m,) centred
    boot: np.ndarray  # (resamples, m)
    regularized: bool
    converged: bool


def _stages(orders: np.ndarray) -> np.ndarray:
    """(K, m - 1, m) bool: the variants still unplaced at each stage of each ranking."""
    count, m = orders.shape
    place = np.empty_like(orders)
    place[np.arange(count)[:, None], orders] = np.arange(m)[None, :]
    return place[:, None, :] >= np.arange(m - 1)[None, :, None]


def _newton(
    orders: np.ndarray, weights: np.ndarray, prior: float, start: np.ndarray
) -> tuple[np.ndarray, bool]:
    """Log-strengths (B, m) of B weightings (B, K) of the distinct rankings ``orders``."""
    count, m = orders.shape
    stages = _stages(orders)  # (K, T, m)
    chosen = np.zeros((count, m - 1, m))
    chosen[np.arange(count)[:, None], np.arange(m - 1)[None, :], orders[:, : m - 1]] = 1
    picks = np.einsum("bk,ktm->bm", weights, chosen)
    theta = np.tile(start, (weights.shape[0], 1)).astype(float)
    shift = 0.0 if prior > 0 else 1.0 / m
    active = np.arange(weights.shape[0])
    for _ in range(200):
        if not len(active):
            return theta - theta.mean(axis=1, keepdims=True), True
        t = theta[active]
        w = weights[active]
        logits = np.where(stages[None], t[:, None, None, :], -np.inf)  # (b, K, T, m)
        logits -= logits.max(axis=3, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=3, keepdims=True)
        own = 1 / (1 + np.exp(-t))
        grad = picks[active] - np.einsum("bk,bktm->bm", w, p) + prior * (0.5 - own)
        info = np.einsum("bk,bktm->bm", w, p)[:, :, None] * np.eye(m)[None] - np.einsum(
            "bk,bktm,bktn->bmn", w, p, p
        )
        info += shift + (prior * own * (1 - own) + 1e-12)[:, :, None] * np.eye(m)[None]
        step = np.clip(np.linalg.solve(info, grad[..., None])[..., 0], -5, 5)
        theta[active] = t + step
        active = active[np.abs(step).max(axis=1) >= 1e-9]
    return theta - theta.mean(axis=1, keepdims=True), not len(active)


def _connected(orders: np.ndarray, m: int) -> bool:
    """Whether every variant is ranked above some other and below some other, through
    chains: the "ranked above" graph is strongly connected (else no finite maximum)."""
    above = np.zeros((m, m))
    for order in orders:
        for i in range(m):
            above[order[i], order[i + 1 :]] = 1
    return stats.strongly_connected(above)


def fit(
    items: Sequence[Sequence[Sequence[int]]], *, resamples: int = 1000, seed: int = 0
) -> list[ItemFit]:
    """For each item (its rankings, each a full order of local variant indices 0..m-1, best
    first): ``strength`` (m,), ``boot`` (resamples, m), ``regularized``, ``converged``."""
    rng = np.random.default_rng(seed)
    fitted = []
    for rankings in items:
        m = len(rankings[0])
        orders, counts = np.unique(np.array(rankings, int), axis=0, return_counts=True)
        if m < 2:
            fitted.append(ItemFit(np.zeros(m), np.zeros((resamples, m)), False, True))
            continue
        regularized = not _connected(orders, m)
        prior = REGULARIZATION if regularized else 0.0
        strength, converged = _newton(orders, counts[None].astype(float), prior, np.zeros(m))
        boot = np.zeros((0, m))
        if resamples > 0:
            drawn = rng.multinomial(counts.sum(), counts / counts.sum(), size=resamples)
            distinct, inverse = np.unique(drawn, axis=0, return_inverse=True)  # each once
            refits, _ = _newton(
                orders,
                distinct.astype(float),
                REGULARIZATION if regularized else RIDGE,
                strength[0],
            )
            boot = refits[inverse.ravel()]
        fitted.append(ItemFit(strength[0], boot, regularized, converged))
    return fitted
