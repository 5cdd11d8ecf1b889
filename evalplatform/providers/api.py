from __future__ import annotations

from typing import cast

import django_filters
from django.db.models import QuerySet
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_variables
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from evalplatform.accounts import policy
from evalplatform.accounts.permissions import TeamField, TeamScopedViewSet, default_team
from evalplatform.accounts.roles import PROVIDERS_MANAGE, PROVIDERS_VIEW
from evalplatform.errors import FieldErrors
from evalplatform.providers import services
from evalplatform.providers.models import LLMModel, ProviderConnection
from evalplatform.throttling import expensive


class ConnectionSerializer(serializers.ModelSerializer):
    team = TeamField(PROVIDERS_MANAGE, required=False)
    api_key = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        trim_whitespace=True,
        style={"input_type": "password"},
        help_text="Write-only. Omit to keep the stored key, send an empty string to clear it.",
    )
    has_api_key = serializers.BooleanField(read_only=True)

    class Meta:
        model = ProviderConnection
        fields = [
            "id",
            "team",
            "name",
            "kind",
            "base_url",
            "api_key",
            "has_api_key",
            "max_tokens_param",
            "max_concurrency",
            "requests_per_minute",
            "timeout_s",
            "options",
            "active",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]
        # Uniqueness is checked by the service (model constraints), once, with field messages.
        validators: list = []

    def validate(self, attrs):
        if self.instance is not None and "team" in attrs and attrs["team"] != self.instance.team:
            raise serializers.ValidationError({"team": "A connection cannot move between teams."})
        return attrs


class ConnectionTestInput(serializers.Serializer):
    model = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        help_text="Model id to call; default: the connection's first active model.",
    )


class ConnectionTestResult(serializers.Serializer):
    ok = serializers.BooleanField()
    model = serializers.CharField()
    latency_ms = serializers.FloatField(required=False)
    reply = serializers.CharField(required=False)
    input_tokens = serializers.IntegerField(required=False)
    output_tokens = serializers.IntegerField(required=False)
    error_kind = serializers.CharField(required=False)
    status = serializers.IntegerField(required=False, allow_null=True)
    message = serializers.CharField(required=False)
    hint = serializers.CharField(required=False)


class ConnectionViewSet(TeamScopedViewSet, viewsets.ModelViewSet):
    """Provider connections of the user's teams. Needs ``feature:providers:manage``."""

    queryset = ProviderConnection.objects.select_related("team")
    serializer_class = ConnectionSerializer
    view_feature = PROVIDERS_MANAGE
    filterset_fields = ["kind", "active"]

    @method_decorator(sensitive_variables())
    def perform_create(self, serializer):
        data = dict(serializer.validated_data)
        team = data.pop("team", None) or default_team(self.request.user, PROVIDERS_MANAGE)
        if team is None:
            raise FieldErrors({"team": "Name the team (slug): you manage several."})
        serializer.instance = services.connection_create(user=self.request.user, team=team, **data)

    @method_decorator(sensitive_variables())
    def perform_update(self, serializer):
        data = dict(serializer.validated_data)
        data.pop("team", None)
        serializer.instance = services.connection_update(
            user=self.request.user, connection=serializer.instance, **data
        )

    def perform_destroy(self, instance):
        services.connection_delete(user=self.request.user, connection=instance)

    @extend_schema(request=ConnectionTestInput, responses=ConnectionTestResult)
    @action(detail=True, methods=["post"])
    @expensive
    def test(self, request, pk=None):
        """Send one tiny request through the connection; report latency or what to fix."""
        connection = cast(ProviderConnection, self.get_object())
        data = ConnectionTestInput(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(
            services.connection_test(
                user=request.user, connection=connection, model_id=data.validated_data["model"]
            )
        )


class ConnectionField(serializers.PrimaryKeyRelatedField):
    def get_queryset(self) -> QuerySet[ProviderConnection]:
        return policy.visible(
            self.context["request"].user, PROVIDERS_MANAGE, ProviderConnection.objects.all()
        )


class LLMModelSerializer(serializers.ModelSerializer):
    connection = ConnectionField()
    connection_name = serializers.CharField(source="connection.name", read_only=True)
    kind = serializers.CharField(source="connection.kind", read_only=True)
    team = serializers.CharField(source="connection.team.slug", read_only=True)

    class Meta:
        model = LLMModel
        fields = [
            "id",
            "team",
            "connection",
            "connection_name",
            "kind",
            "model_id",
            "display_name",
            "input_price_per_mtok",
            "output_price_per_mtok",
            "batch_discount",
            "supports_batch",
            "context_window",
            "active",
            "catalog_date",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["catalog_date", "created_at", "updated_at"]
        validators: list = []
        extra_kwargs = {"display_name": {"required": False}}

    def validate(self, attrs):
        if (
            self.instance is not None
            and "connection" in attrs
            and attrs["connection"] != self.instance.connection
        ):
            raise serializers.ValidationError(
                {"connection": "A model cannot move between connections; create a new one."}
            )
        return attrs


class LLMModelFilter(django_filters.FilterSet):
    # A plain number, not a model choice, so another team's connection id answers like a
    # missing one (an empty list) rather than differently.
    # Bounded: both databases' integers (a larger number is a 400, not an overflow).
    connection = django_filters.NumberFilter(
        field_name="connection_id", min_value=0, max_value=2**63 - 1
    )
    kind = django_filters.CharFilter(field_name="connection__kind")

    class Meta:
        model = LLMModel
        fields = ["connection", "kind", "active", "supports_batch"]


class LLMModelViewSet(TeamScopedViewSet, viewsets.ModelViewSet):
    """The team's models and prices. Reading needs ``feature:providers:view``; changes
    need ``feature:providers:manage``."""

    queryset = LLMModel.objects.select_related("connection__team")
    serializer_class = LLMModelSerializer
    view_feature = PROVIDERS_VIEW
    edit_feature = PROVIDERS_MANAGE
    filterset_class = LLMModelFilter

    def perform_create(self, serializer):
        data = dict(serializer.validated_data)
        connection = data.pop("connection")
        serializer.instance = services.model_create(
            user=self.request.user, connection=connection, **data
        )

    def perform_update(self, serializer):
        data = dict(serializer.validated_data)
        data.pop("connection", None)
        serializer.instance = services.model_update(
            user=self.request.user, model=serializer.instance, **data
        )

    def perform_destroy(self, instance):
        services.model_delete(user=self.request.user, model=instance)
