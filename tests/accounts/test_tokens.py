from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from evalplatform.accounts.models import ApiToken
from evalplatform.accounts.roles import Role


def token_client(key: str, keyword: str = "Token") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{keyword} {key}")
    return client


@pytest.mark.django_db
def test_create_token_command_prints_a_working_key_stored_hashed(team_a, member):
    member(team_a, Role.VIEWER, username="dana")
    out = io.StringIO()
    call_command("create_token", "dana", "--name", "ci", stdout=out, stderr=io.StringIO())
    key = out.getvalue().strip()
    token = ApiToken.objects.get(user__username="dana")
    assert token.name == "ci" and key.startswith(token.prefix)
    assert key not in token.key_hash and len(token.key_hash) == 64
    for keyword in ("Token", "Bearer"):
        response = token_client(key, keyword).get("/api/me")
        assert response.status_code == 200 and response.json()["username"] == "dana"
    token.refresh_from_db()
    assert token.last_used_at is not None


@pytest.mark.django_db
def test_create_token_for_unknown_user_fails_cleanly():
    with pytest.raises(CommandError, match="No user named 'ghost'"):
        call_command("create_token", "ghost", stdout=io.StringIO(), stderr=io.StringIO())
    assert ApiToken.objects.count() == 0


@pytest.mark.django_db
def test_bad_revoked_and_inactive_tokens_are_401(api, team_a, member):
    user = member(team_a, Role.VIEWER)
    created = api(user).post("/api/tokens", {"name": "laptop"}, format="json")
    assert created.status_code == 201
    key = created.json()["key"]
    assert token_client(key).get("/api/me").status_code == 200
    assert token_client(key + "x").get("/api/me").status_code == 401
    assert token_client("a b").get("/api/me").status_code == 401

    listed = api(user).get("/api/tokens").json()["results"]
    assert [t["name"] for t in listed] == ["laptop"] and "key" not in listed[0]
    assert api(user).delete(f"/api/tokens/{listed[0]['id']}").status_code == 204
    assert token_client(key).get("/api/me").status_code == 401

    second = api(user).post("/api/tokens", {"name": "again"}, format="json").json()["key"]
    user.is_active = False
    user.save()
    assert token_client(second).get("/api/me").status_code == 401


@pytest.mark.django_db
def test_tokens_are_private_to_their_owner(api, team_a, member):
    alice, bob = member(team_a, Role.ADMIN), member(team_a, Role.VIEWER)
    api(alice).post("/api/tokens", {"name": "alice"}, format="json")
    token = ApiToken.objects.get(user=alice)
    assert api(bob).get("/api/tokens").json()["results"] == []
    assert api(bob).delete(f"/api/tokens/{token.pk}").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
    assert api(alice).post("/api/tokens", {}, format="json").json()["errors"]["name"]


@pytest.mark.django_db
def test_a_token_is_read_with_its_user_in_one_query_and_stamped_once_a_minute(team_a, member):
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from evalplatform.accounts.services import token_create

    token, key = token_create(user=member(team_a, Role.VIEWER), name="ci")
    client = token_client(key)

    def token_queries() -> list[str]:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/api/me").status_code == 200
        return [q["sql"] for q in ctx.captured_queries if "accounts_apitoken" in q["sql"]]

    first = token_queries()  # never used: the read (joined with the user) and the stamp
    assert len(first) == 2 and "auth_user" in first[0] and first[1].startswith("UPDATE")
    assert len(token_queries()) == 1  # used a moment ago: the read alone
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now() - timedelta(minutes=2))
    assert len(token_queries()) == 2
    token.refresh_from_db()
    assert token.last_used_at is not None
    assert timezone.now() - token.last_used_at < timedelta(minutes=1)


@pytest.mark.django_db
def test_a_tokens_grants_come_with_its_lookup_per_team_and_fresh_each_request(
    team_a, team_b, member
):
    from evalplatform.accounts.models import Membership
    from evalplatform.accounts.roles import ROLE_FEATURES
    from evalplatform.accounts.services import token_create

    user = member(team_a, Role.EVALUATOR)
    Membership.objects.create(user=user, team=team_b, role=Role.MANAGER)
    client = token_client(token_create(user=user, name="two teams")[1])

    def features():
        response = client.get("/api/me")
        assert response.status_code == 200, response.content
        return {team["slug"]: set(team["features"]) for team in response.json()["teams"]}

    assert features() == {
        team_a.slug: set(ROLE_FEATURES[Role.EVALUATOR]),
        team_b.slug: set(ROLE_FEATURES[Role.MANAGER]),
    }
    Membership.objects.filter(user=user, team=team_b).update(role=Role.VIEWER)
    assert features()[team_b.slug] == set(ROLE_FEATURES[Role.VIEWER])
    Membership.objects.filter(user=user).delete()
    assert features() == {}
