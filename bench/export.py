"""Streamed exports and large uploads, on a fresh database (SQLite, or DATABASE_URL).

1. The queries of the outputs list endpoint (first and last page of a small and a large
   job): they must not grow with the page or the job. With ``--in-process``, also CSV and
   JSON of both jobs streamed in this process, the peak of Python allocations (tracemalloc)
   compared between the two sizes (flat memory: a ratio near 1); slow under tracemalloc.
2. Over HTTP, against the real server (``manage.py serve --no-worker``: uvicorn and the ASGI
   application, in a subprocess): the large job's CSV and JSON exports downloaded, with the
   time to the first byte, rows/s, and the server's resident memory (VmRSS, sampled every
   5 ms) at its peak while streaming against its idle figure. Targets: first byte within 1 s,
   50,000 rows/s or more, peak within 50 MB of idle.
3. A scenario's judgments (``--judgments``, a comparison scenario answered by people, one
   CSV row a judgment): in process, the row-by-row reference export (the one before the
   column-wise reading, ``tests/helpers/scenario_export_reference.py``) and the
   platform's, timed in the same run (rows/s) and their bytes compared (sha256); over HTTP,
   CSV and JSON with the outputs' targets (first byte, rows/s, server memory over idle).
4. Over HTTP: a JSONL upload of ``--upload-mb`` megabytes sent to the estimate endpoint
   (parsed and planned, nothing written): the server's peak memory over idle, which is the
   parsed items (the file itself stays on disk), against the file's size.

    python bench/export.py [--small 10000] [--large 100000] [--text-bytes 1000]
                           [--upload-mb 150] [--judgments 100000] [--in-process]

The machine's load average is in the report: on a shared machine the wall-clock rates fall
with it, while rows per server CPU second do not. Last line: one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

TARGET_TTFB_S = 1.0
TARGET_ROWS_PER_S = 50_000
TARGET_RSS_OVER_IDLE_MB = 50.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--text-bytes", type=int, default=1_000)
    parser.add_argument("--upload-mb", type=int, default=150, help="0: no upload measurement")
    parser.add_argument("--judgments", type=int, default=100_000, help="0: no scenario export")
    parser.add_argument("--in-process", action="store_true", help="tracemalloc figures too")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    upload_items = args.upload_mb * 1_000_000 // 1_000  # lines are ~1.45 KB
    os.environ["GENERATION_MAX_CELLS"] = str(max(args.small, args.large, upload_items))
    from setup_data import fresh_database

    with fresh_database("export") as database:
        summary = run(args, database)
    print(json.dumps(summary))


def run(args: argparse.Namespace, database: str) -> dict[str, Any]:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection as db_connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone
    from rest_framework.test import APIClient
    from setup_data import bench_fixture, job_body

    from evalplatform.accounts.services import token_create
    from generation import exports, planning, services
    from generation.models import GenerationOutput

    call_command("migrate", verbosity=0)
    user, model, version = bench_fixture(kind="mock")
    text = ("Rivers carry rain to the sea, and the sea gives it back. " * 50)[: args.text_bytes]

    def job_of(cells: int):
        data = job_body(model, version, cells)
        job = services.job_create(user=user, plan=planning.job_plan(user=user, data=data))
        GenerationOutput.objects.filter(job=job).update(
            status="completed",
            content=text,
            input_tokens=12,
            output_tokens=250,
            cost_usd="0.000512",
            processing_time_ms=850,
            completed_at=timezone.now(),
        )
        return job

    def measure(chunks) -> tuple[int, float, float]:
        tracemalloc.start()
        started = time.perf_counter()
        size = sum(len(chunk.encode()) for chunk in chunks)
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return size, seconds, peak / 1e6

    client = APIClient(SERVER_NAME="localhost")
    client.force_authenticate(user)

    def list_queries(job, page: int) -> int:
        with CaptureQueriesContext(db_connection) as captured:
            response = client.get(f"/api/generation/jobs/{job.pk}/outputs?page={page}")
        assert response.status_code == 200, response.status_code
        return len(captured.captured_queries)

    results = {}
    queries = []
    jobs = {}
    for label, cells in (("small", args.small), ("large", args.large)):
        job = jobs[label] = job_of(cells)
        last_page = -(-cells // 50)
        queries += [list_queries(job, 1), list_queries(job, last_page)]
        head = {"id": job.pk, "name": job.name}
        if not args.in_process:
            continue
        for fmt, chunks in (
            ("csv", lambda job=job: exports.csv_chunks(job)),
            ("json", lambda job=job, head=head: exports.json_chunks(job, head)),
        ):
            size, seconds, peak_mb = measure(chunks())
            results[(label, fmt)] = (cells, size, seconds, peak_mb)
            print(
                f"in process: {fmt.upper()} of {cells:,} outputs: {size / 1e6:.1f} MB in "
                f"{seconds:.2f} s ({cells / seconds:,.0f} rows/s), "
                f"peak Python memory {peak_mb:.1f} MB",
                flush=True,
            )
    print(f"outputs list: {queries} queries (first and last page, small and large job)")
    summary: dict[str, Any] = {
        "database": database.split()[0],
        "outputs_list_queries": sorted(set(queries)),
        "small_cells": args.small,
        "large_cells": args.large,
        "text_bytes": args.text_bytes,
    }
    for fmt in ("csv", "json") if args.in_process else ():
        cells, size, seconds, peak = results[("large", fmt)]
        summary[f"inprocess_{fmt}_rows_per_s"] = round(cells / seconds)
        summary[f"inprocess_{fmt}_peak_mb_large"] = round(peak, 2)
        ratio = peak / results[("small", fmt)][3]
        summary[f"inprocess_{fmt}_peak_ratio_large_over_small"] = round(ratio, 2)

    scenario = None
    if args.judgments:
        scenario = judged_scenario(args, user)
        summary |= scenario_in_process(args, scenario)

    key = token_create(user=user, name="bench")[1]
    db_connection.close()  # the server has the database to itself while it streams
    summary["load_average_before"] = round(os.getloadavg()[0], 2)
    summary |= over_http(args, jobs, key, model, version, scenario)
    summary["load_average_after"] = round(os.getloadavg()[0], 2)
    summary["ok"] = all(v for k, v in summary.items() if k.endswith("_meets_targets"))
    return summary


# --- a scenario's judgments ---------------------------------------------------------------


def judged_scenario(args: argparse.Namespace, user: Any) -> Any:
    """A comparison scenario of ``args.judgments // 10`` pairs, each answered by ten people
    (a rationale and a comment each, some hostile to spreadsheets); ``user`` its manager."""
    from django.contrib.auth import get_user_model
    from setup_data import comparison_scenario

    from evalplatform.accounts.models import Membership
    from evalplatform.accounts.roles import Role
    from evaluations.models import Judgment, RaterKind

    started = time.perf_counter()
    membership = Membership.objects.get(user=user)
    Membership.objects.filter(pk=membership.pk).update(role=Role.ADMIN)
    user = get_user_model().objects.get(pk=user.pk)  # its roles read afresh
    raters = 10
    pairs = -(-args.judgments // raters)
    scenario = comparison_scenario(owner=user, team=membership.team, tasks=pairs, overlap=1)
    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"rater{n}") for n in range(raters)]
    )
    tasks = list(scenario.tasks.order_by("pk").values_list("pk", "variant_a_id", "variant_b_id"))
    made = 0
    batch: list[Judgment] = []
    for n, (task, a, b) in enumerate(tasks):
        for r, rater in enumerate(users):
            if made == args.judgments:
                break
            batch.append(
                Judgment(
                    scenario=scenario,
                    task_id=task,
                    rater_kind=RaterKind.HUMAN,
                    evaluator=rater,
                    presented=[a, b],
                    payload={"winner": "AB"[(n + r) % 2]},
                    rationale=("=A is clearer, and " if r == 0 else "A is clearer, ") * 3,
                    comment="fine" if r % 3 else "",
                    time_spent_ms=1000 + r,
                )
            )
            made += 1
        if len(batch) >= 5000:
            Judgment.objects.bulk_create(batch)
            batch = []
    Judgment.objects.bulk_create(batch)
    print(
        f"scenario: {len(tasks):,} pairs, {made:,} judgments made in "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    return scenario


def scenario_in_process(args: argparse.Namespace, scenario: Any) -> dict[str, Any]:
    """The reference (row-by-row) export and the platform's, each format timed in this
    process, one after the other, and their bytes compared."""
    import hashlib

    from evaluations.manager import exports
    from tests.helpers import scenario_export_reference as reference

    head = {"id": scenario.pk, "name": scenario.name}
    figures: dict[str, Any] = {}
    for fmt in ("csv", "json"):
        digests = {}
        for label, module in (("reference", reference), ("platform", exports)):
            chunks = (
                module.csv_chunks(scenario) if fmt == "csv" else module.json_chunks(scenario, head)
            )
            digest = hashlib.sha256()
            started = time.perf_counter()
            for chunk in chunks:
                digest.update(chunk.encode())
            seconds = time.perf_counter() - started
            digests[label] = digest.hexdigest()
            rate = args.judgments / seconds
            print(
                f"in process: scenario {fmt.upper()} of {args.judgments:,} judgments, {label}: "
                f"{seconds:.2f} s ({rate:,.0f} rows/s)",
                flush=True,
            )
            figures[f"scenario_{fmt}_{label}_inprocess_rows_per_s"] = round(rate)
        speedup = (
            figures[f"scenario_{fmt}_platform_inprocess_rows_per_s"]
            / figures[f"scenario_{fmt}_reference_inprocess_rows_per_s"]
        )
        figures[f"scenario_{fmt}_inprocess_speedup"] = round(speedup, 2)
        figures[f"scenario_{fmt}_same_bytes_as_reference"] = (
            digests["reference"] == digests["platform"]
        )
        print(
            f"in process: scenario {fmt.upper()}: {speedup:.2f}x the reference's rows/s, "
            f"same bytes: {digests['reference'] == digests['platform']}",
            flush=True,
        )
    return figures


# --- over HTTP --------------------------------------------------------------------------------


def over_http(
    args: argparse.Namespace, jobs: dict[str, Any], key: str, model, version, scenario=None
):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Token {key}"}
    figures: dict[str, Any] = {}
    with (
        tempfile.TemporaryFile() as log,
        serving(port, log) as server,
        httpx.Client(base_url=base, headers=headers, timeout=120) as http,
    ):
        wait_ready(http, server)
        for fmt in ("csv", "json"):  # warm up: every code path loaded once
            download(port, f"/api/generation/jobs/{jobs['small'].pk}/export/{fmt}", key)
        large = jobs["large"]
        for fmt in ("csv", "json"):
            idle = rss_mb(server.pid)
            cpu = cpu_s(server.pid)
            with peak_rss(server.pid) as peak:
                ttfb, seconds, size = download(
                    port, f"/api/generation/jobs/{large.pk}/export/{fmt}", key
                )
            rows_per_s = args.large / seconds
            rows_per_cpu_s = args.large / max(cpu_s(server.pid) - cpu, 0.01)
            over = peak["mb"] - idle
            print(
                f"over HTTP: {fmt.upper()} of {args.large:,} outputs: {size / 1e6:.1f} MB "
                f"in {seconds:.2f} s ({rows_per_s:,.0f} rows/s; {rows_per_cpu_s:,.0f} rows per "
                f"server CPU second), first byte after {ttfb * 1000:.0f} ms; server memory "
                f"{idle:.0f} MB idle, {peak['mb']:.0f} MB at peak (+{over:.1f} MB)",
                flush=True,
            )
            figures |= {
                f"http_{fmt}_ttfb_ms": round(ttfb * 1000),
                f"http_{fmt}_rows_per_s": round(rows_per_s),
                f"http_{fmt}_rows_per_server_cpu_s": round(rows_per_cpu_s),
                f"http_{fmt}_mb": round(size / 1e6, 1),
                f"http_{fmt}_server_idle_rss_mb": round(idle, 1),
                f"http_{fmt}_server_peak_rss_mb": round(peak["mb"], 1),
                f"http_{fmt}_server_rss_over_idle_mb": round(over, 1),
                f"http_{fmt}_meets_targets": ttfb <= TARGET_TTFB_S
                and rows_per_s >= TARGET_ROWS_PER_S
                and over <= TARGET_RSS_OVER_IDLE_MB,
            }
        if scenario is not None:
            figures |= scenario_over_http(args, server, port, key, scenario)
        if args.upload_mb:
            figures |= upload(args, http, server, model, version)
    return figures


def scenario_over_http(args: argparse.Namespace, server, port: int, key: str, scenario):
    figures: dict[str, Any] = {}
    for fmt in ("csv", "json"):
        path = f"/api/scenarios/{scenario.pk}/export/{fmt}"
        idle = rss_mb(server.pid)
        cpu = cpu_s(server.pid)
        with peak_rss(server.pid) as peak:
            ttfb, seconds, size = download(port, path, key)
        rows_per_s = args.judgments / seconds
        rows_per_cpu_s = args.judgments / max(cpu_s(server.pid) - cpu, 0.01)
        over = peak["mb"] - idle
        print(
            f"over HTTP: scenario {fmt.upper()} of {args.judgments:,} judgments: "
            f"{size / 1e6:.1f} MB in {seconds:.2f} s ({rows_per_s:,.0f} rows/s, target "
            f"{TARGET_ROWS_PER_S:,}; {rows_per_cpu_s:,.0f} rows per server CPU second), first "
            f"byte after {ttfb * 1000:.0f} ms (target {TARGET_TTFB_S * 1000:.0f}); server "
            f"memory {idle:.0f} MB idle, {peak['mb']:.0f} MB at peak (+{over:.1f} MB, target "
            f"+{TARGET_RSS_OVER_IDLE_MB:.0f})",
            flush=True,
        )
        figures |= {
            f"scenario_{fmt}_ttfb_ms": round(ttfb * 1000),
            f"scenario_{fmt}_rows_per_s": round(rows_per_s),
            f"scenario_{fmt}_rows_per_server_cpu_s": round(rows_per_cpu_s),
            f"scenario_{fmt}_mb": round(size / 1e6, 1),
            f"scenario_{fmt}_server_idle_rss_mb": round(idle, 1),
            f"scenario_{fmt}_server_peak_rss_mb": round(peak["mb"], 1),
            f"scenario_{fmt}_server_rss_over_idle_mb": round(over, 1),
            f"scenario_{fmt}_meets_targets": ttfb <= TARGET_TTFB_S
            and rows_per_s >= TARGET_ROWS_PER_S
            and over <= TARGET_RSS_OVER_IDLE_MB,
        }
    return figures


def upload(args: argparse.Namespace, http: httpx.Client, server, model, version):
    from setup_data import job_body

    config = job_body(model, version, 1)
    del config["source"]
    paragraph = ("Rivers carry rain to the sea, and the sea gives it back. " * 30)[:1_400]
    with tempfile.NamedTemporaryFile("w+b", suffix=".jsonl") as file:
        count = 0
        while file.tell() < args.upload_mb * 1_000_000:
            line = {"id": f"item-{count}", "content": f"{count}: {paragraph}"}
            file.write(json.dumps(line).encode() + b"\n")
            count += 1
        size = file.tell()
        file.seek(0)
        idle = rss_mb(server.pid)
        started = time.perf_counter()
        with peak_rss(server.pid) as peak:
            response = http.post(
                "/api/generation/estimate",
                data={"config": json.dumps(config)},
                files={"file": ("items.jsonl", file, "application/jsonl")},
            )
        seconds = time.perf_counter() - started
    assert response.status_code == 200, (response.status_code, response.text[:500])
    over = peak["mb"] - idle
    print(
        f"over HTTP: upload of {size / 1e6:.0f} MB ({count:,} JSONL items) estimated in "
        f"{seconds:.1f} s; server memory {idle:.0f} MB idle, {peak['mb']:.0f} MB at peak "
        f"(+{over:.0f} MB, {over / (size / 1e6):.2f}x the file)",
        flush=True,
    )
    return {
        "upload_file_mb": round(size / 1e6, 1),
        "upload_items": count,
        "upload_seconds": round(seconds, 1),
        "upload_server_idle_rss_mb": round(idle, 1),
        "upload_server_peak_rss_mb": round(peak["mb"], 1),
        "upload_server_rss_over_idle_mb": round(over, 1),
        "upload_rss_over_idle_per_file_mb": round(over / (size / 1e6), 2),
    }


def download(port: int, path: str, key: str) -> tuple[float, float, int]:
    """(seconds to the first body byte, seconds in all, body bytes as sent, chunk framing
    included) of a POSTed download. A bare socket client: an HTTP library would take more
    of the machine's CPU than the server's work being measured."""
    request = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Token {key}\r\n"
        "Content-Length: 0\r\nConnection: close\r\n\r\n"
    ).encode()
    started = time.perf_counter()
    first = None
    head = b""
    size = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request)
        while data := sock.recv(1 << 20):
            if first is None:
                head += data
                if b"\r\n\r\n" not in head:
                    continue
                status = head.split(b" ", 2)[1]
                assert status == b"200", head[:300]
                data = head.split(b"\r\n\r\n", 1)[1]
                first = time.perf_counter() - started
            size += len(data)
    return first or 0.0, time.perf_counter() - started, size


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the server -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(port: int, log: Any) -> Iterator[subprocess.Popen]:
    """``manage.py serve --no-worker`` (migrate, then uvicorn in the same process) with this
    process's environment (its fresh database)."""
    command = [sys.executable, "manage.py", "serve", "--no-worker", "--port", str(port)]
    server = subprocess.Popen(
        command, cwd=ROOT, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT
    )
    try:
        yield server
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def wait_ready(http: httpx.Client, server: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode}")
        try:
            if http.get("/api/me").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the server did not answer in time")
        time.sleep(0.2)


def rss_mb(pid: int) -> float:
    """The process's resident memory now (VmRSS, Linux), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError("no VmRSS")


@contextmanager
def peak_rss(pid: int, every_s: float = 0.005) -> Iterator[dict[str, float]]:
    """The process's highest resident memory while the block runs (``["mb"]`` after it)."""
    peak = {"mb": rss_mb(pid)}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak["mb"] = max(peak["mb"], rss_mb(pid))
            done.wait(every_s)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()
        peak["mb"] = max(peak["mb"], rss_mb(pid))


if __name__ == "__main__":
    main()
