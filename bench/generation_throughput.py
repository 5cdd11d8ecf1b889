"""Live generation throughput: N cells against the fake provider (its own process) at a fixed
latency and concurrency, on a fresh SQLite database (or DATABASE_URL).

    python bench/generation_throughput.py [--cells 600] [--latency 0.2] [--concurrency 32]
                                          [--watched]

Ideal wall time is ceil(cells / concurrency) x latency. Platform CPU is this process's CPU
time per cell (rendering, budget reservation, claiming, recording, HTTP, live events); the
fake provider's own CPU per cell is reported beside it. ``--watched`` registers a watcher,
so replies stream as they do while someone has the job page open;
``GENERATION_LIVE_EVENTS=0`` turns events off altogether. Last line: JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of another process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=600)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--watched", action="store_true", help="A client watches the job: replies stream."
    )
    args = parser.parse_args()
    os.environ.setdefault("EVAL_DATA_DIR", tempfile.mkdtemp(prefix="evalbench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from provider_overhead import free_port, start_fake
    from setup_data import bench_fixture, job_body

    from evalplatform.providers.llm.retry import RetryPolicy
    from evalplatform.runs.engine import run_live
    from generation import planning, services
    from generation.models import GenerationJob
    from generation.runners.live import GenerationWork

    call_command("migrate", verbosity=0)
    port = free_port()
    fake = start_fake(port, latency=args.latency)
    try:
        user, model, version = bench_fixture(
            kind="openai",
            base_url=f"http://127.0.0.1:{port}",
            max_concurrency=args.concurrency,
            timeout_s=30,
        )
        data = job_body(model, version, args.cells, concurrency=args.concurrency)
        start = time.perf_counter()
        job = services.job_create(user=user, plan=planning.job_plan(user=user, data=data))
        create_s = time.perf_counter() - start
        services.job_start(user=user, job=job)
        if args.watched:
            from datetime import timedelta

            from django.utils import timezone

            from evalplatform.live.models import LiveWatcher
            from generation import events

            LiveWatcher.objects.create(
                group=events.group(job.pk),
                channel_name="bench",
                expires_at=timezone.now() + timedelta(hours=1),
            )

        fake_cpu = process_cpu_s(fake.pid)
        cpu, wall = time.process_time(), time.perf_counter()
        summary = asyncio.run(run_live(GenerationWork(job.pk, retry=RetryPolicy())))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        fake_cpu = process_cpu_s(fake.pid) - fake_cpu
    finally:
        fake.terminate()
        fake.wait(timeout=10)
    job = GenerationJob.objects.get(pk=job.pk)
    assert job.status == "completed" and job.completed_cells == args.cells, (job.status, summary)
    ideal = math.ceil(args.cells / args.concurrency) * args.latency
    print(f"created {args.cells} cells in {create_s:.2f} s")
    print(
        f"ran {args.cells} cells in {wall:.2f} s (ideal {ideal:.2f} s), "
        f"{cpu * 1000 / args.cells:.2f} CPU ms per cell here, "
        f"{fake_cpu * 1000 / args.cells:.2f} in the fake provider; "
        f"live events {'on' if settings.GENERATION_LIVE_EVENTS else 'off'}, "
        f"{'watched (replies stream)' if args.watched else 'nobody watching'}"
    )
    print(
        json.dumps(
            {
                "cells": args.cells,
                "latency_s": args.latency,
                "concurrency": args.concurrency,
                "database": django.db.connection.vendor,
                "create_s": round(create_s, 3),
                "wall_s": round(wall, 3),
                "ideal_s": round(ideal, 3),
                "wall_over_ideal_ratio": round(wall / ideal, 3),
                "cpu_ms_per_cell": round(cpu * 1000 / args.cells, 3),
                "fake_cpu_ms_per_cell": round(fake_cpu * 1000 / args.cells, 3),
                "live_events": settings.GENERATION_LIVE_EVENTS,
                "watched": args.watched,
            }
        )
    )


if __name__ == "__main__":
    main()
