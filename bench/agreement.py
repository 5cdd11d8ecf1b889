"""The agreement part of the analytics on many units: comparisons, ratings (on three
dimensions) and labels (four, several a judgment), each with 3,000 tasks judged by three
people and one LLM judge, 1,000 bootstrap resamples (the most the agreement intervals take).

    python bench/agreement.py [--units 3000] [--people 3] [--resamples 1000] [--dimensions 3]

Works on judgments made in memory (no database): it times ``agreement.agreement`` alone,
the part of ``analyze`` that computes ``agreement``. Last line: JSON of the times (s).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--units", type=int, default=3000)
    parser.add_argument("--people", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--dimensions", type=int, default=3, help="of the rating rubric")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    import django

    django.setup()
    import numpy as np

    from evaluations.analytics import agreement
    from evaluations.analytics.analyze import ANALYSES
    from evaluations.analytics.data import Row

    rng = np.random.default_rng(0)
    people = [f"person{n}" for n in range(args.people)]
    variants = {
        pk: SimpleNamespace(item=SimpleNamespace(item_id=f"i{pk // 2}"), variant_id=f"v{pk % 2}")
        for pk in range(2 * args.units)
    }

    def row(pk: int, task: int, rater: str, presented: list[int], payload: dict) -> Row:
        kind, judge = ("judge", 1) if rater.startswith("judge:") else ("external", None)
        return Row(pk, task, rater, kind, judge, presented, payload, 0, None, False, None)

    def judged(answer) -> list[Row]:
        rows = []
        for unit in range(args.units):
            truth = rng.random()
            for rater in [*people, "judge:J"]:
                pair = [2 * unit, 2 * unit + 1]
                rows.append(row(len(rows), unit, rater, pair, answer(truth, pair)))
        return rows

    def winner(truth: float, pair: list[int]) -> dict:
        noisy = truth + rng.normal(0, 0.3)
        return {"winner": "A" if noisy < 0.4 else "B" if noisy > 0.6 else "tie"}

    def scores(truth: float, pair: list[int]) -> dict:
        del pair[1]
        return {
            "scores": {
                d: int(np.clip(round(1 + 4 * truth + rng.normal(0, 0.7)), 1, 5)) for d in dimensions
            }
        }

    def labels(truth: float, pair: list[int]) -> dict:
        del pair[1]
        chosen = [name for name in ("a", "b", "c", "d") if rng.random() < truth]
        return {"labels": chosen or ["a"]}

    dimensions = [f"d{n}" for n in range(args.dimensions)]
    config = {
        "comparison": {"ties": True},
        "rating": {"dimensions": [{"name": d, "min": 1, "max": 5} for d in dimensions]},
        "labeling": {"labels": ["a", "b", "c", "d"], "multiple": True},
    }
    cases = {
        "comparison": ("pairwise", judged(winner)),
        "rating": ("ratings", judged(scores)),
        "labeling": ("labels", judged(labels)),
    }
    times = {}
    for kind, (name, rows) in cases.items():
        start = time.perf_counter()
        result = agreement.agreement(
            rows,
            ANALYSES[name],
            config[kind],
            variants,  # type: ignore[arg-type]
            {"resamples": args.resamples, "seed": 0},
        )
        times[kind] = round(time.perf_counter() - start, 3)
        main_figure = (
            "krippendorff_alpha_interval" if name == "ratings" else "krippendorff_alpha_nominal"
        )
        print(
            f"{kind}: {len(rows)} judgments, {result['units']} units, {times[kind]} s;",
            f"alpha {result[main_figure]} {result[main_figure + '_ci']}",
        )
    print(json.dumps(times))


if __name__ == "__main__":
    main()
