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


@pytest.mark.django_db
def test_a_token_makes_tokens_only_if_it_was_made_to(api, team_a, member):
    user = member(team_a, Role.VIEWER)
    plain = api(user).post("/api/tokens", {"name": "script"}, format="json").json()
    assert plain["can_mint_tokens"] is False
    refused = token_client(plain["key"]).post("/api/tokens", {"name": "child"}, format="json")
    assert refused.status_code == 403 and "may not make tokens" in refused.json()["detail"]
    minting = (
        api(user).post("/api/tokens", {"name": "ci", "can_mint_tokens": True}, format="json").json()
    )
    child = token_client(minting["key"]).post("/api/tokens", {"name": "child"}, format="json")
    assert child.status_code == 201 and child.json()["can_mint_tokens"] is False
    assert ApiToken.objects.filter(user=user).count() == 3


@pytest.mark.django_db
def test_a_new_password_revokes_the_tokens_and_ends_the_other_sessions(api, team_a, member):
    from django.test import Client

    evaluator = member(team_a, Role.EVALUATOR)
    evaluator.set_password("old-Passw0rd-xyz")
    evaluator.save()
    key = api(evaluator).post("/api/tokens", {"name": "laptop"}, format="json").json()["key"]
    assert token_client(key).get("/api/me").status_code == 200
    here, elsewhere = Client(), Client()
    for client in (here, elsewhere):
        client.post("/login/", {"username": evaluator.username, "password": "old-Passw0rd-xyz"})
        assert client.get("/api/me").status_code == 200
    # A sign-in's own write (last_login) is no password change.
    assert token_client(key).get("/api/me").status_code == 200
    page = here.get("/account/password/")
    assert page.status_code == 200 and "Change your password" in page.content.decode()
    changed = here.post(
        "/account/password/",
        {
            "old_password": "old-Passw0rd-xyz",
            "new_password1": "new-Passw0rd-xyz",
            "new_password2": "new-Passw0rd-xyz",
        },
    )
    assert changed.status_code == 302 and changed["Location"] == "/account/password/done/"
    assert token_client(key).get("/api/me").status_code == 401
    assert ApiToken.objects.get(user=evaluator).revoked_at is not None
    assert here.get("/api/me").status_code == 200  # the page that changed it stays signed in
    assert elsewhere.get("/api/me").status_code in (401, 403)


@pytest.mark.django_db
def test_one_person_holds_at_most_a_hundred_live_tokens_and_old_revoked_ones_go(
    api, team_a, member
):
    from datetime import timedelta

    from django.utils import timezone

    from evalplatform.accounts.services import REVOKED_TOKENS_KEPT, TOKENS_PER_USER

    user = member(team_a, Role.VIEWER)
    client = api(user)
    for n in range(TOKENS_PER_USER):
        assert client.post("/api/tokens", {"name": f"t{n}"}, format="json").status_code == 201
    refused = client.post("/api/tokens", {"name": "one more"}, format="json")
    assert refused.status_code == 409 and "revoke one" in refused.json()["detail"]
    first = ApiToken.objects.filter(user=user).order_by("pk").first()
    assert client.delete(f"/api/tokens/{first.pk}").status_code == 204
    assert client.post("/api/tokens", {"name": "in its place"}, format="json").status_code == 201
    # A token revoked long ago is pruned at the next creation; a recent one is kept.
    ApiToken.objects.filter(pk=first.pk).update(
        revoked_at=timezone.now() - REVOKED_TOKENS_KEPT - timedelta(days=1)
    )
    second = ApiToken.objects.filter(user=user, revoked_at__isnull=True).order_by("pk").first()
    client.delete(f"/api/tokens/{second.pk}")
    assert client.post("/api/tokens", {"name": "again"}, format="json").status_code == 201
    assert not ApiToken.objects.filter(pk=first.pk).exists()
    assert ApiToken.objects.filter(pk=second.pk).exists()
