"""The cost of reading a request: the five use cases with declared inputs (a job, a judge, a
plan request, a scenario edit, a judge-file batch), each sent valid and with a bad value in
every field it declares, in process through Django's test client.

Builds a fresh SQLite database (or uses DATABASE_URL) with one team: two mock models, a prompt
version, a comparison scenario of two models' answers and an uploaded judge file. Every
request of a kind is the same, so the figures are the validation's own cost (plus routing,
auth, the policy and the service's lookups); an invalid request writes nothing, a valid one
is an estimate or a scenario edit back to the same name.

    python bench/request_validation.py [--requests 200]

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()

    os.environ.setdefault("EVAL_DATA_DIR", tempfile.mkdtemp(prefix="evalbench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    # The same request hundreds of times a second: the validation's cost, not the rate limits.
    os.environ.setdefault("API_THROTTLE_WRITE", "off")
    os.environ.setdefault("API_THROTTLE_EXPENSIVE", "off")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.core.management import call_command
    from django.db import connection
    from rest_framework.test import APIClient

    from evalplatform.accounts.models import Membership, Team
    from evalplatform.accounts.roles import Role
    from evalplatform.accounts.services import token_create
    from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion
    from evalplatform.providers.models import LLMModel, ProviderConnection
    from scenarios import services as scenario_services

    logging.getLogger("django.request").setLevel(logging.CRITICAL)  # the 400s are expected
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="x")
    team = Team.objects.create(name="Bench", slug="bench")
    Membership.objects.create(user=user, team=team, role=Role.ADMIN)
    conn = ProviderConnection.objects.create(team=team, name="mock", kind="mock")
    models = [
        LLMModel.objects.create(connection=conn, model_id=f"m{i}", display_name=f"M{i}")
        for i in range(2)
    ]
    template = PromptTemplate.objects.create(team=team, name="Summary")
    version = PromptVersion.objects.create(template=template, number=1)
    PromptBlock.objects.create(version=version, position=0, title="", body="Sum up {{content}}.")
    rows = "\n".join(
        json.dumps({"item_id": f"q{n}", "variant_id": m, "content": f"{m} {n}", "model": m})
        for n in range(20)
        for m in ("m0", "m1")
    ).encode()
    scenario = scenario_services.scenario_from_upload(
        user=user,
        team=team,
        data={"name": "Pairs", "type": "comparison", "config": {}, "format": "jsonl"},
        raw=rows,
    )
    _, key = token_create(user=user, name="bench")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    line = {
        "custom_id": "r1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m0", "messages": [{"role": "user", "content": "Hi"}]},
    }
    upload = SimpleUploadedFile("rows.jsonl", json.dumps(line).encode() + b"\n")
    uploaded = client.post("/v1/files", {"purpose": "batch", "file": upload}, format="multipart")
    assert uploaded.status_code == 200, uploaded.content
    file_id = uploaded.json()["id"]
    items = json.dumps([{"id": f"s{n}", "content": f"Text {n}"} for n in range(20)])
    job = {
        "team": "bench",
        "name": "Study",
        "source": {"type": "manual", "format": "json", "content": items},
        "prompt_versions": [version.pk],
        "models": [m.pk for m in models],
        "temperatures": [0.0, 1.0],
        "repetitions": 2,
        "max_tokens": 100,
    }
    bad_job = job | {
        "name": "",
        "mode": "bulk",
        "finish_live": "yes",
        "repetitions": 0,
        "max_tokens": -1,
        "max_retries": 99,
        "concurrency": 0,
        "temperatures": [9],
        "budget_usd": "-1",
        "prompt_versions": [10**9],
        "models": [{"model": 10**9}],
    }
    bad_judge = {
        "name": "",
        "model": 10**9,
        "prompt_version": 10**9,
        "params": [],
        "temperatures": [],
        "repetitions": 0,
        "swap": "no",
        "mode": "bulk",
        "max_tokens": 0,
        "budget_usd": "x",
        "reply_format": "json",
    }
    bad_plan = {
        "question": "who",
        "k": 0,
        "tau": 2,
        "budget_usd": -1,
        "budget_hours": -1,
        "hourly_rate_usd": -1,
        "seconds_per_judgment": 0,
        "target_width": 0,
        "max_tasks": 0,
        "raters": "all",
    }
    bad_batch = {
        "input_file_id": file_id,
        "endpoint": "/v1/embeddings",
        "completion_window": "1h",
        "metadata": [],
        "budget_usd": "-1",
        "live": "no",
        "judge": 10**9,
    }
    judges = f"/api/scenarios/{scenario.pk}/judges"
    endpoints = {
        "job_estimate_valid": ("post", "/api/generation/estimate", job, 200),
        "job_invalid": ("post", "/api/generation/jobs", bad_job, 400),
        "judge_invalid": ("post", judges, bad_judge, 400),
        "plan_invalid": ("post", f"/api/scenarios/{scenario.pk}/plan", bad_plan, 400),
        "scenario_edit_valid": ("patch", f"/api/scenarios/{scenario.pk}", {"name": "Pairs"}, 200),
        "batch_invalid": ("post", "/v1/batches", bad_batch, 400),
    }
    results = {}
    for name, (method, path, body, status) in endpoints.items():
        call = getattr(client, method)
        for _ in range(5):  # warm up
            call(path, body, format="json")
        executed: list[str] = []

        def count(execute, sql, params, many, context, executed=executed):
            executed.append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(count):
            response = call(path, body, format="json")
        assert response.status_code == status, (name, response.status_code, response.content)
        timings, cpu_start = [], time.process_time()
        for _ in range(args.requests):
            start = time.perf_counter()
            response = call(path, body, format="json")
            timings.append((time.perf_counter() - start) * 1000)
            assert response.status_code == status, (name, response.status_code)
        cpu_ms = (time.process_time() - cpu_start) * 1000 / args.requests
        results[name] = {
            "p50_ms": round(statistics.median(timings), 2),
            "p95_ms": round(percentile(timings, 0.95), 2),
            "cpu_ms": round(cpu_ms, 2),
            "queries": len(executed),
        }
        print(
            f"{name:20s} p50 {results[name]['p50_ms']:7.2f} ms  p95 "
            f"{results[name]['p95_ms']:7.2f} ms  cpu {results[name]['cpu_ms']:6.2f} ms  "
            f"queries {results[name]['queries']}"
        )
    summary = {"database": connection.vendor, "requests_per_endpoint": args.requests}
    for name, found in results.items():
        summary[f"{name}_p95_ms"] = found["p95_ms"]
        summary[f"{name}_cpu_ms_per_request"] = found["cpu_ms"]
        summary[f"{name}_queries"] = found["queries"]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
