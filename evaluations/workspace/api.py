"""The evaluation API under ``/api/evaluations/``: evaluators get their next task, answer
it, skip it or flag it, and revise their earlier answers (``feature:evaluations:submit``,
their own assignments and judgments only, blind as the scenario says); judgments are listed
for their own rater, or all of them with ``feature:evaluations:view_all``, which also lists
a scenario's flags."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform import validation
from evalplatform.accounts import policy
from evalplatform.accounts.roles import EVALUATIONS_VIEW_ALL, SCENARIOS_VIEW
from evalplatform.api import bodies
from evalplatform.errors import FieldErrors, NotFound
from evaluations.judgments.models import Assignment, Judgment
from evaluations.workspace import access, flags, revisions, selectors, services
from evaluations.workspace.models import JudgmentRevision, TaskFlag
from scenarios.models import Scenario, Variant
from scenarios.types.base import KEYS


def _open_scenario(user: Any, pk: int) -> Scenario:
    return access.scenario_to_evaluate(user, pk)


def _assignment(user: Any, pk: int) -> Assignment:
    found = selectors.own_assignment(user, pk)
    if found is None or not access.may_evaluate(user, found.scenario):
        raise NotFound()
    return found


def _to_lock(pk: int) -> Assignment:
    """Assignment ``pk`` by reference, for ``services.submit`` and ``services.skip``: they
    fetch it locked and check it is the user's to answer (``NotFound`` otherwise), so it is
    not read and checked once more here."""
    return Assignment(pk=pk)


class QueueEntrySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(help_text="The team's slug.")
    name = serializers.CharField()
    type = serializers.CharField()
    done = serializers.IntegerField(help_text="Tasks you answered.")
    total = serializers.IntegerField(help_text="Those, and the ones you could still be handed.")
    skipped = serializers.IntegerField(help_text="Tasks you skipped.")
    left = serializers.IntegerField(
        help_text="Up to this many more for you (fewer as others answer them)."
    )


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
    """A judgment. ``presented``: the variants' ids in the order shown; to the evaluator of
    a blind scenario (the context's ``blind_rater``), the neutral keys they saw (A, B, ...):
    variant ids follow the order variants were made in, and so would tell models apart."""

    rater = serializers.SerializerMethodField()
    presented = serializers.SerializerMethodField()
    addresses_judge = serializers.SerializerMethodField()

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
            "comment",
            "time_spent_ms",
            "judge",
            "repetition",
            "temperature",
            "swapped",
            "parse_status",
            "parse_error",
            "addresses_judge",
            "created_at",
            "revised_at",
        ]
        read_only_fields = fields

    def get_addresses_judge(self, judgment: Judgment) -> bool:
        """A judge's verdict on a response that reads as words to the judge (a heuristic
        pointer: ``scenarios.injection``); false for people's judgments."""
        if judgment.judge_id is None:
            return False
        flagged = cast(dict[str, Any], self.context).setdefault("flagged_variants", {})
        if judgment.scenario_id not in flagged:
            flagged[judgment.scenario_id] = set(
                Variant.objects.filter(
                    scenario_id=judgment.scenario_id, addresses_judge=True
                ).values_list("pk", flat=True)
            )
        return bool(flagged[judgment.scenario_id] & set(judgment.presented))

    @extend_schema_field(
        {"type": "array", "items": {"oneOf": [{"type": "integer"}, {"type": "string"}]}}
    )
    def get_presented(self, judgment: Judgment) -> list[Any]:
        shown = list(judgment.presented)
        if self.context.get("blind_rater"):
            return list(KEYS[: len(shown)])
        return shown

    def get_rater(self, judgment: Judgment) -> str:
        if judgment.evaluator is not None:
            return judgment.evaluator.get_username()
        if judgment.judge is not None:
            return judgment.judge.name
        if judgment.external_rater is not None:
            return judgment.external_rater.name
        return ""


class RevisionSerializer(serializers.ModelSerializer):
    class Meta:
        model = JudgmentRevision
        fields = ["payload", "rationale", "comment", "time_spent_ms", "answered_at", "replaced_at"]
        read_only_fields = fields


class OwnJudgmentSerializer(JudgmentSerializer):
    revisions = RevisionSerializer(many=True, read_only=True)

    class Meta(JudgmentSerializer.Meta):
        fields = [*JudgmentSerializer.Meta.fields, "revisions"]
        read_only_fields = fields


