"""Hardening: security headers on every response, the production settings pass
``check --deploy``, every upload path refuses a file over the limit with a field-level error
and writes nothing, and no request body over the outer limit is read, whether its length is
declared or streamed in chunks over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.test import Client, override_settings

from evalplatform.accounts.roles import Role
from generation.models import GenerationJob
from scenarios.models import Scenario
from tests.factories import ComparisonScenarioFactory

ROOT = Path(__file__).resolve().parents[2]
STRONG_KEY = "k3Y-" + "x9Q2vL7mN4pR8sT1wZ6cB3dF5gH0jK2" * 2


@pytest.mark.django_db
def test_pages_and_api_carry_the_security_headers(team_a, member, api):
    client = Client()
    client.force_login(member(team_a, Role.MANAGER))
    for response in (client.get("/"), client.get("/login/"), api(None).get("/api/me")):
        policy = response["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-eval" not in policy
        assert "script-src 'self' 'unsafe-inline'" not in policy
        assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"
        assert response["Cross-Origin-Opener-Policy"] == "same-origin"


def _manage(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ENCRYPTION_KEYS"}
    }
    clean |= {"EVAL_DATA_DIR": str(tmp_path)} | env
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_check_deploy(tmp_path):
    production = {
        "DEBUG": "0",
        "HTTPS": "1",
        "SECRET_KEY": STRONG_KEY,
        "ALLOWED_HOSTS": "evals.example.org",
    }
    result = _manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING", **production)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
    probe = _manage(
        tmp_path,
        "shell",
        "-c",
        "from django.conf import settings as s; import json; print(json.dumps(["
        "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SESSION_COOKIE_HTTPONLY,"
        " s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS]))",
        **production,
    )
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == [True, True, True, True, 31536000]
    # The check is not vacuous: the embedded default (plain HTTP on loopback) is flagged.
    embedded = _manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING")
    assert embedded.returncode != 0
    assert "SESSION_COOKIE_SECURE" in embedded.stderr + embedded.stdout


# --- upload limits ---------------------------------------------------------------------------

BIG = b'{"item_id": "q1", "variant_id": "v1", "content": "' + b"x" * 3000 + b'"}\n'


@pytest.fixture
def manager(team_a, member):
    return member(team_a, Role.MANAGER)


@pytest.fixture
def open_scenario(manager, team_a):
    rows = [{"item_id": "q1", "variant_id": f"v{i}", "content": f"answer {i}"} for i in range(2)]
    return ComparisonScenarioFactory(
        team=team_a, created_by=manager, name="S", config={}, rows=rows, open_it=True
    )


def _file(name: str = "rows.jsonl"):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, BIG, content_type="application/octet-stream")


@pytest.mark.django_db
@override_settings(UPLOAD_MAX_BYTES=1000)
def test_every_upload_path_refuses_an_oversized_file_and_writes_nothing(
    api, manager, team_a, open_scenario
):
    client = api(manager)
    jobs, scenarios = GenerationJob.objects.count(), Scenario.objects.count()
    judgments = open_scenario.judgments.count()
    limit = "the limit is 1,000"

    response = client.post(
        "/api/generation/jobs",
        {"config": json.dumps({"team": team_a.slug}), "file": _file()},
        format="multipart",
    )
    assert response.status_code == 400 and limit in str(response.json()["errors"]["source.file"])

    response = client.post(
        "/api/scenarios",
        {"config": json.dumps({"team": team_a.slug, "type": "comparison"}), "file": _file()},
        format="multipart",
    )
    assert response.status_code == 400 and limit in str(response.json()["errors"]["file"])

    response = client.post(
        f"/api/scenarios/{open_scenario.pk}/import", {"file": _file()}, format="multipart"
    )
    assert response.status_code == 400 and limit in str(response.json()["errors"]["file"])

    pages = Client()
    pages.force_login(manager)
    page = pages.post(
        "/scenarios/new",
        {"team": team_a.slug, "name": "Big", "type": "comparison", "file": _file()},
    )
    assert page.status_code == 400 and limit in page.content.decode()
    page = pages.post(
        "/generation/new",
        {"team": team_a.slug, "name": "Big", "source_type": "manual", "file": _file()},
    )
    assert page.status_code == 400 and limit in page.content.decode()

    assert GenerationJob.objects.count() == jobs and Scenario.objects.count() == scenarios
    assert open_scenario.judgments.count() == judgments


@pytest.mark.django_db
@override_settings(REQUEST_MAX_BYTES=2000)
def test_a_declared_body_over_the_outer_limit_is_refused_before_the_view(api, manager):
    response = api(manager).post(
        "/api/scenarios", {"name": "x" * 3000}, format="json"
    )  # WSGI path: the middleware
    assert response.status_code == 413
    assert "the limit is 2,000" in response.json()["detail"]


@override_settings(REQUEST_MAX_BYTES=2000)
def test_the_asgi_server_refuses_declared_and_streamed_bodies_over_the_limit(
    platform_server, team_a, member
):
    from evalplatform.accounts.services import token_create

    user = member(team_a, Role.MANAGER)
    key = token_create(user=user, name="limits")[1]
    headers = {"Authorization": f"Token {key}", "Content-Type": "application/json"}
    url = f"http://{platform_server}/api/scenarios"
    with httpx.Client(timeout=10) as http:
        declared = http.post(url, content=b"{" + b" " * 5000 + b"}", headers=headers)
        assert declared.status_code == 413 and "5,002 bytes" in declared.json()["detail"]
        # A body far past the socket buffers: the client still gets to read the answer.
        large = http.post(url, content=b" " * 8_000_000, headers=headers)
        assert large.status_code == 413 and "8,000,000 bytes" in large.json()["detail"]

        def chunks():  # no Content-Length: the server counts what arrives
            for _ in range(10):
                yield b" " * 1000

        streamed = http.post(url, content=chunks(), headers=headers)
        assert streamed.status_code == 413 and "over the limit" in streamed.json()["detail"]

        # Under the limit the request reaches the view (and fails its validation there).
        small = http.post(url, content=b"{}", headers=headers)
        assert small.status_code == 400 and "content" in small.json()["errors"]
    assert not Scenario.objects.exists()


@override_settings(REQUEST_MAX_BYTES=2000, UPLOAD_MAX_BYTES=10_000_000)
def test_only_upload_routes_take_a_large_multipart_body():
    from evalplatform.limits import limit_for

    multipart = "multipart/form-data; boundary=x"
    for path in (
        "/api/generation/jobs",
        "/api/generation/estimate",
        "/generation/new",
        "/generation/new/estimate",
        "/api/scenarios",
        "/api/scenarios/preview",
        "/api/scenarios/12/import",
        "/scenarios/new",
    ):
        assert limit_for(path, multipart) > 10_000_000, path
        assert limit_for(path, "application/json") == 2000, path
    for path in ("/login/", "/api/tokens", "/evaluate/tasks/3", "/api/scenarios/12", "/admin/"):
        assert limit_for(path, multipart) == 2000, path


@pytest.mark.django_db
@pytest.mark.parametrize("odd", ["²", "٣", "9" * 5000, "-1", "1e3"])
def test_digits_that_int_cannot_read_are_field_errors(api, manager, odd):
    from django.test import Client

    listed = api(manager).get("/api/evaluations/judgments", {"scenario": odd})
    assert listed.status_code == 400 and "scenario" in listed.json()["errors"]
    page = Client()
    page.force_login(manager)
    dismissed = page.post("/notifications/dismiss", {"id": odd})
    assert dismissed.status_code == 302
