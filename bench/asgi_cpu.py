"""CPU a request costs the server, in process: the platform's ASGI application (the one
uvicorn serves) called directly with ASGI messages, no sockets and no HTTP client, so what is
measured is the platform's own work (the ASGI handler, middleware, views, the ORM) and the
database's, with little of the noise of a loaded machine in it.

    [DATABASE_URL=postgres://...] python bench/asgi_cpu.py [--evaluators 8] [--rounds 600]
        [--polls 100] [--json-only]

The data is ``bench/load.py``'s (one team, evaluators with tokens, a comparison scenario,
three generation jobs), on a database of its own, dropped at the end. Two phases, each after
a warm-up that is not counted:

- evaluators: ``--evaluators`` at once, each looping next, then submit (no think time),
  ``--rounds`` answers in all;
- API clients: the six routes ``bench/load.py``'s pollers call, ``--polls`` times each, four
  at once.

CPU is this process's (``time.process_time``: the handler, the views, the database driver)
and, on PostgreSQL, the database backends' (by their process title). Prints both per request
for each phase, and as its last line one JSON object. A change to the request path is
compared by running this before and after, alternated (CPU, not wall: it moves less with the
machine's load).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from load import create_data, group_cpu_s, say  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evaluators", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=600, help="Answers in all.")
    parser.add_argument("--polls", type=int, default=100, help="Calls of each API route.")
    parser.add_argument("--json-only", action="store_true", help="Print only the JSON line.")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("SECRET_KEY", "bench-asgi-cpu-" + "x" * 40)
    if os.environ.get("DATABASE_URL"):
        os.environ.setdefault("DB_POOL", "1")  # as bench/load.py serves PostgreSQL
    from setup_data import fresh_database

    with fresh_database("asgicpu") as database:
        summary = run(args, database)
    print(json.dumps(summary))
    sys.exit(0 if summary["ok"] else 1)


class Driver:
    """Calls the ASGI application as a server would: the request's body in one message, the
    response collected; counts any status the route does not expect."""

    def __init__(self, application: Any) -> None:
        self.application = application
        self.unexpected: list[str] = []

    async def call(
        self, method: str, path: str, key: str, body: Any = None, expect: tuple = (200,)
    ) -> Any:
        raw = json.dumps(body).encode() if body is not None else b""
        path, _, query = path.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [
                (b"host", b"127.0.0.1"),
                (b"authorization", f"Token {key}".encode()),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }
        sent = False
        gone = asyncio.Event()
        status = 0
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": raw, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message.get("body"):
                chunks.append(message["body"])

        await self.application(scope, receive, send)
        gone.set()
        if status not in expect:
            self.unexpected.append(f"{method} {path} {status} {b''.join(chunks)[:200]!r}")
            return None
        return json.loads(b"".join(chunks)) if chunks else {}


async def evaluators(driver: Driver, data: dict[str, Any], rounds: int, at_once: int) -> int:
    scenario = data["scenario"]
    keys = data["evaluator_keys"]
    left = rounds
    answered = 0

    async def one(key: str) -> None:
        nonlocal left, answered
        while left > 0:
            left -= 1
            task = await driver.call(
                "POST", f"/api/evaluations/scenarios/{scenario}/next", key, expect=(200,)
            )
            if task is None:
                continue
            done = await driver.call(
                "POST",
                f"/api/evaluations/assignments/{task['assignment']}/submit",
                key,
                {"answer": {"winner": "A"}, "rationale": "", "time_spent_ms": 900},
                expect=(201,),
            )
            answered += done is not None

    await asyncio.gather(*(one(keys[n % len(keys)]) for n in range(at_once)))
    return answered


async def pollers(driver: Driver, data: dict[str, Any], polls: int) -> int:
    scenario, jobs, keys = data["scenario"], data["jobs"], data["poller_keys"]
    paths = [
        "/api/generation/jobs",
        f"/api/generation/jobs/{jobs[0]}",
        f"/api/generation/jobs/{jobs[0]}/outputs?page=2",
        f"/api/generation/jobs/{jobs[1]}/statistics",
        f"/api/scenarios/{scenario}",
        f"/api/evaluations/judgments?scenario={scenario}",
    ]
    calls = 0

    async def one(n: int) -> None:
        nonlocal calls
        for _ in range(polls):
            for path in paths:
                await driver.call("GET", path, keys[n % len(keys)])
                calls += 1

    await asyncio.gather(*(one(n) for n in range(4)))
    return calls


def measure(database_title: str | None, work: Any) -> tuple[Any, float, float, float | None]:
    """(result, wall s, this process's CPU s, database CPU s or None)."""

    db_before = group_cpu_s(title=database_title) if database_title else None
    cpu_before, began = time.process_time(), time.perf_counter()
    result = work()
    cpu, wall = time.process_time() - cpu_before, time.perf_counter() - began
    db = None
    if database_title:
        db_after = group_cpu_s(title=database_title)
        if db_before is not None and db_after is not None:
            db = db_after - db_before
    return result, wall, cpu, db


def run(args: argparse.Namespace, database: str) -> dict[str, Any]:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    say(args, f"database: {database}")
    call_command("migrate", verbosity=0)
    tasks = max(args.rounds * 2 + 200, 500)
    shape = argparse.Namespace(
        evaluators=args.evaluators, pollers=4, tasks=tasks, overlap=3, job_cells=200
    )
    data = create_data(shape)
    connections.close_all()
    from evalplatform.asgi import application

    driver = Driver(application)
    title = database.split(" ", 1)[1] if database.startswith("postgresql") else None
    figures: dict[str, Any] = {}

    def phase(name: str, warm: Any, work: Any) -> None:
        asyncio.run(warm())
        count, wall, cpu, db = measure(title, lambda: asyncio.run(work()))
        requests = max(count * 2 if name == "evaluators" else count, 1)
        here = cpu * 1000 / requests
        there = None if db is None else db * 1000 / requests
        figures[name] = {
            "requests": requests,
            "wall_s": round(wall, 2),
            "cpu_ms_per_request": round(here, 3),
            "database_cpu_ms_per_request": None if there is None else round(there, 3),
        }
        line = f"{name:<11} {requests:6d} requests in {wall:5.1f} s: {here:.2f} ms CPU a request"
        if there is not None:
            line += f" here, {there:.2f} ms in the database"
        say(args, line)

    warm_rounds = max(args.evaluators * 4, 20)
    phase(
        "evaluators",
        lambda: evaluators(driver, data, warm_rounds, args.evaluators),
        lambda: evaluators(driver, data, args.rounds, args.evaluators),
    )
    phase(
        "api",
        lambda: pollers(driver, data, 3),
        lambda: pollers(driver, data, args.polls),
    )
    connections.close_all()
    for problem in driver.unexpected[:5]:
        say(args, f"unexpected: {problem}")
    evaluator, api = figures["evaluators"], figures["api"]
    return {
        "database": database.split(" ", 1)[0],
        "evaluators": args.evaluators,
        "evaluator_cpu_ms_per_request": evaluator["cpu_ms_per_request"],
        "evaluator_database_cpu_ms_per_request": evaluator["database_cpu_ms_per_request"],
        "api_cpu_ms_per_request": api["cpu_ms_per_request"],
        "api_database_cpu_ms_per_request": api["database_cpu_ms_per_request"],
        "phases": figures,
        "unexpected": len(driver.unexpected),
        "ok": not driver.unexpected,
    }


if __name__ == "__main__":
    main()
