"""Every CSV the platform writes is inert in a spreadsheet (OWASP's CSV injection): no cell
starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return unless it is a number;
such text comes out quoted (``'=1+1``). The JSON exports keep the same values unchanged.

The CSV routes are found, not listed: every URL pattern with ``csv`` in its route, every
operation of the API schema that answers ``text/csv`` and every admin action named for CSV.
Each must have a way to be requested in ``EXERCISES`` (a new CSV route fails the test until
it is added there), and each must show that the hostile text reached it (a quoted formula),
so a route the seeded team does not feed cannot pass unnoticed.

The team's user-controlled text (item and variant ids, contents, model and prompt names,
usernames, rationales, comments, error messages, batch names, verdicts, custom ids) starts
with each dangerous character in turn.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import URLResolver, get_resolver, resolve
from drf_spectacular.generators import SchemaGenerator

from evalplatform.accounts.roles import Role
from evalplatform.runs.models import BatchState, ProviderBatch
from evaluations.analytics import tables
from evaluations.models import (
    BatchStatus,
    FilePurpose,
    JudgeBatch,
    JudgeFile,
    JudgeVerdict,
    Judgment,
    RaterKind,
)
from generation.models import BATCH_WORK_KIND, GenerationJob, GenerationOutput
from scenarios import services as scenario_services
from tests.factories import (
    ConnectionFactory,
    LLMModelFactory,
    PromptTemplateFactory,
    make_version,
)

pytestmark = pytest.mark.django_db

DANGEROUS = ("=", "+", "-", "@", "\t", "\r")
# One hostile text per dangerous start; ``hostile(n)`` cycles through them.
HOSTILE = (
    '=HYPERLINK("http://evil.example","x")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
)


def hostile(n: int, tag: str = "") -> str:
    return HOSTILE[n % len(HOSTILE)] + tag


# --- finding the CSV routes ------------------------------------------------------------------


def _patterns(patterns: list[Any], route: str = "", namespace: str = "") -> Iterator[tuple]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = namespace + (f"{pattern.namespace}:" if pattern.namespace else "")
            yield from _patterns(pattern.url_patterns, route + str(pattern.pattern), inner)
        else:
            yield route + str(pattern.pattern), namespace + (pattern.name or "")


def csv_routes() -> set[str]:
    """The names of the URL patterns that make CSV, and the admin actions that do."""
    found = {name for route, name in _patterns(get_resolver().url_patterns) if "csv" in route}
    for schema_path, item in SchemaGenerator().get_schema(public=True)["paths"].items():
        for operation in item.values():
            content = {
                kind for answer in operation["responses"].values()
                for kind in answer.get("content", {})
            }  # fmt: skip
            if "text/csv" in content:
                sample = schema_path.replace("{fmt}", "csv").replace("{table}", "elo")
                for name in ("id", "batch_id", "other_id"):
                    sample = sample.replace("{" + name + "}", "1")
                found.add(resolve(sample).view_name)
    for model, model_admin in admin.site._registry.items():
        for action in model_admin.actions or []:
            name = action if isinstance(action, str) else action.__name__
            if "csv" in name:
                found.add(f"admin-action:{model._meta.label_lower}.{name}")
    return found


# --- the hostile team ------------------------------------------------------------------------


@pytest.fixture
def world(team_a, member, superuser):
    manager = member(team_a, Role.ADMIN, username="@mara")
    connection = ConnectionFactory(team=team_a, kind="mock", name=hostile(0, " connection"))
    model = LLMModelFactory(
        connection=connection, model_id="mock-small", display_name=hostile(1, " model")
    )
    template = PromptTemplateFactory(team=team_a, name=hostile(2, " prompt"))
    version = make_version(template, [("", "Say {{content}}")])

    # A generation job of four items, their outputs written as if the model had answered.
    items = [{"id": hostile(n, f" item{n}"), "content": hostile(n + 1)} for n in range(4)]
    body = {
        "team": team_a.slug,
        "name": hostile(3, " job"),
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "repetitions": 1,
        "temperatures": [0.0],
        "max_tokens": 100,
        "reply_format": {"kind": "json", "fields": ["score"]},
    }
    manager_api = _api(manager)
    made = manager_api.post("/api/generation/jobs", body, format="json")
    assert made.status_code == 201, made.json()
    job = GenerationJob.objects.get(pk=made.json()["id"])
    outputs = list(job.outputs.order_by("pk"))
    assert len(outputs) == 4
    for n, output in enumerate(outputs):
        failed = n == 3
        GenerationOutput.objects.filter(pk=output.pk).update(
            status="failed" if failed else "completed",
            content="" if failed else hostile(n + 2, " answer"),
            error_message=hostile(n, " error") if failed else "",
            parsed=None if failed else {"score": n - 1},
            parse_status="" if failed else "ok",
        )
    ProviderBatch.objects.create(
        team=team_a,
        connection=connection,
        work_kind=BATCH_WORK_KIND,
        work_id=job.pk,
        model_id=hostile(4, " model id"),
        name=hostile(5, " batch"),
        protocol="openai",
        remote_id=hostile(0, " remote"),
        state=BatchState.FAILED,
        provider_state=hostile(1, " state"),
        error_message=hostile(2, " batch error"),
    )

    # A comparison scenario of hostile items and variants, answered by hostile evaluators.
    rows = [
        {"item_id": hostile(i, f" q{i}"), "variant_id": hostile(i + v, f" v{v}"),
         "content": hostile(v, f" answer {i}{v}"), "model": hostile(v + 3, f" m{v}"),
         "prompt": hostile(v + 4, " p")}
        for i in range(2)
        for v in range(3)
    ]  # fmt: skip
    scenario = scenario_services.scenario_from_upload(
        user=manager,
        team=team_a,
        data={"name": hostile(1, " scenario"), "type": "comparison", "format": "jsonl"},
        raw="\n".join(json.dumps(r) for r in rows).encode(),
    )
    scenario = scenario_services.scenario_open(user=manager, scenario=scenario)
    raters = [member(team_a, Role.EVALUATOR, username=n) for n in ("@ann", "-bob", "+cy")]
    for n, task in enumerate(scenario.tasks.order_by("position")):
        for r, rater in enumerate(raters):
            Judgment.objects.create(
                scenario=scenario,
                task=task,
                rater_kind=RaterKind.HUMAN,
                evaluator=rater,
                presented=[task.variant_a_id, task.variant_b_id],
                payload={"winner": "AB"[(n + r) % 2]},
                rationale=hostile(n + r, " because"),
                comment=hostile(n + r + 1, " comment"),
            )

    # Two judge-file batches over the job's outputs, with the same hostile custom ids.
    file = JudgeFile.objects.create(
        team=team_a, public_id="file-hostile", purpose=FilePurpose.BATCH, filename="in.jsonl"
    )
    batches = []
    for b in range(2):
        batch = JudgeBatch.objects.create(
            team=team_a,
            public_id=f"batch_hostile{b}",
            input_file=file,
            status=BatchStatus.COMPLETED,
            metadata={"eval": hostile(b, " metadata")},
        )
        for line in range(2):
            JudgeVerdict.objects.create(
                batch=batch,
                output=outputs[2 * b + line],
                custom_id=hostile(line, " custom id"),
                line=line + 1,
                score=-1.5 if line else 3,
                verdict=hostile(line + b + 2, " verdict"),
                rationale=hostile(line + b, " rationale"),
                fields={"note": hostile(line, " note")},
                parsed=True,
                problem=hostile(line + 5, " problem"),
            )
        batches.append(batch)
    return {
        "manager": manager,
        "superuser": superuser,
        "job": job,
        "scenario": scenario,
        "batches": batches,
    }


def _api(user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    return client


def _body(response) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


# --- how each CSV route is requested ---------------------------------------------------------

Request = Callable[[dict[str, Any]], list[Any]]


def _generation_export(w):
    return [_api(w["manager"]).post(f"/api/generation/jobs/{w['job'].pk}/export/csv")]


def _consistency(w):
    base = f"/api/generation/jobs/{w['job'].pk}/consistency/csv"
    client = _api(w["manager"])
    return [client.get(base), client.get(f"{base}?table=agreement")]


def _batch_registry(w):
    return [_api(w["manager"]).get("/api/generation/batches.csv")]


def _scenario_export(w):
    return [_api(w["manager"]).post(f"/api/scenarios/{w['scenario'].pk}/export/csv")]


def _analytics_tables(w):
    client = _api(w["manager"])
    base = f"/api/scenarios/{w['scenario'].pk}/analytics"
    return [client.get(f"{base}/{table}.csv?resamples=0") for table in tables.TABLES]


def _verdicts(w):
    return [_api(w["manager"]).get(f"/api/judge-files/{w['batches'][0].public_id}/verdicts.csv")]


def _compare(w):
    a, b = w["batches"]
    return [_api(w["manager"]).get(f"/api/judge-files/{a.public_id}/compare/{b.public_id}.csv")]


def _admin_job_export(w):
    client = Client()
    client.force_login(w["superuser"])
    return [
        client.post(
            "/admin/generation/generationjob/",
            {"action": "export_csv", "_selected_action": [w["job"].pk]},
        )
    ]


EXERCISES: dict[str, Request] = {
    "generationjob-export-csv": _generation_export,
    "generationjob-consistency-csv": _consistency,
    "generation-batches-csv": _batch_registry,
    "manager-api:export": _scenario_export,
    "analytics-api:table": _analytics_tables,
    "judge-files-api:verdicts-csv": _verdicts,
    "judge-files-api:compare-csv": _compare,
    "admin-action:generation.generationjob.export_csv": _admin_job_export,
}


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_every_csv_route_is_exercised():
    """A CSV route added without a way to request it here fails this test."""
    assert csv_routes() == set(EXERCISES)


@pytest.mark.parametrize("route", sorted(EXERCISES))
def test_no_csv_cell_can_run_as_a_formula(world, route):
    quoted = set()
    for response in EXERCISES[route](world):
        assert response.status_code == 200, (route, response.status_code, _body(response)[:300])
        assert response["Content-Type"].startswith("text/csv"), route
        text = _body(response).decode("utf-8")
        for row in csv.reader(io.StringIO(text, newline="")):
            for cell in row:
                if cell[:1] in DANGEROUS:
                    assert _is_number(cell), (route, row)
                if cell[:1] == "'" and cell[1:2] in DANGEROUS:
                    quoted.add(cell[1])
    # The hostile text reached this route (and came out quoted): the test can fail here.
    assert quoted, route


def test_the_json_exports_keep_the_values_unchanged(world):
    client = _api(world["manager"])
    job = client.post(f"/api/generation/jobs/{world['job'].pk}/export/json")
    text = _body(job).decode()
    scenario = client.post(f"/api/scenarios/{world['scenario'].pk}/export/json")
    analytics = client.get(f"/api/scenarios/{world['scenario'].pk}/analytics?resamples=0")
    verdicts = client.get(f"/api/judge-files/{world['batches'][0].public_id}/verdicts")
    for response in (job, scenario, analytics, verdicts):
        assert response.status_code == 200
    exported = json.loads(text)
    assert {o["source_item_id"] for o in exported["outputs"]} == {
        hostile(n, f" item{n}") for n in range(4)
    }
    assert hostile(3, " error") in {o["error_message"] for o in exported["outputs"]}
    rationales = {
        j["rationale"]
        for j in _walk_dicts(json.loads(_body(scenario)))
        if isinstance(j.get("rationale"), str)
    }
    assert {hostile(n, " because") for n in range(4)} <= rationales
    variants = {row["variant_id"] for row in analytics.json()["bradley_terry"]}
    assert hostile(0, " v0") in variants
    assert {v["custom_id"] for v in verdicts.json()["verdicts"]} == {
        hostile(0, " custom id"),
        hostile(1, " custom id"),
    }


def _walk_dicts(value: Any) -> Iterator[dict]:
    if isinstance(value, dict):
        yield value
        for inner in value.values():
            yield from _walk_dicts(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _walk_dicts(inner)
