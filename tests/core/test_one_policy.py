"""Every surface decides through ``evalplatform.accounts.policy``: change the policy's grants
and the API and the admin follow, with no other table to update."""

from __future__ import annotations

import pytest
from django.test import Client

from evalplatform.accounts import policy
from evalplatform.accounts.roles import (
    ADMIN_ACCESS,
    PROMPTS_EDIT,
    PROMPTS_VIEW,
    PROVIDERS_MANAGE,
    ROLE_FEATURES,
    Role,
)
from tests.factories import ConnectionFactory, PromptTemplateFactory, make_version


@pytest.fixture
def grants(monkeypatch):
    """Replace what one role grants, in the policy only."""

    def set_role(role: str, features: set[str]) -> None:
        monkeypatch.setitem(policy.ROLE_FEATURES, role, frozenset(features))

    return set_role


@pytest.mark.django_db
def test_api_and_admin_follow_a_granted_feature(grants, api, team_a, member):
    template = PromptTemplateFactory(team=team_a)
    make_version(template, [("", "{{content}}")])
    viewer = member(team_a, Role.VIEWER)
    path = f"/api/prompts/templates/{template.pk}"

    assert api(viewer).patch(path, {"name": "x"}, format="json").status_code == 403
    client = Client()
    client.force_login(viewer)
    assert client.get("/admin/").status_code == 302

    grants(Role.VIEWER, {PROMPTS_VIEW, PROMPTS_EDIT, ADMIN_ACCESS})
    viewer = type(viewer).objects.get(pk=viewer.pk)
    assert api(viewer).patch(path, {"name": "renamed"}, format="json").status_code == 200
    assert client.get("/admin/").status_code == 200
    assert client.get(f"/admin/prompts/prompttemplate/{template.pk}/change/").status_code == 200
    assert client.get("/admin/providers/providerconnection/").status_code == 403


@pytest.mark.django_db
def test_api_and_admin_follow_a_withdrawn_feature(grants, api, team_a, member):
    connection = ConnectionFactory(team=team_a)
    manager = member(team_a, Role.MANAGER)
    client = Client()
    client.force_login(manager)
    assert api(manager).get(f"/api/providers/connections/{connection.pk}").status_code == 200
    assert (
        client.get(f"/admin/providers/providerconnection/{connection.pk}/change/").status_code
        == 200
    )

    grants(Role.MANAGER, set(ROLE_FEATURES[Role.MANAGER]) - {PROVIDERS_MANAGE})
    manager = type(manager).objects.get(pk=manager.pk)
    assert api(manager).get(f"/api/providers/connections/{connection.pk}").status_code == 403
    assert client.get("/admin/providers/providerconnection/").status_code == 403
    assert (
        client.get(f"/admin/providers/providerconnection/{connection.pk}/change/").status_code
        == 404
    )
