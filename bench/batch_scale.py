"""Batch mode at scale: a job of N cells through the fake provider's OpenAI batch API (its
own process), on a fresh SQLite database (or DATABASE_URL).

    python bench/batch_scale.py [--cells 50000] [--failure-rate 0.02] [--max-cells 10000]

Measures the submission (rendering, reserving budget, recording each batch before sending,
streaming the JSONL upload), the recording of results (chunks of 500, idempotent; the pass
also waits for the fake to produce and send them, so ``record_db_s`` gives the database
part alone) and the re-submission of failed rows alone, with the process's peak memory.

Then one user's ``--jobs`` batch jobs (``--job-cells`` each) are started at once against a
fake whose batches take ``--batch-s`` seconds: none is queued behind another (a batch job
waiting at the provider holds no running slot), all their batches are in flight together,
and the whole takes about one batch's time, not ``--jobs`` of them (``jobs_wall_over_one_batch``).
Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=50_000)
    parser.add_argument("--failure-rate", type=float, default=0.02)
    parser.add_argument("--max-cells", type=int, default=10_000, help="Cells per batch.")
    parser.add_argument("--jobs", type=int, default=6, help="Batch jobs started at once.")
    parser.add_argument("--job-cells", type=int, default=200, help="Cells of each of them.")
    parser.add_argument("--batch-s", type=float, default=3.0, help="Their provider's batch time.")
    args = parser.parse_args()
    os.environ.setdefault("EVAL_DATA_DIR", tempfile.mkdtemp(prefix="evalbench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["GENERATION_BATCH_MAX_CELLS"] = str(args.max_cells)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db.models import Sum
    from provider_overhead import free_port, start_fake
    from setup_data import bench_fixture, drive_timed, job_body

    from evalplatform.runs.models import ProviderBatch
    from generation import planning, services
    from generation.models import GenerationJob

    call_command("migrate", verbosity=0)
    port = free_port()
    fake = start_fake(
        port,
        extra=("--batch-duration", "0", "--batch-failure-rate", str(args.failure_rate)),
    )
    try:
        user, model, version = bench_fixture(kind="openai", base_url=f"http://127.0.0.1:{port}")
        data = job_body(model, version, args.cells, mode="batch")
        created = time.perf_counter()
        job = services.job_create(user=user, plan=planning.job_plan(user=user, data=data))
        create_s = time.perf_counter() - created
        services.job_start(user=user, job=job)

        # Time spent recording results in the database, apart from waiting for the provider.
        passes, total_s, record_db_s = drive_timed(job.pk)
    finally:
        fake.terminate()
        fake.wait(timeout=10)
    side_by_side = many_jobs(args, user, model, version)
    job = GenerationJob.objects.get(pk=job.pk)
    # SQLite sums decimals as floats: compare at the stored precision (micro-dollars).
    spent = job.outputs.aggregate(s=Sum("cost_usd"))["s"].quantize(Decimal("0.000001"))
    assert job.status == "completed", job.status
    assert job.completed_cells + job.failed_cells == args.cells
    assert job.cost_usd == spent and job.reserved_usd == 0, (job.cost_usd, spent, job.reserved_usd)
    batches = ProviderBatch.objects.filter(work_id=job.pk)
    submit_s = passes[0][0]
    record_s = passes[1][0]
    submitted = passes[0][1].submitted_cells
    recorded = passes[1][1].recorded
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for number, (seconds, summary) in enumerate(passes, 1):
        print(
            f"pass {number}: {seconds:.2f} s, submitted {summary.submitted_cells} cells in "
            f"{summary.submitted_batches} batches, recorded {summary.recorded}"
        )
    print(
        f"{args.cells} cells: {job.completed_cells} completed, {job.failed_cells} failed, "
        f"{batches.count()} provider batches, {len(passes)} passes in {total_s:.1f} s; "
        f"peak memory {peak_mb:.0f} MB"
    )
    print(
        json.dumps(
            {
                "cells": args.cells,
                "database": django.db.connection.vendor,
                "failure_rate": args.failure_rate,
                "provider_batches": batches.count(),
                "passes": len(passes),
                "create_job_s": round(create_s, 3),
                "submit_s": round(submit_s, 3),
                "submit_cells_per_s": round(submitted / submit_s, 1),
                "record_s": round(record_s, 3),
                "record_cells_per_s": round(recorded / record_s, 1),
                "record_db_s": round(record_db_s, 3),
                "record_db_cells_per_s": round(args.cells / record_db_s, 1),
                "completed": job.completed_cells,
                "failed": job.failed_cells,
                "total_s": round(total_s, 3),
                "peak_rss_mb": round(peak_mb, 1),
                **side_by_side,
            }
        )
    )


def many_jobs(args: argparse.Namespace, user, model, version) -> dict:
    """One user's ``args.jobs`` batch jobs started at once: how many ran (none queued), how
    many had batches at the provider together, and the wall time against one batch's."""
    import asyncio

    from provider_overhead import free_port, start_fake
    from setup_data import job_body

    from evalplatform.runs.models import ProviderBatch
    from generation import planning, services
    from generation.models import GenerationJob
    from generation.runners import batch as batch_runner

    port = free_port()
    fake = start_fake(port, extra=("--batch-duration", str(args.batch_s)))
    model.connection.base_url = f"http://127.0.0.1:{port}"
    model.connection.save()
    try:
        began = time.perf_counter()
        ids = []
        for n in range(args.jobs):
            data = job_body(model, version, args.job_cells, mode="batch") | {"name": f"side {n}"}
            job = services.job_create(user=user, plan=planning.job_plan(user=user, data=data))
            services.job_start(user=user, job=job)
            ids.append(job.pk)
        jobs = GenerationJob.objects.filter(pk__in=ids)
        running = jobs.filter(status="running").count()
        queued = jobs.filter(status="queued").count()
        in_flight, passes = 0, 0
        while jobs.exclude(status="completed").exists() and passes < 200:
            asyncio.run(batch_runner.drive())
            passes += 1
            open_batches = ProviderBatch.objects.filter(
                work_id__in=ids,
                state__in=("submitting", "validating", "in_progress", "finalizing"),
            )
            in_flight = max(in_flight, open_batches.values("work_id").distinct().count())
            time.sleep(0.25)
        wall = time.perf_counter() - began
    finally:
        fake.terminate()
        fake.wait(timeout=10)
    done = jobs.filter(status="completed").count()
    print(
        f"{args.jobs} batch jobs of one user started at once: {running} running, {queued} "
        f"queued; up to {in_flight} with batches at the provider together; {done} completed "
        f"in {wall:.1f} s where one batch takes {args.batch_s:.1f} s "
        f"({wall / args.batch_s:.2f}x one batch; one after another would be {args.jobs}x)"
    )
    return {
        "jobs": args.jobs,
        "jobs_running_at_start": running,
        "jobs_queued_at_start": queued,
        "jobs_with_batches_in_flight_together": in_flight,
        "jobs_completed": done,
        "jobs_wall_s": round(wall, 2),
        "jobs_wall_over_one_batch": round(wall / args.batch_s, 2),
    }


if __name__ == "__main__":
    main()
