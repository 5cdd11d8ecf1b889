"""bench/load.py at a reduced size, as CI runs it: evaluators and API clients against the real
server processes over loopback HTTP on the environment's kind of database (SQLite without
DATABASE_URL, PostgreSQL with it), in a database the bench makes for itself and removes,
never the test database. Asserts on its last line (the JSON summary): no error on any route,
no task over-assigned or answered twice, every accepted answer stored, every route
exercised. Latency is printed by the bench, not asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
EVALUATORS, POLLERS, DURATION_S = 8, 2, 8
ROUTES = {
    "POST /api/evaluations/scenarios/{id}/next",
    "POST /api/evaluations/assignments/{id}/submit",
    "GET /api/generation/jobs",
    "GET /api/generation/jobs/{id}",
    "GET /api/generation/jobs/{id}/outputs",
    "GET /api/generation/jobs/{id}/statistics",
    "GET /api/scenarios/{id}",
    "GET /api/evaluations/judgments?scenario={id}",
}


def postgres_databases(url: str) -> set[str]:
    import psycopg

    admin = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        return {name for (name,) in conn.execute("SELECT datname FROM pg_database")}


def test_load_bench_at_reduced_size_has_no_error_and_no_over_assignment():
    url = os.environ.get("DATABASE_URL", "")
    result = subprocess.run(
        [
            sys.executable,
            "bench/load.py",
            *("--evaluators", str(EVALUATORS), "--pollers", str(POLLERS)),
            *("--duration", str(DURATION_S), "--think-ms", "100", "--poll-pause-ms", "200"),
            *("--processes", "2", "--json-only"),
        ],
        cwd=ROOT,
        env=os.environ | {"LOG_LEVEL": "WARNING"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])

    assert summary["errors"] == 0, summary["errors_by_route_and_status"]
    assert summary["over_assigned"] == 0
    assert summary["duplicate_judgments"] == 0
    assert summary["duplicate_assignments"] == 0
    assert summary["place_counter_mismatches"] == 0
    assert summary["judgments_lost"] == 0
    assert summary["ok"] is True
    assert set(summary["latency_ms_by_endpoint"]) == ROUTES
    assert all(s["count"] > 0 for s in summary["latency_ms_by_endpoint"].values())
    assert (summary["evaluators"], summary["pollers"]) == (EVALUATORS, POLLERS)
    assert summary["requests"] >= 100
    assert summary["judgments"] >= 3 * EVALUATORS
    assert summary["no_task_left"] == 0  # sized so that nobody runs out

    name = summary["database_name"]
    if url:
        assert summary["database"] == "postgresql"
        base = urlsplit(url).path.lstrip("/")
        assert name.startswith(f"{base}_load_")  # its own: not the URL's, not test_<base>
        assert name not in postgres_databases(url)  # and dropped
    else:
        assert summary["database"] == "sqlite"
        assert not Path(name).exists()  # its own data directory, removed
        assert not Path(name).is_relative_to(settings.DATA_DIR)  # not the tests' directory
