"""Serving the fake provider: in a background thread (tests, benchmarks) or in the foreground."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from evalplatform.providers.fake.app import FakeConfig, FakeProvider


class RunningFake:
    def __init__(self, app: FakeProvider, host: str, port: int):
        self.app = app
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def config(self) -> FakeConfig:
        return self.app.config


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve_in_thread(app: Any, *, host: str = "127.0.0.1", port: int = 0) -> Iterator[int]:
    """Serve any ASGI application with uvicorn in a background thread on loopback until the
    block ends; yields the port."""
    port = port or free_port(host)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
    )
    thread = threading.Thread(target=server.run, name=f"asgi-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"The server did not start on {host}:{port}.")
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def run_in_thread(
    config: FakeConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> Iterator[RunningFake]:
    """Serve a fresh fake provider on loopback until the block ends."""
    app = FakeProvider(config)
    with serve_in_thread(app, host=host, port=port) as bound:
        yield RunningFake(app, host, bound)
