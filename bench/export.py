"""Streamed exports: CSV and JSON of a small and a large job, on a fresh SQLite database (or
DATABASE_URL). Memory should stay flat whatever the size: the peak of Python allocations
while streaming (tracemalloc) is compared between the two sizes.

    python bench/export.py [--small 10000] [--large 100000] [--text-bytes 1000]

Also counts the queries of the outputs list endpoint (first and last page of each job): it
must not grow with the page or the job. Last line: JSON (``peak_ratio_large_over_small`` near
1 means flat memory).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--text-bytes", type=int, default=1_000)
    args = parser.parse_args()
    os.environ.setdefault("EVAL_DATA_DIR", tempfile.mkdtemp(prefix="evalbench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["GENERATION_MAX_CELLS"] = str(max(args.small, args.large))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection as db_connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone
    from rest_framework.test import APIClient
    from setup_data import bench_fixture, job_body

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
    for label, cells in (("small", args.small), ("large", args.large)):
        job = job_of(cells)
        last_page = -(-cells // 50)
        queries += [list_queries(job, 1), list_queries(job, last_page)]
        head = {"id": job.pk, "name": job.name}
        for fmt, chunks in (
            ("csv", lambda job=job: exports.csv_chunks(job)),
            ("json", lambda job=job, head=head: exports.json_chunks(job, head)),
        ):
            size, seconds, peak_mb = measure(chunks())
            results[(label, fmt)] = (cells, size, seconds, peak_mb)
            print(
                f"{fmt.upper()} of {cells:,} outputs: {size / 1e6:.1f} MB in {seconds:.2f} s "
                f"({size / 1e6 / seconds:.1f} MB/s, {cells / seconds:,.0f} rows/s), "
                f"peak Python memory {peak_mb:.1f} MB"
            )
    print(f"outputs list: {queries} queries (first and last page, small and large job)")
    summary = {
        "outputs_list_queries": sorted(set(queries)),
        "small_cells": args.small,
        "large_cells": args.large,
        "database": django.db.connection.vendor,
    }
    for fmt in ("csv", "json"):
        cells, size, seconds, peak = results[("large", fmt)]
        summary[f"{fmt}_rows_per_s"] = round(cells / seconds)
        summary[f"{fmt}_mb_per_s"] = round(size / 1e6 / seconds, 1)
        summary[f"{fmt}_peak_mb_large"] = round(peak, 2)
        summary[f"{fmt}_peak_ratio_large_over_small"] = round(peak / results[("small", fmt)][3], 2)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
