"""The joint Bradley-Terry model of people and judges (``evaluations.analytics.joint``) at
the sizes users bring: verdicts by people and three judges on 10 models, with position,
length, markdown and self-preference effects, fitted with and without them, and 200
bootstrap resamples of both (the analytics' bound; past ``joint.BOOTSTRAP_WORK``, Wald
intervals, as the analytics do). Prints, per size, the time of the two fits and of their
intervals, the number of cells and columns, and the largest difference from statsmodels'
Logit on the same design; last line: JSON.

    python bench/joint_model.py [--sizes 3000,50000] [--resamples 200]

One BLAS thread, as the analytics run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluations.analytics import joint

RATERS = 4  # people, then three judges
MODELS = 10


def simulate(verdicts: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    strength = rng.normal(0, 1, MODELS)
    a = rng.integers(0, MODELS, verdicts)
    b = (a + rng.integers(1, MODELS, verdicts)) % MODELS
    # Outputs: 200 per model, each with its log2 length and markdown density.
    outputs = rng.integers(0, 200, (verdicts, 2))
    log_length = rng.normal(9, 0.8, (MODELS, 200)) + np.linspace(-1, 1, MODELS)[:, None]
    density = rng.gamma(2.0, 0.5, (MODELS, 200))
    family = rng.integers(0, 4, MODELS)
    rater = rng.integers(0, RATERS, verdicts)
    x = np.zeros((verdicts, 4 * RATERS))
    rows = np.arange(verdicts)
    x[rows, rater * 4] = 1.0
    x[rows, rater * 4 + 1] = log_length[a, outputs[:, 0]] - log_length[b, outputs[:, 1]]
    x[rows, rater * 4 + 2] = density[a, outputs[:, 0]] - density[b, outputs[:, 1]]
    judge = rater > 0
    own = rater - 1  # judge r is of family r - 1
    signed = (family[a] == own).astype(float) - (family[b] == own)
    x[rows[judge], rater[judge] * 4 + 3] = signed[judge]
    beta = rng.normal(0, 0.4, x.shape[1])
    eta = strength[a] - strength[b] + x @ beta
    p = 1 / (1 + np.exp(-eta))
    tie = 0.1 * 2 * np.minimum(p, 1 - p)
    first = rng.random(verdicts) < (p - tie / 2) / (1 - tie)
    y = np.where(rng.random(verdicts) < tie, 0.5, first.astype(float))
    return a, b, x, y


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="3000,50000")
    parser.add_argument("--resamples", type=int, default=200)
    args = parser.parse_args()
    import statsmodels.api as sm

    report = []
    with threadpool_limits(limits=1, user_api="blas"):
        for size in [int(s) for s in args.sizes.split(",")]:
            a, b, x, y = simulate(size)
            began = time.perf_counter()
            found = joint.cells(a, b, x, y)
            fitted = joint.fit(MODELS, found)
            plain = joint.fit(MODELS, found, effects=False)
            fit_s = time.perf_counter() - began
            # The intervals as the analytics get them: the bootstrap, or past its bound Wald's.
            began = time.perf_counter()
            work = joint.bootstrap_work([fitted, plain], found, args.resamples)
            intervals = "wald" if work > joint.BOOTSTRAP_WORK else "bootstrap"
            if intervals == "wald":
                joint.wald(fitted, found, MODELS)
                joint.wald(plain, found, MODELS)
            else:
                joint.bootstrap([fitted, plain], found, MODELS, resamples=args.resamples, seed=0)
            boot_s = time.perf_counter() - began
            design = joint.design(a, b, x, fitted.columns, MODELS)
            logit = sm.Logit(y, design).fit(disp=0, method="newton", tol=1e-12, maxiter=100)
            entry = {
                "verdicts": size,
                "cells": len(found.y),
                "columns": fitted.columns.size,
                "fit_s": round(fit_s, 3),
                "intervals": intervals,
                "intervals_s": round(boot_s, 3),
                "resamples": args.resamples if intervals == "bootstrap" else 0,
                "glm_max_abs_difference": float(np.abs(logit.params - fitted.coefficients).max()),
            }
            print(
                f"{size:>7} verdicts ({entry['cells']} cells, {entry['columns']} columns): "
                f"fits {fit_s:.3f} s, intervals ({intervals}) {boot_s:.2f} s, "
                f"max |statsmodels - fit| {entry['glm_max_abs_difference']:.1e}"
            )
            report.append(entry)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
