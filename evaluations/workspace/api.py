"""The evaluation API under ``/api/evaluations/``: evaluators get their next task, answer
it or skip it (``feature:evaluations:submit``, their own assignments only, blind as the
scenario says); judgments are listed for their own rater, or all of them with
``feature:evaluations:view_all``."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts import policy
from evalplatform.accounts.roles import EVALUATIONS_VIEW_ALL
from evalplatform.errors import FieldErrors, NotFound
from evaluations.models import Assignment, Judgment
from evaluations.workspace import access, selectors, services
from scenarios.models import Scenario


def _open_scenario(user: Any, pk: int) -> Scenario:
    return access.scenario_to_evaluate(user, pk, Scenario.objects.select_related("team"))


def _assignment(user: Any, pk: int) -> Assignment:
    found = selectors.own_assignment(user, pk)
    if found is None or not access.may_evaluate(user, found.scenario):
        raise NotFound()
    return found


class QueueEntrySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(help_text="The team's slug.")
    name = serializers.CharField()
    type = serializers.CharField()
    done = serializers.IntegerField(help_text="Tasks you answered.")
    total = serializers.IntegerField(help_text="Those, and the ones you could still be handed.")


class QueueView(APIView):
    """Open scenarios you may evaluate, with your progress (done / total)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=QueueEntrySerializer(many=True))
    def get(self, request):
        listed = selectors.queue(request.user)
        done = selectors.progress_many(user=request.user, scenarios=listed)
        return Response(
            [
                {"id": s.pk, "team": s.team.slug, "name": s.name, "type": s.type, **done[s.pk]}
                for s in listed
            ]
        )


class NextTaskView(APIView):
    """Your current task in the scenario, or the next one (204 when none is left)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT, 204: None})
    def post(self, request, pk: int):
        scenario = _open_scenario(request.user, pk)
        assignment = services.next_task(user=request.user, scenario=scenario)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(services.task_view(assignment))


class AssignmentView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk: int):
        return Response(services.task_view(_assignment(request.user, pk)))


class JudgmentSerializer(serializers.ModelSerializer):
    rater = serializers.SerializerMethodField()

    class Meta:
        model = Judgment
        fields = [
            "id",
            "scenario",
            "task",
            "rater_kind",
            "rater",
            "presented",
            "payload",
            "rationale",
            "time_spent_ms",
            "judge",
            "repetition",
            "temperature",
            "swapped",
            "parse_status",
            "parse_error",
            "created_at",
        ]
        read_only_fields = fields

    def get_rater(self, judgment: Judgment) -> str:
        if judgment.evaluator is not None:
            return judgment.evaluator.get_username()
        if judgment.judge is not None:
            return judgment.judge.name
        if judgment.external_rater is not None:
            return judgment.external_rater.name
        return ""


class SubmitView(APIView):
    """Answer your assigned task: ``answer`` in the scenario type's shape (comparison
    ``{"winner": "A" | "B" | "tie"}``, rating ``{"scores": {dimension: n}, "justifications":
    {...}}``, ranking ``{"ranking": ["B", "A", ...]}`` best first, labeling ``{"labels": [...],
    "text": ...}``), ``rationale``, ``time_spent_ms``."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: JudgmentSerializer})
    def post(self, request, pk: int):
        if not isinstance(request.data, dict):
            raise FieldErrors({"non_field_errors": "Send a JSON object."})
        judgment = services.submit(
            user=request.user, assignment=_assignment(request.user, pk), data=request.data
        )
        return Response(JudgmentSerializer(judgment).data, status=status.HTTP_201_CREATED)


class SkipView(APIView):
    """Give the task back; it will not be handed to you again."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses={204: None})
    def post(self, request, pk: int):
        services.skip(user=request.user, assignment=_assignment(request.user, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class JudgmentListView(ListAPIView):
    """Judgments of a scenario (``?scenario=ID``): all of them with
    ``feature:evaluations:view_all``, else your own."""

    permission_classes = [IsAuthenticated]
    serializer_class = JudgmentSerializer

    @extend_schema(
        parameters=[OpenApiParameter("scenario", int, required=True)],
        responses=JudgmentSerializer(many=True),
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Judgment.objects.none()
        user = cast(Any, self.request.user)
        raw = self.request.query_params.get("scenario", "")
        if not raw.isdigit():
            raise FieldErrors({"scenario": "The scenario's id."})
        scenarios = Scenario.objects.filter(pk=int(raw))
        if policy.visible(user, EVALUATIONS_VIEW_ALL, scenarios).exists():
            return selectors.judgments(int(raw))
        if access.evaluable(user, scenarios).exists():
            return selectors.judgments(int(raw)).filter(evaluator=user)
        raise NotFound()
