from __future__ import annotations

import logging

import pytest
from django.db import connection as db_connection

from evalplatform.accounts.roles import Role
from evalplatform.providers.models import LLMModel, ProviderConnection
from tests.factories import ConnectionFactory, LLMModelFactory

SECRET = "sk-test-VERY-secret-4f9a2c7e11"


def _raw_key_column(pk: int) -> str:
    with db_connection.cursor() as cursor:
        cursor.execute(
            "SELECT api_key_encrypted FROM providers_providerconnection WHERE id = %s", [pk]
        )
        return cursor.fetchone()[0]


@pytest.fixture
def manager_a(team_a, member):
    return member(team_a, Role.MANAGER, username="mgr-a")


def _create(api, user, **extra):
    body = {"team": "team-a", "name": "OpenAI prod", "kind": "openai", "api_key": SECRET} | extra
    return api(user).post("/api/providers/connections", body, format="json")


@pytest.fixture
def sql_log(caplog):
    """Log every SQL statement with its parameters, as DEBUG=1 would."""
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="django")
    db_connection.force_debug_cursor = True
    yield caplog
    db_connection.force_debug_cursor = False


@pytest.mark.django_db
def test_api_key_is_write_only_encrypted_and_never_logged(api, manager_a, sql_log):
    response = _create(api, manager_a)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert "api_key" not in body and body["has_api_key"] is True
    pk = body["id"]

    client = api(manager_a)
    responses = [
        client.get("/api/providers/connections"),
        client.get(f"/api/providers/connections/{pk}"),
        client.patch(f"/api/providers/connections/{pk}", {"name": "renamed"}, format="json"),
        client.get("/api/schema/"),
    ]
    for r in [response, *responses]:
        assert r.status_code == 200 or r.status_code == 201
        assert SECRET not in r.content.decode()

    raw = _raw_key_column(pk)
    assert raw and SECRET not in raw and "VERY-secret" not in raw
    stored = ProviderConnection.objects.get(pk=pk)
    assert stored.get_api_key() == SECRET
    assert SECRET not in repr(stored) and SECRET not in str(stored)
    # The log did record the writes (with the encrypted value), never the key itself.
    assert "INSERT INTO" in sql_log.text and raw in sql_log.text
    assert SECRET not in sql_log.text


@pytest.mark.django_db
def test_key_kept_when_omitted_cleared_when_empty(api, manager_a):
    pk = _create(api, manager_a).json()["id"]
    client = api(manager_a)
    client.patch(f"/api/providers/connections/{pk}", {"timeout_s": 30}, format="json")
    assert ProviderConnection.objects.get(pk=pk).get_api_key() == SECRET
    r = client.patch(f"/api/providers/connections/{pk}", {"api_key": ""}, format="json")
    assert r.json()["has_api_key"] is False
    assert _raw_key_column(pk) == ""


@pytest.mark.django_db
def test_invalid_input_is_400_with_field_messages_and_changes_nothing(api, manager_a):
    r = _create(api, manager_a, kind="carrier-pigeon", base_url="not a url", max_concurrency=0)
    assert r.status_code == 400
    errors = r.json()["errors"]
    assert {"kind", "base_url", "max_concurrency"} <= set(errors)
    assert all(isinstance(v, list) and v for v in errors.values())
    assert ProviderConnection.objects.count() == 0

    assert _create(api, manager_a).status_code == 201
    duplicate = _create(api, manager_a)
    assert duplicate.status_code == 400
    assert "already exists" in duplicate.json()["errors"]["name"][0]
    assert ProviderConnection.objects.count() == 1


