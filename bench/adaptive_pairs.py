"""Adaptive against random comparison designs: how many comparisons each needs before the
Bradley-Terry ranking of the variants reaches Kendall's tau >= 0.9 with the truth.

    python bench/adaptive_pairs.py [--sizes 20 100] [--runs 20] [--spreads 1 3]

Simulated: true log-strengths drawn from N(0, spread^2), each comparison won by the first
with the Bradley-Terry probability. A comparison of i and j carries p(1 - p) <= 1/4 of
Fisher information about their difference: random pairs average E[p(1 - p)], so no design
can need fewer than about 4 E[p(1 - p)] of random's comparisons ("information bound",
printed): close strengths (spread 1) leave little to gain, spread ones much.

Both designs start from the same round (every variant in one random pair); then, a round
at a time (a tenth of the variants' number of pairs), the random design draws pairs
uniformly and the adaptive one takes ``evaluations.analytics.stats.next_pairs`` under the
current fit. Reports the median over ``runs`` seeds; last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluations.analytics import bradley_terry, stats  # noqa: E402 (after the path)

TARGET_TAU = 0.9
CAP = 200  # comparisons per variant before giving up


def needed(n: int, spread: float, seed: int, adaptive: bool) -> int:
    rng = np.random.default_rng(seed)
    truth = rng.normal(0, spread, n)
    first = rng.permutation(n)
    a = list(first[: n // 2])
    b = list(first[n // 2 : 2 * (n // 2)])
    outcomes: list[float] = []

    def judge(i: int, j: int) -> float:
        return float(rng.random() < 1 / (1 + np.exp(truth[j] - truth[i])))

    outcomes = [judge(i, j) for i, j in zip(a, b, strict=True)]
    step = max(1, n // 10)
    while len(a) < CAP * n:
        arrays = np.array(a), np.array(b), np.array(outcomes)
        fit = bradley_terry.fit_matrix(stats.win_matrix(n, *arrays), regularize=True)
        if sps.kendalltau(truth, fit.strength).statistic >= TARGET_TAU:
            return len(a)
        if adaptive:
            pairs = stats.next_pairs(n, *arrays, step)
        else:
            pairs = []
            while len(pairs) < step:
                i, j = rng.choice(n, 2, replace=False)
                pairs.append((int(i), int(j)))
        for i, j in pairs:
            if rng.random() < 0.5:  # the order shown
                i, j = j, i
            a.append(i)
            b.append(j)
            outcomes.append(judge(i, j))
    return len(a)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--spreads", type=float, nargs="+", default=[1.0, 3.0])
    args = parser.parse_args()
    report: dict[str, object] = {"target_tau": TARGET_TAU, "runs": args.runs}
    for spread in args.spreads:
        bound = information_bound(spread)
        report[f"information_bound_spread_{spread:g}"] = round(bound, 3)
        for n in args.sizes:
            random_runs = [needed(n, spread, seed, adaptive=False) for seed in range(args.runs)]
            adaptive_runs = [needed(n, spread, seed, adaptive=True) for seed in range(args.runs)]
            r, ad = statistics.median(random_runs), statistics.median(adaptive_runs)
            print(
                f"spread {spread:g}, {n} variants: random needs {r:.0f} comparisons (runs "
                f"{random_runs}), adaptive {ad:.0f} (runs {adaptive_runs}): ratio {ad / r:.2f} "
                f"(information bound {bound:.2f})",
                flush=True,
            )
            key = f"spread_{spread:g}_n{n}"
            report[f"random_{key}"] = r
            report[f"adaptive_{key}"] = ad
            report[f"adaptive_over_random_{key}"] = round(ad / r, 3)
    print(json.dumps(report))


def information_bound(spread: float, draws: int = 200_000) -> float:
    """4 E[p(1 - p)] over random pairs of strengths from N(0, spread^2): roughly the least
    share of random's comparisons any design could need."""
    rng = np.random.default_rng(0)
    gap = rng.normal(0, spread, draws) - rng.normal(0, spread, draws)
    p = 1 / (1 + np.exp(-gap))
    return float(4 * np.mean(p * (1 - p)))


if __name__ == "__main__":
    main()
