"""The evaluation API under ``/api/evaluations/``: evaluators get their next task, answer
it or skip it (``feature:evaluations:submit``, their own assignments only, blind as the
scenario says); judgments are listed for their own rater, or all of them with
``feature:evaluations:view_all``."""

from __future__ import annotations

from typing import Any, cast

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts import audit, policy
from evalplatform.accounts.roles import (
    EVALUATIONS_VIEW_ALL,
    SCENARIOS_EXPORT,
    SCENARIOS_MANAGE,
    SCENARIOS_VIEW,
)
from evalplatform.api.uploads import read_upload
from evalplatform.errors import FieldErrors, NotFound
from evaluations import access, exports, invitations, services
from evaluations.imports import import_judgments
from evaluations.models import Assignment, Invitation, Judgment
from scenarios.models import Scenario, ScenarioStatus


def _open_scenario(user: Any, pk: int) -> Scenario:
    return access.scenario_to_evaluate(user, pk, Scenario.objects.select_related("team"))


def _assignment(user: Any, pk: int) -> Assignment:
    found = (
        Assignment.objects.select_related("scenario", "task__item")
        .filter(pk=pk, evaluator=user)
        .first()
    )
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
        scenarios = access.evaluable(
            request.user,
            Scenario.objects.filter(status=ScenarioStatus.OPEN).select_related("team"),
        )
        listed = list(scenarios.order_by("-opened_at", "-pk")[:200])
        done = services.progress_many(user=request.user, scenarios=listed)
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
        qs = Judgment.objects.select_related("evaluator", "external_rater", "judge").order_by("pk")
        if policy.visible(user, EVALUATIONS_VIEW_ALL, scenarios).exists():
            return qs.filter(scenario_id=int(raw))
        if access.evaluable(user, scenarios).exists():
            return qs.filter(scenario_id=int(raw), evaluator=user)
        raise NotFound()


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
        description="``export/csv`` answers text/csv, ``export/json`` application/json.",
    )
    def post(self, request, pk: int, fmt: str):
        scenario = policy.access(
            request.user,
            SCENARIOS_EXPORT,
            Scenario.objects.select_related("team"),
            view_feature=SCENARIOS_VIEW,
            pk=pk,
        )
        audit.record(
            user=request.user,
            team=scenario.team_id,
            action="scenario.export",
            target=scenario,
            format=fmt,
        )
        if fmt == "csv":
            return exports.csv_response(scenario)
        head = {
            "id": scenario.pk,
            "team": scenario.team.slug,
            "name": scenario.name,
            "type": scenario.type,
            "status": scenario.status,
            "instructions": scenario.instructions,
            "config": scenario.config,
            "blind": scenario.blind,
            "overlap": scenario.overlap,
            "seed": scenario.seed,
            "source": scenario.source,
        }
        return exports.json_response(scenario, head)


class ImportJudgmentsView(APIView):
    """``POST /api/scenarios/{id}/import`` (``feature:scenarios:manage``): a multipart
    ``file`` of judgments collected elsewhere (CSV or JSON lines; columns in
    docs/scenarios.md); every row or none."""

    parser_classes = [MultiPartParser]

    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: OpenApiTypes.OBJECT})
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


class InvitationSerializer(serializers.ModelSerializer):
    invited_by = serializers.CharField(source="invited_by.username", default=None, allow_null=True)
    accepted_by = serializers.CharField(
        source="accepted_by.username", default=None, allow_null=True
    )

    class Meta:
        model = Invitation
        fields = [
            "id",
            "email",
            "state",
            "invited_by",
            "created_at",
            "expires_at",
            "emailed_at",
            "accepted_by",
            "accepted_at",
            "revoked_at",
        ]
        read_only_fields = fields


class InvitationCreatedSerializer(InvitationSerializer):
    link = serializers.CharField(help_text="The invitation link; shown once (also mailed).")

    class Meta(InvitationSerializer.Meta):
        fields = [*InvitationSerializer.Meta.fields, "link"]
        read_only_fields = fields


class InvitationInputSerializer(serializers.Serializer):
    emails = serializers.ListField(child=serializers.EmailField())
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000)


def _managed_scenario(user: Any, pk: int) -> Scenario:
    return policy.access(
        user,
        SCENARIOS_MANAGE,
        Scenario.objects.select_related("team"),
        view_feature=SCENARIOS_VIEW,
        pk=pk,
    )


def invitation_link(request, token: str) -> str:
    return request.build_absolute_uri(reverse("invitation", kwargs={"token": token}))


class InvitationListView(APIView):
    """``/api/scenarios/{id}/invitations`` (``feature:scenarios:manage``): the scenario's
    invitations; POST ``{"emails": [...], "note": ...}`` invites people by email. Each new
    invitation comes back once with its ``link`` (also mailed); whoever accepts it may
    evaluate this scenario, and only this one."""

    parser_classes = [JSONParser]

    @extend_schema(responses=InvitationSerializer(many=True))
    def get(self, request, pk: int):
        scenario = _managed_scenario(request.user, pk)
        rows = scenario.invitations.select_related("invited_by", "accepted_by")
        return Response(InvitationSerializer(rows, many=True).data)

    @extend_schema(
        request=InvitationInputSerializer,
        responses={201: InvitationCreatedSerializer(many=True)},
    )
    def post(self, request, pk: int):
        scenario = _managed_scenario(request.user, pk)
        if not isinstance(request.data, dict):
            raise FieldErrors({"non_field_errors": "Send a JSON object."})
        made = invitations.invite(
            user=request.user,
            scenario=scenario,
            emails=request.data.get("emails"),
            note=request.data.get("note", ""),
            link_for=lambda token: invitation_link(request, token),
        )
        body = [
            {**InvitationSerializer(invitation).data, "link": link} for invitation, link in made
        ]
        return Response(body, status=status.HTTP_201_CREATED)


class InvitationView(APIView):
    """``DELETE /api/scenarios/{id}/invitations/{invitation_id}`` withdraws an invitation:
    a pending link stops working, and someone who accepted it leaves the pool."""

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, pk: int, invitation_id: int):
        scenario = _managed_scenario(request.user, pk)
        invitation = Invitation.objects.filter(scenario=scenario, pk=invitation_id).first()
        if invitation is None:
            raise NotFound()
        invitations.withdraw(user=request.user, invitation=invitation)
        return Response(status=status.HTTP_204_NO_CONTENT)
