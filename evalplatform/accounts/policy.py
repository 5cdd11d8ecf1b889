"""The one authorization policy. Every surface (API, admin, pages, consumers) asks it.

- ``has_feature(user, F, team)``: may this user do F in team T?
- ``may(user, F, obj)``: may this user do F to this team-scoped object?
- ``visible(user, F, queryset)``: the objects of this queryset the user may see for F.
- ``access(user, F, queryset, ...)``: fetch one object and authorize it; another team's object
  raises the same ``NotFound`` as a missing one.

A team-scoped model names the path to its team in ``team_lookup`` (``"team"``,
``"connection__team"``, ...). Superusers may do everything.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Model, QuerySet

from evalplatform.accounts.models import Membership, Team
from evalplatform.accounts.roles import FEATURES, ROLE_FEATURES
from evalplatform.errors import Forbidden, NotFound

M = TypeVar("M", bound=Model)

_CACHE_ATTR = "_evalplatform_features_by_team"


def features_by_team(user: Any) -> dict[int, frozenset[str]]:
    """Granted features per team id, cached on the user object for the request."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return {}
    cached = getattr(user, _CACHE_ATTR, None)
    if cached is None:
        # One query per request (the user object lives as long as the request); unordered,
        # so it reads the memberships alone, not joined with their users and teams.
        rows = Membership.objects.filter(user_id=user.pk).order_by().values_list("team_id", "role")
        remember(user, rows)
        cached = getattr(user, _CACHE_ATTR)
    return cached


def remember(user: Any, memberships: Iterable[tuple[int, str]]) -> None:
    """Cache the user's grants from their memberships (team id, role) read with another
    query (the API token's: ``token_authenticate``), so ``features_by_team`` asks nothing."""
    grants = {team_id: ROLE_FEATURES.get(role, frozenset()) for team_id, role in memberships}
    setattr(user, _CACHE_ATTR, grants)


def forget(user: Any) -> None:
    """Drop the cached grants (after a membership of this user changed)."""
    if hasattr(user, _CACHE_ATTR):
        delattr(user, _CACHE_ATTR)


def is_superuser(user: Any) -> bool:
    return bool(getattr(user, "is_active", False) and getattr(user, "is_superuser", False))


def _team_id(team: Team | int) -> int:
    return team if isinstance(team, int) else team.pk


def has_feature(user: Any, feature: str, team: Team | int) -> bool:
    if is_superuser(user):
        return True
    return feature in features_by_team(user).get(_team_id(team), frozenset())


def has_feature_anywhere(user: Any, feature: str) -> bool:
    if is_superuser(user):
        return True
    return any(feature in codes for codes in features_by_team(user).values())


def team_ids_with(user: Any, feature: str) -> list[int]:
    return [tid for tid, codes in features_by_team(user).items() if feature in codes]


def teams_with(user: Any, feature: str) -> QuerySet[Team]:
    if is_superuser(user):
        return Team.objects.all()
    return Team.objects.filter(pk__in=team_ids_with(user, feature))


def team_id_of(obj: Model) -> int:
    """Follow ``team_lookup`` on the object (``connection__team`` → ``obj.connection.team_id``)."""
    if isinstance(obj, Team):
        return obj.pk
    path = getattr(type(obj), "team_lookup", "team").split("__")
    target: Any = obj
    for part in path[:-1]:
        target = getattr(target, part)
    return getattr(target, f"{path[-1]}_id")


def may(user: Any, feature: str, obj: Model) -> bool:
    return has_feature(user, feature, team_id_of(obj))


def visible(user: Any, feature: str, queryset: QuerySet[M]) -> QuerySet[M]:
    if is_superuser(user):
        return queryset
    model = queryset.model
    if model is Team:
        return queryset.filter(pk__in=team_ids_with(user, feature))
    lookup = getattr(model, "team_lookup", "team")
    return queryset.filter(**{f"{lookup}__in": team_ids_with(user, feature)})


def access(
    user: Any,
    feature: str,
    queryset: QuerySet[M],
    *,
    view_feature: str | None = None,
    **lookup: Any,
) -> M:
    """Fetch one object and authorize ``feature`` on it.

    The object is looked up among those the user may see (``view_feature``, default
    ``feature``): if it is not there, ``NotFound``, whether it is missing or another team's.
    If the user may see it but not do ``feature`` to it, ``Forbidden``.
    """
    try:
        obj = visible(user, view_feature or feature, queryset).get(**lookup)
    except (ObjectDoesNotExist, ValueError, TypeError) as exc:
        raise NotFound() from exc
    if view_feature and view_feature != feature and not may(user, feature, obj):
        raise Forbidden()
    return obj


def granted(user: Any, team: Team | int) -> frozenset[str]:
    if is_superuser(user):
        return frozenset(FEATURES)
    return features_by_team(user).get(_team_id(team), frozenset())
