"""Load test over real HTTP: evaluators working through a scenario while API clients poll
generation jobs and the scenario's progress, against the platform's own ASGI server
(uvicorn, ``--processes`` worker processes) on loopback, for a bounded time.

    DATABASE_URL=postgres://... python bench/load.py [--evaluators 50] [--pollers 5]
        [--duration 60] [--think-ms 500] [--processes N] [--overlap 3] [--json-only]

It runs on a database of its own, dropped at the end (a new PostgreSQL database named after
DATABASE_URL's; without it a fresh SQLite file). The data: one team, its evaluators and its
API clients (viewers) with tokens, an open comparison scenario with more tasks than the
evaluators can answer in the time, and generation jobs with outputs (two completed, one
paused half-way; their outputs are written directly, no provider is called).

Each evaluator loops: next task, think (``--think-ms`` on average, 0.5x to 1.5x), submit a
valid answer. Each API client loops: the job list, a job, a page of its outputs, its
statistics, the scenario and its judgments, then pauses (``--poll-pause-ms``). Latency is
recorded per route (``GET /api/generation/jobs/{id}``, not per URL); any answer other than
the route's expected ones (200, 201, and 204 "no task left" for next) is an error, counted by
route and status. After the run the database is checked: no task holds more than
``overlap`` places (reservations and judgments) or judgments, no evaluator answered a task
twice, every task's place counter matches its rows, and every accepted answer is stored.

Prints a table per route (count, p50, p95, p99, max) against the p95 target, and as its last
line one JSON object. Exits 1 on any error or failed check; a latency over the target is
reported, not a failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NEXT = "POST /api/evaluations/scenarios/{id}/next"
SUBMIT = "POST /api/evaluations/assignments/{id}/submit"
JOBS = "GET /api/generation/jobs"
JOB = "GET /api/generation/jobs/{id}"
OUTPUTS = "GET /api/generation/jobs/{id}/outputs"
STATISTICS = "GET /api/generation/jobs/{id}/statistics"
SCENARIO = "GET /api/scenarios/{id}"
JUDGMENTS = "GET /api/evaluations/judgments?scenario={id}"
ROUTES = [NEXT, SUBMIT, JOBS, JOB, OUTPUTS, STATISTICS, SCENARIO, JUDGMENTS]
EXPECTED = {NEXT: (200, 204), SUBMIT: (201,)}  # every other route: 200


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evaluators", type=int, default=50)
    parser.add_argument("--pollers", type=int, default=5, help="API clients polling jobs.")
    parser.add_argument("--duration", type=float, default=60, help="Seconds of load.")
    parser.add_argument(
        "--think-ms",
        type=float,
        default=500,
        help="An evaluator reads for this long on average (0.5x to 1.5x) before answering; "
        "500 ms is far quicker than any person.",
    )
    parser.add_argument("--poll-pause-ms", type=float, default=1000)
    parser.add_argument(
        "--processes",
        type=int,
        default=min(8, os.cpu_count() or 1),
        help="Server worker processes (uvicorn --workers).",
    )
    parser.add_argument(
        "--db-pool",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="PostgreSQL: serve with DB_POOL=1, a connection pool per server process, as "
        "docs/deploy.md advises for web processes (--no-db-pool: a connection per request).",
    )
    parser.add_argument("--overlap", type=int, default=3)
    parser.add_argument(
        "--tasks",
        type=int,
        default=0,
        help="Scenario tasks (default: enough that the evaluators never run out).",
    )
    parser.add_argument("--job-cells", type=int, default=200, help="Outputs per job.")
    parser.add_argument("--target-p95-ms", type=float, default=200)
    parser.add_argument("--json-only", action="store_true", help="Print only the JSON line.")
    args = parser.parse_args()
    if not args.tasks:
        # Every evaluator answering at twice the mean pace for the whole run, plus one each.
        pace = 1000 / max(args.think_ms, 10)
        args.tasks = math.ceil(2 * args.evaluators * args.duration * pace / args.overlap)
        args.tasks += args.evaluators
    return args


def main() -> None:
    args = parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    # The fake provider listens on loopback, which connections may call only when allowed
    # (evalplatform/providers/netguard.py).
    os.environ.setdefault("PROVIDER_HOSTS_ALLOWED", "127.0.0.1,localhost")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    from setup_data import fresh_database

    with fresh_database("load") as database:
        summary = run(args, database)
    print(json.dumps(summary))
    sys.exit(0 if summary["ok"] else 1)


def say(args: argparse.Namespace, text: str) -> None:
    if not args.json_only:
        print(text, flush=True)


# --- the data -------------------------------------------------------------------------------


def create_data(args: argparse.Namespace) -> dict[str, Any]:
    """The team, users and tokens, the scenario and the jobs; ids and keys for the clients."""
    from django.utils import timezone
    from setup_data import bench_fixture, comparison_scenario, job_body, members_create

    from evalplatform.accounts.models import Team
    from evalplatform.accounts.roles import Role
    from evalplatform.accounts.services import token_create
    from generation import planning
    from generation import services as generation
    from generation.models import GenerationJob, GenerationOutput, JobStatus, OutputStatus

    creator, model, version = bench_fixture(kind="mock")
    team = Team.objects.get(slug="bench")
    (manager,) = members_create(team=team, role=Role.MANAGER, prefix="manager", count=1)
    evaluators = members_create(
        team=team, role=Role.EVALUATOR, prefix="evaluator", count=args.evaluators
    )
    pollers = members_create(team=team, role=Role.VIEWER, prefix="client", count=args.pollers)
    scenario = comparison_scenario(owner=manager, team=team, tasks=args.tasks, overlap=args.overlap)
    jobs = []
    now = timezone.now()
    for name, status, share in (
        ("load completed 1", JobStatus.COMPLETED, 1.0),
        ("load completed 2", JobStatus.COMPLETED, 1.0),
        ("load paused", JobStatus.PAUSED, 0.5),
    ):
        plan = planning.job_plan(
            user=creator, data=job_body(model, version, args.job_cells, name=name)
        )
        job = generation.job_create(user=creator, plan=plan)
        cells = list(job.outputs.order_by("pk").values_list("pk", flat=True))
        done = cells[: round(len(cells) * share)]
        GenerationOutput.objects.filter(pk__in=done).update(
            status=OutputStatus.COMPLETED,
            content="Rivers rise after rain; a short summary of the paragraph.",
            finish_reason="stop",
            input_tokens=40,
            output_tokens=12,
            cost_usd="0.000064",
            processing_time_ms=350,
            attempts=1,
            started_at=now,
            completed_at=now,
        )
        GenerationJob.objects.filter(pk=job.pk).update(
            status=status,
            completed_cells=len(done),
            cost_usd=f"{0.000064 * len(done):.6f}",
            started_at=now,
            finished_at=now if status == JobStatus.COMPLETED else None,
        )
        jobs.append(job.pk)
    return {
        "scenario": scenario.pk,
        "jobs": jobs,
        "evaluator_keys": [token_create(user=u, name="load")[1] for u in evaluators],
        "poller_keys": [token_create(user=u, name="load")[1] for u in pollers],
    }


# --- the server -----------------------------------------------------------------------------


def start_server(args: argparse.Namespace, port: int, log: Any) -> subprocess.Popen:
    """The platform's ASGI application under uvicorn, as deployed (docs/deploy.md), with the
    environment of this process (its fresh database)."""
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "evalplatform.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--lifespan",
        "off",
        "--no-access-log",
        "--log-level",
        "warning",
    ]
    if args.processes > 1:
        command += ["--workers", str(args.processes)]
    env = dict(os.environ)
    if args.db_pool and os.environ.get("DATABASE_URL"):
        env["DB_POOL"] = "1"
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def stop_server(server: subprocess.Popen) -> None:
    server.terminate()  # uvicorn's supervisor stops its workers
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, 9)  # its own session: only the server and its workers
        server.wait(timeout=10)


def group_cpu_s(pgid: int | None = None, title: str | None = None) -> float | None:
    """CPU seconds (user + system) of the live processes of a process group, or of those
    whose command line holds ``title`` (Linux: PostgreSQL names a backend's database in its
    title), to tell server work from a starved machine; None where /proc is not there. (A
    process that exits meanwhile takes its CPU with it: the database's backends live as
    long as their pooled connections.)"""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    total = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = text.rsplit(")", 1)[1].split()
        # pgrp is field 2; utime and stime follow at 11 and 12.
        if pgid is not None and int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
        elif title is not None:
            try:
                line = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if line.startswith("postgres: ") and f" {title} " in line:
                total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> tuple[float, float] | None:
    """(busy, all) CPU seconds of the whole machine since boot (Linux), all CPUs summed."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle and iowait
    ticks = os.sysconf("SC_CLK_TCK")
    return (sum(values[:8]) - idle) / ticks, sum(values[:8]) / ticks