@pytest.mark.django_db
def test_changing_the_address_needs_the_key_again(api, manager_a):
    pk = _create(api, manager_a).json()["id"]
    client = api(manager_a)
    path = f"/api/providers/connections/{pk}"
    moved = client.patch(path, {"base_url": "https://collector.example"}, format="json")
    assert moved.status_code == 400 and "api_key" in moved.json()["errors"]
    stored = ProviderConnection.objects.get(pk=pk)
    assert stored.base_url == "" and stored.get_api_key() == SECRET
    # Spelling out the default address is no move; giving the key again is allowed.
    assert (
        client.patch(path, {"base_url": "https://api.openai.com/"}, format="json").status_code
        == 200
    )
    rekeyed = client.patch(
        path, {"base_url": "http://127.0.0.1:11434", "api_key": "ollama"}, format="json"
    )
    assert rekeyed.status_code == 200
    assert ProviderConnection.objects.get(pk=pk).get_api_key() == "ollama"


@pytest.mark.django_db
def test_filters_do_not_tell_other_teams_ids_from_missing_ones(api, team_a, team_b, manager_a):
    theirs = LLMModelFactory(connection=ConnectionFactory(team=team_b))
    client = api(manager_a)
    other = client.get("/api/providers/models", {"connection": theirs.connection_id})
    missing = client.get("/api/providers/models", {"connection": 987654})
    assert other.status_code == missing.status_code == 200
    assert other.json() == missing.json() and other.json()["count"] == 0


@pytest.mark.django_db
def test_connections_need_providers_manage(api, team_a, member):
    conn = ConnectionFactory(team=team_a)
    creator = member(team_a, Role.CREATOR)
    assert api(creator).get("/api/providers/connections").status_code == 403
    assert api(creator).get(f"/api/providers/connections/{conn.pk}").status_code == 403
    assert _create(api, creator).status_code == 403
    assert ProviderConnection.objects.count() == 1


@pytest.mark.django_db
def test_other_teams_connection_is_404(api, team_a, team_b, member, manager_a):
    theirs = ConnectionFactory(team=team_b)
    client = api(manager_a)
    assert client.get(f"/api/providers/connections/{theirs.pk}").status_code == 404
    assert client.get("/api/providers/connections/999999").status_code == 404
    assert (
        client.patch(
            f"/api/providers/connections/{theirs.pk}", {"name": "x"}, format="json"
        ).status_code
        == 404
    )
    assert client.delete(f"/api/providers/connections/{theirs.pk}").status_code == 404
    assert [c["id"] for c in client.get("/api/providers/connections").json()["results"]] == []
    # Naming another team's slug on create is the same error as an unknown slug.
    r = _create(api, manager_a, team="team-b")
    assert r.status_code == 400 and "team" in r.json()["errors"]
    assert (
        _create(api, manager_a, team="no-such-team").json()["errors"]["team"]
        == r.json()["errors"]["team"]
    )
    ProviderConnection.objects.get(pk=theirs.pk)  # untouched


