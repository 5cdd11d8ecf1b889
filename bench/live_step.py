"""The live runner's step alone: its CPU per step, in this process, with no provider and no
HTTP, on a fresh database of the bench's own (SQLite, or PostgreSQL with DATABASE_URL).

    python bench/live_step.py [--cells 3000] [--claim 8] [--rounds 3]

A job of ``--cells`` cells is started and run by ``GenerationWork.step`` alone, as the engine
would call it: each step records the replies of the cells the previous step claimed (made up
here, the same for all) and claims ``--claim`` more (8: what most steps of a C=32 run take,
with half the concurrency claimed ahead). Reported: the CPU of the steps (this thread's), per
step and per cell, and the database's executes and round trips per step (an execute of
several statements is one round trip on PostgreSQL; BEGIN and COMMIT are one each), the best
of ``--rounds`` jobs. Live events are on, as in a run with a publisher (nothing watches,
nothing is sent). Other work on the machine slows the
steps too: compare runs made side by side. Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def run_job(fixture: tuple, cells: int, claim: int) -> dict[str, Any]:
    """Start a job of ``cells`` cells and step it to the end; its figures."""
    from django.db import connection
    from setup_data import job_body

    from evalplatform.providers.llm.types import LLMResponse
    from evalplatform.runs.engine import Outcome
    from generation import planning, services
    from generation.models import GenerationJob
    from generation.runners.live import GenerationWork

    user, model, version = fixture
    data = job_body(model, version, cells, concurrency=claim)
    job = services.job_create(user=user, plan=planning.job_plan(user=user, data=data))
    services.job_start(user=user, job=job)
    work = GenerationWork(job.pk)
    assert work.begin()
    executes = 0

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal executes
        executes += 1
        return execute(sql, params, many, context)

    reply = LLMResponse("Rivers carry the rain to the sea.", 20, 8, "stop", 0.2)
    steps, outcomes = 0, list[Outcome]()
    with connection.execute_wrapper(count):
        cpu = time.thread_time()
        while True:
            _, claimed, _ = work.step(outcomes, claim)
            steps += 1
            if not claimed:
                break
            outcomes = [Outcome(c, 1, response=reply, total_s=0.2) for c in claimed]
        cpu = time.thread_time() - cpu
    work.end()
    done = GenerationJob.objects.get(pk=job.pk)
    assert done.completed_cells == cells and done.status == "completed", done.status
    # On PostgreSQL each execute is a round trip, and so are the BEGIN and the COMMIT of the
    # step's transaction (psycopg sends them on their own).
    trips = executes / steps + (2 if connection.vendor == "postgresql" else 0)
    return {
        "steps": steps,
        "cpu_ms_per_step": cpu * 1000 / steps,
        "cpu_ms_per_cell": cpu * 1000 / cells,
        "executes_per_step": executes / steps,
        "round_trips_per_step": trips if connection.vendor == "postgresql" else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=3000)
    parser.add_argument("--claim", type=int, default=8, help="Cells claimed by each step.")
    parser.add_argument("--rounds", type=int, default=3, help="Jobs run; the best is kept.")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    # A loopback provider address, which connections may call only when allowed
    # (evalplatform/providers/netguard.py).
    os.environ.setdefault("PROVIDER_HOSTS_ALLOWED", "127.0.0.1,localhost")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("GENERATION_LIVE_EVENTS", "1")
    from setup_data import fresh_database

    load_before = os.getloadavg()
    with fresh_database("livestep") as where:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection
        from setup_data import bench_fixture

        call_command("migrate", verbosity=0)
        fixture = bench_fixture(kind="openai", base_url="http://127.0.0.1:1", timeout_s=30)
        runs = [run_job(fixture, args.cells, args.claim) for _ in range(args.rounds)]
        vendor = connection.vendor
    best = min(runs, key=lambda r: r["cpu_ms_per_step"])
    print(f"{args.cells} cells, {args.claim} claimed a step, on {where}")
    print(f"  load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    for run in runs:
        print(
            f"  {run['steps']} steps: CPU {run['cpu_ms_per_step']:.3f} ms per step "
            f"({run['cpu_ms_per_cell']:.3f} ms per cell), {run['executes_per_step']:.2f} "
            "executes per step"
            + (
                f", {run['round_trips_per_step']:.2f} round trips"
                if run["round_trips_per_step"] is not None
                else ""
            )
        )
    result = {
        "cells": args.cells,
        "claim": args.claim,
        "database": vendor,
        "load_average_before": round(load_before[0], 2),
        **{k: round(v, 3) if isinstance(v, float) else v for k, v in best.items()},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
