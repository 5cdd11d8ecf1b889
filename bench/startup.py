"""Start-up: how long ``python manage.py serve`` (the documented way to run the platform on one
machine) takes from its start to its first answer, on SQLite in a data directory of its own.

    python bench/startup.py [--runs 3] [--path /login/] [--target-s 3] [--json-only]

Each run starts ``manage.py serve --no-worker`` on a free port and asks ``--path`` every 20 ms
until it answers 200; the time from the start of the process to that answer is the figure,
with the CPU time the server had spent by then (which a busy machine does not stretch).
The first run is on a new data directory (the start migrates the database and creates the
first admin and team); the later ones restart on that directory, as a server does after a
deploy or a reboot. The target (``--target-s``, issue 20: 3 s) applies to the restarts; the
first start's figure is printed beside it. The server is stopped (SIGTERM) after each run.

Prints each run's figures, and as its last line one JSON object. Exits 0 whatever the
figures (a time over the target is reported, not a failure); 1 when the server never
answered.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="Starts: one first, then restarts.")
    parser.add_argument("--path", default="/login/", help="What the first request asks.")
    parser.add_argument("--target-s", type=float, default=3.0)
    parser.add_argument("--timeout-s", type=float, default=120.0)
    parser.add_argument(
        "--project",
        type=Path,
        default=ROOT,
        help="The checkout whose manage.py to start (default: this one), to compare two.",
    )
    parser.add_argument("--json-only", action="store_true", help="Print only the JSON line.")
    return parser.parse_args()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) the process spent so far (Linux), None where unknown: the
    part of a start that does not depend on how busy the machine is."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_start(args: argparse.Namespace, data_dir: str) -> dict[str, float | int | None]:
    """Start the server, wait for its first 200 on ``args.path``, stop it."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"EVAL_DATA_DIR": data_dir, "LOG_LEVEL": "WARNING", "PYTHONPATH": str(args.project)}
    command = [sys.executable, "manage.py", "serve", "--no-worker", "--port", str(port)]
    url = f"http://127.0.0.1:{port}{args.path}"
    began = time.perf_counter()
    server = subprocess.Popen(
        command,
        cwd=args.project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    listening: float | None = None
    cpu: float | None = None
    answered: float | None = None
    status: int | None = None
    try:
        with httpx.Client(timeout=30) as client:
            while time.perf_counter() - began < args.timeout_s and server.poll() is None:
                try:
                    response = client.get(url)
                except httpx.TransportError:
                    time.sleep(0.02)
                    continue
                status = response.status_code
                if listening is None:
                    listening = time.perf_counter() - began
                if status == 200:
                    answered = time.perf_counter() - began
                    cpu = process_cpu_s(server.pid)
                    break
                time.sleep(0.02)
        # A second request: what the first one paid once (imports, first queries).
        second = None
        if answered is not None:
            with httpx.Client(timeout=30) as client:
                t = time.perf_counter()
                client.get(url)
                second = time.perf_counter() - t
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            _, err = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)  # its own session: the server alone
            _, err = server.communicate(timeout=10)
    if answered is None and not args.json_only:
        print(f"no answer (last status {status}); stderr:\n{err.decode()[-2000:]}")
    return {
        "first_answer_s": round(answered, 2) if answered is not None else None,
        "first_response_s": round(listening, 2) if listening is not None else None,
        "second_request_s": round(second, 3) if second is not None else None,
        "server_cpu_s": round(cpu, 2) if cpu is not None else None,
        "status": status,
    }


def main() -> None:
    args = parse_args()
    load = os.getloadavg()[0]
    data_dir = tempfile.mkdtemp(prefix="evalbench-startup-")
    runs = []
    try:
        for n in range(args.runs):
            runs.append(one_start(args, data_dir))
            if not args.json_only:
                kind = "first start (new database)" if n == 0 else "restart"
                r = runs[-1]
                print(
                    f"{kind:28s} first 200 on {args.path} after {r['first_answer_s']} s "
                    f"(server CPU {r['server_cpu_s']} s; first response of any status "
                    f"{r['first_response_s']} s; the next request {r['second_request_s']} s)",
                    flush=True,
                )
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    restarts = [r["first_answer_s"] for r in runs[1:]]
    worst = max((s for s in restarts if s is not None), default=None)
    ok = all(r["first_answer_s"] is not None for r in runs)
    summary = {
        "database": "sqlite",
        "command": "manage.py serve --no-worker",
        "path": args.path,
        "first_start_answer_s": runs[0]["first_answer_s"] if runs else None,
        "restart_answer_s": restarts,
        "first_answer_s": worst,
        "target_first_answer_s": args.target_s,
        "within_target": worst is not None and worst <= args.target_s,
        "runs": runs,
        "cpus": os.cpu_count(),
        "load_average_before": round(load, 2),
        "ok": ok,
    }
    if not args.json_only:
        print(
            f"restart to first answer: worst {worst} s (target {args.target_s:g} s); "
            f"load average {load:.1f} on {os.cpu_count()} CPUs before the runs"
        )
    print(json.dumps(summary))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
