"""Batch mode at scale: a job of N cells through the fake provider's OpenAI batch API (its
own process), on a fresh database of its own (SQLite, or PostgreSQL with DATABASE_URL).

    python bench/batch_scale.py [--cells 50000] [--failure-rate 0.02] [--max-cells 10000]

Reported per stage, each with its wall time, this process's CPU seconds and the fake
provider's (the provider's own work: parsing the upload, writing the answers):

- ``create``: the job planned (``job_plan``) and created with every cell (``job_create``);
- ``submit``: the first pass: pending cells claimed into batches with their budget reserved
  (rendering each request), each batch recorded before it is sent, its JSONL built into a
  spooled file and uploaded; ``build_submit_s`` is ``create`` and ``submit`` together, from
  the configuration to every batch at the provider;
- ``ingest``: the second pass: the results streamed, parsed and recorded in chunks
  (idempotent; ``ingest_db_s`` is the database part alone); failed rows go back to pending;
- ``resubmit``: the passes after it, the failed rows sent again alone until the job ends.

Targets (issue 20): ``build_submit_s`` <= 10 s, ``ingest_s`` <= 15 s, peak RSS <= 400 MB
(this process, ``ru_maxrss``). The machine's load average is reported: on a shared machine
wall times grow with it, CPU seconds much less.

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
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

TARGET_BUILD_SUBMIT_S = 10.0
TARGET_INGEST_S = 15.0
TARGET_PEAK_RSS_MB = 400.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=50_000)
    parser.add_argument("--failure-rate", type=float, default=0.02)
    parser.add_argument("--max-cells", type=int, default=10_000, help="Cells per batch.")
    parser.add_argument("--jobs", type=int, default=6, help="Batch jobs started at once.")
    parser.add_argument("--job-cells", type=int, default=200, help="Cells of each of them.")
    parser.add_argument("--batch-s", type=float, default=3.0, help="Their provider's batch time.")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    # The fake provider listens on loopback, which connections may call only when allowed
    # (evalplatform/providers/netguard.py).
    os.environ.setdefault("PROVIDER_HOSTS_ALLOWED", "127.0.0.1,localhost")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["GENERATION_BATCH_MAX_CELLS"] = str(args.max_cells)
    os.environ["GENERATION_MAX_CELLS"] = str(max(args.cells, 50_000))
    from setup_data import fresh_database

    with fresh_database("batch") as database:
        summary = run(args, database)
    print(json.dumps(summary))


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Stage:
    """Wall time, this process's CPU and the fake's over a block."""

    def __init__(self, fake_pid: int):
        self.fake_pid = fake_pid

    def __enter__(self) -> Stage:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()
        self.fake = _cpu_s(self.fake_pid)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu
        self.fake = _cpu_s(self.fake_pid) - self.fake


def run(args: argparse.Namespace, database: str) -> dict[str, Any]:
    import asyncio

    import django

    django.setup()
    from django.core.management import call_command
    from django.db.models import Sum
    from provider_overhead import free_port, start_fake
    from setup_data import bench_fixture, job_body

    from evalplatform.runs.models import ProviderBatch
    from generation import planning, services
    from generation.models import GenerationJob
    from generation.runners import batch as batch_runner

    call_command("migrate", verbosity=0)
    port = free_port()
    fake = start_fake(
        port,
        extra=("--batch-duration", "0", "--batch-failure-rate", str(args.failure_rate)),
    )
    load_before = os.getloadavg()[0]
    stages: dict[str, Stage] = {}
    summaries = []
    recording = {"s": 0.0}
    record = batch_runner._record

    def timed_record(*a: Any, **kw: Any) -> Any:
        began = time.perf_counter()
        try:
            return record(*a, **kw)
        finally:
            recording["s"] += time.perf_counter() - began

    try:
        user, model, version = bench_fixture(kind="openai", base_url=f"http://127.0.0.1:{port}")
        data = job_body(model, version, args.cells, mode="batch")
        with Stage(fake.pid) as stages["create"]:
            job = services.job_create(user=user, plan=planning.job_plan(user=user, data=data))
        services.job_start(user=user, job=job)
        batch_runner._record = timed_record  # type: ignore[assignment]
        for number in range(12):
            name = {0: "submit", 1: "ingest"}.get(number, f"resubmit{number - 1}")
            recording["s"] = 0.0
            with Stage(fake.pid) as stage:
                summaries.append(asyncio.run(batch_runner.drive(job.pk)))
            stage.db = recording["s"]  # type: ignore[attr-defined]
            stages[name] = stage
            if GenerationJob.objects.get(pk=job.pk).status != "running":
                break
    finally:
        batch_runner._record = record  # type: ignore[assignment]
        fake.terminate()
        fake.wait(timeout=10)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load_after = os.getloadavg()[0]
    side_by_side = many_jobs(args, user, model, version)
    job = GenerationJob.objects.get(pk=job.pk)
    # SQLite sums decimals as floats: compare at the stored precision (micro-dollars).
    spent = job.outputs.aggregate(s=Sum("cost_usd"))["s"].quantize(Decimal("0.000001"))
    assert job.status == "completed", job.status
    assert job.completed_cells + job.failed_cells == args.cells
    assert job.cost_usd == spent and job.reserved_usd == 0, (job.cost_usd, spent, job.reserved_usd)
    batches = ProviderBatch.objects.filter(work_id=job.pk).count()
    create, submit, ingest = stages["create"], stages["submit"], stages["ingest"]
    rest = [s for name, s in stages.items() if name.startswith("resubmit")]
    build_submit_s = create.wall + submit.wall
    for name, stage in stages.items():
        extra = f", database {stage.db:.2f} s" if hasattr(stage, "db") and stage.db else ""
        print(
            f"{name:>10}: {stage.wall:6.2f} s wall, {stage.cpu:6.2f} s CPU here, "
            f"{stage.fake:6.2f} s CPU at the fake provider{extra}"
        )
    print(
        f"{args.cells} cells on {database.split()[0]}: {job.completed_cells} completed, "
        f"{job.failed_cells} failed, {batches} provider batches, {len(summaries)} passes; "
        f"load average {load_before:.1f} before, {load_after:.1f} after"
    )
    print(
        f"build + submit {build_submit_s:.1f} s (target <= {TARGET_BUILD_SUBMIT_S:g}), ingest "
        f"{ingest.wall:.1f} s (target <= {TARGET_INGEST_S:g}), peak RSS {peak_mb:.0f} MB "
        f"(target <= {TARGET_PEAK_RSS_MB:g})"
    )
    return {
        "cells": args.cells,
        "database": database.split()[0],
        "failure_rate": args.failure_rate,
        "provider_batches": batches,
        "passes": len(summaries),
        "load_average_before": round(load_before, 2),
        "load_average_after": round(load_after, 2),
        "create_job_s": round(create.wall, 3),
        "create_job_cpu_s": round(create.cpu, 3),
        "submit_s": round(submit.wall, 3),
        "submit_cpu_s": round(submit.cpu, 3),
        "submit_fake_cpu_s": round(submit.fake, 3),
        "submit_cells_per_s": round(summaries[0].submitted_cells / submit.wall, 1),
        "build_submit_s": round(build_submit_s, 3),
        "ingest_s": round(ingest.wall, 3),
        "ingest_cpu_s": round(ingest.cpu, 3),
        "ingest_fake_cpu_s": round(ingest.fake, 3),
        "ingest_db_s": round(ingest.db, 3),  # type: ignore[attr-defined]
        "ingest_cells_per_s": round(summaries[1].recorded / ingest.wall, 1),
        "resubmit_s": round(sum(s.wall for s in rest), 3),
        "completed": job.completed_cells,
        "failed": job.failed_cells,
        "total_s": round(sum(s.wall for s in stages.values()), 3),
        "peak_rss_mb": round(peak_mb, 1),
        "build_submit_meets_target": build_submit_s <= TARGET_BUILD_SUBMIT_S,
        "ingest_meets_target": ingest.wall <= TARGET_INGEST_S,
        "peak_rss_meets_target": peak_mb <= TARGET_PEAK_RSS_MB,
        **side_by_side,
    }


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
