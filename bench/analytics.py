"""The analytics of a big comparison scenario: 20 variants and 50,000 judgments (by 10
imported raters, in random presentation orders, drawn from known strengths with a position
bias), the whole JSON with 1,000 bootstrap resamples.

    python bench/analytics.py [--variants 20] [--judgments 50000] [--resamples 1000]

Runs on a fresh SQLite database (or DATABASE_URL). Prints the time to read the judgments
and to compute, the recovery of the true order (Kendall's tau), and the JSON size. Last
line: JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", type=int, default=20)
    parser.add_argument("--judgments", type=int, default=50_000)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    os.environ.setdefault("EVAL_DATA_DIR", tempfile.mkdtemp(prefix="evalbench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    import numpy as np
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from scipy import stats as sps

    from evalplatform.accounts.models import Membership, Team
    from evalplatform.accounts.roles import Role
    from evaluations.analytics import analyze as analytics
    from evaluations.analytics import data as analytics_data
    from evaluations.models import ExternalRater, Judgment, RaterKind
    from scenarios import services as scenarios
    from scenarios.models import Task

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench")
    team = Team.objects.create(name="Bench", slug="bench")
    Membership.objects.create(user=user, team=team, role=Role.MANAGER)
    rows = ["item_id,variant_id,content,model"] + [
        f"essay,v{n:02d},Answer number {n},model-{n % 4}" for n in range(args.variants)
    ]
    scenario = scenarios.scenario_from_upload(
        user=user,
        team=team,
        data={"name": "Big", "type": "comparison", "seed": 1},
        raw="\n".join(rows).encode(),
        filename="v.csv",
    )
    tasks = list(Task.objects.filter(scenario=scenario).values_list("pk", "variant_a", "variant_b"))
    raters = [ExternalRater.objects.create(team=team, name=f"rater-{n}") for n in range(10)]
    rng = np.random.default_rng(0)
    variant_ids = sorted({v for _, a, b in tasks for v in (a, b)})
    truth = dict(zip(variant_ids, np.linspace(-2, 2, len(variant_ids)), strict=True))
    made = []
    for index in range(args.judgments):
        task, a, b = tasks[index % len(tasks)]
        if rng.random() < 0.5:
            a, b = b, a
        p_first = 1 / (1 + np.exp(truth[b] - truth[a])) + 0.05  # a little position bias
        draw = rng.random()
        winner = "tie" if draw > 0.97 else ("A" if draw < p_first * 0.97 else "B")
        made.append(
            Judgment(
                scenario=scenario,
                task_id=task,
                rater_kind=RaterKind.EXTERNAL,
                external_rater=raters[index % len(raters)],
                presented=[a, b],
                payload={"winner": winner},
            )
        )
    Judgment.objects.bulk_create(made, batch_size=5000)

    began = time.perf_counter()
    rows_, _ = analytics_data.verdicts(scenario)
    load_s = time.perf_counter() - began
    began = time.perf_counter()
    result = analytics.analyze(scenario, resamples=args.resamples)
    total_s = time.perf_counter() - began
    size = len(json.dumps(result, default=str))
    names = [r["variant"] for r in result["bradley_terry"]]
    estimated = [r["strength"] for r in result["bradley_terry"]]
    by_label = {f"essay/v{n:02d}": truth[variant_ids[n]] for n in range(len(variant_ids))}
    tau = sps.kendalltau([by_label[n] for n in names], estimated).statistic
    print(
        f"{args.variants} variants, {len(rows_)} judgments, {args.resamples} resamples: "
        f"read in {load_s:.2f} s, whole analytics in {total_s:.2f} s, JSON {size / 1024:.0f} kB"
    )
    print(
        f"Kendall's tau with the true strengths {tau:.3f}; first-position share "
        f"{result['position_bias']['overall']['share']:.3f} "
        f"(p = {result['position_bias']['overall']['p_value']:.2g})"
    )
    print(
        json.dumps(
            {
                "database": django.db.connection.vendor,
                "variants": args.variants,
                "judgments": len(rows_),
                "resamples": args.resamples,
                "read_s": round(load_s, 3),
                "analytics_s": round(total_s, 3),
                "target_s": 5,
                "json_kb": round(size / 1024, 1),
                "kendall_tau_with_truth": round(float(tau), 4),
            }
        )
    )


if __name__ == "__main__":
    main()
