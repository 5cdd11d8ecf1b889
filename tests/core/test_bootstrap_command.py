"""``manage.py bootstrap``: the first admin, the default team and the mock provider, once."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from evalplatform.accounts.models import Membership, Team
from evalplatform.providers.models import ProviderConnection


@pytest.mark.django_db
def test_bootstrap_makes_the_first_admin_and_team_once(client, monkeypatch):
    monkeypatch.delenv("EVAL_ADMIN_PASSWORD", raising=False)
    first = io.StringIO()
    call_command("bootstrap", stdout=first)
    said = re.search(r"Sign in as '([^']+)' with password '([^']+)'", first.getvalue())
    assert said, first.getvalue()
    username, password = said.groups()
    admin = get_user_model().objects.get(username=username)
    assert admin.is_superuser and admin.check_password(password)
    team = Team.objects.get(slug="default")
    assert Membership.objects.filter(user=admin, team=team, role="admin").exists()
    assert ProviderConnection.objects.filter(team=team, kind="mock").exists()
    assert client.login(username=username, password=password)

    again = io.StringIO()
    call_command("bootstrap", stdout=again)
    assert again.getvalue().strip() == f"An admin exists already ({username!r}): nothing to do."
    assert password not in again.getvalue()
    assert get_user_model().objects.count() == 1 and Team.objects.count() == 1


@pytest.mark.django_db
def test_bootstrap_takes_the_login_from_the_environment(monkeypatch):
    monkeypatch.setenv("EVAL_ADMIN_USERNAME", "ops")
    monkeypatch.setenv("EVAL_ADMIN_PASSWORD", "a long passphrase of ours")
    out = io.StringIO()
    call_command("bootstrap", stdout=out)
    assert out.getvalue().strip() == "First admin 'ops' created from EVAL_ADMIN_PASSWORD."
    assert "a long passphrase" not in out.getvalue()
    assert get_user_model().objects.get(username="ops").is_superuser
