from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from evalplatform.accounts import policy
from evalplatform.accounts.models import ApiToken, Membership, Team
from evalplatform.accounts.roles import Role
from evalplatform.errors import FieldErrors, NotFound

TOKEN_PREFIX_LEN = 8


def hash_token_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def team_create(*, name: str, slug: str = "", owner: Any | None = None) -> Team:
    name = name.strip()
    slug = slug or slugify(name)
    errors: dict[str, str] = {}
    if not name:
        errors["name"] = "A team needs a name."
    elif Team.objects.filter(name=name).exists():
        errors["name"] = "A team with this name exists."
    if not slug:
        errors["slug"] = "A team needs a slug (letters, digits, hyphens)."
    elif Team.objects.filter(slug=slug).exists():
        errors["slug"] = "A team with this slug exists."
    if errors:
        raise FieldErrors(errors)
    with transaction.atomic():
        team = Team.objects.create(name=name, slug=slug)
        if owner is not None:
            Membership.objects.create(user=owner, team=team, role=Role.ADMIN)
    if owner is not None:
        policy.forget(owner)
    return team


def membership_set(*, team: Team, user: Any, role: str) -> Membership:
    """Add ``user`` to ``team`` with ``role``, or change the role they have."""
    if role not in Role.values:
        raise FieldErrors(
            {"role": f"Unknown role {role!r}; choose one of {', '.join(Role.values)}."}
        )
    membership, _ = Membership.objects.update_or_create(
        user=user, team=team, defaults={"role": role}
    )
    policy.forget(user)
    return membership


def token_create(*, user: Any, name: str = "default") -> tuple[ApiToken, str]:
    """Create a token; return it and its key. The key is never stored or shown again."""
    key = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name.strip() or "default",
        prefix=key[:TOKEN_PREFIX_LEN],
        key_hash=hash_token_key(key),
    )
    return token, key


def token_create_for_username(*, username: str, name: str = "default") -> tuple[ApiToken, str]:
    try:
        user = get_user_model().objects.get(username=username)
    except get_user_model().DoesNotExist as exc:
        raise NotFound(f"No user named {username!r}.") from exc
    return token_create(user=user, name=name)


def token_authenticate(key: str) -> ApiToken | None:
    token = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=hash_token_key(key), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    # Coarse last-use stamp: one write per token per minute, not one per request.
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def token_revoke(*, token: ApiToken) -> None:
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
