"""Assignment under load: concurrent evaluators working through a comparison scenario with
overlap, each in its own thread and database connection, spread over several processes (as
web servers would be), through the services the API and the pages use (the database's
locking is what is measured, not HTTP).

    DATABASE_URL=postgres://… python bench/assignment.py [--evaluators 50] [--tasks 5000]
                                                        [--overlap 3] [--think-ms 500]

It runs on a database of its own, dropped at the end (a new PostgreSQL database named after
DATABASE_URL's; without it a fresh SQLite file, where writers are serialized). Prints
p50 / p95 latency of "next task" and of "submit", and the tasks judged more than ``overlap``
times (must be 0). Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluators", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--overlap", type=int, default=3)
    parser.add_argument(
        "--processes",
        type=int,
        default=min(8, os.cpu_count() or 1),
        help="Evaluators are spread over this many processes (as web servers would be).",
    )
    parser.add_argument(
        "--think-ms",
        type=float,
        default=500,
        help="Each evaluator reads for this long (on average, 0.5x to 1.5x) before answering: "
        "500 ms is far quicker than any person. 0: a closed loop with no pause, which "
        "measures the server saturated (latency is then queueing: evaluators / throughput).",
    )
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    from setup_data import fresh_database

    with fresh_database("assignment"):
        run(args)


def run(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, connections
    from setup_data import comparison_scenario, members_create, percentile

    from evalplatform.accounts.models import Team
    from evalplatform.accounts.roles import Role
    from evaluations.models import Judgment
    from evaluations.workspace import services as evaluation

    call_command("migrate", verbosity=0)
    team = Team.objects.create(name="Bench", slug="bench")
    (owner,) = members_create(team=team, role=Role.MANAGER, prefix="owner", count=1)
    evaluators = members_create(
        team=team, role=Role.EVALUATOR, prefix="evaluator", count=args.evaluators
    )
    started = time.perf_counter()
    scenario = comparison_scenario(owner=owner, team=team, tasks=args.tasks, overlap=args.overlap)
    create_s = time.perf_counter() - started
    next_ms: list[float] = []
    submit_ms: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def work(user) -> None:
        mine_next, mine_submit = [], []
        pause = random.Random(user.pk)
        try:
            while True:
                began = time.perf_counter()
                assignment = evaluation.next_task(user=user, scenario=scenario)
                mine_next.append((time.perf_counter() - began) * 1000)
                if assignment is None:
                    return
                if args.think_ms:
                    time.sleep(args.think_ms * pause.uniform(0.5, 1.5) / 1000)
                began = time.perf_counter()
                evaluation.submit(
                    user=user, assignment=assignment, data={"answer": {"winner": "A"}}
                )
                mine_submit.append((time.perf_counter() - began) * 1000)
        except Exception as exc:  # reported below
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connections.close_all()
            with lock:
                next_ms.extend(mine_next)
                submit_ms.extend(mine_submit)

    def process(share, results) -> None:
        threads = [threading.Thread(target=work, args=(u,)) for u in share]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        results.put((next_ms, submit_ms, errors))

    connections.close_all()  # the children open their own
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    shares = [evaluators[n :: args.processes] for n in range(args.processes)]
    children = [context.Process(target=process, args=(share, results)) for share in shares]
    wall = time.perf_counter()
    for child in children:
        child.start()
    for _ in children:
        more_next, more_submit, more_errors = results.get()
        next_ms.extend(more_next)
        submit_ms.extend(more_submit)
        errors.extend(more_errors)
    for child in children:
        child.join()
    wall = time.perf_counter() - wall
    per_task = Counter(Judgment.objects.filter(scenario=scenario).values_list("task_id", flat=True))
    over = sum(1 for count in per_task.values() if count > args.overlap)
    judged = sum(per_task.values())
    vendor = connection.vendor
    print(
        f"{args.evaluators} evaluators in {args.processes} processes, {args.tasks} tasks "
        f"x overlap {args.overlap} on {vendor}, think time {args.think_ms:g} ms"
    )
    print(
        f"scenario created in {create_s:.1f} s; {judged} judgments in {wall:.1f} s "
        f"({judged / wall:.0f}/s); errors: {len(errors)} {errors[:3]}"
    )
    print(
        f"next: p50 {percentile(next_ms, 0.5):.1f} ms, p95 {percentile(next_ms, 0.95):.1f} ms; "
        f"submit: p50 {percentile(submit_ms, 0.5):.1f} ms, p95 {percentile(submit_ms, 0.95):.1f} ms"
    )
    print(f"tasks judged more than {args.overlap} times: {over}")
    print(
        json.dumps(
            {
                "database": vendor,
                "evaluators": args.evaluators,
                "processes": args.processes,
                "tasks": args.tasks,
                "overlap": args.overlap,
                "think_ms": args.think_ms,
                "judgments": judged,
                "judgments_per_s": round(judged / wall, 1),
                "next_p50_ms": round(percentile(next_ms, 0.5), 2),
                "next_p95_ms": round(percentile(next_ms, 0.95), 2),
                "submit_p50_ms": round(percentile(submit_ms, 0.5), 2),
                "submit_p95_ms": round(percentile(submit_ms, 0.95), 2),
                "next_mean_ms": round(statistics.fmean(next_ms), 2),
                "over_assigned_tasks": over,
                "errors": len(errors),
            }
        )
    )


if __name__ == "__main__":
    main()
