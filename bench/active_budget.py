"""The budget scheduler against today's fixed designs: the money and people's hours each
needs before the question's 95% interval is as narrow (issue 21: target <= 1/2).

    python bench/active_budget.py [--sizes 8] [--runs 20] [--spreads 1] [--passes 3]
                                  [--questions pair top_k ranking]

Simulated (``evaluations.planner.simulation``, seeded): true log-strengths of the models from
N(0, spread^2); people (reliability 1, position bias 0.2 logit, 30 s a verdict at $30/h) and
three judges of known quality (cheap and noisy with a strong first-position bias and sticky
repeats; good and dearer; nearly useless). Today's fixed design: passes over every pair, each
task answered by people and by every judge (as "unjudged" judge runs do); the target is the
width the fixed design reaches after ``--passes`` passes, and the fixed design's cost is what
it spent to get there. The scheduler starts from a calibration chain (every model in a pair,
answered by everyone, so each judge is measured against people) and then plans rounds of a
twentieth of that cost, re-estimating after each, until the same width. Both widths are
measured by the same fit (``design.estimate``). This grows ``bench/adaptive_pairs.py``: there
the ranking's comparisons alone were counted; here every verdict has a price and a rater.

Reports the median ratio over ``runs`` seeds per question; last line: JSON, with
``money_ratio`` and ``human_hours_ratio`` the worst question's medians.

``--bounds [--judges N]`` times one proposal's model at the request bounds instead (100
models, 200,000 verdicts of people and N judges, 3 by default, 2,000 candidate pairs, 500
tasks, the ranking): the joint fit and the plan, in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluations.planner import simulation  # noqa: E402 (after the path)

TARGET = 0.5


def one(n: int, spread: float, seed: int, kind: str, passes: int) -> tuple[float, float]:
    _, _, target = simulation.fixed_cost(n, spread, seed, kind, 0.0, max_passes=passes)
    fixed_usd, fixed_hours, _ = simulation.fixed_cost(n, spread, seed, kind, target)
    usd, hours, width = simulation.planned_cost(
        n, spread, seed, kind, target, round_usd=fixed_usd / 20, round_hours=fixed_hours / 20
    )
    if width > target:  # never reached: count it as no saving at all
        return max(1.0, usd / fixed_usd), max(1.0, hours / fixed_hours)
    return usd / fixed_usd, hours / fixed_hours


def bounds(judges: int = 3) -> None:
    """The joint fit and a 500-task ranking plan at the request bounds, timed."""
    import numpy as np

    from evaluations.planner import design

    rng = np.random.default_rng(0)
    n, verdicts = 100, 200_000
    truth = rng.normal(0, 1, n)
    extra = tuple(
        simulation.SimRater(f"judge:more{k}", 0.8, 0.3, 1, 0.002, 0.0)
        for k in range(judges - len(simulation.JUDGES))
    )
    raters = (simulation.PEOPLE, *simulation.JUDGES[:judges], *extra)
    who = rng.integers(0, len(raters), verdicts)
    first = rng.integers(0, n, verdicts)
    second = (first + rng.integers(1, n, verdicts)) % n
    lam = np.array([r.reliability for r in raters])[who]
    bias = np.array([r.bias for r in raters])[who]
    outcome = rng.random(verdicts) < design.first_wins(truth[first] - truth[second], lam, bias)
    keys = np.array([r.key for r in raters], dtype=object)[who]
    task = np.arange(verdicts)
    started = time.perf_counter()
    found = design.estimate(n, first, second, outcome.astype(float), keys, task)
    fitted = time.perf_counter() - started
    pairs = np.array([(i, j) for i in range(n) for j in range(i + 1, n)][:2000])
    offered = simulation.offered(found, raters)
    started = time.perf_counter()
    chosen = design.plan(
        fitted=found,
        question=design.Question("ranking", tau=0.999),
        candidates=pairs,
        raters=offered,
        budget_usd=1000.0,
        budget_hours=1000.0,
        max_tasks=500,
    )
    planned = time.perf_counter() - started
    print(
        f"At the bounds: the joint fit took {fitted:.1f} s ({found.layout.size} parameters), "
        f"the plan {planned:.1f} s ({len(chosen.picks)} tasks)"
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print(
        json.dumps(
            {
                "fit_seconds": round(fitted, 2),
                "plan_seconds": round(planned, 2),
                "parameters": found.layout.size,
                "tasks": len(chosen.picks),
                "load_average_1m": None if load is None else round(load, 2),
            }
        )
    )


def main() -> None:
    if "--bounds" in sys.argv:
        given = sys.argv.index("--judges") + 1 if "--judges" in sys.argv else 0
        bounds(int(sys.argv[given]) if given else 3)
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[8])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--spreads", type=float, nargs="+", default=[1.0])
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument(
        "--questions", nargs="+", default=["pair", "top_k", "ranking"], choices=simulation.KINDS
    )
    args = parser.parse_args()
    started = time.perf_counter()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    report: dict[str, object] = {"target": TARGET, "runs": args.runs, "passes": args.passes}
    worst_money = worst_hours = 0.0
    for spread in args.spreads:
        for n in args.sizes:
            for kind in args.questions:
                found = [one(n, spread, seed, kind, args.passes) for seed in range(args.runs)]
                money = statistics.median(r[0] for r in found)
                hours = statistics.median(r[1] for r in found)
                worst_money, worst_hours = max(worst_money, money), max(worst_hours, hours)
                print(
                    f"{kind}, {n} models, spread {spread:g}: the scheduler needs {money:.2f} of "
                    f"the fixed design's money and {hours:.2f} of its people's hours (runs: "
                    f"{', '.join(f'{m:.2f}/{h:.2f}' for m, h in found)}; target <= {TARGET})",
                    flush=True,
                )
                key = f"{kind}_n{n}_spread_{spread:g}"
                report[f"money_ratio_{key}"] = round(money, 3)
                report[f"human_hours_ratio_{key}"] = round(hours, 3)
    report["money_ratio"] = round(worst_money, 3)
    report["human_hours_ratio"] = round(worst_hours, 3)
    report["meets_target"] = worst_money <= TARGET and worst_hours <= TARGET
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["load_average_1m"] = round(load, 2) if load is not None else None
    print(json.dumps(report))


if __name__ == "__main__":
    main()
