"""An LLM judge run of a few thousand comparison tasks, in both presentation orders, through
the fake provider's OpenAI batch API (its own process) with a share of rows failing: the run
must come back complete, with the failed rows re-submitted alone.

    python bench/judge_batch.py [--tasks 2500] [--failure-rate 0.02]

Measures the submission (the judge's items rendered, budget reserved, batches recorded and
uploaded), the recording of the replies into judgments (``record_db_s``: the database part,
parsing included) and the re-submission rounds. Runs on a fresh SQLite database (or
DATABASE_URL). Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=2500)
    parser.add_argument("--failure-rate", type=float, default=0.02)
    args = parser.parse_args()
    os.environ.setdefault("EVAL_DATA_DIR", tempfile.mkdtemp(prefix="evalbench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    # The fake provider listens on loopback, which connections may call only when allowed
    # (evalplatform/providers/netguard.py).
    os.environ.setdefault("PROVIDER_HOSTS_ALLOWED", "127.0.0.1,localhost")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command
    from provider_overhead import free_port, start_fake
    from setup_data import bench_fixture, drive_timed

    from evalplatform.runs.models import ProviderBatch
    from evaluations.judges import services as judges
    from evaluations.models import Judgment
    from generation.models import GenerationJob
    from scenarios import services as scenarios

    call_command("migrate", verbosity=0)
    port = free_port()
    fake = start_fake(
        port,
        extra=("--batch-duration", "0", "--batch-failure-rate", str(args.failure_rate)),
    )
    try:
        user, model, _ = bench_fixture(kind="openai", base_url=f"http://127.0.0.1:{port}")
        rows = ["item_id,variant_id,content"] + [
            f"i{n},{v},Answer {v} to question {n}: {'a long and careful one' if v == 'a' else 'no'}"
            for n in range(args.tasks)
            for v in ("a", "b")
        ]
        scenario = scenarios.scenario_from_upload(
            user=user,
            team=model.connection.team,
            data={"name": "Pairs", "type": "comparison", "seed": 1},
            raw="\n".join(rows).encode(),
            filename="pairs.csv",
        )
        judge = judges.judge_create(
            user=user,
            scenario=scenario,
            data={
                "name": "Batch judge",
                "model": model.pk,
                "mode": "batch",
                "swap": True,
                "temperatures": [0.0],
                "max_tokens": 100,
            },
        )
        began = time.perf_counter()
        run = judges.judge_run(user=user, judge=judge, data={})
        create_s = time.perf_counter() - began

        passes, total_s, record_db_s = drive_timed(run.job_id)
    finally:
        fake.terminate()
        fake.wait(timeout=10)
    job = GenerationJob.objects.get(pk=run.job_id)
    calls = args.tasks * 2
    judgments = Judgment.objects.filter(judge=judge)
    verdicts = judgments.exclude(parse_status="failed").count()
    rounds = list(
        ProviderBatch.objects.filter(work_id=job.pk)
        .order_by("round", "pk")
        .values_list("round", "request_count")
    )
    resubmitted = sum(count for number, count in rounds if number > 1)
    assert job.status == "completed", (job.status, job.status_message)
    assert job.completed_cells == calls == verdicts, (job.completed_cells, verdicts)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for number, (seconds, summary) in enumerate(passes, 1):
        print(
            f"pass {number}: {seconds:.2f} s, submitted {summary.submitted_cells} calls in "
            f"{summary.submitted_batches} batches, recorded {summary.recorded}"
        )
    print(
        f"{args.tasks} pairs x 2 orders = {calls} calls: {verdicts} verdicts, "
        f"{resubmitted} failed rows re-submitted alone ({len(rounds)} provider batches); "
        f"run created in {create_s:.1f} s, done in {total_s:.1f} s; peak memory {peak_mb:.0f} MB"
    )
    print(
        json.dumps(
            {
                "database": django.db.connection.vendor,
                "tasks": args.tasks,
                "calls": calls,
                "failure_rate": args.failure_rate,
                "verdicts": verdicts,
                "complete": verdicts == calls,
                "rows_resubmitted_alone": resubmitted,
                "provider_batches": len(rounds),
                "passes": len(passes),
                "create_run_s": round(create_s, 3),
                "submit_s": round(passes[0][0], 3),
                "record_db_s": round(record_db_s, 3),
                "record_db_calls_per_s": round(calls / record_db_s, 1),
                "total_s": round(total_s, 3),
                "cost_usd": str(job.cost_usd),
                "peak_rss_mb": round(peak_mb, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
