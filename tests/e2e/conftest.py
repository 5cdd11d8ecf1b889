"""Scale mode for end-to-end tests: each test gets a fresh PostgreSQL database (on the server of
``DATABASE_URL``, dropped afterwards), a redis-server of its own on a free port (so it can be
stopped and restarted, and no other run's tasks or events reach it), a queue name of its own,
and starts the platform's processes itself: ASGI servers (``uvicorn``, as docs/deploy.md says)
and ``qcluster`` workers. The tests drive it as users and operators would: the HTTP API, a
WebSocket client that reconnects like the job page, SQL on the database, and signals.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from evalplatform.providers.fake.server import free_port
from tests.helpers.e2e import stop, wait_for

ROOT = Path(__file__).resolve().parents[2]
SCALE_VARS = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ENCRYPTION_KEYS")

# Fixtures for the platform: a team, and per job spec an owner (one running job per user),
# a fake-provider connection and model, a prompt and an API token. Read from E2E_SPEC.
SETUP = """
import json, os
from django.contrib.auth import get_user_model
from evalplatform.accounts.models import Membership, Team
from evalplatform.accounts.services import token_create
from evalplatform.prompts.services import template_create
from evalplatform.providers.models import LLMModel, ProviderConnection
spec = json.loads(os.environ["E2E_SPEC"])
team = Team.objects.create(name="E2E", slug="e2e")
made = []
for n, owner in enumerate(spec):
    user = get_user_model().objects.create_user(f"owner-{n}")
    Membership.objects.create(user=user, team=team, role="creator")
    conn = ProviderConnection.objects.create(
        team=team, name=f"fake-{n}", kind="openai", base_url=owner["url"],
        max_concurrency=owner["concurrency"], timeout_s=owner.get("timeout_s", 30))
    model = LLMModel.objects.create(connection=conn, model_id="gpt-fake", display_name=f"F{n}",
                                    input_price_per_mtok=1, output_price_per_mtok=2)
    template = template_create(user=user, team=team, name=f"P{n}",
                               blocks=[{"title": "", "body": "Say {{content}}"}])
    made.append({"key": token_create(user=user, name="e2e")[1], "model": model.pk,
                 "prompt": template.versions.get().pk})
print("MADE", json.dumps(made))
"""


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class PrivateRedis:
    """A redis-server on a free loopback port, without persistence: a restart loses
    everything in it, as a crashed cache server would."""

    def __init__(self, log_dir: Path):
        self.port = free_port()
        self.log = log_dir / "redis.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                [
                    "redis-server",
                    *("--port", str(self.port), "--bind", "127.0.0.1"),
                    *("--save", "", "--appendonly", "no"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for(lambda: port_open(self.port), 20, "redis-server")

    def kill(self) -> None:
        if self.process is not None:
            stop(self.process, signal.SIGKILL)
            self.process = None


class FreshDatabase:
    """A new database on the PostgreSQL server of ``DATABASE_URL``, dropped at the end."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        base = parts.path.lstrip("/") or "postgres"
        self.name = f"{base}_e2e_{secrets.token_hex(4)}"
        self.url = urlunsplit(parts._replace(path=f"/{self.name}"))
        self.admin_url = urlunsplit(parts._replace(path="/postgres", query=""))

    def _admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(statement)

    def create(self) -> None:
        self._admin(f'CREATE DATABASE "{self.name}"')

    def drop(self) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def query(self, sql: str, params: Any = None) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, application_name="e2e-test") as conn:
            return conn.execute(sql, params).fetchall()


