"""README command one, end to end: ``manage.py serve`` on a fresh data directory starts the
platform on the embedded default, creates the first admin, and answers over real HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ENCRYPTION_KEYS"}
    }
    env |= {"EVAL_DATA_DIR": str(tmp_path / "data"), "EVAL_ADMIN_PASSWORD": "first-Admin-pw-7"}
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/login/", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.3)
    else:
        proc.kill()
        log.seek(0)
        pytest.fail(f"serve did not start:\n{log.read()}")
    yield base, tmp_path
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def test_serve_starts_the_platform_with_a_first_admin(server):
    base, tmp_path = server
    assert (tmp_path / "data" / "db.sqlite3").exists()
    with httpx.Client(base_url=base, follow_redirects=False, timeout=10) as client:
        page = client.get("/login/")
        token = page.text.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
        signed_in = client.post(
            "/login/",
            data={
                "username": "admin",
                "password": "first-Admin-pw-7",
                "csrfmiddlewaretoken": token,
            },
            headers={"Referer": f"{base}/login/"},
        )
        assert signed_in.status_code == 302, signed_in.text[:500]
        me = client.get("/api/me").json()
        assert me["username"] == "admin" and me["is_superuser"] is True
        assert [t["slug"] for t in me["teams"]] == ["default"]
        models = client.get("/api/providers/models").json()["results"]
        assert {"mock-small", "mock-large"} <= {m["model_id"] for m in models}
        assert client.get("/api/docs/").status_code == 200
        assert client.get("/admin/").status_code == 200
        # Without the CSRF token a form post is refused.
        refused = client.post("/login/", data={"username": "admin", "password": "x"})
        assert refused.status_code == 403
