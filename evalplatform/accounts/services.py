from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from evalplatform.accounts import audit
from evalplatform.accounts.models import ApiToken, Notification
from evalplatform.accounts.signals import tokens_revoked
from evalplatform.errors import NotFound

TOKEN_PREFIX_LEN = 8


def hash_token_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def token_create(*, user: Any, name: str = "default") -> tuple[ApiToken, str]:
    """Create a token; return it and its key. The key is never stored or shown again."""
    key = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name.strip() or "default",
        prefix=key[:TOKEN_PREFIX_LEN],
        key_hash=hash_token_key(key),
    )
    audit.record(user=user, team=None, action="accounts.token.create", target=token)
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


def tokens_revoke(*, tokens, by: Any = None) -> int:
    """Revoke the tokens of a queryset (already revoked ones keep their date)."""
    live = list(tokens.filter(revoked_at__isnull=True).select_related("user"))
    for token in live:
        audit.record(
            user=by or token.user,
            team=None,
            action="accounts.token.revoke",
            target=token,
            owner=token.user.get_username(),
        )
    revoked = tokens.filter(pk__in=[t.pk for t in live]).update(revoked_at=timezone.now())
    tokens_revoked.send(sender=ApiToken, user_ids={token.user_id for token in live})
    return revoked


def notify(*, user: Any, team: Any, kind: str, message: str, link: str = "") -> Notification:
    return Notification.objects.create(
        user=user, team=team, kind=kind, message=message[:500], link=link[:300]
    )


def notify_once(*, user: Any, team: Any, kind: str, message: str, link: str) -> Notification:
    """Tell the user, unless they were told already: when their latest notice of this kind
    about this link is still unread, or says the same, it is refreshed (the new message,
    listed first again; read or not as it was) instead of a second one being added."""
    message, link = message[:500], link[:300]
    last = Notification.objects.filter(user=user, kind=kind, link=link).first()
    if last is None or (last.read_at is not None and last.message != message):
        return notify(user=user, team=team, kind=kind, message=message, link=link)
    last.message, last.created_at = message, timezone.now()
    last.save(update_fields=["message", "created_at"])
    return last


def notifications_dismiss(*, user: Any, ids: list[int] | None = None) -> int:
    """Mark the user's notifications read (all, or those in ``ids``); other users' are never
    touched."""
    unread = Notification.objects.filter(user=user, read_at__isnull=True)
    if ids is not None:
        unread = unread.filter(pk__in=ids)
    return unread.update(read_at=timezone.now())