class SubmitView(APIView):
    """Answer your assigned task: ``answer`` in the scenario type's shape (comparison
    ``{"winner": "A" | "B" | "tie"}``, rating ``{"scores": {dimension: n}, "justifications":
    {...}}``, ranking ``{"ranking": ["B", "A", ...]}`` best first, labeling ``{"labels": [...],
    "text": ...}``), ``rationale``, ``comment`` (a note to the managers, at most 2,000
    characters), ``time_spent_ms``."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=bodies.ANSWER, responses={201: JudgmentSerializer})
    def post(self, request, pk: int):
        if not isinstance(request.data, dict):
            raise FieldErrors({"non_field_errors": "Send a JSON object."})
        judgment = services.submit(user=request.user, assignment=_to_lock(pk), data=request.data)
        context = _rater_context(judgment.scenario)
        return Response(
            JudgmentSerializer(judgment, context=context).data, status=status.HTTP_201_CREATED
        )


class SkipView(APIView):
    """Give the task back; it will not be handed to you again."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses={204: None})
    def post(self, request, pk: int):
        services.skip(user=request.user, assignment=_to_lock(pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class FlagSerializer(serializers.ModelSerializer):
    evaluator = serializers.CharField(source="evaluator.username", read_only=True)
    item_id = serializers.CharField(
        source="task.item.item_id", read_only=True, default=None, allow_null=True
    )

    class Meta:
        model = TaskFlag
        fields = ["id", "scenario", "task", "item_id", "evaluator", "reason", "note", "created_at"]
        read_only_fields = fields


class FlagView(APIView):
    """Flag your task for the managers: ``reason`` (broken, unclear, offensive) and an
    optional ``note``. A task you hold and have not answered is given back, as by skip."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: FlagSerializer})
    def post(self, request, pk: int):
        if not isinstance(request.data, dict):
            raise FieldErrors({"non_field_errors": "Send a JSON object."})
        flag = flags.task_flag(
            user=request.user, assignment=_assignment(request.user, pk), data=request.data
        )
        return Response(FlagSerializer(flag).data, status=status.HTTP_201_CREATED)


class FlagListView(ListAPIView):
    """The flags of a scenario, the latest first (``feature:evaluations:view_all``)."""

    permission_classes = [IsAuthenticated]
    serializer_class = FlagSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return TaskFlag.objects.none()
        scenario = policy.access(
            self.request.user,
            EVALUATIONS_VIEW_ALL,
            Scenario.objects.select_related("team"),
            view_feature=SCENARIOS_VIEW,
            pk=self.kwargs["pk"],
        )
        return selectors.flags(scenario)


def _rater_context(scenario: Scenario) -> dict[str, Any]:
    """What an evaluator's own judgments are serialized with: in a blind scenario, no id
    that could tell the models apart."""
    return {"blind_rater": scenario.blind}


class MineView(ListAPIView):
    """Your judgments in the scenario, the latest first, each with its earlier answers
    (``revisions``): what you may revise while the scenario is open."""

    permission_classes = [IsAuthenticated]
    serializer_class = OwnJudgmentSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Judgment.objects.none()
        self.scenario = access.scenario_to_evaluate(self.request.user, self.kwargs["pk"])
        return selectors.own_judgments(self.request.user, self.scenario)

    def get_serializer_context(self) -> dict[str, Any]:
        scenario = getattr(self, "scenario", None)
        rater = _rater_context(scenario) if scenario is not None else {}
        return {**super().get_serializer_context(), **rater}


class ReviseView(APIView):
    """Revise your own judgment while its scenario is open: the body of submit, checked the
    same way. The judgment keeps the new answer; the one it replaces joins ``revisions``.
    Anyone else's judgment is a 404; a closed scenario's a 409."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=bodies.ANSWER, responses={200: OwnJudgmentSerializer})
    def post(self, request, pk: int):
        if not isinstance(request.data, dict):
            raise FieldErrors({"non_field_errors": "Send a JSON object."})
        judgment = revisions.judgment_revise(user=request.user, judgment=pk, data=request.data)
        fresh = selectors.own_judgments(request.user, judgment.scenario).get(pk=judgment.pk)
        context = _rater_context(judgment.scenario)
        return Response(OwnJudgmentSerializer(fresh, context=context).data)


class JudgmentListView(ListAPIView):
    """Judgments of a scenario (``?scenario=ID``): all of them with
    ``feature:evaluations:view_all``, else your own; ``?judge=ID``: one LLM judge's."""

    permission_classes = [IsAuthenticated]
    serializer_class = JudgmentSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter("scenario", int, required=True),
            OpenApiParameter("judge", int, description="One LLM judge's verdicts only."),
        ],
        responses=JudgmentSerializer(many=True),
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Judgment.objects.none()
        user = cast(Any, self.request.user)
        raw = self.request.query_params.get("scenario", "")
        scenario_id = validation.digits(raw)
        if scenario_id is None:
            raise FieldErrors({"scenario": "The scenario's id."})
        judge = self.request.query_params.get("judge")
        judge_id = validation.digits(judge) if judge is not None else None
        if judge is not None and judge_id is None:
            raise FieldErrors({"judge": "The id of one of the scenario's LLM judges."})
        scenarios = Scenario.objects.filter(pk=scenario_id)
        found = selectors.judgments(scenario_id)
        if judge_id is not None:
            found = found.filter(judge_id=judge_id)
        if policy.visible(user, EVALUATIONS_VIEW_ALL, scenarios).exists():
            return found
        evaluable = access.evaluable(user, scenarios).first()
        if evaluable is not None:
            self.rater = _rater_context(evaluable)
            return found.filter(evaluator=user)
        raise NotFound()

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), **getattr(self, "rater", {})}
