"""First start of the embedded default: a first admin, a team, an offline mock provider."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction

from evalplatform.accounts.models import Membership, Team
from evalplatform.accounts.roles import Role
from evalplatform.providers.models import ProviderConnection, ProviderKind
from evalplatform.providers.services import catalog_load


@dataclass(frozen=True)
class BootstrapResult:
    username: str
    password: str | None  # set only when this call generated it
    created_admin: bool


def bootstrap() -> BootstrapResult:
    """Idempotent; does nothing once a superuser exists.

    Reads ``EVAL_ADMIN_USERNAME``, ``EVAL_ADMIN_PASSWORD`` and ``EVAL_ADMIN_EMAIL``.
    """
    User = get_user_model()
    username = os.environ.get("EVAL_ADMIN_USERNAME", "admin")
    with transaction.atomic():
        existing = User.objects.filter(is_superuser=True).order_by("pk").first()
        if existing is not None:
            return BootstrapResult(existing.get_username(), None, False)
        given = os.environ.get("EVAL_ADMIN_PASSWORD")
        password = given or secrets.token_urlsafe(12)
        admin = User.objects.create_superuser(
            username=username, email=os.environ.get("EVAL_ADMIN_EMAIL", ""), password=password
        )
        team, _ = Team.objects.get_or_create(slug="default", defaults={"name": "Default team"})
        Membership.objects.get_or_create(user=admin, team=team, defaults={"role": Role.ADMIN})
        mock, _ = ProviderConnection.objects.get_or_create(
            team=team, name="Mock (offline)", defaults={"kind": ProviderKind.MOCK}
        )
        catalog_load(team=team, connection=mock)
    return BootstrapResult(username, None if given else password, True)


def greeting(result: BootstrapResult) -> str | None:
    """What to tell the operator of a bootstrap: the generated login, once (None when no
    admin was made)."""
    if result.created_admin and result.password:
        return (
            f"First admin created. Sign in as {result.username!r} with password "
            f"{result.password!r} (change it in the admin; it is not shown again)."
        )
    if result.created_admin:
        return f"First admin {result.username!r} created from EVAL_ADMIN_PASSWORD."
    return None
