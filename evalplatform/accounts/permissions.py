"""DRF glue over the one policy (``evalplatform.accounts.policy``)."""

from __future__ import annotations

from typing import Any, cast

from django.db.models import Model, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import permissions, serializers, viewsets

from evalplatform.accounts import policy
from evalplatform.accounts.models import Team


class FeaturePermission(permissions.BasePermission):
    """The user must hold the view's feature for this action in at least one team.

    Object-level checks happen in ``TeamScopedViewSet.get_object`` through ``policy.access``,
    so another team's object is a 404 and never a 403.
    """

    def has_permission(self, request, view) -> bool:
        return bool(
            request.user
            and request.user.is_authenticated
            and policy.has_feature_anywhere(request.user, view.feature_for_action())
        )


_EDIT_ACTIONS = {"create", "update", "partial_update", "destroy"}


class TeamScopedViewSet(viewsets.GenericViewSet):
    """Base for viewsets over a team-scoped model (add DRF's mixins for the actions).

    ``queryset`` is the unfiltered base, ``view_feature`` decides what the user sees in it,
    ``edit_feature`` is what the writing actions need, ``action_features`` maps any other
    action to its feature (default: ``view_feature``).
    Every check goes through ``evalplatform.accounts.policy``.
    """

    view_feature: str
    edit_feature: str | None = None  # create, update, partial_update and destroy need it
    action_features: dict[str, str] = {}
    permission_classes = [FeaturePermission]
    lookup_field = "pk"

    def feature_for_action(self) -> str:
        """``action_features`` keys are an action (``"create"``) or an action and method
        (``"versions:POST"``) for actions that serve several methods."""
        action = self.action or ""
        method = getattr(self.request, "method", "")
        default = (
            self.edit_feature
            if self.edit_feature and action in _EDIT_ACTIONS
            else self.view_feature
        )
        return self.action_features.get(
            f"{action}:{method}", self.action_features.get(action, default)
        )

    def get_base_queryset(self) -> QuerySet:
        base = cast(QuerySet | None, getattr(self, "queryset", None))
        assert base is not None, f"{type(self).__name__} names no queryset"
        return base.all()

    def get_queryset(self) -> QuerySet:
        return policy.visible(self.request.user, self.view_feature, self.get_base_queryset())

    def get_object(self) -> Model:
        obj = policy.access(
            self.request.user,
            self.feature_for_action(),
            self.get_base_queryset(),
            view_feature=self.view_feature,
            **{self.lookup_field: self.kwargs[self.lookup_field]},
        )
        return obj


@extend_schema_field(OpenApiTypes.STR)
class TeamField(serializers.SlugRelatedField):
    """A team given by slug, limited to the teams where the user holds ``feature``.

    Another team's slug gets the same error as an unknown one.
    """

    default_error_messages = {
        "does_not_exist": "Unknown team, or one where you may not do this.",
        "invalid": "Give the team's slug.",
    }

    def __init__(self, feature: str, **kwargs: Any):
        self.feature = feature
        kwargs.setdefault("slug_field", "slug")
        super().__init__(**kwargs)

    def get_queryset(self) -> QuerySet[Team]:
        return policy.teams_with(self.context["request"].user, self.feature)


def default_team(user: Any, feature: str) -> Team | None:
    """The user's only team holding ``feature``, if there is exactly one."""
    teams = list(policy.teams_with(user, feature)[:2])
    return teams[0] if len(teams) == 1 else None
