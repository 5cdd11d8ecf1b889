"""End-to-end tests (``tests/e2e``): waiting on processes, stopping them, watching a job's
events over a WebSocket."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

FINAL_STATUSES = {"completed", "failed", "cancelled"}


def wait_for(
    predicate: Callable[[], Any],
    timeout: float,
    what: str | Callable[[], str],
    *,
    meanwhile: Callable[[], None] | None = None,
) -> Any:
    """Poll ``predicate`` until it is true; ``meanwhile`` (assertions) runs on every poll.
    ``what`` may be a function, to describe the state at the time out."""
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")
        if meanwhile is not None:
            meanwhile()
        time.sleep(0.1)
    return result


def stop(process: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    """Signal a process started in its own session; kill its whole group if it lingers."""
    if process.poll() is None:
        try:
            if sig == signal.SIGKILL:
                os.killpg(process.pid, sig)
            else:
                process.send_signal(sig)
            process.wait(timeout=timeout)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # children a dead leader left behind
    process.wait(timeout=10)


class Watcher:
    """A WebSocket client of a job, collecting its events in a thread. Like the job page
    (generation/static/generation/live.js) it reconnects after a close, with a backoff from
    0.5 s doubling to 10 s, until the job is in a final state."""

    def __init__(self, port: int, job_id: int, key: str, *, reconnect: bool = False):
        self.messages: list[dict[str, Any]] = []
        self.uri = f"ws://127.0.0.1:{port}/ws/generation/jobs/{job_id}"
        self.headers = [("Authorization", f"Token {key}")]
        self.reconnect = reconnect
        self.connections = 0
        self.closes: list[int | None] = []
        self.stopping = threading.Event()
        self.connected = threading.Event()
        self.socket: Any = None
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()
        assert self.connected.wait(15), "the WebSocket did not open"

    def final(self) -> bool:
        """Whether the client knows the job ended (an event, or a snapshot after a reconnect)."""
        states = [
            m["data"]["status"] for m in self.messages if m["event"].startswith("generation:job:")
        ]
        return bool(states) and states[-1] in FINAL_STATUSES

    def read(self) -> None:
        retry = 0.5
        while not self.stopping.is_set():
            try:
                # No client keepalive pings: under load (CI runs two suites on two cores) an
                # answer to one can take past its 20 s timeout, and the client then closes the
                # socket itself. A browser's page does not ping either.
                with connect(
                    self.uri, additional_headers=self.headers, open_timeout=10, ping_interval=None
                ) as ws:
                    self.socket = ws
                    self.connections += 1
                    self.connected.set()
                    retry = 0.5
                    try:
                        while True:
                            self.messages.append(json.loads(ws.recv()))
                    except ConnectionClosed as closed:
                        self.closes.append(closed.rcvd.code if closed.rcvd else None)
            except (OSError, InvalidStatus, TimeoutError):
                self.closes.append(None)  # the server is unreachable: try again
            if not self.reconnect or self.final() or self.stopping.is_set():
                return
            self.stopping.wait(retry)
            retry = min(retry * 2, 10)

    def describe(self) -> str:
        """For a failure: the connections, their close codes and the last events seen."""
        last = [m["event"] for m in self.messages[-5:]]
        return (
            f"{len(self.messages)} messages over {self.connections} connection(s), "
            f"closes {self.closes}, reading {self.thread.is_alive()}, last {last}"
        )

    def events(self, name: str) -> list[dict[str, Any]]:
        return [m["data"] for m in self.messages if m["event"] == name]

    def close(self) -> None:
        self.stopping.set()
        if self.socket is not None:
            self.socket.close()
        self.thread.join(timeout=15)
