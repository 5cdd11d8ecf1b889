"""The admin console through the one policy: team managers see and change their team only."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from evalplatform.accounts.roles import Role
from evalplatform.prompts import services as prompt_services
from evalplatform.prompts.models import PromptVersion
from evalplatform.providers.models import ProviderConnection
from tests.factories import ConnectionFactory, LLMModelFactory, PromptTemplateFactory, make_version

SECRET = "sk-admin-SECRET-98f1e0c2aa"


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def manager_a(team_a, member):
    return member(team_a, Role.MANAGER, username="mgr-a")


@pytest.fixture
def objects(team_a, team_b):
    out = {}
    for key, team in (("a", team_a), ("b", team_b)):
        conn = ConnectionFactory(team=team, name=f"conn-{key}")
        template = PromptTemplateFactory(team=team, name=f"prompt-{key}")
        out[key] = {
            "providerconnection": conn,
            "llmmodel": LLMModelFactory(connection=conn, model_id=f"model-{key}"),
            "prompttemplate": template,
            "promptversion": make_version(template, [("", "{{content}}")]),
        }
    return out


def _change_url(obj) -> str:
    meta = obj._meta
    return f"/admin/{meta.app_label}/{meta.model_name}/{obj.pk}/change/"


@pytest.mark.django_db
def test_manager_sees_own_team_and_gets_404_for_the_other(manager_a, objects):
    client = login(manager_a)
    assert client.get("/admin/").status_code == 200
    for name, obj in objects["a"].items():
        assert client.get(_change_url(obj)).status_code == 200, name
        listing = client.get(f"/admin/{obj._meta.app_label}/{name}/")
        assert listing.status_code == 200
        other = objects["b"][name]
        assert client.get(_change_url(other)).status_code == 404, name
        assert client.post(_change_url(other), {}).status_code == 404, name
        delete = _change_url(other).replace("/change/", "/delete/")
        assert client.post(delete, {"post": "yes"}).status_code == 404, name
        assert type(other).objects.filter(pk=other.pk).exists()
    listing = client.get("/admin/providers/providerconnection/").content.decode()
    assert "conn-a" in listing and "conn-b" not in listing


@pytest.mark.django_db
def test_console_access_follows_the_policy(team_a, member, superuser, objects):
    for role in (Role.CREATOR, Role.EVALUATOR, Role.VIEWER):
        response = login(member(team_a, role)).get("/admin/")
        assert response.status_code == 302 and "/admin/login/" in response["Location"], role
    root = login(superuser)
    assert root.get(_change_url(objects["b"]["providerconnection"])).status_code == 200
    assert root.get("/admin/auth/user/").status_code == 200


@pytest.mark.django_db
def test_manager_cannot_reach_users_or_other_teams(manager_a, team_b):
    client = login(manager_a)
    assert client.get("/admin/auth/user/").status_code == 403
    assert client.get(f"/admin/accounts/team/{team_b.pk}/change/").status_code == 404


@pytest.mark.django_db
def test_api_key_saved_in_admin_is_never_shown_again(manager_a, team_a, caplog):
    caplog.set_level(logging.DEBUG)
    client = login(manager_a)
    form = {
        "team": team_a.pk,
        "name": "Anthropic",
        "kind": "anthropic",
        "base_url": "",
        "active": "on",
        "api_key": SECRET,
        "max_tokens_param": "max_completion_tokens",
        "max_concurrency": 4,
        "requests_per_minute": "",
        "timeout_s": 60,
    }
    response = client.post("/admin/providers/providerconnection/add/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    connection = ProviderConnection.objects.get(name="Anthropic")
    assert connection.get_api_key() == SECRET
    assert SECRET not in connection.api_key_encrypted

    for url in (
        _change_url(connection),
        "/admin/providers/providerconnection/",
        _change_url(connection).replace("/change/", "/history/"),
    ):
        page = client.get(url)
        assert page.status_code == 200
        assert SECRET not in page.content.decode()
    assert "stored (encrypted)" in client.get(_change_url(connection)).content.decode()

    # Saving without a key keeps the stored one.
    form.pop("api_key")
    form["name"] = "Anthropic 2"
    assert client.post(_change_url(connection), form).status_code == 302
    connection.refresh_from_db()
    assert connection.name == "Anthropic 2" and connection.get_api_key() == SECRET
    assert SECRET not in caplog.text


@pytest.mark.django_db
def test_manager_cannot_create_in_another_team(manager_a, team_b):
    response = login(manager_a).post(
        "/admin/providers/providerconnection/add/",
        {
            "team": team_b.pk,
            "name": "x",
            "kind": "mock",
            "max_tokens_param": "max_tokens",
            "max_concurrency": 1,
            "timeout_s": 10,
        },
    )
    assert response.status_code == 200  # the form again, with an error on team
    assert "Select a valid choice" in response.content.decode()
    assert not ProviderConnection.objects.filter(team=team_b).exists()


@pytest.mark.django_db
def test_admin_locked_version_refuses_save_and_saves_as_new(manager_a, team_a):
    template = PromptTemplateFactory(team=team_a)
    version = make_version(
        template,
        [("System", "Be kind."), ("", "{{content}}")],
        sample_item={"content": "<b>hi</b>"},
    )
    prompt_services.version_lock(version=version)
    client = login(manager_a)
    page = client.get(_change_url(version)).content.decode()
    # The preview renders the sample item, escaped.
    assert "&lt;b&gt;hi&lt;/b&gt;" in page and "<b>hi</b>" not in page

    blocks = list(version.blocks.all())
    form = {
        "template": template.pk,
        "note": "edited",
        "default_variables": "{}",
        "sample_item": '{"content": "x"}',
        "blocks-TOTAL_FORMS": len(blocks),
        "blocks-INITIAL_FORMS": len(blocks),
        "blocks-MIN_NUM_FORMS": 0,
        "blocks-MAX_NUM_FORMS": 1000,
    }
    for i, block in enumerate(blocks):
        form |= {
            f"blocks-{i}-id": block.pk,
            f"blocks-{i}-version": version.pk,
            f"blocks-{i}-position": block.position,
            f"blocks-{i}-title": block.title,
            f"blocks-{i}-body": block.body + " (edited)",
        }
    refused = client.post(_change_url(version), form)
    assert refused.status_code == 200
    assert "can no longer change" in refused.content.decode()
    version.refresh_from_db()
    assert version.note == "" and [b.body for b in version.blocks.all()] == [
        "Be kind.",
        "{{content}}",
    ]

    saved = client.post(_change_url(version), form | {"_saveasnew": "Save as new"})
    assert saved.status_code == 302, saved.content.decode()[:3000]
    new = PromptVersion.objects.get(template=template, number=2)
    assert new.note == "edited" and not new.is_locked
    assert [b.body for b in new.blocks.all()] == ["Be kind. (edited)", "{{content}} (edited)"]


@pytest.mark.django_db
def test_filters_list_only_the_managers_teams(manager_a, objects):
    client = login(manager_a)
    for url in (
        "/admin/providers/providerconnection/",
        "/admin/providers/llmmodel/",
        "/admin/prompts/prompttemplate/",
        "/admin/prompts/promptversion/",
        "/admin/accounts/membership/",
        "/admin/accounts/team/",
    ):
        page = client.get(url)
        assert page.status_code == 200, url
        assert "Team B" not in page.content.decode(), url


@pytest.mark.django_db
def test_managers_sign_in_to_the_console_without_is_staff(team_a, member):
    manager = member(team_a, Role.MANAGER, username="mona")
    creator = member(team_a, Role.CREATOR, username="cleo")
    assert not manager.is_staff
    client = Client()
    response = client.post(
        "/admin/login/?next=/admin/", {"username": "mona", "password": "pw-Secret-123"}
    )
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200
    refused = Client().post("/admin/login/", {"username": "cleo", "password": "pw-Secret-123"})
    assert refused.status_code == 200
    assert "may not use the admin console" in refused.content.decode()
    assert creator.check_password("pw-Secret-123")  # right password, still refused


@pytest.mark.django_db
def test_token_created_in_admin_is_shown_once_and_works(manager_a):
    from evalplatform.accounts.models import ApiToken

    client = login(manager_a)
    response = client.post("/admin/accounts/apitoken/add/", {"name": "ci"}, follow=True)
    assert response.status_code == 200
    [message] = [str(m) for m in response.context["messages"] if "token key" in str(m)]
    key = message.split("The token key is ")[1].split(" ")[0]
    token = ApiToken.objects.get(name="ci")
    assert token.user == manager_a and key.startswith(token.prefix)
    assert key not in client.get(_change_url(token)).content.decode()
    assert key not in client.get("/admin/accounts/apitoken/").content.decode()

    from rest_framework.test import APIClient

    api_client = APIClient()
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api_client.get("/api/me").json()["username"] == "mgr-a"


@pytest.mark.django_db
def test_used_versions_and_their_templates_survive_admin_deletes(manager_a, team_a):
    template = PromptTemplateFactory(team=team_a, name="Kept")
    used = make_version(template, [("", "{{content}}")])
    draft = make_version(template, [("", "draft")])
    prompt_services.version_lock(version=used)
    client = login(manager_a)

    bulk = {"action": "delete_selected", "post": "yes", "_selected_action": [used.pk, draft.pk]}
    page = client.post("/admin/prompts/promptversion/", bulk)
    assert page.status_code == 200 and "used by a job" in page.content.decode()
    single = client.post(_change_url(used).replace("/change/", "/delete/"), {"post": "yes"})
    assert single.status_code == 200 and "used by a job" in single.content.decode()
    templates = {"action": "delete_selected", "post": "yes", "_selected_action": [template.pk]}
    page = client.post("/admin/prompts/prompttemplate/", templates)
    assert "has versions used by jobs" in page.content.decode()
    assert PromptVersion.objects.filter(template=template).count() == 2

    # A draft alone may go, but never the last version of a template.
    lone = make_version(PromptTemplateFactory(team=team_a, name="Lone"), [("", "x")])
    page = client.post(_change_url(lone).replace("/change/", "/delete/"), {"post": "yes"})
    assert "a template keeps one" in page.content.decode()
    assert (
        client.post(_change_url(draft).replace("/change/", "/delete/"), {"post": "yes"}).status_code
        == 302
    )
    assert set(PromptVersion.objects.values_list("pk", flat=True)) == {used.pk, lone.pk}


@pytest.mark.django_db
def test_a_revoked_token_stays_revoked_and_keeps_its_owner(manager_a, superuser, team_a, member):
    from evalplatform.accounts.models import ApiToken
    from evalplatform.accounts.services import token_create

    token, key = token_create(user=manager_a, name="old")
    client = login(manager_a)
    client.post("/admin/accounts/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    token.refresh_from_db()
    assert token.revoked_at is not None
    response = client.post(
        _change_url(token), {"name": "renamed", "revoked_at_0": "", "revoked_at_1": ""}
    )
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.name == "renamed" and token.revoked_at is not None
    from rest_framework.test import APIClient

    api_client = APIClient()
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api_client.get("/api/me").status_code == 401

    other = member(team_a, Role.VIEWER, username="vic")
    login(superuser).post(_change_url(token), {"name": "x", "user": other.pk})
    assert ApiToken.objects.get(pk=token.pk).user == manager_a


@pytest.mark.django_db
def test_editing_a_membership_changes_that_row(team_a, member):
    from evalplatform.accounts.models import Membership

    admin_user = member(team_a, Role.ADMIN, username="ada")
    viewer = member(team_a, Role.VIEWER, username="vera")
    membership = Membership.objects.get(user=viewer)
    client = login(admin_user)
    response = client.post(
        _change_url(membership), {"user": viewer.pk, "team": team_a.pk, "role": "creator"}
    )
    assert response.status_code == 302
    assert list(Membership.objects.filter(user=viewer).values_list("pk", "role")) == [
        (membership.pk, "creator")
    ]


@pytest.mark.django_db
def test_admin_asks_for_the_key_again_when_the_address_changes(manager_a, team_a):
    connection = ConnectionFactory(team=team_a, kind="openai", name="oa")
    connection.set_api_key(SECRET)
    connection.save()
    form = {
        "team": team_a.pk,
        "name": "oa",
        "kind": "openai",
        "base_url": "https://collector.example",
        "active": "on",
        "max_tokens_param": "max_tokens",
        "max_concurrency": 4,
        "timeout_s": 60,
    }
    client = login(manager_a)
    refused = client.post(_change_url(connection), form)
    assert refused.status_code == 200 and "Give the API key again" in refused.content.decode()
    connection.refresh_from_db()
    assert connection.base_url == "" and connection.get_api_key() == SECRET
    assert client.post(_change_url(connection), form | {"api_key": "new-key"}).status_code == 302
    connection.refresh_from_db()
    assert connection.base_url == "https://collector.example"
    assert connection.get_api_key() == "new-key"


@pytest.mark.django_db
def test_the_console_names_read_well(superuser):
    page = login(superuser).get("/admin/").content.decode()
    for name in ("Provider batches", "LLM judges", "API tokens"):
        assert f">{name}<" in page, name
    for clumsy in ("batchs", "Llm judges", "Api tokens", "analysiss"):
        assert clumsy not in page
