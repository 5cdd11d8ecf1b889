"""Latency and query counts of the core API list and detail endpoints, in process.

Builds a fresh SQLite database in a temporary data directory (or uses DATABASE_URL), fills one
team with prompt templates (2 versions of 3 blocks each) and models, plus a second team of the
same size that the user must never see, then times requests through Django's test client
(no network, so the figures are the server's own work: routing, auth, the policy, queries,
serialization).

    python bench/api_latency.py [--rows 200] [--requests 300]

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
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()

    os.environ.setdefault("EVAL_DATA_DIR", tempfile.mkdtemp(prefix="evalbench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from rest_framework.test import APIClient

    from evalplatform.accounts.models import Membership, Team
    from evalplatform.accounts.roles import Role
    from evalplatform.accounts.services import token_create
    from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion
    from evalplatform.providers.models import LLMModel, ProviderConnection

    logging.getLogger("django.request").setLevel(logging.ERROR)  # the 404 probe is expected
    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("bench", password="x")
    teams = [Team.objects.create(name=f"Bench {i}", slug=f"bench-{i}") for i in range(2)]
    Membership.objects.create(user=user, team=teams[0], role=Role.CREATOR)
    for team in teams:
        conn = ProviderConnection.objects.create(team=team, name="mock", kind="mock")
        LLMModel.objects.bulk_create(
            LLMModel(connection=conn, model_id=f"m{i}", display_name=f"M{i}")
            for i in range(args.rows)
        )
        for i in range(args.rows):
            template = PromptTemplate.objects.create(team=team, name=f"t{i}")
            for number in (1, 2):
                version = PromptVersion.objects.create(template=template, number=number)
                PromptBlock.objects.bulk_create(
                    PromptBlock(
                        version=version,
                        position=p,
                        title="System" if p == 0 else "",
                        body="Summarize {{content}} in {{language}}.",
                    )
                    for p in range(3)
                )
    _, key = token_create(user=user, name="bench")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    some_template = PromptTemplate.objects.filter(team=teams[0]).first()
    other_template = PromptTemplate.objects.filter(team=teams[1]).first()
    version = some_template.versions.first()

    endpoints = {
        "me": ("get", "/api/me", None, 200),
        "templates_list": ("get", "/api/prompts/templates", None, 200),
        "template_detail": ("get", f"/api/prompts/templates/{some_template.pk}", None, 200),
        "other_team_404": ("get", f"/api/prompts/templates/{other_template.pk}", None, 404),
        "models_list": ("get", "/api/providers/models", None, 200),
        "render": (
            "post",
            f"/api/prompts/versions/{version.pk}/render",
            {"items": [{"id": i, "content": "x", "language": "en"} for i in range(20)]},
            200,
        ),
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
        assert response.status_code == status, (name, response.status_code)
        timings = []
        for _ in range(args.requests):
            start = time.perf_counter()
            call(path, body, format="json")
            timings.append((time.perf_counter() - start) * 1000)
        results[name] = {
            "p50_ms": round(statistics.median(timings), 2),
            "p95_ms": round(percentile(timings, 0.95), 2),
            "queries": len(executed),
        }
        print(
            f"{name:16s} p50 {results[name]['p50_ms']:7.2f} ms  p95 "
            f"{results[name]['p95_ms']:7.2f} ms  queries {results[name]['queries']}"
        )

    summary = {
        "database": connection.vendor,
        "rows_per_team": args.rows,
        "requests_per_endpoint": args.requests,
        "templates_list_p95_ms": results["templates_list"]["p95_ms"],
        "models_list_p95_ms": results["models_list"]["p95_ms"],
        "me_p95_ms": results["me"]["p95_ms"],
        "templates_list_over_me_p50_ratio": round(
            results["templates_list"]["p50_ms"] / results["me"]["p50_ms"], 2
        ),
        "other_team_404_over_detail_p50_ratio": round(
            results["other_team_404"]["p50_ms"] / results["template_detail"]["p50_ms"], 2
        ),
        "queries_per_request": {k: v["queries"] for k, v in results.items()},
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
