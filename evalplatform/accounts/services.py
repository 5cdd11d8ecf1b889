from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F, ProtectedError, Q
from django.utils import timezone

from evalplatform import validation
from evalplatform.accounts import audit, policy
from evalplatform.accounts.models import ApiToken, Notification, Team, TeamGroup
from evalplatform.accounts.roles import SCENARIOS_MANAGE
from evalplatform.accounts.signals import tokens_revoked
from evalplatform.errors import Conflict, FieldErrors, Forbidden, NotFound
from evalplatform.prepared import Prepared

TOKEN_PREFIX_LEN = 8


def hash_token_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


TOKENS_PER_USER = 100  # live (unrevoked) tokens one person may hold
REVOKED_TOKENS_KEPT = timedelta(days=30)


def token_create(
    *, user: Any, name: str = "default", can_mint_tokens: bool = False, by_token: Any = None
) -> tuple[ApiToken, str]:
    """Create a token; return it and its key. The key is never stored or shown again.
    ``by_token``: the token the request came with, if any: it may make tokens only if it
    was made to (``can_mint_tokens``), and no token it makes may do more than it."""
    if by_token is not None and not by_token.can_mint_tokens:
        raise Forbidden(
            "This API token may not make tokens: sign in, or use a token made with can_mint_tokens."
        )
    # Revoked tokens are kept a while (the audit log names them), then pruned.
    ApiToken.objects.filter(user=user, revoked_at__lt=timezone.now() - REVOKED_TOKENS_KEPT).delete()
    if ApiToken.objects.filter(user=user, revoked_at__isnull=True).count() >= TOKENS_PER_USER:
        raise Conflict(
            f"You have {TOKENS_PER_USER} live API tokens, the most one person may hold: "
            "revoke one you no longer use."
        )
    key = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name.strip() or "default",
        prefix=key[:TOKEN_PREFIX_LEN],
        key_hash=hash_token_key(key),
        can_mint_tokens=can_mint_tokens,
    )
    audit.record(user=user, team=None, action="accounts.token.create", target=token)
    return token, key


def token_create_for_username(*, username: str, name: str = "default") -> tuple[ApiToken, str]:
    try:
        user = get_user_model().objects.get(username=username)
    except get_user_model().DoesNotExist as exc:
        raise NotFound(f"No user named {username!r}.") from exc
    return token_create(user=user, name=name)


# Compiled once per process (``evalplatform.prepared``): every API request runs it.
_TOKEN_AND_GRANTS = Prepared(
    lambda key_hash: (
        ApiToken.objects.select_related("user")
        .filter(key_hash=key_hash, revoked_at__isnull=True)
        .annotate(
            membership_team=F("user__memberships__team_id"),
            membership_role=F("user__memberships__role"),
        )
        .order_by()
    ),
    key_hash=str,
)


def token_authenticate(key: str) -> ApiToken | None:
    """The live token of ``key`` with its user, None for none. The same query reads the
    user's memberships (a row per membership, joined), handed to ``policy`` as the
    request's grants: one query for who the caller is and what they may do."""
    rows = _TOKEN_AND_GRANTS.objects(key_hash=hash_token_key(key))
    token = rows[0] if rows else None
    if token is None or not token.user.is_active:
        return None
    policy.remember(
        token.user,
        [
            (row.membership_team, row.membership_role)
            for row in rows
            if row.membership_team is not None
        ],  # type: ignore[attr-defined]
    )
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


# --- evaluator groups --------------------------------------------------------------------
# Managed by those who assign evaluators (``feature:scenarios:manage`` in the group's team);
# seen by those who may see the team's members (``feature:accounts:view``).

GROUP_NAME_MAX = 100  # TeamGroup.name
GROUP_MEMBERS_MAX = 1000


def _manage_groups(user: Any, team: Team | int) -> None:
    if not policy.has_feature(user, SCENARIOS_MANAGE, team):
        raise Forbidden()


def _group_name(name: Any, errors: dict[str, str]) -> str:
    return validation.text(
        name,
        name="name",
        errors=errors,
        max_length=GROUP_NAME_MAX,
        required=True,
        message=f"A name of 1 to {GROUP_NAME_MAX} characters.",
    )


