"""Live connections follow their user's rights while they are open.

A connection signs in once (``auth``: the session, or an API token) and is authorized once per
object it watches, but rights can go while it stays open: the token is revoked, the user signs
out or is deactivated, the membership is removed or its role no longer lets them view the
object. Each connection therefore has a ``Guard``, which re-checks, through the same sign-in
rules and the same ``Topic.authorize`` (the one permission policy) as at the start:

- every ``LIVE_RECHECK_S`` seconds: the guarantee, whatever changed and however;
- at once when a change is announced (``announce``, sent by the signal receivers below after
  the change commits): a revoked or deleted token, a removed or changed membership, a signed-out
  session, a changed user. The announcement reaches the user's connections in every web process
  by the road events take (``transport``), as a ``RIGHTS_CHANGED`` event in the user's group;
  connections handle it themselves and never forward it.

Once a check fails the guard remembers why (``revoked``), the connection forwards no further
event, and closes: ``CLOSE_UNAUTHENTICATED`` (4401) when the credential no longer signs in,
``CLOSE_FORBIDDEN`` (4403) when the user may no longer watch an object (a deleted object counts
as one they may no longer watch).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from importlib import import_module
from types import SimpleNamespace
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from evalplatform.accounts.models import ApiToken, Membership
from evalplatform.accounts.signals import tokens_revoked
from evalplatform.errors import Forbidden, NotFound
from evalplatform.live.transport import send
from evalplatform.live.watch import Topic

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
RIGHTS_CHANGED = "live:rights_changed"


@dataclass(frozen=True)
class Credential:
    """How a connection signed in: its user, and the API token or the session it came with
    (neither only for a connection built without the sign-in stack, e.g. in a test)."""

    user_id: int
    token_id: int | None = None
    session_key: str | None = None


def session_digest(session_key: str) -> str:
    """What an announcement names a signed-out session by (never the key itself: it travels
    through the outbox table or Redis)."""
    return hashlib.sha256(session_key.encode()).hexdigest()


def current_user(credential: Credential) -> Any:
    """The credential's user as the database has it now, or None if the credential no longer
    signs in (token revoked or deleted, session ended or now someone else's, user inactive or
    deleted, password changed under a session)."""
    user: Any
    if credential.token_id is not None:
        token = (
            ApiToken.objects.select_related("user")
            .filter(pk=credential.token_id, revoked_at__isnull=True)
            .first()
        )
        user = token.user if token is not None else None
    elif credential.session_key is not None:
        store = import_module(settings.SESSION_ENGINE).SessionStore(credential.session_key)
        user = auth.get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]
    else:
        user = auth.get_user_model().objects.filter(pk=credential.user_id).first()
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    return user if user.pk == credential.user_id else None


def verdict(credential: Credential, targets: Iterable[tuple[Topic, int]]) -> int | None:
    """The close code a connection has earned, or None while it may go on watching."""
    user = current_user(credential)  # fresh: no grants cached on an old user object
    if user is None:
        return CLOSE_UNAUTHENTICATED
    for topic, pk in targets:
        try:
            topic.authorize(user, pk)
        except (NotFound, Forbidden):
            return CLOSE_FORBIDDEN
    return None


def user_group(user_id: int) -> str:
    """The group every live connection of a user joins to hear ``RIGHTS_CHANGED``."""
    return f"live.user.{user_id}"


class Guard:
    """Keeps one connection within its user's rights: re-checks them every
    ``LIVE_RECHECK_S`` and on each ``RIGHTS_CHANGED`` it hears, and calls ``on_revoked(code)``
    once, the first time they are gone. ``targets`` are the objects the connection watches."""

    def __init__(
        self, credential: Credential, on_revoked: Callable[[int], Awaitable[None]]
    ) -> None:
        self.credential = credential
        self.on_revoked = on_revoked
        self.targets: list[tuple[Topic, int]] = []
        # The cached outcome every event is checked against before it is forwarded.
        self.revoked: int | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def group(self) -> str:
        return user_group(self.credential.user_id)

    def start(self) -> None:
        self._task = asyncio.create_task(self._every())

    async def _every(self) -> None:
        while self.revoked is None:
            await asyncio.sleep(settings.LIVE_RECHECK_S)
            try:
                await self.check()
            except Exception:  # a busy or restarting database: check again next time
                logger.exception("live: re-checking the rights of a connection failed")

    async def check(self) -> bool:
        """Re-check now; whether the connection may go on."""
        if self.revoked is None:
            code = await database_sync_to_async(verdict)(self.credential, list(self.targets))
            if code is not None:
                await self.revoke(code)
        return self.revoked is None

    async def heard(self, event: dict[str, Any]) -> bool:
        """Handle ``event`` if it is a ``RIGHTS_CHANGED`` (re-check at once); whether it was."""
        if event.get("event") != RIGHTS_CHANGED:
            return False
        ended = (event.get("data") or {}).get("ended_session")
        key = self.credential.session_key
        if ended is not None and key is not None and ended == session_digest(key):
            # Signed out: the session may not be deleted yet when the announcement arrives.
            await self.revoke(CLOSE_UNAUTHENTICATED)
        else:
            await self.check()
        return True

    async def revoke(self, code: int) -> None:
        if self.revoked is None:
            self.revoked = code
            await self.on_revoked(code)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


# --- announcing changes (synchronous code: services, admin, views) ----------------------------


def announce(user_ids: Iterable[int], *, ended_session: str | None = None) -> None:
    """Have the users' open connections re-check their rights at once, after the current
    transaction commits. Best effort: the periodic re-check is the guarantee."""
    data = {"ended_session": session_digest(ended_session)} if ended_session else {}
    for user_id in set(user_ids):

        def notify(group: str = user_group(user_id)) -> None:
            try:
                send(group, [{"event": RIGHTS_CHANGED, "data": data}])
            except Exception:
                logger.exception("live: could not announce a change of rights to %s", group)

        transaction.on_commit(notify)


def _membership_changed(sender: Any, instance: Membership, **kwargs: Any) -> None:
    if not kwargs.get("created"):  # a new membership takes nothing away
        announce([instance.user_id])


def _token_deleted(sender: Any, instance: ApiToken, **kwargs: Any) -> None:
    announce([instance.user_id])


def _tokens_revoked(sender: Any, user_ids: Iterable[int], **kwargs: Any) -> None:
    announce(user_ids)


def _user_changed(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    if not created and not (fields and set(fields) <= {"last_login"}):  # not each sign-in
        announce([instance.pk])


def _signed_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if user is not None:
        announce([user.pk], ended_session=getattr(request.session, "session_key", None))


def connect_receivers() -> None:
    """Connected once, by the app's ``ready``."""
    uid = "evalplatform.live.rights"
    post_save.connect(_membership_changed, sender=Membership, dispatch_uid=f"{uid}.m_save")
    post_delete.connect(_membership_changed, sender=Membership, dispatch_uid=f"{uid}.m_delete")
    post_delete.connect(_token_deleted, sender=ApiToken, dispatch_uid=f"{uid}.t_delete")
    tokens_revoked.connect(_tokens_revoked, dispatch_uid=f"{uid}.t_revoked")
    post_save.connect(_user_changed, sender=settings.AUTH_USER_MODEL, dispatch_uid=f"{uid}.u")
    user_logged_out.connect(_signed_out, dispatch_uid=f"{uid}.signed_out")
