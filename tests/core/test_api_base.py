from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.test import Client

from evalplatform.accounts.roles import Role


@pytest.mark.django_db
def test_schema_is_valid_openapi_3_without_warnings(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command(
        "spectacular",
        "--validate",
        "--fail-on-warn",
        "--file",
        str(target),
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    text = target.read_text()
    assert text.startswith("openapi: 3")
    for path in (
        "/api/me:",
        "/api/prompts/templates:",
        "/api/providers/connections:",
        "/api/providers/models:",
        "/api/prompts/versions/{id}/render:",
    ):
        assert path in text


@pytest.mark.django_db
def test_schema_endpoint_needs_authentication(api, team_a, member):
    assert api().get("/api/schema/").status_code == 401
    response = api(member(team_a, Role.VIEWER)).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    assert response.json()["openapi"].startswith("3.")
    assert "tokenAuth" in response.json()["components"]["securitySchemes"]


@pytest.mark.django_db
def test_swagger_ui_is_served_offline(team_a, member):
    client = Client()
    client.force_login(member(team_a, Role.VIEWER))
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets, html
    for asset in assets:
        assert not asset.startswith(("http:", "https:", "//")), asset
        if asset.startswith("/static/"):
            response = client.get(asset)
            assert response.status_code == 200, asset
            body = b"".join(response.streaming_content) if response.streaming else response.content
            assert len(body) > 100, asset


@pytest.mark.django_db
def test_unauthenticated_api_is_401_and_pages_redirect_to_login(api):
    assert api().get("/api/prompts/templates").status_code == 401
    response = Client().get("/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.django_db
def test_malformed_json_is_a_400_with_detail(team_a, member):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(member(team_a, Role.CREATOR))
    response = client.post(
        "/api/prompts/templates", data="{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]


@pytest.mark.django_db
def test_home_page_lists_teams_and_escapes_names(team_a, member):
    team_a.name = "<script>alert(1)</script>"
    team_a.save()
    client = Client()
    client.force_login(member(team_a, Role.EVALUATOR, username="eve"))
    html = client.get("/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    assert "feature:evaluations:submit" in html