async def wait_ready(base: str, key: str, server: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=base, headers=auth(key)) as client:
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the server exited with {server.returncode}")
            try:
                if (await client.get("/api/me")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not answer in time")
            await asyncio.sleep(0.2)


# --- the clients ----------------------------------------------------------------------------


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Token {key}"}


class Recorder:
    """Latency per route, and what went wrong, by route and status (or exception)."""

    def __init__(self) -> None:
        self.latency_ms: dict[str, list[float]] = defaultdict(list)
        self.errors: Counter[str] = Counter()
        self.examples: list[str] = []
        self.statuses: Counter[str] = Counter()

    async def call(
        self, client: httpx.AsyncClient, route: str, path: str, body: Any = None
    ) -> httpx.Response | None:
        """The response when its status is one the route expects, else None (recorded)."""
        method = route.split(" ", 1)[0]
        began = time.perf_counter()
        try:
            response = await client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            self.errors[f"{route} {type(exc).__name__}"] += 1
            return None
        self.latency_ms[route].append((time.perf_counter() - began) * 1000)
        self.statuses[f"{route} {response.status_code}"] += 1
        if response.status_code not in EXPECTED.get(route, (200,)):
            self.errors[f"{route} {response.status_code}"] += 1
            if len(self.examples) < 5:
                self.examples.append(
                    f"{method} {path} {response.status_code} {response.text[:200]}"
                )
            return None
        return response


async def nap(seconds: float, until: float) -> None:
    """Sleep, but not past the end of the run."""
    await asyncio.sleep(max(0.0, min(seconds, until - time.monotonic())))


async def evaluator(
    rec: Recorder, client: httpx.AsyncClient, scenario: int, args: argparse.Namespace, until: float
) -> None:
    rng = random.Random()
    think = args.think_ms / 1000
    await nap(rng.uniform(0, think), until)  # not all at once
    while time.monotonic() < until:
        response = await rec.call(client, NEXT, f"/api/evaluations/scenarios/{scenario}/next")
        if response is None or response.status_code == 204:
            await nap(max(think, 0.1), until)  # an error or nothing left: do not spin
            continue
        task = response.json()
        spent = think * rng.uniform(0.5, 1.5)
        await nap(spent, until)
        if time.monotonic() >= until:
            return  # the reservation stays, as a person's would when they leave
        answer = {"winner": rng.choice(["A", "B", "tie"])}
        await rec.call(
            client,
            SUBMIT,
            f"/api/evaluations/assignments/{task['assignment']}/submit",
            {"answer": answer, "rationale": "", "time_spent_ms": round(spent * 1000)},
        )


async def poller(
    rec: Recorder,
    client: httpx.AsyncClient,
    data: dict[str, Any],
    args: argparse.Namespace,
    until: float,
) -> None:
    rng = random.Random()
    pause = args.poll_pause_ms / 1000
    pages = max(1, math.ceil(args.job_cells / 50))
    scenario = data["scenario"]
    await nap(rng.uniform(0, pause), until)
    while time.monotonic() < until:
        job = rng.choice(data["jobs"])
        await rec.call(client, JOBS, "/api/generation/jobs")
        await rec.call(client, JOB, f"/api/generation/jobs/{job}")
        page = rng.randint(1, pages)
        await rec.call(client, OUTPUTS, f"/api/generation/jobs/{job}/outputs?page={page}")
        await rec.call(client, STATISTICS, f"/api/generation/jobs/{job}/statistics")
        await rec.call(client, SCENARIO, f"/api/scenarios/{scenario}")
        await rec.call(client, JUDGMENTS, f"/api/evaluations/judgments?scenario={scenario}")
        await nap(pause, until)


async def drive(
    args: argparse.Namespace, base: str, data: dict[str, Any]
) -> tuple[Recorder, float]:
    """Warm every server process up (not recorded), then the load for ``--duration``."""
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    timeout = httpx.Timeout(30.0)
    clients = [
        httpx.AsyncClient(base_url=base, headers=auth(key), limits=limits, timeout=timeout)
        for key in data["evaluator_keys"] + data["poller_keys"]
    ]
    try:
        warm = Recorder()
        some = clients[len(data["evaluator_keys"]) :] or clients
        await asyncio.gather(
            *(warm.call(some[n % len(some)], JOBS, "/api/generation/jobs") for n in range(20))
        )
        rec = Recorder()
        began = time.monotonic()
        until = began + args.duration
        evaluators = clients[: len(data["evaluator_keys"])]
        pollers = clients[len(data["evaluator_keys"]) :]
        await asyncio.gather(
            *(evaluator(rec, c, data["scenario"], args, until) for c in evaluators),
            *(poller(rec, c, data, args, until) for c in pollers),
        )
        return rec, time.monotonic() - began
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))