class ScalePlatform:
    """The platform in scale mode, in processes this test starts and stops."""

    def __init__(self, tmp_path: Path, database: FreshDatabase, redis: PrivateRedis):
        self.dir = tmp_path
        self.db = database
        self.redis = redis
        self.env = {k: v for k, v in os.environ.items() if k not in SCALE_VARS}
        self.env |= {
            "DATABASE_URL": database.url,
            "REDIS_URL": redis.url,
            "SECRET_KEY": os.environ["SECRET_KEY"],
            "ENCRYPTION_KEYS": os.environ["ENCRYPTION_KEYS"],
            "Q_CLUSTER_NAME": f"e2e-{secrets.token_hex(4)}",
            "Q_WORKERS": "1",
            # The tests start up to three one-worker qclusters and their owners share a team:
            # the team's share is two workers (the default, Q_WORKERS - 1, counts one cluster).
            "TEAM_MAX_RUNNING_TASKS": "2",
            "EVAL_DATA_DIR": str(tmp_path),
            "LOG_LEVEL": "WARNING",
        }
        self.processes: list[subprocess.Popen] = []
        self.web_port = 0

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env | (env or {}),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def setup(self, owners: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Migrate and create one owner (connection, model, prompt, token) per spec."""
        self.manage("migrate", "--verbosity", "0")
        out = self.manage("shell", "-c", SETUP, env={"E2E_SPEC": json.dumps(owners)})
        return json.loads(out.split("MADE", 1)[1])

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        with (self.dir / f"{name}.log").open("a") as log:
            process = subprocess.Popen(
                [sys.executable, *argv],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append(process)
        return process

    def start_web(self) -> str:
        """An ASGI server; returns its base URL."""
        self.web_port = free_port()
        argv = ["-m", "uvicorn", "evalplatform.asgi:application", "--host", "127.0.0.1"]
        argv += ["--port", str(self.web_port), "--lifespan", "off", "--log-level", "warning"]
        self._spawn("web", argv, self.env)
        wait_for(lambda: port_open(self.web_port), 60, "the ASGI server")
        return f"http://127.0.0.1:{self.web_port}"

    def start_worker(self, name: str) -> subprocess.Popen:
        """A ``qcluster``; its database sessions are named after it (``application_name``), and
        its log says which tasks it processed."""
        url = self.db.url + ("&" if "?" in self.db.url else "?") + f"application_name={name}"
        env = self.env | {"DATABASE_URL": url, "LOG_LEVEL": "INFO"}
        return self._spawn(name, ["manage.py", "qcluster"], env)

    def ran(self, name: str, job_id: int) -> bool:
        """Whether worker ``name`` took up the job's task (django-q logs each task it starts)."""
        return f"processing generation-job-{job_id} " in self.log(name)

    def log(self, name: str) -> str:
        return (self.dir / f"{name}.log").read_text(errors="replace")

    def api(self, key: str) -> httpx.Client:
        return httpx.Client(
            base_url=f"http://127.0.0.1:{self.web_port}/api",
            headers={"Authorization": f"Token {key}"},
            timeout=60,
        )

    def create_job(self, owner: dict[str, Any], name: str, cells: int, concurrency: int) -> int:
        """A live job of ``cells`` items (one prompt, model and temperature), through the API."""
        items = [{"id": i, "content": f"{name} item {i}"} for i in range(cells)]
        body = {
            "team": "e2e",
            "name": name,
            "prompt_versions": [owner["prompt"]],
            "models": [owner["model"]],
            "temperatures": [0.5],
            "max_tokens": 50,
            "concurrency": concurrency,
            "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
        }
        with self.api(owner["key"]) as api:
            response = api.post("/generation/jobs", json=body)
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def start_job(self, owner: dict[str, Any], job_id: int) -> None:
        with self.api(owner["key"]) as api:
            response = api.post(f"/generation/jobs/{job_id}/start")
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "running", response.text

    def job(self, job_id: int) -> dict[str, Any]:
        [row] = self.db.query(
            "SELECT status, completed_cells, failed_cells, cost_usd, reserved_usd, runner_token,"
            " lease_until < now(), status_message FROM generation_generationjob WHERE id = %s",
            [job_id],
        )
        names = "status completed failed cost reserved runner expired message"
        return dict(zip(names.split(), row, strict=True))

    def completed_ids(self, job_id: int) -> set[int]:
        rows = self.db.query(
            "SELECT id FROM generation_generationoutput WHERE job_id = %s AND status = 'completed'",
            [job_id],
        )
        return {pk for (pk,) in rows}

    def consistent(self, job_id: int) -> bool:
        """Nothing half-written, read in one statement (one snapshot): the job's counts, cost
        and reservation are its rows', and every completed row has its reply and tokens."""
        [(*job, done, failed, spent, held)] = self.db.query(
            "SELECT j.completed_cells, j.failed_cells, j.cost_usd, j.reserved_usd, o.* "
            "FROM generation_generationjob j, ("
            "  SELECT count(*) FILTER (WHERE status = 'completed' AND content <> ''"
            "                          AND output_tokens > 0 AND cost_usd > 0),"
            "         count(*) FILTER (WHERE status = 'failed'),"
            "         coalesce(sum(cost_usd), 0), coalesce(sum(reserved_usd), 0)"
            "  FROM generation_generationoutput WHERE job_id = %(job)s) o "
            "WHERE j.id = %(job)s",
            {"job": job_id},
        )
        return job == [done, failed, spent, held]

    def assert_done_once(self, job_id: int, cells: int) -> None:
        """Completed, every cell once with its reply, the cost counted once, nothing held."""
        job = self.job(job_id)
        assert (job["status"], job["completed"], job["failed"], job["runner"]) == (
            "completed",
            cells,
            0,
            "",
        )
        [(rows, distinct, with_reply, spent, held)] = self.db.query(
            "SELECT count(*), count(DISTINCT custom_id),"
            " count(*) FILTER (WHERE status = 'completed' AND content <> ''"
            "                  AND output_tokens > 0 AND cost_usd > 0),"
            " sum(cost_usd), sum(reserved_usd) FROM generation_generationoutput"
            " WHERE job_id = %s",
            [job_id],
        )
        assert rows == distinct == with_reply == cells
        assert job["cost"] == spent > 0 and job["reserved"] == held == 0

    def close(self) -> None:
        for process in self.processes:  # all at once: each takes a moment to wind down
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            stop(process)


@pytest.fixture
def scale(tmp_path) -> Iterator[ScalePlatform]:
    if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        pytest.skip("scale mode: needs PostgreSQL and Redis (set DATABASE_URL and REDIS_URL)")
    if not os.environ["DATABASE_URL"].startswith(("postgres://", "postgresql://")):
        pytest.skip("scale mode: DATABASE_URL is not a PostgreSQL URL")
    if shutil.which("redis-server") is None:
        # Scale mode was asked for: under CI (which installs redis-server) this is a failure.
        missing = "scale mode: needs the redis-server binary (a private server per test)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(missing)
        pytest.skip(missing)
    database = FreshDatabase(os.environ["DATABASE_URL"])
    redis = PrivateRedis(tmp_path)
    database.create()
    platform = None
    try:
        redis.start()
        platform = ScalePlatform(tmp_path, database, redis)
        yield platform
    finally:
        if platform is not None:
            platform.close()
        redis.kill()
        database.drop()
