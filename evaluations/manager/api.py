"""The scenario manager's API: ``POST /api/scenarios/{id}/export/csv`` and ``/export/json``
(the unblinded judgments) and ``POST /api/scenarios/{id}/import`` (judgments collected
elsewhere)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform import validation
from evalplatform.accounts import audit, policy
from evalplatform.accounts.roles import SCENARIOS_EXPORT, SCENARIOS_MANAGE, SCENARIOS_VIEW
from evalplatform.api.parsers import MultiPartParser
from evalplatform.api.uploads import read_upload
from evalplatform.errors import FieldErrors
from evalplatform.throttling import expensive
from evaluations.judgments.models import LLMJudge
from evaluations.manager import exports
from evaluations.manager.imports import import_judgments
from scenarios.models import Scenario


class ScenarioExportView(APIView):
    """``POST /api/scenarios/{id}/export/csv`` and ``/export/json``
    (``feature:scenarios:export``): every judgment, unblinded (which variant was which model
    and prompt), streamed. CSV columns depend on the scenario's type (docs/scenarios.md)."""

    @extend_schema(
        request=None,
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/json"): OpenApiTypes.OBJECT,
        },
        description="``export/csv`` answers text/csv, ``export/json`` application/json; "
        "``?judge=<id>``: one LLM judge's judgments only.",
        parameters=[OpenApiParameter("judge", int, description="One LLM judge's judgments.")],
    )
    @expensive
    def post(self, request, pk: int, fmt: str):
        scenario = policy.access(
            request.user,
            SCENARIOS_EXPORT,
            Scenario.objects.select_related("team"),
            view_feature=SCENARIOS_VIEW,
            pk=pk,
        )
        raw = request.query_params.get("judge")
        judge = validation.digits(raw) if raw is not None else None
        if raw is not None and (
            judge is None or not LLMJudge.objects.filter(pk=judge, scenario=scenario).exists()
        ):
            raise FieldErrors({"judge": "The id of one of the scenario's LLM judges."})
        audit.record(
            user=request.user,
            team=scenario.team_id,
            action="scenario.export",
            target=scenario,
            format=fmt,
            judge=judge,
        )
        if fmt == "csv":
            return exports.csv_response(scenario, judge)
        head = {
            "id": scenario.pk,
            "team": scenario.team.slug,
            "name": scenario.name,
            "type": scenario.type,
            "status": scenario.status,
            "instructions": scenario.instructions,
            "config": scenario.config,
            "blind": scenario.blind,
            "context_fields": scenario.context_fields,
            "overlap": scenario.overlap,
            "seed": scenario.seed,
            "source": scenario.source,
        }
        return exports.json_response(scenario, head, judge)


class ImportJudgmentsView(APIView):
    """``POST /api/scenarios/{id}/import`` (``feature:scenarios:manage``): a multipart
    ``file`` of judgments collected elsewhere (CSV or JSON lines; columns in
    docs/scenarios.md); every row or none."""

    parser_classes = [MultiPartParser]

    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: OpenApiTypes.OBJECT})
    @expensive
    def post(self, request, pk: int):
        scenario = policy.access(
            request.user,
            SCENARIOS_MANAGE,
            Scenario.objects.select_related("team"),
            view_feature=SCENARIOS_VIEW,
            pk=pk,
        )
        upload = read_upload(request)
        if upload is None:
            raise FieldErrors({"file": "Upload the judgments as a file."})
        raw, filename = upload
        count = import_judgments(user=request.user, scenario=scenario, raw=raw, filename=filename)
        return Response({"imported": count}, status=status.HTTP_201_CREATED)