# --- the checks -----------------------------------------------------------------------------


def check_database(scenario_id: int, overlap: int) -> dict[str, int]:
    """What the database holds after the run, and every way it could be wrong (all 0)."""
    from django.db.models import Count

    from evaluations.models import Assignment, AssignmentStatus, Judgment
    from scenarios.models import Task

    judgments = Judgment.objects.filter(scenario_id=scenario_id, evaluator__isnull=False)
    holding = Assignment.objects.filter(
        scenario_id=scenario_id, status__in=[AssignmentStatus.RESERVED, AssignmentStatus.DONE]
    )

    def over(rows: Any, fields: tuple[str, ...], limit: int) -> set[Any]:
        counted = rows.values(*fields).annotate(n=Count("pk")).filter(n__gt=limit)
        return {tuple(row[f] for f in fields) for row in counted}

    places = dict(holding.values("task").annotate(n=Count("pk")).values_list("task", "n"))
    counters = Task.objects.filter(scenario_id=scenario_id).values_list("pk", "taken")
    over_assigned = (
        over(judgments, ("task",), overlap)
        | over(holding, ("task",), overlap)
        | {(pk,) for pk, taken in counters if taken > overlap}
    )
    return {
        "judgments_stored": judgments.count(),
        "over_assigned": len(over_assigned),
        "duplicate_judgments": len(over(judgments, ("task", "evaluator"), 1)),
        "duplicate_assignments": len(
            over(Assignment.objects.filter(scenario_id=scenario_id), ("task", "evaluator"), 1)
        ),
        "place_counter_mismatches": sum(1 for pk, taken in counters if taken != places.get(pk, 0)),
    }


