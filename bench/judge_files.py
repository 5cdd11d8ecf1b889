"""A judge file at full size: a 50,000-row JSONL (about 150 MB: rubric prompts of ~3 kB)
through upload → validation → the fake provider's OpenAI batch API (its own process) →
output and error files, stage by stage, with peak RSS; and the estimate of the uploaded
file before the batch (``POST /api/judge-files/estimate``).

    python bench/judge_files.py [--rows 50000] [--row-bytes 3000] [--bad-every 1000]

One line in ``--bad-every`` is malformed (it must land in the error file). Targets: upload +
validation ≤ 15 s, peak RSS ≤ 300 MB, flat in the file size (run it with ``--rows 10000`` to
compare). Runs on a fresh SQLite database (or DATABASE_URL). Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


RUBRIC = 'Score 1-5 and reply as JSON {"score", "rationale"}.'


def rss_mb() -> float:
    """The process's peak resident set so far (ru_maxrss is in kB on Linux)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def write_file(path: Path, rows: int, row_bytes: int, bad_every: int) -> int:
    filler = ("The answer explains the steps, cites its sources and stays on topic. " * 60)[
        : max(0, row_bytes - 400)
    ]
    with path.open("w") as out:
        for n in range(rows):
            if bad_every and n % bad_every == bad_every - 1:
                out.write("{not json\n")
                continue
            body = {
                "model": "gpt-fake",
                "messages": [
                    {"role": "system", "content": RUBRIC},
                    {"role": "user", "content": f"Question {n}.\nAnswer to grade: {filler}"},
                ],
                "max_tokens": 60,
            }
            line = {"custom_id": f"eval-{n:06d}", "method": "POST",
                    "url": "/v1/chat/completions", "body": body}  # fmt: skip
            out.write(json.dumps(line) + "\n")
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--row-bytes", type=int, default=3000)
    parser.add_argument("--bad-every", type=int, default=1000)
    args = parser.parse_args()
    os.environ.setdefault("EVAL_DATA_DIR", tempfile.mkdtemp(prefix="evalbench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    # The fake provider listens on loopback, which connections may call only when allowed
    # (evalplatform/providers/netguard.py).
    os.environ.setdefault("PROVIDER_HOSTS_ALLOWED", "127.0.0.1,localhost")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.files import File
    from django.core.management import call_command
    from provider_overhead import free_port, start_fake
    from setup_data import bench_fixture, drive_timed

    from evaluations.judgefiles import services
    from evaluations.models import JudgeBatch

    call_command("migrate", verbosity=0)
    port = free_port()
    fake = start_fake(port, extra=("--batch-duration", "0"))
    try:
        user, model, _ = bench_fixture(kind="openai", base_url=f"http://127.0.0.1:{port}")
        team = model.connection.team
        path = Path(tempfile.mkdtemp(prefix="judgefile-")) / "batch.jsonl"
        size = write_file(path, args.rows, args.row_bytes, args.bad_every)
        stages: dict[str, float] = {}
        rss: dict[str, float] = {"start": rss_mb()}

        began = time.perf_counter()
        with path.open("rb") as handle:
            uploaded = services.file_create(
                user=user, team=team, upload=File(handle, name="batch.jsonl"), purpose="batch"
            )
        stages["upload_s"] = time.perf_counter() - began
        rss["upload"] = rss_mb()

        began = time.perf_counter()  # POST /api/judge-files/estimate, in the request
        priced = services.estimate(user=user, file=uploaded)
        stages["estimate_s"] = time.perf_counter() - began
        rss["estimate"] = rss_mb()
        assert priced["rows"] + priced["refused"] == args.rows, priced

        began = time.perf_counter()
        batch = services.batch_create(
            user=user,
            team=team,
            data={"input_file_id": uploaded.public_id, "endpoint": services.ENDPOINT},
        )
        services.validate(batch.pk)  # what the queued task does
        stages["validation_s"] = time.perf_counter() - began
        rss["validation"] = rss_mb()
        batch.refresh_from_db()
        assert batch.status == "in_progress", batch.status

        began = time.perf_counter()
        _, _, record_s = drive_timed(batch.job_id, passes=40)
        stages["provider_batch_s"] = time.perf_counter() - began
        stages["record_s"] = record_s
        rss["provider_batch"] = rss_mb()

        began = time.perf_counter()
        services.sync(batch)
        services.finalize(batch.pk)  # what the queued task does
        stages["finalize_s"] = time.perf_counter() - began
        rss["finalize"] = rss_mb()
        batch = JudgeBatch.objects.select_related("output_file", "error_file").get(pk=batch.pk)
    finally:
        fake.terminate()
        fake.wait(timeout=10)

    bad = args.rows // args.bad_every if args.bad_every else 0
    within = stages["upload_s"] + stages["validation_s"] <= 15 and max(rss.values()) <= 300
    print(
        f"{args.rows} rows, {size / 2**20:.0f} MB: upload {stages['upload_s']:.1f} s, "
        f"estimate {stages['estimate_s']:.1f} s (${priced['live_usd']} live), "
        f"validation {stages['validation_s']:.1f} s (target upload + validation 15 s), "
        f"provider batch {stages['provider_batch_s']:.1f} s (recording "
        f"{stages['record_s']:.1f} s), files {stages['finalize_s']:.1f} s; "
        f"status {batch.status}, {batch.completed} completed, {batch.failed} failed "
        f"(expected {bad}); peak RSS {max(rss.values()):.0f} MB (target 300)"
    )
    print(
        json.dumps(
            {
                "rows": args.rows,
                "file_mb": round(size / 2**20, 1),
                **{k: round(v, 2) for k, v in stages.items()},
                "upload_plus_validation_s": round(stages["upload_s"] + stages["validation_s"], 2),
                "peak_rss_mb_by_stage": rss,
                "peak_rss_mb": max(rss.values()),
                "status": batch.status,
                "completed": batch.completed,
                "failed": batch.failed,
                "error_file_lines": batch.error_file.lines if batch.error_file else 0,
                "output_file_lines": batch.output_file.lines if batch.output_file else 0,
                "within_target": within,
            }
        )
    )


if __name__ == "__main__":
    main()