def _team_members(team_id: int, refs: Any, errors: dict[str, str], field: str) -> list[Any]:
    """The users ``refs`` names (ids or usernames), each a member of the team; errors name
    ``<field>.<index>`` for anyone else (another team's member gets the same message as
    nobody)."""
    if not isinstance(refs, list):
        errors[field] = "A list of members (user ids or usernames)."
        return []
    if len(refs) > GROUP_MEMBERS_MAX:
        errors[field] = f"At most {GROUP_MEMBERS_MAX:,} members at once."
        return []
    ids = [r for r in refs if isinstance(r, int) and not isinstance(r, bool)]
    names = [r[:150] for r in refs if isinstance(r, str)]
    users = (
        get_user_model()
        .objects.filter(
            memberships__team_id=team_id,
        )
        .filter(Q(pk__in=[i for i in ids if 0 < i <= validation.INT_MAX]) | Q(username__in=names))
    )
    by_id = {u.pk: u for u in users}
    return validation.each_named(
        refs,
        by_id=by_id,
        by_name={u.get_username(): u for u in by_id.values()},
        field=field,
        errors=errors,
        unknown="no member of the team",
    )


def group_create(*, user: Any, team: Team, name: Any, members: Any = None) -> TeamGroup:
    _manage_groups(user, team)
    errors: dict[str, str] = {}
    name = _group_name(name, errors)
    chosen = _team_members(team.pk, [] if members is None else members, errors, "members")
    if name and TeamGroup.objects.filter(team=team, name=name).exists():
        errors["name"] = "The team has a group of that name."
    if errors:
        raise FieldErrors(errors)
    with transaction.atomic():
        # Two requests at once may both pass the check above: the constraint refuses the
        # second, which the API answers 409.
        group = TeamGroup.objects.create(team=team, name=name)
        group.members.add(*chosen)
        audit.record(
            user=user,
            team=team,
            action="accounts.group.create",
            target=group,
            members=sorted(u.get_username() for u in chosen),
        )
    return group


def group_rename(*, user: Any, group: TeamGroup, name: Any) -> TeamGroup:
    _manage_groups(user, group.team_id)
    errors: dict[str, str] = {}
    name = _group_name(name, errors)
    clash = TeamGroup.objects.filter(team_id=group.team_id, name=name).exclude(pk=group.pk)
    if name and clash.exists():
        errors["name"] = "The team has a group of that name."
    if errors:
        raise FieldErrors(errors)
    old = group.name
    with transaction.atomic():
        group.name = name
        group.save(update_fields=["name"])
        audit.record(
            user=user, team=group.team_id, action="accounts.group.rename", target=group, old=old
        )
    return group


def group_delete(*, user: Any, group: TeamGroup) -> None:
    """Refused (409) while a scenario is assigned to the group: dropping it there silently
    could hand the scenario to every evaluator of the team."""
    _manage_groups(user, group.team_id)
    try:
        with transaction.atomic():
            audit.record(
                user=user, team=group.team_id, action="accounts.group.delete", target=group
            )
            group.delete()
    except ProtectedError as exc:
        raise Conflict(
            "Scenarios are assigned to this group: choose their evaluators again first."
        ) from exc


def group_members_add(*, user: Any, group: TeamGroup, members: Any) -> TeamGroup:
    _manage_groups(user, group.team_id)
    errors: dict[str, str] = {}
    chosen = _team_members(group.team_id, members, errors, "members")
    if errors:
        raise FieldErrors(errors)
    with transaction.atomic():
        group.members.add(*chosen)
        audit.record(
            user=user,
            team=group.team_id,
            action="accounts.group.members.add",
            target=group,
            members=sorted(u.get_username() for u in chosen),
        )
    return group


def group_members_remove(*, user: Any, group: TeamGroup, member: Any) -> None:
    """Take one user out of the group; ``NotFound`` when they are not in it."""
    _manage_groups(user, group.team_id)
    with transaction.atomic():
        removed, _ = TeamGroup.members.through.objects.filter(
            teamgroup_id=group.pk, user_id=member.pk
        ).delete()
        if not removed:
            raise NotFound()
        audit.record(
            user=user,
            team=group.team_id,
            action="accounts.group.members.remove",
            target=group,
            member=member.get_username(),
        )


def group_member(group: TeamGroup, ref: Any) -> Any:
    """A member of the group by id or username; ``NotFound`` for anyone else."""
    ref = str(ref)
    members = group.members.all()
    number = validation.digits(ref, most=10)
    found = None
    if number is not None and number <= validation.INT_MAX:
        found = members.filter(pk=number).first()
    if found is None:  # a username, all digits or not
        found = members.filter(username=ref[:150]).first()
    if found is None:
        raise NotFound()
    return found


def groups_leave(*, user_id: int, team_id: int) -> None:
    """A member who left the team leaves its groups (called when a membership is deleted)."""
    TeamGroup.members.through.objects.filter(teamgroup__team_id=team_id, user_id=user_id).delete()