# --- the run --------------------------------------------------------------------------------


def run(args: argparse.Namespace, database: str) -> dict[str, Any]:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections
    from setup_data import percentile

    from evalplatform.providers.fake.server import free_port

    say(args, f"database: {database}")
    load_before = os.getloadavg()[0]
    began = time.perf_counter()
    call_command("migrate", verbosity=0)
    data = create_data(args)
    say(
        args,
        f"set up in {time.perf_counter() - began:.1f} s: {args.evaluators} evaluators, "
        f"{args.pollers} API clients, {args.tasks} tasks x overlap {args.overlap}, "
        f"{len(data['jobs'])} jobs of {args.job_cells} cells",
    )
    connections.close_all()  # the servers own the load; this process only checks afterwards
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.NamedTemporaryFile("w+", prefix="evalbench-load-", suffix=".log") as log:
        server = start_server(args, port, log)
        try:
            asyncio.run(
                wait_ready(
                    base,
                    data["poller_keys"][0] if data["poller_keys"] else data["evaluator_keys"][0],
                    server,
                )
            )
            say(args, f"{args.processes} server processes on {base}; load for {args.duration:g} s")
            server_cpu, client_cpu = group_cpu_s(server.pid), time.process_time()
            database_name = database.split(" ", 1)[1] if "postgresql" in database else None
            database_cpu = group_cpu_s(title=database_name) if database_name else None
            machine = machine_busy_s()
            rec, wall = asyncio.run(drive(args, base, data))
            client_cpu = time.process_time() - client_cpu
            after = group_cpu_s(server.pid)
            server_cpu = (
                after - server_cpu if after is not None and server_cpu is not None else None
            )
            database_after = group_cpu_s(title=database_name) if database_name else None
            machine_after = machine_busy_s()
            database_cpu = (
                database_after - database_cpu
                if database_cpu is not None and database_after is not None
                else None
            )
            busy = (
                (machine_after[0] - machine[0]) / (machine_after[1] - machine[1])
                if machine and machine_after and machine_after[1] > machine[1]
                else None
            )
        finally:
            stop_server(server)
            log.seek(0)
            server_log = log.read()
    checks = check_database(data["scenario"], args.overlap)
    connections.close_all()

    stats = {}
    for route in ROUTES:
        values = rec.latency_ms.get(route)
        if not values:
            continue
        stats[route] = {
            "count": len(values),
            "p50": round(percentile(values, 0.5), 1),
            "p95": round(percentile(values, 0.95), 1),
            "p99": round(percentile(values, 0.99), 1),
            "max": round(max(values), 1),
        }
    requests = sum(s["count"] for s in stats.values()) + sum(
        n for key, n in rec.errors.items() if not key.split()[-1].isdigit()
    )
    submits_ok = rec.statuses[f"{SUBMIT} 201"]
    errors = sum(rec.errors.values())
    lost = submits_ok - checks["judgments_stored"]
    worst = max((s["p95"] for s in stats.values()), default=0.0)
    failed = (
        errors
        or lost
        or checks["over_assigned"]
        or checks["duplicate_judgments"]
        or checks["duplicate_assignments"]
        or checks["place_counter_mismatches"]
    )

    def per_request(cpu_s: float | None) -> float | None:
        return round(cpu_s * 1000 / requests, 2) if cpu_s is not None and requests else None

    if not args.json_only:
        print(f"\n{'route':48s} {'count':>7s} {'p50':>7s} {'p95':>7s} {'p99':>7s} {'max':>7s}  ms")
        for route, s in stats.items():
            flag = "" if s["p95"] <= args.target_p95_ms else "  over target"
            print(
                f"{route:48s} {s['count']:7d} {s['p50']:7.1f} {s['p95']:7.1f} "
                f"{s['p99']:7.1f} {s['max']:7.1f}{flag}"
            )
        print(
            f"\n{requests} requests in {wall:.1f} s ({requests / wall:.0f}/s); "
            f"{submits_ok} answers ({submits_ok / wall:.1f}/s); "
            f"no task left: {rec.statuses[f'{NEXT} 204']} times"
        )
        print(f"errors: {errors} {dict(rec.errors)}")
        for example in rec.examples:
            print(f"  {example}")
        print(
            f"database: {checks['judgments_stored']} judgments stored ({lost} accepted but "
            f"missing); over-assigned tasks {checks['over_assigned']}; duplicate judgments "
            f"{checks['duplicate_judgments']}, assignments {checks['duplicate_assignments']}; "
            f"place counters off {checks['place_counter_mismatches']}"
        )
        print(f"worst p95 {worst:.1f} ms (target {args.target_p95_ms:g} ms)")
        print(
            f"CPU: server {server_cpu if server_cpu is not None else float('nan'):.1f} s "
            f"({per_request(server_cpu)} ms a request), database "
            f"{database_cpu if database_cpu is not None else float('nan'):.1f} s "
            f"({per_request(database_cpu)} ms a request), load generator {client_cpu:.1f} s, "
            f"on {os.cpu_count()} CPUs, busy {(busy or float('nan')) * 100:.0f}% of the run; "
            f"load average {load_before:.1f} before the run"
        )
        if failed and server_log.strip():
            print("server log (last lines):\n" + "\n".join(server_log.splitlines()[-20:]))
    return {
        "database": database.split()[0],
        "database_name": database.split(" ", 1)[1],
        "duration_s": round(wall, 1),
        "evaluators": args.evaluators,
        "pollers": args.pollers,
        "processes": args.processes,
        "db_pool": bool(args.db_pool and os.environ.get("DATABASE_URL")),
        "think_ms": args.think_ms,
        "tasks": args.tasks,
        "overlap": args.overlap,
        "requests": requests,
        "requests_per_s": round(requests / wall, 1),
        "judgments": submits_ok,
        "judgments_per_s": round(submits_ok / wall, 1),
        "no_task_left": rec.statuses[f"{NEXT} 204"],
        "errors": errors,
        "errors_by_route_and_status": dict(rec.errors),
        "over_assigned": checks["over_assigned"],
        "duplicate_judgments": checks["duplicate_judgments"],
        "duplicate_assignments": checks["duplicate_assignments"],
        "place_counter_mismatches": checks["place_counter_mismatches"],
        "judgments_lost": lost,
        "latency_ms_by_endpoint": stats,
        "p95_ms_by_endpoint": {route: s["p95"] for route, s in stats.items()},
        "p95_ms_worst": worst,
        "target_p95_ms": args.target_p95_ms,
        "p95_within_target": worst <= args.target_p95_ms,
        "server_cpu_s": round(server_cpu, 1) if server_cpu is not None else None,
        "server_cpu_ms_per_request": per_request(server_cpu),
        "database_cpu_s": round(database_cpu, 1) if database_cpu is not None else None,
        "database_cpu_ms_per_request": per_request(database_cpu),
        "machine_busy_ratio": round(busy, 3) if busy is not None else None,
        "load_generator_cpu_s": round(client_cpu, 1),
        "cpus": os.cpu_count(),
        "load_average_before": round(load_before, 2),
        "ok": not failed,
    }


if __name__ == "__main__":
    main()
