"""Test connection: one tiny request through a stored connection, over real loopback HTTP."""

from __future__ import annotations

import pytest
from django.test import Client

from evalplatform.accounts.roles import Role
from tests.factories import ConnectionFactory, LLMModelFactory

KEY = "sk-live-abcdef0123456789"


@pytest.fixture
def manager(team_a, member):
    return member(team_a, Role.MANAGER)


def _connection(team, url, *, kind="openai", key=KEY, **fields):
    connection = ConnectionFactory(team=team, kind=kind, base_url=url, timeout_s=5, **fields)
    connection.set_api_key(key)
    connection.save()
    return connection


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
def test_a_working_connection_reports_latency(api, team_a, manager, fake_provider, kind):
    connection = _connection(team_a, fake_provider.url, kind=kind)
    LLMModelFactory(connection=connection, model_id="m-test")
    response = api(manager).post(
        f"/api/providers/connections/{connection.pk}/test", {}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True and body["model"] == "m-test" and body["latency_ms"] > 0
    assert body["reply"] and body["output_tokens"] > 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("model", "kind", "hint"),
    [
        ("m-[[fault:401]]", "auth", "refused the API key"),
        ("m-[[fault:404]]", "not_found", "check the model id"),
        ("m-[[fault:quota]]", "quota", "billing"),
    ],
)
def test_failures_say_what_to_fix(api, team_a, manager, fake_provider, model, kind, hint):
    connection = _connection(team_a, fake_provider.url)
    response = api(manager).post(
        f"/api/providers/connections/{connection.pk}/test", {"model": model}, format="json"
    )
    body = response.json()
    assert response.status_code == 200 and body["ok"] is False, body
    assert body["error_kind"] == kind and hint in body["hint"]
    assert KEY not in response.content.decode()
    if kind == "auth":  # the fake quotes the refused key, as providers do; it is redacted
        assert "[redacted]" in body["message"]


@pytest.mark.django_db(transaction=True)
def test_unreachable_server_and_missing_model(api, team_a, manager):
    from evalplatform.providers.fake.server import free_port

    connection = _connection(team_a, f"http://127.0.0.1:{free_port()}")
    path = f"/api/providers/connections/{connection.pk}/test"
    no_model = api(manager).post(path, {}, format="json")
    assert no_model.status_code == 400 and "model" in no_model.json()["errors"]
    body = api(manager).post(path, {"model": "gpt-4o"}, format="json").json()
    assert body["ok"] is False and body["error_kind"] == "connection"
    assert "check the base URL" in body["hint"]


@pytest.mark.django_db(transaction=True)
def test_mock_connection_and_permissions(api, team_a, team_b, member, manager):
    mock = ConnectionFactory(team=team_a, kind="mock")
    LLMModelFactory(connection=mock, model_id="mock-small")
    assert (
        api(manager)
        .post(f"/api/providers/connections/{mock.pk}/test", {}, format="json")
        .json()["ok"]
    )
    creator = member(team_a, Role.CREATOR)
    assert api(creator).post(f"/api/providers/connections/{mock.pk}/test").status_code == 403
    theirs = ConnectionFactory(team=team_b, kind="mock")
    assert api(manager).post(f"/api/providers/connections/{theirs.pk}/test").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_admin_action_reports_each_connection(team_a, manager, fake_provider):
    good = _connection(team_a, fake_provider.url, name="good")
    LLMModelFactory(connection=good, model_id="m-ok")
    bad = _connection(team_a, fake_provider.url, name="bad")
    LLMModelFactory(connection=bad, model_id="m-[[fault:401]]")
    client = Client()
    client.force_login(manager)
    page = client.post(
        "/admin/providers/providerconnection/",
        {"action": "test_connection", "_selected_action": [good.pk, bad.pk]},
        follow=True,
    )
    messages = [str(m) for m in page.context["messages"]]
    assert any(m.startswith("good: m-ok answered in") for m in messages), messages
    assert any(m.startswith("bad:") and "refused the API key" in m for m in messages), messages
    assert all(KEY not in m for m in messages)
