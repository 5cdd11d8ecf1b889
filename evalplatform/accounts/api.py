from __future__ import annotations

from typing import Any, cast

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts.models import ApiToken, AuditEvent, Notification
from evalplatform.accounts.permissions import TeamScopedViewSet
from evalplatform.accounts.roles import ACCOUNTS_MANAGE
from evalplatform.accounts.selectors import me_summary
from evalplatform.accounts.services import notifications_dismiss, token_create, tokens_revoke


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
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
        read_only_fields = fields


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)


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
        token, key = token_create(user=request.user, name=data.validated_data["name"])
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