@pytest.mark.django_db
def test_models_view_and_manage(api, team_a, team_b, member, manager_a):
    conn = ConnectionFactory(team=team_a)
    mine = LLMModelFactory(connection=conn)
    theirs = LLMModelFactory(connection=ConnectionFactory(team=team_b))
    viewer = member(team_a, Role.VIEWER)

    listed = api(viewer).get("/api/providers/models").json()["results"]
    assert [m["id"] for m in listed] == [mine.pk]
    assert api(viewer).get(f"/api/providers/models/{theirs.pk}").status_code == 404
    # Visible but not changeable: 403 for a viewer of the same team.
    assert (
        api(viewer)
        .patch(f"/api/providers/models/{mine.pk}", {"active": False}, format="json")
        .status_code
        == 403
    )

    created = api(manager_a).post(
        "/api/providers/models",
        {
            "connection": conn.pk,
            "model_id": "gpt-x",
            "input_price_per_mtok": "1.5",
            "output_price_per_mtok": "6",
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json()["display_name"] == "gpt-x"
    other_conn = api(manager_a).post(
        "/api/providers/models",
        {"connection": theirs.connection_id, "model_id": "sneaky"},
        format="json",
    )
    assert other_conn.status_code == 400 and "connection" in other_conn.json()["errors"]
    bad = api(manager_a).post(
        "/api/providers/models",
        {
            "connection": conn.pk,
            "model_id": "neg",
            "input_price_per_mtok": "-1",
            "batch_discount": "1.5",
        },
        format="json",
    )
    assert bad.status_code == 400
    assert {"input_price_per_mtok", "batch_discount"} <= set(bad.json()["errors"])
    assert LLMModel.objects.filter(connection=conn).count() == 2


@pytest.mark.django_db
def test_model_cost_uses_prices_and_batch_discount(team_a):
    model = LLMModelFactory(
        connection=ConnectionFactory(team=team_a),
        input_price_per_mtok="2.50",
        output_price_per_mtok="10.00",
    )
    model.refresh_from_db()
    assert float(model.cost_usd(1_000_000, 100_000)) == pytest.approx(3.5)
    assert float(model.cost_usd(1_000_000, 100_000, batch=True)) == pytest.approx(1.75)


@pytest.mark.django_db
def test_model_list_query_count_is_constant(api, team_a, member):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    viewer = member(team_a, Role.VIEWER)
    conn = ConnectionFactory(team=team_a)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            fresh = type(viewer).objects.get(pk=viewer.pk)  # as each request loads its user
            assert api(fresh).get("/api/providers/models").status_code == 200
        return len(ctx.captured_queries)

    LLMModelFactory.create_batch(2, connection=conn)
    few = count()
    LLMModelFactory.create_batch(20, connection=ConnectionFactory(team=team_a))
    assert count() == few


@pytest.mark.django_db
def test_mock_options_are_bounded_and_named_on_create_and_update(api, manager_a):
    url = "/api/providers/connections"
    client = api(manager_a)
    bad = {
        "latency_s": 1e9,
        "failure_rate": 1.5,
        "seed": -3,
        "position_bias": "lots",
        "noise": True,
        "fenced_json_rate": -0.1,
        "latency": 1,
    }
    for name, value in bad.items():
        r = _create(
            api, manager_a, name=f"Mock {name}", kind="mock", api_key="", options={name: value}
        )
        assert r.status_code == 400, name
        (message,) = r.json()["errors"]["options"]
        assert message.startswith(f"{name}: "), message
    # JSON's 1e999 reads as infinity: refused by the API's parser, naming the option's path.
    raw = '{"team": "team-a", "name": "Inf", "kind": "mock", "options": {"latency_s": 1e999}}'
    r = client.post(url, raw, content_type="application/json")
    assert r.status_code == 400 and "options.latency_s" in r.json()["errors"]
    assert ProviderConnection.objects.count() == 0
    every = _create(api, manager_a, name="Mock all", kind="mock", api_key="", options=bad)
    assert every.status_code == 400
    assert len(every.json()["errors"]["options"]) == len(bad)

    good = {
        "latency_s": 0.5,
        "failure_rate": 0.1,
        "seed": 7,
        "position_bias": 0.2,
        "noise": 2,
        "fenced_json_rate": 0,
    }
    created = _create(api, manager_a, name="Mock", kind="mock", api_key="", options=good)
    assert created.status_code == 201, created.json()
    pk = created.json()["id"]
    r = client.patch(f"{url}/{pk}", {"options": {"latency_s": 1e9}}, format="json")
    assert r.status_code == 400 and r.json()["errors"]["options"][0].startswith("latency_s: ")
    assert ProviderConnection.objects.get(pk=pk).options == good  # nothing changed
    assert (
        client.patch(f"{url}/{pk}", {"options": {"latency_s": 60}}, format="json").status_code
        == 200
    )
    # Other kinds' options are bounded in size.
    huge = _create(api, manager_a, name="Huge", options={"x": "y" * 20_000})
    assert huge.status_code == 400 and "options" in huge.json()["errors"]


def test_the_fake_provider_command_refuses_unbounded_flags():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError) as err:
        call_command(
            "fake_provider", "--latency", "1e9", "--fault-rate", "2", "--faults", "429,lightning"
        )
    message = str(err.value)
    assert "--latency:" in message and "--fault-rate:" in message and "--faults:" in message
