"""The audit log: one call per action worth knowing later, from the service (or view) that
does it, inside its transaction (an action that fails leaves no entry). Never record a
secret: targets and details name objects, not keys or texts."""

from __future__ import annotations

from typing import Any

from django.db.models import Model

from evalplatform.accounts.models import AuditEvent, Team


def record(
    *, user: Any, team: Team | int | None, action: str, target: Model | str = "", **detail: Any
) -> AuditEvent:
    """``action``: ``area.object.verb`` (``generation.job.start``, ``scenario.export``, ...);
    ``target``: the object (its model and id and its name are written) or a text."""
    if isinstance(target, Model):
        label = f"{target._meta.label_lower}:{target.pk} {str(target)[:200]}"
    else:
        label = str(target)[:300]
    authenticated = bool(getattr(user, "is_authenticated", False))
    return AuditEvent.objects.create(
        team_id=team if isinstance(team, int) or team is None else team.pk,
        user=user if authenticated else None,
        username=user.get_username() if authenticated else "",
        action=action,
        target=label,
        detail=detail,
    )
