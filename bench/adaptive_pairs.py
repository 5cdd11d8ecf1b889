"""Adaptive against random comparison designs: how many comparisons each needs before the
Bradley-Terry ranking of the variants reaches Kendall's tau >= 0.9 with the truth.

    python bench/adaptive_pairs.py [--sizes 20 100] [--runs 5] [--spread 1.0]

Simulated: true log-strengths drawn from N(0, spread^2), each comparison won by the first
with the Bradley-Terry probability. Both designs start from the same round (every variant
in one random pair); then, a round at a time (a tenth of the variants' number of pairs),
the random design draws pairs uniformly and the adaptive one takes
``evaluations.analytics.stats.next_pairs`` under the current fit. Reports the median over
``runs`` seeds; last line: JSON.
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

from evaluations.analytics import stats  # noqa: E402 (after the path)

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
        fit = stats.bradley_terry(stats.win_matrix(n, *arrays), regularize=True)
        if sps.kendalltau(truth, fit["strength"]).statistic >= TARGET_TAU:
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
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--spread", type=float, default=1.0)
    args = parser.parse_args()
    report: dict[str, object] = {"target_tau": TARGET_TAU, "spread": args.spread, "runs": args.runs}
    for n in args.sizes:
        random_runs = [needed(n, args.spread, seed, adaptive=False) for seed in range(args.runs)]
        adaptive_runs = [needed(n, args.spread, seed, adaptive=True) for seed in range(args.runs)]
        r, ad = statistics.median(random_runs), statistics.median(adaptive_runs)
        print(
            f"{n} variants: random needs {r:.0f} comparisons (runs {random_runs}), adaptive "
            f"{ad:.0f} (runs {adaptive_runs}): ratio {ad / r:.2f}"
        )
        report[f"random_{n}"] = r
        report[f"adaptive_{n}"] = ad
        report[f"adaptive_over_random_{n}"] = round(ad / r, 3)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
