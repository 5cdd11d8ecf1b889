"""The scenarios API under ``/api/scenarios/``, and the generation spec's
``POST /api/generation/jobs/:id/to-scenario`` (routed by ``scenarios.urls``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts import policy
from evalplatform.accounts.permissions import TeamScopedViewSet, default_team
from evalplatform.accounts.roles import (
    GENERATION_TO_SCENARIO,
    GENERATION_VIEW,
    SCENARIOS_CREATE,
    SCENARIOS_MANAGE,
    SCENARIOS_VIEW,
)
from evalplatform.api import bodies
from evalplatform.api.parsers import FormParser, JSONParser, MultiPartParser
from evalplatform.api.uploads import config_and_upload
from evalplatform.errors import FieldErrors
from evalplatform.throttling import expensive
from generation import sources
from generation.models import GenerationJob
from scenarios import selectors, services
from scenarios.inputs import ScenarioFromJobInput, ScenarioInput, ScenarioUploadInput
from scenarios.models import Scenario, Task, Variant


class ScenarioSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug", read_only=True)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    items = serializers.IntegerField(source="items.count", read_only=True)
    variants = serializers.IntegerField(source="variants.count", read_only=True)
    tasks = serializers.IntegerField(source="tasks.count", read_only=True)

    class Meta:
        model = Scenario
        fields = [
            "id",
            "team",
            "name",
            "type",
            "status",
            "instructions",
            "config",
            "blind",
            "context_fields",
            "overlap",
            "seed",
            "source",
            "items",
            "variants",
            "tasks",
            "created_by",
            "created_at",
            "opened_at",
            "closed_at",
        ]
        read_only_fields = fields


class VariantSerializer(serializers.ModelSerializer):
    item_id = serializers.CharField(source="item.item_id", read_only=True)

    class Meta:
        model = Variant
        fields = [
            "id",
            "item_id",
            "variant_id",
            "content",
            "model_label",
            "prompt_label",
            "meta",
            "source_output",
        ]
        read_only_fields = fields


class TaskSerializer(serializers.ModelSerializer):
    item_id = serializers.CharField(
        source="item.item_id", read_only=True, default=None, allow_null=True
    )

    class Meta:
        model = Task
        fields = ["id", "position", "item_id", "variant_a", "variant_b", "order", "reverse_of"]
        read_only_fields = fields


def _upload(request) -> tuple[dict[str, Any], sources.Upload, str]:
    """The configuration and the rows: a multipart ``file``, or the text in ``content``."""
    data, raw, filename = config_and_upload(request)
    if raw is not None:
        return data, raw, filename
    content = data.pop("content", None)
    if not isinstance(content, str) or not content:
        raise FieldErrors({"content": "Upload a file (multipart) or give its text in content."})
    return data, content.encode(), ""


def _team(user: Any, slug: Any):
    """The team named by slug among those where the user may create scenarios; it may be left
    out when there is exactly one."""
    if slug:
        team = policy.teams_with(user, SCENARIOS_CREATE).filter(slug=str(slug)).first()
        if team is None:
            raise FieldErrors({"team": "Unknown team, or one where you may not create scenarios."})
        return team
    team = default_team(user, SCENARIOS_CREATE)
    if team is None:
        raise FieldErrors({"team": "Name the team (slug)."})
    return team


class ScenarioViewSet(TeamScopedViewSet, mixins.ListModelMixin, mixins.RetrieveModelMixin):
    """Scenarios of the user's teams. Create one from an upload here, or from a generation
    job with ``POST /api/generation/jobs/{id}/to-scenario``."""

    queryset = Scenario.objects.select_related("team", "created_by")
    serializer_class = ScenarioSerializer
    view_feature = SCENARIOS_VIEW
    action_features = {
        "create": SCENARIOS_CREATE,
        "preview": SCENARIOS_CREATE,
        "partial_update": SCENARIOS_MANAGE,
        "destroy": SCENARIOS_MANAGE,
        "open": SCENARIOS_MANAGE,
        "regenerate": SCENARIOS_MANAGE,
        "close": SCENARIOS_MANAGE,
    }
    filterset_fields = ["type", "status"]
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    def _scenario(self) -> Scenario:
        return self.get_object()  # type: ignore[return-value]

    def _answer(self, scenario: Scenario, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_base_queryset().get(pk=scenario.pk)
        return Response(ScenarioSerializer(fresh).data, status=code)

    @extend_schema(
        request=bodies.request(ScenarioUploadInput, *bodies.FORMS),
        responses={201: ScenarioSerializer},
    )
    @expensive
    def create(self, request, *args, **kwargs):
        """From an upload: a multipart ``file`` (CSV with a header, or JSON lines) with the
        rest as JSON in ``config``, or JSON with the text in ``content``. Rows:
        ``item_id, variant_id, content`` and optionally ``model, prompt, context``. Fields:
        team, name, type (rating, ranking, comparison, labeling), config (the rubric, label
        set or pair design), instructions, blind, context_fields (the context fields a blind
        scenario shows; null: all), overlap, seed, format."""
        data, raw, filename = _upload(request)
        team = _team(request.user, data.get("team"))
        scenario = services.scenario_from_upload(
            user=request.user, team=team, data=data, raw=raw, filename=filename
        )
        return self._answer(scenario, status.HTTP_201_CREATED)

    @extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)
    @action(detail=False, methods=["post"])
    @expensive
    def preview(self, request):
        """The body of ``create``, previewed without writing anything: ``tasks`` (counted,
        not built), ``judgments`` (tasks times overlap), ``items``, ``variants``, whether the
        design is within ``limit`` (``allowed``), the human time (``human_hours`` at
        ``seconds_per_judgment``), and with ``judge_model`` (a model id) one judge call per
        task's estimated cost (``judge``). The name may be left out."""
        data, raw, filename = _upload(request)
        team = _team(request.user, data.get("team"))
        return Response(
            services.preview_from_upload(
                user=request.user, team=team, data=data, raw=raw, filename=filename
            )
        )

    @extend_schema(request=bodies.request(ScenarioInput), responses=ScenarioSerializer)
    def partial_update(self, request, *args, **kwargs):
        """A draft's name, instructions, blind mode, context_fields, overlap or config
        (rubric, labels, ties; the pair design is fixed)."""
        if not isinstance(request.data, dict):
            raise FieldErrors({"non_field_errors": "Send a JSON object."})
        scenario = services.scenario_update(
            user=request.user, scenario=self._scenario(), data=dict(request.data)
        )
        return self._answer(scenario)

    def destroy(self, request, *args, **kwargs):
        services.scenario_delete(user=request.user, scenario=self._scenario())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses=ScenarioSerializer)
    @action(detail=True, methods=["post"])
    def open(self, request, pk=None):
        """Open a draft for evaluation (its design is fixed from then on)."""
        return self._answer(services.scenario_open(user=request.user, scenario=self._scenario()))

    @extend_schema(request=bodies.REGENERATE, responses=ScenarioSerializer)
    @action(detail=True, methods=["post"])
    @expensive
    def regenerate(self, request, pk=None):
        """A draft's tasks made again with another pair design or seed: ``config`` (merged
        into the current one) and ``seed``; not once any task was asked."""
        if not isinstance(request.data, dict):
            raise FieldErrors({"non_field_errors": "Send a JSON object."})
        scenario = services.scenario_regenerate(
            user=request.user, scenario=self._scenario(), data=dict(request.data)
        )
        return self._answer(scenario)

    @extend_schema(request=None, responses=ScenarioSerializer)
    @action(detail=True, methods=["post"])
    def close(self, request, pk=None):
        return self._answer(services.scenario_close(user=request.user, scenario=self._scenario()))

    @extend_schema(responses=VariantSerializer(many=True))
    @action(detail=True, methods=["get"])
    def variants(self, request, pk=None):
        """The variants with what made them (model, prompt): for the scenario's managers and
        viewers; evaluators see tasks only, through the evaluation API, blind."""
        page = self.paginate_queryset(selectors.variants(self._scenario()))
        return self.get_paginated_response(VariantSerializer(page, many=True).data)

    @extend_schema(responses=TaskSerializer(many=True))
    @action(detail=True, methods=["get"])
    def tasks(self, request, pk=None):
        """The task design in presentation order: variant ids shown first and second (pairs),
        the presented order (rankings), and which pair a reverse pair mirrors."""
        page = self.paginate_queryset(selectors.tasks(self._scenario()))
        return self.get_paginated_response(TaskSerializer(page, many=True).data)


