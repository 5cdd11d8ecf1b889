"""The scenario manager's API: ``POST /api/scenarios/{id}/export/csv`` and ``/export/json``
(the unblinded judgments) and ``POST /api/scenarios/{id}/import`` (judgments collected
elsewhere)."""

from __future__ import annotations

from typing import Any

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
from evaluations.judgments.models import JudgeRun, LLMJudge
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
        "``?judge=<id>``: one LLM judge's judgments only; ``?run=<id>``: one run's.",
        parameters=[
            OpenApiParameter("judge", int, description="One LLM judge's judgments."),
            OpenApiParameter("run", int, description="One judge run's judgments."),
        ],
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
        only = _only(scenario, request.query_params)
        audit.record(
            user=request.user,
            team=scenario.team_id,
            action="scenario.export",
            target=scenario,
            format=fmt,
            judge=only.judge,
            run=only.run,
        )
        if fmt == "csv":
            return exports.csv_response(scenario, only)
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
        return exports.json_response(scenario, head, only)


def _only(scenario: Scenario, params: Any) -> exports.Only:
    """``?judge=<id>``: one of the scenario's LLM judges' judgments; ``?run=<id>``: those of
    one run of a judge (with ``judge``, a run of that judge). Anything else is a 400."""
    errors: dict[str, str] = {}
    judge = run = job = None
    if (raw := params.get("judge")) is not None:
        judge = validation.digits(raw)
        if judge is None or not LLMJudge.objects.filter(pk=judge, scenario=scenario).exists():
            errors["judge"] = "The id of one of the scenario's LLM judges."
    if (raw := params.get("run")) is not None:
        run = validation.digits(raw)
        found = (
            JudgeRun.objects.filter(pk=run, judge__scenario=scenario)
            .values_list("judge_id", "job_id")
            .first()
            if run is not None
            else None
        )
        if found is None:
            errors["run"] = "The id of a run of one of the scenario's LLM judges."
        elif judge is not None and found[0] != judge:
            errors["run"] = "A run of the judge named by judge."
        else:
            judge, job = found
    if errors:
        raise FieldErrors(errors)
    return exports.Only(judge=judge, run=run, job=job)


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
