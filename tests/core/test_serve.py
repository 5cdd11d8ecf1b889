"""README command one, end to end: ``manage.py serve`` on a fresh data directory starts the
platform on the embedded default, creates the first admin, and answers over real HTTP."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
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


@contextlib.contextmanager
def _serving(tmp_path, **extra_env):
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ENCRYPTION_KEYS"}
    }
    env |= {"EVAL_DATA_DIR": str(tmp_path / "data"), "EVAL_ADMIN_PASSWORD": "first-Admin-pw-7"}
    env |= extra_env
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
    try:
        yield base, tmp_path
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            log.close()


@pytest.fixture
def server(tmp_path):
    with _serving(tmp_path) as served:
        yield served


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
    # A client cannot name its own address: X-Forwarded-For is believed only from the
    # proxies TRUSTED_PROXIES names (none), so a failed sign-in counts against the peer.
    with httpx.Client(base_url=base, follow_redirects=False, timeout=10) as client:
        page = client.get("/login/")
        token = page.text.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
        failed = client.post(
            "/login/",
            data={"username": "nobody", "password": "wrong", "csrfmiddlewaretoken": token},
            headers={"Referer": f"{base}/login/", "X-Forwarded-For": "203.0.113.9"},
        )
        assert failed.status_code == 200
    with sqlite3.connect(tmp_path / "data" / "db.sqlite3") as database:
        addresses = database.execute("SELECT address FROM accounts_loginfailure").fetchall()
    assert addresses == [("127.0.0.1",)]


def _children() -> dict[int, list[int]]:
    """Each live process's children, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def _descendants(pid: int) -> set[int]:
    tree, found, todo = _children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _group(pgid: int) -> set[int]:
    """The live processes of a process group (the worker leads its own)."""
    members = set()
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.add(int(entry.name))
    return members


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _start_serve(tmp_path, port):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ENCRYPTION_KEYS"}
    }
    env |= {"EVAL_DATA_DIR": str(tmp_path / "data"), "EVAL_ADMIN_PASSWORD": "first-Admin-pw-7"}
    log = (tmp_path / f"serve-{port}.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/login/", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.3)
    else:
        proc.kill()
        log.seek(0)
        pytest.fail(f"serve did not start:\n{log.read()}")
    return proc, log


def _cluster_of(proc) -> tuple[int, set[int]]:
    """serve's qcluster child and, once it has started them, its own processes."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = [p for p in _descendants(proc.pid) if b"qcluster" in _command(p)]
        tops = [p for p in workers if p in _children().get(proc.pid, [])]
        if tops and len(_descendants(tops[0])) >= 2:
            return tops[0], _descendants(tops[0])
        time.sleep(0.2)
    pytest.fail("serve's qcluster did not start its processes")


def _gone(pids, within: float = 40) -> set[int]:
    """The pids still alive after waiting up to ``within`` seconds for them to end."""
    deadline = time.monotonic() + within
    while (left := {p for p in pids if _alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _cleanup(*pids):
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_ctrl_c_to_serve_stops_its_worker_and_the_workers_processes(tmp_path):
    proc, log = _start_serve(tmp_path, free_port())
    worker, processes = _cluster_of(proc)
    everything = {proc.pid, worker, *processes}
    try:
        os.kill(proc.pid, signal.SIGINT)  # to serve alone (the worker has its own group)
        proc.wait(timeout=40)
        assert _gone(everything) == set()
        assert _group(worker) == set()  # nor any process the worker started later
        assert not (tmp_path / "data" / "worker.pid").exists()
    finally:
        _cleanup(*everything, *_group(worker))
        log.close()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_sigterm_and_a_restart_after_a_crash_never_leave_a_worker_behind(tmp_path):
    first, log = _start_serve(tmp_path, free_port())
    old_worker, old_processes = _cluster_of(first)
    everything = {first.pid, old_worker, *old_processes}
    new_worker = -1  # no group, until known
    try:
        first.kill()  # SIGKILL: serve cannot stop its worker, which is left running
        first.wait(timeout=10)
        assert _alive(old_worker)
        second, second_log = _start_serve(tmp_path, free_port())
        log.close()
        log = second_log
        everything.add(second.pid)
        new_worker, new_processes = _cluster_of(second)
        everything |= {new_worker, *new_processes}
        # The second serve stopped the worker the first one left before starting its own.
        assert _gone({old_worker, *old_processes}) == set() and _group(old_worker) == set()
        assert _alive(new_worker)
        os.kill(second.pid, signal.SIGTERM)  # to serve alone, as a service manager would
        second.wait(timeout=40)
        assert _gone(everything) == set() and _group(new_worker) == set()
    finally:
        _cleanup(*everything, *_group(old_worker), *_group(new_worker))
        log.close()


def _half_sent(port: int, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(data)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """All the server sends until it closes the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_serve_holds_against_slow_and_greedy_clients(tmp_path):
    """Half-sent requests are cut after the header timeout (uvicorn alone held them for
    ever); one address holds at most its share of connections, the next is told to wait;
    a body that stalls is cut, one that trickles steadily is not."""
    guards = {"SERVE_HEADER_TIMEOUT_S": "2", "SERVE_BODY_IDLE_TIMEOUT_S": "2",
              "SERVE_CONNECTIONS_PER_ADDRESS": "5"}  # fmt: skip
    with _serving(tmp_path, **guards) as (base, _):
        port = int(base.rsplit(":", 1)[1])
        half = [_half_sent(port, b"GET /login/ HTTP/1.1\r\nHost: x\r\n") for _ in range(4)]
        assert httpx.get(f"{base}/login/", timeout=10).status_code == 200  # the fifth
        half.append(_half_sent(port, b"GET /login/ HTTP/1.1\r\n"))
        refused = _answer(_half_sent(port, b""))
        assert refused.startswith(b"HTTP/1.1 503") and b"Too many connections" in refused
        began = time.monotonic()
        for sock in half:
            assert _answer(sock).startswith(b"HTTP/1.1 408")
        assert time.monotonic() - began < 8  # cut at the timeout, not held
        assert httpx.get(f"{base}/login/", timeout=10).status_code == 200  # room again

        stalled = _half_sent(
            port,
            b"POST /login/ HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
            b"Content-Length: 100\r\n\r\n0123456789",
        )
        assert _answer(stalled).startswith(b"HTTP/1.1 408")

        steady = _half_sent(
            port,
            b"POST /login/ HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
            b"Connection: close\r\nContent-Length: 8\r\n\r\n",
        )
        for _ in range(8):  # 4 s in all, a byte every half second
            time.sleep(0.5)
            steady.sendall(b"x")
        answered = _answer(steady)
        assert answered.startswith(b"HTTP/1.1 ") and not answered.startswith(b"HTTP/1.1 408")


def test_serve_on_a_busy_port_says_so_before_serving(tmp_path):
    """The port is checked first: no "Serving on", no migration, a clear message."""
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        done = subprocess.run(
            [sys.executable, "manage.py", "serve", "--port", str(port), "--no-worker"],
            cwd=ROOT,
            env=env | {"EVAL_DATA_DIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1
    assert f"Port {port} on 127.0.0.1 is in use" in done.stderr
    assert "choose another with --port" in done.stderr
    assert "Serving on" not in done.stdout
    assert not (tmp_path / "db.sqlite3").exists()  # nothing was migrated
