"""``python manage.py serve``: the whole platform on one machine (web + task worker).

The worker (``qcluster``, with its own worker processes) runs in a process group of its own,
and its ids are kept in ``worker.pid`` in the data directory. SIGTERM or SIGINT (Ctrl+C) stop
the web server, then the worker: SIGTERM to it (it finishes what it runs), and after
``WORKER_GRACE_S`` SIGKILL to its whole group. A worker left by a ``serve`` that could not
stop it (killed with SIGKILL) is stopped by the next ``serve`` on the same data directory
before it starts its own (where /proc tells it is that worker still), so there are never two.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from evalplatform.bootstrap import bootstrap, greeting
from evalplatform.web.server import serve_options

WORKER_GRACE_S = 15.0
GROUPS = hasattr(os, "killpg")  # POSIX: the worker leads a process group of its own


def _pid_file() -> Path:
    return Path(settings.DATA_DIR) / "worker.pid"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError, IndexError):
        return proc.read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone
    return True


def _started(pid: int) -> str:
    """When ``pid`` started (clock ticks after boot, from /proc), or "" where unknown: with
    its pid, it names a process (a pid alone may have been reused)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _is_worker(pid: int, started: Any) -> bool:
    """Whether ``pid`` is still the live ``qcluster`` that started at ``started``. Without
    /proc to ask, it is not presumed to be (a reused pid must never be signalled)."""
    if not _alive(pid):
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"qcluster" in command and bool(started) and _started(pid) == started


def _signal(pid: int, sig: int, *, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group and GROUPS:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def _wait_gone(pid: int, timeout: float, proc: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None:
            proc.poll()  # reap our own child
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def stop_worker(pid: int, proc: subprocess.Popen | None = None) -> None:
    """Stop the worker ``pid`` and every process of its group: SIGTERM to the worker (it
    stops its own processes), SIGKILL to the group after ``WORKER_GRACE_S`` or once the
    worker is gone (anything of it still there)."""
    _signal(pid, signal.SIGTERM, group=False)
    if not _wait_gone(pid, WORKER_GRACE_S, proc):
        _signal(pid, signal.SIGKILL, group=False)
    _signal(pid, signal.SIGKILL, group=True)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def _read_pid_file() -> dict[str, Any]:
    try:
        data = json.loads(_pid_file().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _port_free(host: str, port: int) -> None:
    """``CommandError`` when ``host:port`` cannot be listened on (another server has it)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CommandError(f"Cannot listen on {host!r}: {exc.strerror}.") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise CommandError(
                f"Port {port} on {host} is in use ({exc.strerror}): stop what serves there, "
                "or choose another with --port."
            ) from exc


class Command(BaseCommand):
    help = "Migrate, create the first admin if none exists, then run the web server and a worker."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-worker", action="store_true", help="Do not start qcluster.")

    def handle(self, *args, host, port, no_worker, **options):
        _port_free(host, port)  # before anything else: a busy port is said, not "Serving on"
        # SIGTERM and SIGINT end the command (uvicorn hands a signal back once it has
        # stopped), and the worker is always stopped on the way out.
        signal.signal(signal.SIGTERM, _exit_on_signal)
        signal.signal(signal.SIGINT, _exit_on_signal)
        worker: subprocess.Popen | None = None
        try:
            call_command("migrate", interactive=False, verbosity=0)
            # Every stored schedule and queued task names a task that resolves (runs.E002).
            self.check(databases=["default"], display_num_errors=False)
            self._greet()
            if not no_worker:
                worker = self._start_worker()
            self.stdout.write(f"Serving on http://{host}:{port}/ (Ctrl+C to stop)", ending="\n")
            self.stdout.flush()
            uvicorn.run(
                "evalplatform.asgi:application",
                host=host,
                port=port,
                log_level="info",
                lifespan="off",
                # X-Forwarded-For only from the proxies an administrator names (uvicorn
                # believes loopback by default: any local client could pick its address).
                proxy_headers=bool(settings.TRUSTED_PROXIES),
                forwarded_allow_ips=",".join(settings.TRUSTED_PROXIES) or None,
                # WebSocket clients only listen: no message from them needs more than this.
                ws_max_size=64 * 1024,
                # Header and body timeouts, connections per address and in all, keep-alive.
                **serve_options(),
            )
        finally:
            if worker is not None:
                # A second signal while the worker stops must not cut this short.
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                stop_worker(worker.pid, worker)
                if _read_pid_file().get("worker") == worker.pid:
                    _pid_file().unlink(missing_ok=True)

    def _greet(self) -> None:
        if said := greeting(bootstrap()):
            self.stdout.write(self.style.SUCCESS(said))
        database = settings.DATABASES["default"]
        self.stdout.write(
            f"Database: {database['ENGINE'].rsplit('.', 1)[-1]} {database['NAME']}; "
            f"data directory: {settings.DATA_DIR}"
        )

    def _start_worker(self) -> subprocess.Popen | None:
        """Start ``qcluster``, once a worker an earlier ``serve`` left is stopped; None when
        the ``serve`` that owns the running worker is still running (one worker is enough)."""
        left = _read_pid_file()
        old_worker, old_serve = left.get("worker"), left.get("serve")
        if isinstance(old_worker, int) and _is_worker(old_worker, left.get("started")):
            if (
                isinstance(old_serve, int)
                and old_serve != os.getpid()
                and _alive(old_serve)
                and _started(old_serve) == left.get("serve_started")
            ):
                self.stdout.write(
                    f"A task worker (pid {old_worker}) of another serve (pid {old_serve}) runs "
                    "on this data directory: not starting a second one."
                )
                return None
            self.stdout.write(f"Stopping the task worker an earlier serve left (pid {old_worker}).")
            stop_worker(old_worker)
        worker = subprocess.Popen(  # noqa: S603
            [sys.executable, sys.argv[0], "qcluster"], start_new_session=GROUPS
        )
        mine = {
            "serve": os.getpid(),
            "serve_started": _started(os.getpid()),
            "worker": worker.pid,
            "started": _started(worker.pid),
        }
        _pid_file().write_text(json.dumps(mine))
        return worker


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)
