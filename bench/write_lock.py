"""How long another team waits to write while one team's heavy work runs: a 50,000-line
judge file's upload and validation, a 50,000-cell job's creation, a comparison scenario of
its outputs, an import of 50,000 judgments and the batch's output files, each timed while a
second team (its own process and connection, as a web worker) makes and revokes an API
token every 50 ms, as a person at the API would.

    python bench/write_lock.py [--rows 50000] [--row-bytes 600]

Target (issue 35): every write of the other team answers within a second on SQLite, the
embedded default (on PostgreSQL, rows lock, not the database). Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from setup_data import fresh_database, percentile  # noqa: E402


def write_file(path: Path, rows: int, row_bytes: int) -> None:
    filler = ("The answer explains the steps and stays on topic. " * 40)[: max(0, row_bytes - 250)]
    with path.open("w") as out:
        for n in range(rows):
            body = {"model": "gpt-fake", "max_tokens": 20,
                    "messages": [{"role": "user", "content": f"Grade {n}: {filler}"}]}  # fmt: skip
            line = {"custom_id": f"row-{n}", "method": "POST",
                    "url": "/v1/chat/completions", "body": body}  # fmt: skip
            out.write(json.dumps(line) + "\n")


def other_team(user_id: int, stop: Any, out: Any) -> None:
    """Another process (a web worker of another team): writes every 50 ms (a token made,
    then revoked) and times each write."""
    from django.contrib.auth import get_user_model
    from django.db import connections

    from evalplatform.accounts import services

    connections.close_all()  # the parent's, forked: this process opens its own
    user = get_user_model().objects.get(pk=user_id)
    waits = []
    while not stop.is_set():
        began = time.perf_counter()
        token, _ = services.token_create(user=user, name="bench")
        services.tokens_revoke(tokens=type(token).objects.filter(pk=token.pk))
        waits.append(time.perf_counter() - began)
        stop.wait(0.05)
    out.put(waits)


def timed(label: str, user: Any, work: Callable[[], Any], report: dict[str, Any]) -> Any:
    from django.db import connections

    connections.close_all()
    context = multiprocessing.get_context("fork")
    stop, out = context.Event(), context.Queue()
    other = context.Process(target=other_team, args=(user.pk, stop, out), daemon=True)
    other.start()
    time.sleep(0.5)
    began = time.perf_counter()
    try:
        return work()
    finally:
        report[f"{label}_s"] = round(time.perf_counter() - began, 2)
        stop.set()
        waits = out.get(timeout=60) or [0.0]
        other.join()
        report[f"{label}_other_team_max_wait_s"] = round(max(waits), 3)
        report[f"{label}_other_team_p95_wait_s"] = round(percentile(waits, 0.95), 3)
        report[f"{label}_other_team_writes"] = len(waits)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--row-bytes", type=int, default=600)
    args = parser.parse_args()
    with fresh_database("writelock") as where:
        import os

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
        os.environ.setdefault("LOG_LEVEL", "WARNING")
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.files import File
        from django.core.management import call_command
        from setup_data import bench_fixture, job_body

        from evalplatform.accounts.models import Membership, Team
        from evaluations.judgefiles import services
        from evaluations.models import JudgeBatch
        from generation import planning
        from generation import services as generation

        call_command("migrate", verbosity=0)
        user, model, version = bench_fixture(kind="openai", base_url="https://api.openai.com/v1")
        team = model.connection.team
        other = get_user_model().objects.create(username="other")
        Membership.objects.create(
            user=other, team=Team.objects.create(slug="other", name="Other"), role="creator"
        )
        path = Path(tempfile.mkdtemp(prefix="writelock-")) / "batch.jsonl"
        write_file(path, args.rows, args.row_bytes)
        report: dict[str, Any] = {"database": where.split()[0], "rows": args.rows}

        def upload() -> Any:
            with path.open("rb") as handle:
                return services.file_create(
                    user=user, team=team, upload=File(handle, name="b.jsonl"), purpose="batch"
                )

        uploaded = timed("upload", other, upload, report)
        batch = services.batch_create(
            user=user,
            team=team,
            data={"input_file_id": uploaded.public_id, "endpoint": services.ENDPOINT},
        )
        timed("validation", other, lambda: services.validate(batch.pk), report)
        batch.refresh_from_db()
        assert batch.status == "in_progress", (batch.status, batch.errors)
        # rows/2 items at two temperatures: each item's two outputs are compared below.
        data = job_body(model, version, args.rows // 2, temperatures=[0.0, 1.0])

        def create() -> Any:
            return generation.job_create(user=user, plan=planning.job_plan(user=user, data=data))

        job = timed("job_create", other, create, report)
        assert job.outputs.count() == args.rows
        from scenarios import services as scenarios

        def convert() -> Any:
            return scenarios.scenario_from_job(
                user=user,
                job=job,
                data={"name": "pairs", "type": "comparison", "outputs": {"status": ["pending"]}},
            )

        scenario = timed("scenario_from_job", other, convert, report)
        assert scenario.variants.count() == args.rows, scenario.variants.count()

        # Judgments collected elsewhere, one row each: labels of 5,000 items' two variants.
        from evaluations.manager import imports

        Membership.objects.filter(user=user).update(role="manager")
        user = get_user_model().objects.get(pk=user.pk)  # its role, read afresh
        items = [{"item_id": f"i{n}", "variant_id": v, "content": "x"} for n in range(5000)
                 for v in ("a", "b")]  # fmt: skip
        labeled = scenarios.scenario_from_upload(
            user=user,
            team=team,
            data={
                "name": "labels",
                "type": "labeling",
                "format": "jsonl",
                "config": {"labels": ["good", "bad"]},
            },
            raw="\n".join(json.dumps(i) for i in items).encode(),
        )
        lines = "\n".join(
            json.dumps(
                {
                    "item_id": f"i{n % 5000}",
                    "variant": "ab"[n // 5000 % 2],
                    "rater": f"r{n // 10000}",
                    "labels": "good",
                }
            )
            for n in range(args.rows)
        ).encode()
        imported = timed(
            "judgment_import",
            other,
            lambda: imports.import_judgments(
                user=user, scenario=labeled, raw=lines, filename="labels.jsonl"
            ),
            report,
        )
        assert imported == args.rows, imported
        from generation import lifecycle

        lifecycle.cancel(batch.job)
        services.job_ended(batch.job_id)
        timed("finalize", other, lambda: services.finalize(batch.pk), report)
        batch = JudgeBatch.objects.get(pk=batch.pk)
        assert batch.output_file_id or batch.error_file_id, batch.status

    worst = max(v for k, v in report.items() if k.endswith("_max_wait_s"))
    report["other_team_max_wait_s"] = worst
    report["within_target"] = worst < 1.0
    stages = ("upload", "validation", "job_create", "scenario_from_job", "judgment_import",
              "finalize")  # fmt: skip
    for stage in stages:
        writes, p95, most = (
            report[f"{stage}_other_team_{key}"] for key in ("writes", "p95_wait_s", "max_wait_s")
        )
        print(
            f"{stage}: {report[f'{stage}_s']} s; the other team's {writes} writes waited "
            f"p95 {p95} s, max {most} s"
        )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
