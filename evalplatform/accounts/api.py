from __future__ import annotations

from typing import Any, cast

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts.models import ApiToken
from evalplatform.accounts.selectors import me_summary
from evalplatform.accounts.services import token_create, tokens_revoke


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
