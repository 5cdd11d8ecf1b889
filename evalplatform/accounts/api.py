from __future__ import annotations

from typing import Any, cast

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts import selectors
from evalplatform.accounts.models import ApiToken, AuditEvent, Notification, TeamGroup
from evalplatform.accounts.permissions import TeamField, TeamScopedViewSet, default_team
from evalplatform.accounts.roles import ACCOUNTS_MANAGE, ACCOUNTS_VIEW, SCENARIOS_MANAGE
from evalplatform.accounts.selectors import me_summary
from evalplatform.accounts.services import (
    group_create,
    group_delete,
    group_member,
    group_members_add,
    group_members_remove,
    group_rename,
    notifications_dismiss,
    token_create,
    tokens_revoke,
)
from evalplatform.errors import FieldErrors


class MeTeamSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    slug = serializers.CharField()
    name = serializers.CharField()
    role = serializers.CharField(
        allow_null=True, help_text="Null for superusers who are not members."
    )
    features = serializers.ListField(child=serializers.CharField())


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()
    email = serializers.CharField()
    is_superuser = serializers.BooleanField()
    teams = MeTeamSerializer(many=True)


class MeView(APIView):
    """The signed-in user, their teams, roles and granted feature codes."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=MeSerializer)
    def get(self, request):
        return Response(MeSerializer(me_summary(request.user)).data)


class TokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "prefix",
            "can_mint_tokens",
            "created_at",
            "last_used_at",
            "revoked_at",
        ]
        read_only_fields = fields


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    can_mint_tokens = serializers.BooleanField(
        default=False, help_text="Requests with the new token may make tokens too."
    )


class TokenCreatedSerializer(TokenSerializer):
    key = serializers.CharField(read_only=True, help_text="Shown once; store it now.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "key"]
        read_only_fields = fields


class TokenViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """The signed-in user's own API tokens. ``DELETE`` revokes."""

    serializer_class = TokenSerializer
    permission_classes = [IsAuthenticated]
    queryset = ApiToken.objects.all()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ApiToken.objects.none()
        return ApiToken.objects.filter(user=cast(Any, self.request.user))

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenCreatedSerializer})
    def create(self, request):
        data = TokenCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        by_token = request.auth if isinstance(request.auth, ApiToken) else None
        token, key = token_create(
            user=request.user,
            name=data.validated_data["name"],
            can_mint_tokens=data.validated_data["can_mint_tokens"],
            by_token=by_token,
        )
        body = TokenSerializer(token).data | {"key": key}
        return Response(body, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance):
        tokens_revoke(tokens=ApiToken.objects.filter(pk=instance.pk))


class NotificationSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug", read_only=True)

    class Meta:
        model = Notification
        fields = ["id", "team", "kind", "message", "link", "created_at", "read_at"]
        read_only_fields = fields


class NotificationViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """The signed-in user's own notifications, newest first (``?unread=true`` for the unread
    ones). ``POST .../{id}/read`` dismisses one, ``POST .../read`` all."""

    serializer_class = NotificationSerializer
    permission_classes = [IsAuthenticated]
    queryset = Notification.objects.all()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Notification.objects.none()
        qs = Notification.objects.filter(user=cast(Any, self.request.user)).select_related("team")
        if self.request.query_params.get("unread") in ("1", "true"):
            qs = qs.filter(read_at__isnull=True)
        return qs

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["post"])
    def read(self, request, pk=None):
        notifications_dismiss(user=request.user, ids=[self.get_object().pk])
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={204: None}, operation_id="notifications_read_all")
    @action(detail=False, methods=["post"], url_path="read")
    def read_all(self, request):
        notifications_dismiss(user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AuditEventSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug", default=None, allow_null=True, read_only=True)

    class Meta:
        model = AuditEvent
        fields = ["id", "team", "username", "action", "target", "detail", "created_at"]
        read_only_fields = fields


class AuditEventViewSet(TeamScopedViewSet, mixins.ListModelMixin):
    """``/api/audit``: the audit log of the teams you manage (``feature:accounts:manage``),
    newest first; ``?action=`` keeps the actions starting with it (``generation.job``),
    ``?team=`` one team (its slug)."""

    queryset = AuditEvent.objects.select_related("team")
    serializer_class = AuditEventSerializer
    view_feature = ACCOUNTS_MANAGE

    def get_queryset(self):
        rows = super().get_queryset()
        action = self.request.query_params.get("action")
        team = self.request.query_params.get("team")
        if action:
            rows = rows.filter(action__startswith=action)
        if team:
            rows = rows.filter(team__slug=team)
        return rows


class GroupMemberSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()


class GroupSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug", read_only=True)
    members = serializers.SerializerMethodField()

    class Meta:
        model = TeamGroup
        fields = ["id", "team", "name", "members", "created_at"]
        read_only_fields = fields

    @extend_schema_field(GroupMemberSerializer(many=True))
    def get_members(self, group: TeamGroup) -> list[dict[str, Any]]:
        # ``members`` comes prefetched, by username, from ``selectors.groups``.
        return [{"id": u.pk, "username": u.get_username()} for u in group.members.all()]


class GroupCreateSerializer(serializers.Serializer):
    team = TeamField(SCENARIOS_MANAGE, required=False)
    name = serializers.JSONField(help_text="1 to 100 characters, unique in the team.")
    members = serializers.JSONField(
        required=False, help_text="Members of the team, by user id or username."
    )


class GroupRenameSerializer(serializers.Serializer):
    name = serializers.JSONField()


class GroupMembersSerializer(serializers.Serializer):
    members = serializers.JSONField(help_text="Members of the team, by user id or username.")


class GroupViewSet(
    TeamScopedViewSet,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
):
    """``/api/groups``: the evaluator groups of your teams (``feature:accounts:view``), which
    scenarios can be assigned to. Creating, renaming, deleting them and changing their members
    needs ``feature:scenarios:manage`` in their team; ``?team=`` keeps one team (its slug).
    ``POST .../{id}/members {"members": [...]}`` adds members, ``DELETE
    .../{id}/members/{user}`` (id or username) takes one out."""

    queryset = selectors.groups()
    serializer_class = GroupSerializer
    view_feature = ACCOUNTS_VIEW
    edit_feature = SCENARIOS_MANAGE
    action_features = {"members": SCENARIOS_MANAGE, "member": SCENARIOS_MANAGE}

    def get_queryset(self):
        rows = super().get_queryset()
        team = self.request.query_params.get("team")
        return rows.filter(team__slug=team) if team else rows

    def _shown(self, group: TeamGroup) -> dict[str, Any]:
        return GroupSerializer(selectors.groups().get(pk=group.pk)).data

    @extend_schema(request=GroupCreateSerializer, responses={201: GroupSerializer})
    def create(self, request):
        data = GroupCreateSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        values = data.validated_data
        team = values.get("team") or default_team(request.user, SCENARIOS_MANAGE)
        if team is None:
            raise FieldErrors({"team": "Name the team (slug): you manage several."})
        group = group_create(
            user=request.user, team=team, name=values["name"], members=values.get("members")
        )
        return Response(self._shown(group), status=status.HTTP_201_CREATED)

    @extend_schema(request=GroupRenameSerializer, responses=GroupSerializer)
    def partial_update(self, request, pk=None):
        group = cast(TeamGroup, self.get_object())
        data = GroupRenameSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        group_rename(user=request.user, group=group, name=data.validated_data["name"])
        return Response(self._shown(group))

    @extend_schema(request=GroupRenameSerializer, responses=GroupSerializer)
    def update(self, request, pk=None):
        return self.partial_update(request, pk)

    def perform_destroy(self, instance):
        group_delete(user=self.request.user, group=instance)

    @extend_schema(request=GroupMembersSerializer, responses=GroupSerializer)
    @action(detail=True, methods=["post"])
    def members(self, request, pk=None):
        group = cast(TeamGroup, self.get_object())
        data = GroupMembersSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        group_members_add(user=request.user, group=group, members=data.validated_data["members"])
        return Response(self._shown(group))

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["delete"], url_path=r"members/(?P<user>[^/]+)")
    def member(self, request, pk=None, user=None):
        group = cast(TeamGroup, self.get_object())
        group_members_remove(user=request.user, group=group, member=group_member(group, user))
        return Response(status=status.HTTP_204_NO_CONTENT)