class JobToScenarioView(APIView):
    """``POST /api/generation/jobs/{id}/to-scenario`` (``feature:generation:to_scenario``
    and ``feature:scenarios:create``): name, type, config, instructions, blind,
    context_fields (by default the fields the job's prompts read), overlap, seed, and
    ``outputs`` ({status: [...], models: [job model ids], prompts: [job prompt
    ids, repetitions, temperatures]}; completed outputs of every model and prompt by
    default). Items are grouped by the job's source items. With ``"preview": true`` nothing
    is written: the answer is the preview of ``POST /api/scenarios/preview``."""

    parser_classes = [JSONParser]

    @extend_schema(request=ScenarioFromJobInput, responses={201: ScenarioSerializer})
    @expensive
    def post(self, request, pk: int):
        job = policy.access(
            request.user,
            GENERATION_TO_SCENARIO,
            GenerationJob.objects.filter(writing=False).select_related("team"),
            view_feature=GENERATION_VIEW,
            pk=pk,
        )
        if not isinstance(request.data, dict):
            raise FieldErrors({"non_field_errors": "Send a JSON object."})
        data = dict(request.data)
        preview = data.pop("preview", False)
        if not isinstance(preview, bool):
            raise FieldErrors({"preview": "true or false."})
        if preview:
            return Response(services.preview_from_job(user=request.user, job=job, data=data))
        scenario = services.scenario_from_job(user=request.user, job=job, data=data)
        fresh = selectors.scenario_with_team(scenario.pk)
        return Response(ScenarioSerializer(fresh).data, status=status.HTTP_201_CREATED)
