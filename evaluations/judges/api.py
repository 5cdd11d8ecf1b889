"""The LLM judge API: ``/api/scenarios/{id}/judges`` (list, create) and ``/api/judges/{id}``
(read, change before its first run, delete, estimate, run, runs, retry failed). Viewing
needs ``feature:scenarios:view``; everything else ``feature:evaluations:judge``."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
)
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts import policy
from evalplatform.accounts.permissions import TeamScopedViewSet
from evalplatform.accounts.roles import (
    EVALUATIONS_JUDGE,
    EVALUATIONS_VIEW_ALL,
    SCENARIOS_MANAGE,
    SCENARIOS_VIEW,
)
from evalplatform.api import bodies
from evalplatform.api.parsers import JSONParser
from evalplatform.errors import FieldErrors
from evalplatform.throttling import expensive
from evaluations.analytics import trust
from evaluations.judges import selectors
from evaluations.judges import services as judges
from evaluations.judges.inputs import JudgeInput
from evaluations.judgments.models import LLMJudge
from scenarios.models import Scenario

JUDGE_BODY = bodies.request(JudgeInput)


class JudgeSerializer(serializers.ModelSerializer):
    prompt = serializers.SerializerMethodField()
    model = serializers.IntegerField(source="llm_model_id")
    model_label = serializers.CharField(source="llm_model.display_name")
    created_by = serializers.CharField(source="created_by.username")
    judgments = serializers.IntegerField(source="judgments.count")
    trust = serializers.SerializerMethodField(
        help_text="The judge's trust under its scenario's gate, from the latest stored "
        "analysis: state (trusted, untrusted, ungated; unmeasured without a card), reasons, "
        "counted_in_rankings."
    )

    class Meta:
        model = LLMJudge
        fields = [
            "id",
            "scenario",
            "name",
            "prompt_version",
            "prompt",
            "model",
            "model_label",
            "params",
            "temperatures",
            "repetitions",
            "swap",
            "mode",
            "max_tokens",
            "budget_usd",
            "reply_format",
            "include_untrusted",
            "trust",
            "judgments",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields

    def get_prompt(self, judge: LLMJudge) -> str:
        version = judge.prompt_version
        return f"{version.template.name} v{version.number}"

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_trust(self, judge: LLMJudge) -> dict[str, Any]:
        by_judge = self.context.get("trust")
        if by_judge is None:
            by_judge = trust.stored_trust(judge.scenario)
        return by_judge.get(
            judge.pk, {"state": "unmeasured", "reasons": [], "counted_in_rankings": True}
        )


class JudgeRunSerializer(serializers.Serializer):
    """``selectors.run_summary``."""

    id = serializers.IntegerField()
    judge = serializers.IntegerField()
    job = serializers.IntegerField(help_text="The generation job that makes the calls.")
    status = serializers.CharField(help_text="The job's status.")
    calls = serializers.IntegerField()
    completed = serializers.IntegerField()
    failed = serializers.IntegerField()
    pending = serializers.IntegerField()
    verdicts = serializers.IntegerField()
    unparseable = serializers.IntegerField()
    cost_usd = serializers.CharField()
    tasks = serializers.CharField(help_text='"unjudged", "all", or "listed" (task ids).')
    created_at = serializers.DateTimeField()


def _body(request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise FieldErrors({"non_field_errors": "Send a JSON object."})
    return dict(request.data)


class ScenarioJudgesView(APIView):
    """``/api/scenarios/{id}/judges``: the scenario's judges; POST creates one: name, model
    (an id), prompt_version (an id; the team's default judge prompt for the scenario's type
    when left out), params (e.g. thinking), temperatures, repetitions, swap (both orders),
    mode (live or batch), max_tokens, budget_usd, reply_format (how replies are read:
    docs/judges.md, "Reply formats")."""

    parser_classes = [JSONParser]

    def _scenario(self, request, pk: int, feature: str) -> Scenario:
        return policy.access(
            request.user,
            feature,
            Scenario.objects.select_related("team"),
            view_feature=SCENARIOS_VIEW,
            pk=pk,
        )

    @extend_schema(responses=JudgeSerializer(many=True))
    def get(self, request, pk: int):
        scenario = self._scenario(request, pk, SCENARIOS_VIEW)
        rows = selectors.scenario_judges(scenario)
        context = {"trust": trust.stored_trust(scenario)}
        return Response(JudgeSerializer(rows, many=True, context=context).data)

    @extend_schema(
        request=JUDGE_BODY,
        responses={
            201: PolymorphicProxySerializer(
                component_name="JudgeOrGrid",
                serializers=[JudgeSerializer, JudgeSerializer(many=True)],
                resource_type_field_name=None,
                many=False,
            )
        },
    )
    def post(self, request, pk: int):
        """One judge; or, with ``grid`` (``{"prompt_versions": [ids], "models": [{"model":
        id, "params": {...}, "label": ...}]}``), one judge per prompt version x model
        configuration with the same other settings, to compare them (a list comes back)."""
        scenario = self._scenario(request, pk, EVALUATIONS_JUDGE)
        data = _body(request)
        if "grid" in data:
            made = judges.judge_grid(user=request.user, scenario=scenario, data=data)
            context = {"trust": trust.stored_trust(scenario)}  # once, not once per judge
            return Response(
                JudgeSerializer(made, many=True, context=context).data,
                status=status.HTTP_201_CREATED,
            )
        judge = judges.judge_create(user=request.user, scenario=scenario, data=data)
        return Response(JudgeSerializer(judge).data, status=status.HTTP_201_CREATED)


class JudgeViewSet(TeamScopedViewSet, mixins.RetrieveModelMixin):
    """``/api/judges/{id}``."""

    queryset = LLMJudge.objects.select_related(
        "scenario__team", "prompt_version__template", "llm_model", "created_by"
    )
    serializer_class = JudgeSerializer
    view_feature = SCENARIOS_VIEW
    edit_feature = EVALUATIONS_JUDGE
    action_features = {
        "estimate": EVALUATIONS_JUDGE,
        "run": EVALUATIONS_JUDGE,
        "retry_failed": EVALUATIONS_JUDGE,
        "card": EVALUATIONS_VIEW_ALL,
        "trust_opt_in": SCENARIOS_MANAGE,
    }
    parser_classes = [JSONParser]

    def _judge(self) -> LLMJudge:
        return cast(LLMJudge, self.get_object())

    @extend_schema(request=JUDGE_BODY, responses=JudgeSerializer)
    def partial_update(self, request, *args, **kwargs):
        """Change a judge that has not run yet."""
        judge = judges.judge_update(user=request.user, judge=self._judge(), data=_body(request))
        return Response(JudgeSerializer(judge).data)

    def destroy(self, request, *args, **kwargs):
        """Delete the judge and its judgments."""
        judges.judge_delete(user=request.user, judge=self._judge())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=bodies.JUDGE_RUN, responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["post"])
    @expensive
    def estimate(self, request, pk=None):
        """Calls and cost of a run over ``tasks`` ("unjudged" by default, "all", or task
        ids), at live and batch prices; nothing runs."""
        return Response(
            judges.judge_estimate(user=request.user, judge=self._judge(), data=_body(request))
        )

    @extend_schema(request=bodies.JUDGE_RUN, responses={201: JudgeRunSerializer})
    @action(detail=True, methods=["post"])
    @expensive
    def run(self, request, pk=None):
        """Run the judge over ``tasks`` ("unjudged" by default, "all", or task ids), with
        an optional ``budget_usd`` for this run: a generation job, started at once (watch it
        at ``/generation/jobs/{job}`` or its WebSocket)."""
        run = judges.judge_run(user=request.user, judge=self._judge(), data=_body(request))
        summary = JudgeRunSerializer(selectors.run_summary(run)).data
        return Response(summary, status=status.HTTP_201_CREATED)

    @extend_schema(responses=JudgeRunSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def runs(self, request, pk=None):
        """The judge's runs: status, calls, verdicts, unparseable replies, cost."""
        rows = selectors.runs(self._judge())
        return Response(
            JudgeRunSerializer([selectors.run_summary(run) for run in rows], many=True).data
        )

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["post"], url_path="retry-failed")
    @expensive
    def retry_failed(self, request, pk=None):
        """Ask again the calls that failed (provider errors, and replies that were no valid
        verdict), and only them, in every run of the judge."""
        retried = judges.judge_retry_failed(user=request.user, judge=self._judge())
        return Response({"retried": retried})

    @extend_schema(responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["get"], pagination_class=None)
    @expensive
    def card(self, request, pk=None):
        """The judge's cards (one per temperature: agreement with people and with
        adjudicated answers, flip rate, self-consistency, self-preference, parse failures,
        cost, reasoning honoured, what it was measured with and whether that is stale), its
        trust, and the analysis they are of (docs/analytics.md, "Judge cards"). 202 while
        the scenario's analysis is first computed."""
        found = trust.judge_card(self._judge())
        if found["analysis"]["judgments"] is None and found["analysis"]["status"] != "done":
            return Response(found, status=status.HTTP_202_ACCEPTED, headers={"Retry-After": "2"})
        return Response(found)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "field", str, description="A dimension of the rubric; default the first."
            )
        ],
        responses=OpenApiTypes.OBJECT,
    )
    @action(detail=True, methods=["get"], pagination_class=None)
    def consistency(self, request, pk=None):
        """A rating judge's repeated calls per task, for one dimension: n, mean, SD, min,
        max per task and temperature, and the rank agreement of the tasks between
        temperatures (Spearman and Kendall tau-b with 95% intervals; docs/generation.md)."""
        field = request.query_params.get("field") or None
        return Response(selectors.consistency_for(self._judge(), field))

    @extend_schema(request=OpenApiTypes.OBJECT, responses=JudgeSerializer)
    @action(detail=True, methods=["post"], url_path="trust-opt-in")
    def trust_opt_in(self, request, pk=None):
        """A manager's opt-in: ``{"include_untrusted": true|false, "reason": "..."}`` counts
        (or stops counting) the judge's verdicts in the rankings even when it is untrusted;
        audited."""
        judge = trust.judge_opt_in(user=request.user, judge=self._judge(), data=request.data)
        return Response(JudgeSerializer(judge).data)
