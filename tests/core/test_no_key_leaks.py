"""A provider API key goes in once and never comes out: a job runs against a provider that
quotes the refused key back (as real providers do), the connection is tested, outputs are
exported and pages read, and then every log record (all loggers at DEBUG), every response
body, every export and a dump of the whole database are searched for the key. It is found
nowhere; the cell the provider refused says "[redacted]" where the key was."""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.core.management import call_command
from django.test import Client

from evalplatform.accounts.roles import Role
from generation.models import GenerationJob, GenerationOutput
from tests.factories import PromptTemplateFactory, make_version
from tests.helpers.generation import run

KEY = "sk-canary-7f3a9c2e-do-not-leak-5d1b"


@pytest.mark.django_db(transaction=True)
def test_the_api_key_appears_in_no_log_response_export_or_table(
    api, team_a, member, fake_provider, caplog
):
    for logger in ("", "httpx", "httpcore", "django", "django_q"):
        caplog.set_level(logging.DEBUG, logger=logger)
    manager = member(team_a, Role.ADMIN)
    client = api(manager)
    seen: list[tuple[str, str]] = []

    def keep(what: str, response) -> dict | list | None:
        assert response.status_code < 400, (what, response.status_code, response.content[:500])
        body = b"".join(response.streaming_content) if response.streaming else response.content
        seen.append((what, body.decode()))
        return json.loads(body) if response["Content-Type"].startswith("application/json") else None

    connection = keep(
        "create connection",
        client.post(
            "/api/providers/connections",
            {
                "team": team_a.slug,
                "name": "fake",
                "kind": "openai",
                "base_url": fake_provider.url,
                "api_key": KEY,
            },
            format="json",
        ),
    )
    assert connection["has_api_key"] is True
    model = keep(
        "create model",
        client.post(
            "/api/providers/models",
            {"connection": connection["id"], "model_id": "gpt-fake", "display_name": "Fake"},
            format="json",
        ),
    )
    version = make_version(PromptTemplateFactory(team=team_a), [("", "Say: {{content}}")])
    items = [
        {"id": "ok", "content": "fine"},
        {"id": "flaky", "content": "x [[fault:500*1]]"},
        {"id": "refused", "content": "x [[fault:401]]"},
    ]
    job = keep(
        "create job",
        client.post(
            "/api/generation/jobs",
            {
                "team": team_a.slug,
                "name": "Leaks",
                "prompt_versions": [version.pk],
                "models": [model["id"]],
                "temperatures": [0.0],
                "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
            },
            format="json",
        ),
    )
    keep("start", client.post(f"/api/generation/jobs/{job['id']}/start"))
    run(job["id"])
    # The refused key fails the job (a systematic failure); the refused cell keeps its
    # error and waits, pending, for a resume with a mended key.
    assert GenerationJob.objects.get(pk=job["id"]).status == "failed"
    refused = GenerationOutput.objects.get(job_id=job["id"], item__item_id="refused")
    assert refused.status == "pending" and refused.error_kind == "auth"
    assert "[redacted]" in refused.error_message  # the provider did quote the key

    tested = keep(
        "connection test",
        client.post(
            f"/api/providers/connections/{connection['id']}/test",
            {"model": "m-[[fault:401]]"},
            format="json",
        ),
    )
    assert tested["ok"] is False and tested["error_kind"] == "auth"
    base = f"/api/generation/jobs/{job['id']}"
    for what, response in (
        ("connection", client.get(f"/api/providers/connections/{connection['id']}")),
        ("connections", client.get("/api/providers/connections")),
        ("job", client.get(base)),
        ("outputs", client.get(f"{base}/outputs")),
        ("export csv", client.post(f"{base}/export/csv")),
        ("export json", client.post(f"{base}/export/json")),
        ("audit", client.get("/api/audit")),
    ):
        keep(what, response)
    pages = Client()
    pages.force_login(manager)
    for path in (
        f"/generation/jobs/{job['id']}",
        f"/generation/jobs/{job['id']}/outputs",
        "/admin/providers/providerconnection/",
        f"/admin/providers/providerconnection/{connection['id']}/change/",
    ):
        keep(path, pages.get(path))

    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    seen.append(("database", dump.getvalue()))
    seen.append(("logs", caplog.text))
    # The logs were captured at DEBUG, the provider calls' included.
    assert any(r.name.startswith("httpcore") and r.levelno == logging.DEBUG for r in caplog.records)
    leaks = [what for what, text in seen if KEY in text or "canary-7f3a9c2e" in text]
    assert leaks == []
