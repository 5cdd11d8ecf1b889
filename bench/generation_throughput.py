"""Live generation throughput: N cells against the fake provider (its own process) at a fixed
latency and concurrency, on a fresh SQLite database (or DATABASE_URL).

    python bench/generation_throughput.py [--cells 600] [--latency 0.2] [--concurrency 32]
                                          [--watched | --compare-watched] [--no-bare]

Ideal wall time is ceil(cells / concurrency) x latency. Platform CPU is this process's CPU
time per cell (rendering, budget reservation, claiming, recording, HTTP, live events); the
fake provider's own CPU per cell is reported beside it. ``--watched`` registers a watcher,
so replies stream as they do while someone has the job page open; ``--compare-watched``
runs the job twice (unwatched, then watched) and reports watched / unwatched wall time;
``GENERATION_LIVE_EVENTS=0`` turns events off altogether.

In the same run, a bare asyncio + httpx client (no database, no platform) makes the same
calls (same bodies) to the same fake provider at the same concurrency, so the platform's
figures are set against a baseline measured here, not remembered: platform / bare for
wall / ideal and for CPU per call. Targets (issue 20): wall / ideal <= 1.10 at C=32 and
<= 1.15 at C=128 (2,000 cells), platform CPU <= 2 ms per cell, watched within 10 % of
unwatched. Last line: one JSON object.
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


WALL_TARGETS = {32: 1.10, 128: 1.15}  # wall / ideal, at 2,000 cells
CPU_TARGET_MS = 2.0
WATCHED_TARGET = 1.10  # watched wall / unwatched wall


def bare_requests(cells: int) -> list:
    """The calls the bench job makes (``setup_data.job_body``: one prompt, one model, one
    temperature), as the bare client sends them."""
    from evalplatform.providers.llm.types import LLMRequest

    return [
        LLMRequest(
            model="gpt-fake",
            system="Be brief.",
            user=f"Summarize: Item {i}: a paragraph about rivers and rain.",
            temperature=0.7,
            max_tokens=200,
        )
        for i in range(cells)
    ]


def run_bare(url: str, cells: int, concurrency: int) -> tuple[float, float]:
    """(wall s, CPU s) of a bare asyncio + httpx client making the job's calls."""
    from provider_overhead import bare_httpx

    batch = bare_requests(cells)
    cpu, wall = time.process_time(), time.perf_counter()
    tokens = asyncio.run(bare_httpx(url, batch, concurrency))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert tokens > 0
    return wall, cpu


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=600)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--watched", action="store_true", help="A client watches the job: replies stream."
    )
    parser.add_argument(
        "--compare-watched",
        action="store_true",
        help="Run the job unwatched, then again watched, and compare their wall times.",
    )
    parser.add_argument(
        "--no-bare", action="store_true", help="Skip the bare asyncio + httpx baseline."
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
    url = f"http://127.0.0.1:{port}"
    ideal = math.ceil(args.cells / args.concurrency) * args.latency
    modes = [False, True] if args.compare_watched else [args.watched]
    runs: dict[bool, dict] = {}
    bare: dict | None = None
    try:
        user, model, version = bench_fixture(
            kind="openai",
            base_url=url,
            max_concurrency=args.concurrency,
            timeout_s=30,
        )
        # Warm-up, untimed: imports, the fake's first connections (both sides profit).
        run_bare(url, min(args.cells, 2 * args.concurrency), args.concurrency)
        if not args.no_bare:
            fake_cpu = process_cpu_s(fake.pid)
            wall, cpu = run_bare(url, args.cells, args.concurrency)
            fake_cpu = process_cpu_s(fake.pid) - fake_cpu
            bare = {"wall_s": wall, "cpu_s": cpu, "fake_cpu_s": fake_cpu}
        for watched in modes:
            data = job_body(model, version, args.cells, concurrency=args.concurrency)
            data["name"] = f"bench {args.cells} {'watched' if watched else 'unwatched'}"
            start = time.perf_counter()
            job = services.job_create(user=user, plan=planning.job_plan(user=user, data=data))
            create_s = time.perf_counter() - start
            services.job_start(user=user, job=job)
            if watched:
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
            job = GenerationJob.objects.get(pk=job.pk)
            assert job.status == "completed" and job.completed_cells == args.cells, (
                job.status,
                summary,
            )
            runs[watched] = {
                "create_s": create_s,
                "wall_s": wall,
                "cpu_s": cpu,
                "fake_cpu_s": fake_cpu,
            }
    finally:
        fake.terminate()
        fake.wait(timeout=10)

    n = args.cells
    live = "on" if settings.GENERATION_LIVE_EVENTS else "off"
    wall_target = WALL_TARGETS.get(args.concurrency)
    result: dict = {
        "cells": n,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "database": django.db.connection.vendor,
        "ideal_s": round(ideal, 3),
        "live_events": settings.GENERATION_LIVE_EVENTS,
        "wall_over_ideal_target": wall_target,
        "cpu_ms_per_cell_target": CPU_TARGET_MS,
    }
    print(f"{n} cells, C={args.concurrency}, latency {args.latency} s, ideal {ideal:.2f} s")
    if bare is not None:
        print(
            f"  bare httpx       wall {bare['wall_s']:6.2f} s  wall/ideal "
            f"{bare['wall_s'] / ideal:5.3f}  CPU {bare['cpu_s'] * 1000 / n:6.2f} ms per call"
        )
        result |= {
            "bare_wall_s": round(bare["wall_s"], 3),
            "bare_wall_over_ideal_ratio": round(bare["wall_s"] / ideal, 3),
            "bare_cpu_ms_per_call": round(bare["cpu_s"] * 1000 / n, 3),
        }
    for watched, m in runs.items():
        label = "watched" if watched else "unwatched"
        prefix = "watched_" if watched and args.compare_watched else ""
        ratio = m["wall_s"] / ideal
        cpu_ms = m["cpu_s"] * 1000 / n
        line = (
            f"  platform {label:9s} wall {m['wall_s']:6.2f} s  wall/ideal {ratio:5.3f}  "
            f"CPU {cpu_ms:6.2f} ms per cell"
        )
        if wall_target is not None:
            line += f"  [wall/ideal <= {wall_target}: {verdict(ratio <= wall_target)}"
        else:
            line += "  [no wall/ideal target at this concurrency"
        line += f"; CPU <= {CPU_TARGET_MS} ms: {verdict(cpu_ms <= CPU_TARGET_MS)}]"
        print(line)
        print(
            f"    created in {m['create_s']:.2f} s; the fake provider spent "
            f"{m['fake_cpu_s'] * 1000 / n:.2f} CPU ms per cell; live events {live}"
        )
        result |= {
            f"{prefix}create_s": round(m["create_s"], 3),
            f"{prefix}wall_s": round(m["wall_s"], 3),
            f"{prefix}wall_over_ideal_ratio": round(ratio, 3),
            f"{prefix}cpu_ms_per_cell": round(cpu_ms, 3),
            f"{prefix}fake_cpu_ms_per_cell": round(m["fake_cpu_s"] * 1000 / n, 3),
        }
        if bare is not None:
            wall_x = m["wall_s"] / bare["wall_s"]
            cpu_x = m["cpu_s"] / bare["cpu_s"]
            print(f"    platform / bare: wall/ideal {wall_x:.2f}x, CPU per cell {cpu_x:.2f}x")
            result |= {
                f"{prefix}platform_over_bare_wall_ratio": round(wall_x, 3),
                f"{prefix}platform_over_bare_cpu_ratio": round(cpu_x, 3),
            }
    result["watched"] = args.watched and not args.compare_watched
    if args.compare_watched:
        slower = runs[True]["wall_s"] / runs[False]["wall_s"]
        print(
            f"  watched / unwatched wall: {slower:.3f} "
            f"[<= {WATCHED_TARGET}: {verdict(slower <= WATCHED_TARGET)}]"
        )
        result |= {"watched_over_unwatched_wall_ratio": round(slower, 3)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
