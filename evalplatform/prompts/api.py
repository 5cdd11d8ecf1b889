from __future__ import annotations

from functools import cached_property
from typing import cast

import django_filters
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from evalplatform.accounts.permissions import TeamField, TeamScopedViewSet, default_team
from evalplatform.accounts.roles import PROMPTS_EDIT, PROMPTS_VIEW
from evalplatform.errors import FieldErrors
from evalplatform.prompts import selectors, services
from evalplatform.prompts.models import PromptTemplate, PromptVersion
from evalplatform.prompts.rendering import variables_in


class BlockSerializer(serializers.Serializer):
    title = serializers.CharField(allow_blank=True, required=False, default="", max_length=200)
    body = serializers.CharField(trim_whitespace=False)


class VersionSerializer(serializers.ModelSerializer):
    blocks = serializers.SerializerMethodField()
    variables = serializers.SerializerMethodField()
    locked = serializers.BooleanField(source="is_locked", read_only=True)
    created_by = serializers.CharField(
        source="created_by.username", default=None, allow_null=True, read_only=True
    )

    class Meta:
        model = PromptVersion
        fields = [
            "id",
            "template",
            "number",
            "note",
            "blocks",
            "variables",
            "default_variables",
            "sample_item",
            "locked",
            "locked_at",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(BlockSerializer(many=True))
    def get_blocks(self, version: PromptVersion) -> list[dict]:
        return [{"title": b.title, "body": b.body} for b in version.blocks.all()]

    def get_variables(self, version: PromptVersion) -> list[str]:
        return variables_in(version.as_blocks())


class TemplateSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug", read_only=True)
    latest_version = serializers.SerializerMethodField()
    version_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = PromptTemplate
        fields = [
            "id",
            "team",
            "name",
            "description",
            "latest_version",
            "version_count",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @cached_property
    def _version_serializer(self) -> VersionSerializer:
        # One instance for all rows: building a serializer's fields per row is the slow part.
        return VersionSerializer()

    @extend_schema_field(VersionSerializer)
    def get_latest_version(self, template: PromptTemplate) -> dict | None:
        # ``latest_versions`` comes from ``selectors.templates_with_latest_version``.
        latest = template.latest_versions  # type: ignore[attr-defined]
        return self._version_serializer.to_representation(latest[0]) if latest else None


class VersionInputSerializer(serializers.Serializer):
    blocks = BlockSerializer(many=True, allow_empty=False)
    note = serializers.CharField(allow_blank=True, required=False, default="", max_length=300)
    default_variables = serializers.DictField(required=False, default=dict)
    sample_item = serializers.DictField(required=False, default=dict)


class VersionUpdateSerializer(VersionInputSerializer):
    blocks = BlockSerializer(many=True, allow_empty=False, required=False)
    note = serializers.CharField(allow_blank=True, required=False, max_length=300)
    default_variables = serializers.DictField(required=False)
    sample_item = serializers.DictField(required=False)


class TemplateCreateSerializer(VersionInputSerializer):
    team = TeamField(PROMPTS_EDIT, required=False)
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(allow_blank=True, required=False, default="")


class TemplateUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(allow_blank=True, required=False)


class RenderInputSerializer(serializers.Serializer):
    items = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="Items to render for; each may carry an 'id'. "
        "Default: the version's sample item.",
    )


class RenderedSerializer(serializers.Serializer):
    item_id = serializers.CharField()
    system = serializers.CharField()
    user = serializers.CharField()


def _version_input(data: dict) -> dict:
    data = dict(data)
    if "blocks" in data:
        data["blocks"] = [dict(block) for block in data["blocks"]]
    return data


class TemplateViewSet(TeamScopedViewSet, viewsets.ModelViewSet):
    """Prompt templates of the user's teams, each with immutable-once-used versions."""

    queryset = selectors.templates_with_latest_version()
    serializer_class = TemplateSerializer
    view_feature = PROMPTS_VIEW
    edit_feature = PROMPTS_EDIT
    action_features = {"versions:POST": PROMPTS_EDIT}
    filterset_fields = {"name": ["exact", "icontains"], "team__slug": ["exact"]}

    def _reload(self, pk: int) -> PromptTemplate:
        return selectors.templates_with_latest_version().get(pk=pk)

    @extend_schema(request=TemplateCreateSerializer, responses={201: TemplateSerializer})
    def create(self, request, *args, **kwargs):
        data = TemplateCreateSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        values = _version_input(data.validated_data)
        team = values.pop("team", None) or default_team(request.user, PROMPTS_EDIT)
        if team is None:
            raise FieldErrors({"team": "Name the team (slug): you edit prompts in several."})
        template = services.template_create(user=request.user, team=team, **values)
        return Response(TemplateSerializer(self._reload(template.pk)).data, status.HTTP_201_CREATED)

    @extend_schema(request=TemplateUpdateSerializer, responses=TemplateSerializer)
    def update(self, request, *args, **kwargs):
        template = cast(PromptTemplate, self.get_object())
        data = TemplateUpdateSerializer(data=request.data, partial=kwargs.get("partial", False))
        data.is_valid(raise_exception=True)
        services.template_update(user=request.user, template=template, **data.validated_data)
        return Response(TemplateSerializer(self._reload(template.pk)).data)

    def perform_destroy(self, instance):
        services.template_delete(user=self.request.user, template=instance)

    @extend_schema(
        methods=["GET"], responses=VersionSerializer(many=True), description="All versions."
    )
    @extend_schema(
        methods=["POST"],
        request=VersionInputSerializer,
        responses={201: VersionSerializer},
        description="Create the next version (editing a used version means this).",
    )
    @action(detail=True, methods=["get", "post"], url_path="versions", pagination_class=None)
    def versions(self, request, pk=None):
        template = cast(PromptTemplate, self.get_object())
        if request.method == "GET":
            return Response(
                VersionSerializer(selectors.template_versions(template), many=True).data
            )
        data = VersionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        version = services.version_create(
            user=request.user, template=template, **_version_input(data.validated_data)
        )
        version = selectors.versions_with_blocks().get(pk=version.pk)
        return Response(VersionSerializer(version).data, status=status.HTTP_201_CREATED)


class VersionFilter(django_filters.FilterSet):
    # A plain number, not a model choice: a choice field would answer "invalid choice" for a
    # missing id but not for another team's, telling them apart.
    template = django_filters.NumberFilter(field_name="template_id")

    class Meta:
        model = PromptVersion
        fields = ["template", "number"]


class VersionViewSet(
    TeamScopedViewSet,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
):
    """Single prompt versions. A used (locked) version refuses edits and deletion with 409."""

    queryset = selectors.versions_with_blocks()
    serializer_class = VersionSerializer
    view_feature = PROMPTS_VIEW
    edit_feature = PROMPTS_EDIT
    filterset_class = VersionFilter

    @extend_schema(request=VersionUpdateSerializer, responses=VersionSerializer)
    def update(self, request, *args, **kwargs):
        version = cast(PromptVersion, self.get_object())
        data = VersionUpdateSerializer(data=request.data, partial=kwargs.get("partial", False))
        data.is_valid(raise_exception=True)
        services.version_update(
            user=request.user, version=version, **_version_input(data.validated_data)
        )
        return Response(VersionSerializer(selectors.versions_with_blocks().get(pk=version.pk)).data)

    def perform_destroy(self, instance):
        services.version_delete(user=self.request.user, version=instance)

    @extend_schema(request=RenderInputSerializer, responses=RenderedSerializer(many=True))
    @action(detail=True, methods=["post"], pagination_class=None)
    def render(self, request, pk=None):
        """Render the version for the given items; 400 lists every missing variable by item."""
        version = cast(PromptVersion, self.get_object())
        data = RenderInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        raw_items = data.validated_data.get("items") or [version.sample_item]
        items = [(str(item.get("id", index + 1)), item) for index, item in enumerate(raw_items)]
        rendered = services.version_render(version=version, items=items)
        return Response(
            [
                {"item_id": item_id, "system": r.system, "user": r.user}
                for (item_id, _), r in zip(items, rendered, strict=True)
            ]
        )
