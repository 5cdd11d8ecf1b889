from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Prefetch, QuerySet

from evalplatform.accounts import policy
from evalplatform.accounts.models import Membership, Team, TeamGroup


def me_summary(user: Any) -> dict[str, Any]:
    """The user, their teams with role and granted features (``GET /api/me``)."""
    teams: list[dict[str, Any]] = []
    memberships = Membership.objects.filter(user_id=user.pk).select_related("team")
    seen: set[int] = set()
    for membership in memberships:
        seen.add(membership.team_id)
        teams.append(_team_entry(user, membership.team, membership.role))
    if policy.is_superuser(user):
        teams.extend(_team_entry(user, team, None) for team in Team.objects.exclude(pk__in=seen))
    return {
        "id": user.pk,
        "username": user.get_username(),
        "email": user.email,
        "is_superuser": bool(user.is_superuser),
        "teams": teams,
    }


def _team_entry(user: Any, team: Team, role: str | None) -> dict[str, Any]:
    return {
        "id": team.pk,
        "slug": team.slug,
        "name": team.name,
        "role": role,
        "features": sorted(policy.granted(user, team)),
    }


def groups() -> QuerySet[TeamGroup]:
    """Evaluator groups with their team and members (by username): two queries for any
    number of groups."""
    return TeamGroup.objects.select_related("team").prefetch_related(
        Prefetch("members", queryset=get_user_model().objects.order_by("username"))
    )
