"""A real django-q2 worker is killed with SIGKILL mid-job; after its lease runs out the job is
recovered and a new worker finishes only what was left: every cell completed once, cost
counted once, and the provider asked again only for the cells that were in flight.

Runs on the embedded default (SQLite file + ORM broker, no Redis) in its own data directory,
with the fake provider server in this process counting the calls it gets, and the web server
in a process of its own: a WebSocket client attached to it sees both workers' events (they
cross processes through the database outbox) through to the job's completion.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from evalplatform.providers.fake import FakeConfig, run_in_thread
from evalplatform.providers.fake.server import free_port
from evalplatform.runs import engine

ROOT = Path(__file__).resolve().parents[2]
CELLS, CONCURRENCY = 60, 4

SETUP = """
import json
from django.contrib.auth import get_user_model
from evalplatform.accounts.models import Membership, Team
from evalplatform.prompts.services import template_create
from evalplatform.providers.models import LLMModel, ProviderConnection
from generation import planning, services
user = get_user_model().objects.create_user("worker-test")
team = Team.objects.create(name="T", slug="t")
Membership.objects.create(user=user, team=team, role="creator")
conn = ProviderConnection.objects.create(team=team, name="fake", kind="openai", base_url="{url}")
model = LLMModel.objects.create(connection=conn, model_id="gpt-fake", display_name="F",
                                input_price_per_mtok=1, output_price_per_mtok=2)
template = template_create(user=user, team=team, name="P",
                           blocks=[{{"title": "", "body": "Say {{{{content}}}}"}}])
items = [{{"id": i, "content": f"item {{i}}"}} for i in range({cells})]
data = {{"team": "t", "name": "crash", "prompt_versions": [template.versions.get().pk],
        "models": [model.pk], "temperatures": [0.5], "max_tokens": 50,
        "concurrency": {concurrency},
        "source": {{"type": "manual", "format": "json", "content": json.dumps(items)}}}}
job = services.job_create(user=user, plan=planning.job_plan(user=user, data=data))
from evalplatform.accounts.services import token_create
print("KEY", token_create(user=user, name="e2e")[1], job.pk)
"""


def manage(env, *args, timeout=120):
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )


def worker(env, log):
    return subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def web_server(env, port, log):
    return subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--no-worker", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


class Watcher:
    """A WebSocket client of the web server, collecting a job's events in a thread."""

    def __init__(self, port, job_id, key):
        self.messages = []
        self.uri = f"ws://127.0.0.1:{port}/ws/generation/jobs/{job_id}"
        self.headers = [("Authorization", f"Token {key}")]
        self.connected = threading.Event()
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()
        assert self.connected.wait(10), "the WebSocket did not open"

    def read(self):
        with connect(self.uri, additional_headers=self.headers, open_timeout=10) as socket:
            self.socket = socket
            self.connected.set()
            try:
                while True:
                    self.messages.append(json.loads(socket.recv()))
            except ConnectionClosed:
                pass

    def events(self, name):
        return [m["data"] for m in self.messages if m["event"] == name]

    def close(self):
        self.socket.close()
        self.thread.join(timeout=10)


def query(db, sql):
    with sqlite3.connect(db, timeout=30) as conn:
        return conn.execute(sql).fetchall()


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_sigkilled_worker_is_recovered_without_double_work(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ENCRYPTION_KEYS"}
    }
    env |= {
        "EVAL_DATA_DIR": str(tmp_path),
        "GENERATION_LEASE_S": "2",
        "TEAM_TASK_LEASE_S": "2",  # the dead worker's share of the team runs out with it
        "Q_WORKERS": "1",
        "LOG_LEVEL": "WARNING",
    }
    db = tmp_path / "db.sqlite3"
    port = free_port()
    with (
        run_in_thread(FakeConfig(latency_s=0.1)) as fake,
        (tmp_path / "w.log").open("w") as log,
        (tmp_path / "web.log").open("w") as web_log,
    ):
        manage(env, "migrate", "--verbosity", "0")
        setup = manage(
            env, "shell", "-c", SETUP.format(url=fake.url, cells=CELLS, concurrency=CONCURRENCY)
        )
        key, job_id = setup.stdout.split("KEY", 1)[1].split()
        web = web_server(env, port, web_log)
        try:
            wait_for(lambda: port_open(port), 60, "the web server")
            watcher = Watcher(port, job_id, key)
            wait_for(lambda: watcher.messages, 10, "the snapshot")
            manage(env, "shell", "-c", START.format(job_id=job_id))
            crash_and_recover(env, db, fake, log)
            wait_for(lambda: watcher.events("generation:job:completed"), 30, "the last event")
            watcher.close()
        finally:
            os.killpg(web.pid, signal.SIGKILL)
            web.wait(timeout=10)
    assert watcher.messages[0]["event"] == "generation:job:snapshot"
    assert len(watcher.events("generation:job:started")) >= 2  # both workers' runs
    assert len(watcher.events("generation:item:completed")) >= CELLS - CONCURRENCY
    assert watcher.events("generation:item:token")  # streamed text, across processes
    [final] = watcher.events("generation:job:completed")
    assert (final["completed"], final["status"]) == (CELLS, "completed")


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


START = """
from django.contrib.auth import get_user_model
from generation import services
from generation.models import GenerationJob
services.job_start(user=get_user_model().objects.get(username="worker-test"),
                   job=GenerationJob.objects.get(pk={job_id}))
"""


def crash_and_recover(env, db, fake, log):
    """Kill the first worker part-way, recover the job, let a second worker finish it."""
    first = worker(env, log)
    try:
        wait_for(
            lambda: query(db, "SELECT completed_cells FROM generation_generationjob")[0][0] >= 15,
            60,
            "the first worker to get going",
        )
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    [(status, done)] = query(db, "SELECT status, completed_cells FROM generation_generationjob")
    assert status == "running" and done < CELLS
    calls_at_kill = fake.app.calls["openai_chat"]

    time.sleep(2.5)  # the dead runner's lease runs out
    recovered = manage(
        env, "shell", "-c", "from generation.tasks import recover_jobs; print(recover_jobs())"
    )
    assert recovered.stdout.strip().splitlines()[-1] == "[1]"
    second = worker(env, log)
    try:
        wait_for(
            lambda: query(db, "SELECT status FROM generation_generationjob")[0][0] == "completed",
            60,
            "the second worker to finish",
        )
    finally:
        second.send_signal(signal.SIGTERM)  # the cluster stops its own children
        try:
            second.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait(timeout=10)

    [(completed, failed, cost, reserved)] = query(
        db,
        "SELECT completed_cells, failed_cells, cost_usd, reserved_usd "
        "FROM generation_generationjob",
    )
    assert (completed, failed) == (CELLS, 0)
    statuses = query(db, "SELECT status, count(*) FROM generation_generationoutput GROUP BY 1")
    assert statuses == [("completed", CELLS)]
    [(spent,)] = query(db, "SELECT sum(cost_usd) FROM generation_generationoutput")
    assert Decimal(str(cost)) == pytest.approx(Decimal(str(spent))) and Decimal(str(reserved)) == 0
    # Only cells in flight, or answered and not yet recorded, at the kill were asked for
    # again: at most the concurrency and the cells claimed ahead.
    calls = fake.app.calls["openai_chat"]
    held = CONCURRENCY + int(CONCURRENCY * engine.CLAIM_AHEAD)
    assert CELLS <= calls <= CELLS + held, (calls, calls_at_kill)
