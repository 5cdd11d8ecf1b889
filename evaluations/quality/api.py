"""The quality-control API, ``feature:scenarios:manage`` on the scenario (another team's is a
404): ``/api/scenarios/{id}/assignees`` (who evaluates, and their quotas),
``/api/scenarios/{id}/gold`` (gold tasks and the rate they are mixed in at),
``/api/scenarios/{id}/attention`` (attention checks and their rate),
``/api/scenarios/{id}/quality`` (each evaluator's figures) and
``/api/scenarios/{id}/excluded/{user}`` (leave an evaluator's judgments out of the analytics,
or take them back in). docs/scenarios.md, "Who evaluates" and "Quality control"."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts import policy
from evalplatform.accounts.roles import SCENARIOS_MANAGE, SCENARIOS_VIEW
from evalplatform.api import bodies
from evalplatform.api.parsers import JSONParser, MultiPartParser
from evalplatform.api.uploads import read_upload
from evalplatform.errors import FieldErrors
from evaluations.quality import attention, selectors, services
from scenarios.models import Scenario


def _managed_scenario(user: Any, pk: int) -> Scenario:
    return policy.access(
        user,
        SCENARIOS_MANAGE,
        Scenario.objects.select_related("team"),
        view_feature=SCENARIOS_VIEW,
        pk=pk,
    )


class AssigneesView(APIView):
    """GET: the scenario's assignees (``everyone``: none chosen, so every member of the team
    who may submit evaluates it) and its default quota. PUT a list of ``{"user": id or
    username, "quota": n or null}``, or ``{"assignees": [...], "default_quota": n or null}``:
    replaces them."""

    parser_classes = [JSONParser]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        scenario = _managed_scenario(request.user, pk)
        return Response(selectors.assignees_view(scenario))

    @extend_schema(request=bodies.ASSIGNEES, responses=OpenApiTypes.OBJECT)
    def put(self, request, pk: int):
        scenario = _managed_scenario(request.user, pk)
        services.assignees_set(user=request.user, scenario=scenario, data=request.data)
        return Response(selectors.assignees_view(scenario))


class GoldView(APIView):
    """GET: the gold tasks with their answers, and ``gold_rate``. PUT a list of ``{"task":
    id, "answer": {...}}`` (answers as an evaluator sends them), or ``{"tasks": [...],
    "gold_rate": r}``, as JSON or as a multipart ``file`` (JSON or JSON lines, with an
    optional ``gold_rate`` field): replaces them."""

    parser_classes = [JSONParser, MultiPartParser]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        scenario = _managed_scenario(request.user, pk)
        return Response(selectors.gold_view(scenario))

    @extend_schema(request=bodies.GOLD, responses=OpenApiTypes.OBJECT)
    def put(self, request, pk: int):
        scenario = _managed_scenario(request.user, pk)
        upload = read_upload(request)
        data: Any = request.data
        if upload is not None:
            data = {"tasks": services.gold_entries(upload[0])}
            if isinstance(data["tasks"], dict):
                data = dict(data["tasks"])
            if request.data.get("gold_rate") not in (None, ""):
                data["gold_rate"] = request.data.get("gold_rate")
        services.gold_set(user=request.user, scenario=scenario, data=data)
        return Response(selectors.gold_view(scenario))


class AttentionView(APIView):
    """GET: the attention checks (``task``, ``position``, ``instruction``, ``answer``) and
    ``attention_rate``. POST ``{"instruction": text, "answer": {...}, "task": id}`` (``task``
    optional: whose item and variants the check reuses) adds one check (201). PUT
    ``{"attention_rate": r}`` (0 to 0.5) sets the rate they are mixed in at."""

    parser_classes = [JSONParser]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        scenario = _managed_scenario(request.user, pk)
        return Response(attention.attention_view(scenario))

    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: OpenApiTypes.OBJECT})
    def post(self, request, pk: int):
        scenario = _managed_scenario(request.user, pk)
        check = attention.attention_add(user=request.user, scenario=scenario, data=request.data)
        body = {
            "task": check.task_id,
            "position": check.task.position,
            "instruction": check.instruction,
            "answer": check.answer,
        }
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)
    def put(self, request, pk: int):
        scenario = _managed_scenario(request.user, pk)
        data = request.data if isinstance(request.data, dict) else {}
        unknown = set(data) - {"attention_rate"}
        if unknown or "attention_rate" not in data:
            raise FieldErrors({"attention_rate": 'Send {"attention_rate": r}, r from 0 to 0.5.'})
        attention.attention_rate_set(
            user=request.user, scenario=scenario, rate=data["attention_rate"]
        )
        return Response(attention.attention_view(scenario))


class AttentionCheckView(APIView):
    """DELETE: remove an attention check nobody answered yet (204; an answered one is 409)."""

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, pk: int, task: int):
        scenario = _managed_scenario(request.user, pk)
        attention.attention_remove(user=request.user, scenario=scenario, task=task)
        return Response(status=status.HTTP_204_NO_CONTENT)


class QualityView(APIView):
    """Each evaluator's judgments, accuracy on gold, attention checks passed and failed,
    agreement with the others, median time per task and flags (straight-lining, fast,
    failed-attention), and whether they are excluded."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        scenario = _managed_scenario(request.user, pk)
        return Response(selectors.quality(scenario))


class ExcludedView(APIView):
    """POST (optionally ``{"reason": ...}``): leave the evaluator's judgments out of the
    analytics (201; 200 if they were already); DELETE: take them back in (204). Both are
    audited; the judgments themselves stay."""

    parser_classes = [JSONParser]

    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: OpenApiTypes.OBJECT})
    def post(self, request, pk: int, user: str):
        scenario = _managed_scenario(request.user, pk)
        evaluator = services.rater(scenario, user)
        reason = request.data.get("reason", "") if isinstance(request.data, dict) else None
        exclusion, made = services.rater_exclude(
            user=request.user, scenario=scenario, evaluator=evaluator, reason=reason
        )
        body = {
            "evaluator": evaluator.pk,
            "username": evaluator.get_username(),
            "reason": exclusion.reason,
            "excluded_at": exclusion.created_at,
        }
        return Response(body, status=status.HTTP_201_CREATED if made else status.HTTP_200_OK)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, pk: int, user: str):
        scenario = _managed_scenario(request.user, pk)
        evaluator = services.rater(scenario, user)
        services.rater_include(user=request.user, scenario=scenario, evaluator=evaluator)
        return Response(status=status.HTTP_204_NO_CONTENT)
