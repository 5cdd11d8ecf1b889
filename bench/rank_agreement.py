"""Do the rank-agreement intervals of ``generation.consistency`` cover? Seeded worlds whose
truth is known: two conditions score the same items; the truth is the population's
Spearman rho and Kendall tau-b between them (closed form for a bivariate normal, else from
one sample of 400,000 items). Each cell: ``--seeds`` seeds x ``--reps`` replications.

Worlds: ``normal`` (bivariate normal scores), ``tied`` (both cut to five levels: many
ties), ``heavy`` (heavy-tailed noise, t with 2 df), ``essay`` (each item's mean of 20
integer scores from 0 to 12 with call noise against one deterministic call: the
essay-scoring activity's design). Correlations 0, 0.5, 0.9 and 0.99; 10, 30 and 100 items.

    python bench/rank_agreement.py [--seeds 20] [--reps 100]

The last line is one JSON object: the worst coverage of each coefficient, the false
positive rate where the truth is 0, and each cell's figures.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
from scipy import stats as sps

from generation.consistency import rank_agreement

WORLDS = ("normal", "tied", "heavy", "essay")
RHOS = (0.0, 0.5, 0.9, 0.99)
SIZES = (10, 30, 100)


def draw(world: str, rho: float, n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    x = rng.standard_normal(n)
    if world == "heavy":
        noise = rng.standard_t(2, n) / math.sqrt(3)  # scaled; t2 has no variance, still heavy
        y = rho * x + math.sqrt(1 - rho * rho) * noise
        return x, y
    y = rho * x + math.sqrt(1 - rho * rho) * rng.standard_normal(n)
    if world == "tied":
        cuts = np.array([-1.0, -0.3, 0.3, 1.0])
        return np.searchsorted(cuts, x).astype(float), np.searchsorted(cuts, y).astype(float)
    if world == "essay":
        # Condition A: the mean of 20 calls, each the item's score plus call noise, rounded
        # to 0..12; condition B: one deterministic call (temperature 0), its own view.
        base_a = 6 + 2 * x
        calls = np.clip(np.rint(base_a[:, None] + rng.normal(0, 1.2, (n, 20))), 0, 12)
        b = np.clip(np.rint(6 + 2 * y), 0, 12)
        return calls.mean(axis=1), b
    return x, y


def truth(world: str, rho: float, rng: np.random.Generator) -> tuple[float, float]:
    if world == "normal":
        return 6 / math.pi * math.asin(rho / 2), 2 / math.pi * math.asin(rho)
    a, b = draw(world, rho, 400_000, rng)
    return float(sps.spearmanr(a, b).statistic), float(sps.kendalltau(a, b).statistic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--reps", type=int, default=100)
    args = parser.parse_args()
    cells = []
    print(
        f"{'world':8} {'rho':>4} {'n':>4} {'true rho_s':>10} {'cover':>6} {'width':>6} "
        f"{'true tau':>9} {'cover':>6} {'width':>6} {'undefined':>9}"
    )
    for world in WORLDS:
        for rho in RHOS:
            true_s, true_k = truth(world, rho, np.random.default_rng(12345))
            for n in SIZES:
                hits_s = hits_k = flagged = total = undefined = 0
                widths_s: list[float] = []
                widths_k: list[float] = []
                for seed in range(args.seeds):
                    rng = np.random.default_rng([seed, n, int(rho * 100), WORLDS.index(world)])
                    for _ in range(args.reps):
                        a, b = draw(world, rho, n, rng)
                        found = rank_agreement(a.tolist(), b.tolist())
                        if found["spearman_ci"] is None:
                            undefined += 1
                            continue
                        total += 1
                        lo, hi = found["spearman_ci"]
                        widths_s.append(hi - lo)
                        widths_k.append(found["kendall_ci"][1] - found["kendall_ci"][0])
                        hits_s += lo <= true_s <= hi
                        lo_k, hi_k = found["kendall_ci"]
                        hits_k += lo_k <= true_k <= hi_k
                        flagged += lo > 0 or hi < 0
                cell = {
                    "world": world,
                    "rho": rho,
                    "items": n,
                    "true_spearman": round(true_s, 3),
                    "spearman_coverage": round(hits_s / total, 3),
                    "true_kendall": round(true_k, 3),
                    "kendall_coverage": round(hits_k / total, 3),
                    "excludes_zero": round(flagged / total, 3),
                    "median_spearman_width": round(float(np.median(widths_s)), 3),
                    "median_kendall_width": round(float(np.median(widths_k)), 3),
                    "undefined": undefined,
                }
                cells.append(cell)
                print(
                    f"{world:8} {rho:4.2f} {n:4d} {true_s:10.3f} {cell['spearman_coverage']:6.3f}"
                    f" {cell['median_spearman_width']:6.3f} {true_k:9.3f}"
                    f" {cell['kendall_coverage']:6.3f} {cell['median_kendall_width']:6.3f}"
                    f" {undefined:9d}"
                )
    zero = [c["excludes_zero"] for c in cells if c["rho"] == 0.0]
    print(
        json.dumps(
            {
                "seeds": args.seeds,
                "replications_per_cell": args.seeds * args.reps,
                "min_spearman_coverage": min(c["spearman_coverage"] for c in cells),
                "min_kendall_coverage": min(c["kendall_coverage"] for c in cells),
                "max_false_positive_rate_at_zero": max(zero),
                "cells": cells,
            }
        )
    )


if __name__ == "__main__":
    main()
