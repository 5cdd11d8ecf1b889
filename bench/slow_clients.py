"""``manage.py serve`` under slow and greedy clients, at a small file-descriptor limit: one
client (from 127.0.0.2) opens ``--half`` connections that send half a request and stop;
meanwhile another (from 127.0.0.1) asks ``GET /login/`` every 0.2 s. Reported: how many of
the normal requests were answered 200 while the half-sent ones were open, how many of those
the server still held after the header timeout, and how long it took to cut them.

    python bench/slow_clients.py [--half 300] [--nofile 256]

Issue 35 saw uvicorn hold every half-sent request for ever, and at 256 descriptors 300 of
them reset the normal ``GET /login/``. Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
HEADER_TIMEOUT_S = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--half", type=int, default=300)
    parser.add_argument("--nofile", type=int, default=256)
    args = parser.parse_args()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env |= {
        "EVAL_DATA_DIR": tempfile.mkdtemp(prefix="slowclients-"),
        "EVAL_ADMIN_PASSWORD": "bench-Admin-pw-7",
        "SERVE_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
        "LOG_LEVEL": "WARNING",
    }

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))

    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--no-worker"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=limit, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/login/", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.3)
        half: list[socket.socket] = []
        refused_at_connect = 0
        for _ in range(args.half):
            sock = socket.socket()
            sock.settimeout(5)
            sock.bind(("127.0.0.2", 0))
            try:
                sock.connect(("127.0.0.1", port))
                sock.sendall(b"GET /login/ HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                refused_at_connect += 1
                sock.close()
                continue
            half.append(sock)
        began = time.monotonic()
        normal = {"ok": 0, "other": 0}
        while time.monotonic() - began < HEADER_TIMEOUT_S + 2:
            try:
                status = httpx.get(f"{base}/login/", timeout=5).status_code
                normal["ok" if status == 200 else "other"] += 1
            except httpx.HTTPError:
                normal["other"] += 1
            time.sleep(0.2)
        held = cut = 0
        for sock in half:
            sock.setblocking(False)
            try:
                sock.recv(4096)  # the 408 or 503, or the end of the connection
            except BlockingIOError:  # nothing yet: the server still holds it
                held += 1
            except OSError:
                cut += 1
            else:
                cut += 1
            sock.close()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    print(
        f"{args.half} half-sent requests from one address at {args.nofile} descriptors: "
        f"{normal['ok']} of {normal['ok'] + normal['other']} normal GET /login/ answered 200; "
        f"{held} half-sent still held {HEADER_TIMEOUT_S + 2} s on (header timeout "
        f"{HEADER_TIMEOUT_S} s), {cut} answered 408/503 and cut"
    )
    print(
        json.dumps(
            {
                "half_sent": args.half,
                "nofile": args.nofile,
                "normal_requests": normal["ok"] + normal["other"],
                "normal_ok_share": round(normal["ok"] / max(1, normal["ok"] + normal["other"]), 3),
                "half_sent_held_after_timeout": held,
                "half_sent_cut": cut,
                "refused_at_connect": refused_at_connect,
            }
        )
    )


if __name__ == "__main__":
    main()
