"""The generation API, with the spec's endpoint paths and permission codes."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, cast

import django_filters
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts import audit, policy
from evalplatform.accounts.permissions import TeamScopedViewSet
from evalplatform.accounts.roles import (
    GENERATION_CREATE,
    GENERATION_EXPORT,
    GENERATION_MANAGE,
    GENERATION_VIEW,
)
from evalplatform.api import bodies
from evalplatform.api.parsers import FormParser, JSONParser, MultiPartParser
from evalplatform.api.uploads import config_and_upload, csv_chunks, download
from evalplatform.errors import FieldErrors
from evalplatform.runs.models import BatchState, ProviderBatch
from evalplatform.throttling import expensive
from generation import (
    batch_registry,
    exports,
    job_input,
    pilot,
    planning,
    replies,
    selectors,
    services,
)
from generation.models import GenerationJob, GenerationOutput


class JobSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    progress = serializers.FloatField(read_only=True)
    prompts = serializers.SerializerMethodField()
    models = serializers.SerializerMethodField()
    reply_format = serializers.SerializerMethodField(
        help_text="How replies are scored into fields (kind and fields), or null."
    )

    class Meta:
        model = GenerationJob
        fields = [
            "id",
            "team",
            "owner",
            "name",
            "status",
            "mode",
            "source_kind",
            "source_meta",
            "prompts",
            "models",
            "reply_format",
            "repetitions",
            "temperatures",
            "max_tokens",
            "budget_usd",
            "max_retries",
            "concurrency",
            "finish_live",
            "estimate",
            "total_cells",
            "completed_cells",
            "failed_cells",
            "progress",
            "cost_usd",
            "status_message",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_reply_format(self, job: GenerationJob) -> dict[str, Any] | None:
        return replies.shown(job.config.get("reply_format"))

    def get_prompts(self, job: GenerationJob) -> list[dict[str, Any]]:
        return [
            {"id": p.pk, "label": p.label, "prompt_version": p.prompt_version_id}
            for p in job.prompts.all()
        ]

    def get_models(self, job: GenerationJob) -> list[dict[str, Any]]:
        return [
            {
                "id": m.pk,
                "label": m.label,
                "model": m.llm_model_id,
                "params": m.params,
                "response_schema": m.response_schema,
            }
            for m in job.models.all()
        ]


class OutputSerializer(serializers.ModelSerializer):
    source_item_id = serializers.CharField(source="item.item_id", read_only=True)
    prompt_variant = serializers.CharField(source="prompt.label", read_only=True)
    model_name = serializers.CharField(source="model_config.label", read_only=True)

    class Meta:
        model = GenerationOutput
        fields = [
            "id",
            "job",
            "custom_id",
            "source_item_id",
            "prompt_variant",
            "model_name",
            "repetition",
            "temperature",
            "status",
            "content",
            "finish_reason",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "processing_time_ms",
            "last_attempt_ms",
            "attempts",
            "error_kind",
            "error_message",
            "parsed",
            "parse_status",
            "parse_error",
            "created_at",
            "started_at",
            "completed_at",
        ]
        read_only_fields = fields


class BatchSerializer(serializers.ModelSerializer):
    class Meta:
        model = ProviderBatch
        fields = list(selectors.BATCH_FIELDS)
        read_only_fields = fields


class BatchRegistrySerializer(serializers.Serializer):
    """A row of the batch registry (``generation.batch_registry.COLUMNS``)."""

    id = serializers.IntegerField()
    job_id = serializers.IntegerField(help_text="The generation job (a judge run's too).")
    job_name = serializers.CharField(allow_null=True, help_text="None: the job was deleted.")
    team = serializers.CharField(help_text="The team's slug.")
    provider = serializers.CharField(help_text="The connection's kind when it was sent.")
    connection_id = serializers.IntegerField()
    connection_name = serializers.CharField()
    model = serializers.CharField(help_text="The provider's model id.")
    name = serializers.CharField(help_text="The name sent to the provider.")
    remote_id = serializers.CharField(help_text="The provider's batch id (blank: not yet).")
    input_file_id = serializers.CharField(help_text="The provider's input file, if it has one.")
    state = serializers.ChoiceField(choices=BatchState.choices)
    provider_state = serializers.CharField()
    round = serializers.IntegerField(help_text="1 = the cells' first submission.")
    request_count = serializers.IntegerField()
    succeeded = serializers.IntegerField(help_text="As the provider counts them.")
    failed = serializers.IntegerField(help_text="As the provider counts them.")
    cells_completed = serializers.IntegerField(help_text="Cells whose result came from it.")
    cells_failed = serializers.IntegerField(help_text="Cells that failed for good in it.")
    cost_usd = serializers.DecimalField(max_digits=14, decimal_places=6)
    submitted_bytes = serializers.IntegerField()
    error_message = serializers.CharField()
    created_at = serializers.DateTimeField()
    submitted_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)
    closed_at = serializers.DateTimeField(allow_null=True)
    prompts = serializers.CharField(help_text='Its prompts ("Template v2"), "; "-joined.')
    reasoning = serializers.CharField(help_text="Reasoning settings; empty: none set.")
    direction = serializers.CharField(
        help_text="A judge run's: forward, reversed or both; empty for other jobs."
    )


class JobUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    budget_usd = serializers.DecimalField(
        max_digits=12,
        decimal_places=4,
        required=False,
        allow_null=True,
        min_value=Decimal("0.0001"),
    )


class OutputFilter(django_filters.FilterSet):
    model = django_filters.NumberFilter(field_name="model_config_id")
    prompt = django_filters.NumberFilter(field_name="prompt_id")
    item = django_filters.CharFilter(field_name="item__item_id")

    class Meta:
        model = GenerationOutput
        fields = [
            "status",
            "model",
            "prompt",
            "item",
            "repetition",
            "temperature",
            "parse_status",
        ]


CONSISTENCY_FIELD_HELP = "One of the job's reply fields; default: the first with numbers."
TABLE_HELP = "items (every numeric field, per item and condition) or agreement (one field)."
CONSISTENCY_ITEM_COLUMNS = [
    "field",
    "item",
    "condition",
    "model",
    "prompt",
    "temperature",
    "n",
    "mean",
    "sd",
    "min",
    "max",
]
CONSISTENCY_AGREEMENT_COLUMNS = [
    "field",
    "a",
    "b",
    "items",
    "spearman",
    "spearman_low",
    "spearman_high",
    "kendall",
    "kendall_low",
    "kendall_high",
    "spearman_interval",
    "kendall_interval",
]


def _cell(value: Any) -> Any:
    return "" if value is None else value


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """A rank-agreement row with each interval as its low and high ends."""
    flat = dict(row)
    for name in ("spearman", "kendall"):
        low, high = flat.pop(f"{name}_ci", None) or (None, None)
        flat[f"{name}_low"], flat[f"{name}_high"] = low, high
    return flat


# The body as ``JobInput`` declares it; or multipart, a ``config`` field beside the ``file``.
JOB_BODY = bodies.request(job_input.JobInput, *bodies.FORMS)


def _job_input(request) -> tuple[dict[str, Any], bytes | None, str]:
    """The configuration (JSON body, or a multipart ``config`` field) and an uploaded file.
    The file is passed on unread: ``planning.job_plan`` hands it to ``sources.parse_upload``,
    which reads it as a stream (and ``len`` of it is its size), hence the cast while
    ``job_plan``'s ``upload`` is annotated as bytes."""
    data, upload, filename = config_and_upload(request, error_key="source.file")
    return data, cast("bytes | None", upload), filename


def _jobs() -> QuerySet[GenerationJob]:
    """Jobs as the API shows them (their models by id: no ``LLMModel`` rows)."""
    return selectors.jobs(llm_models=False)


@extend_schema_view(
    list=extend_schema(
        parameters=[OpenApiParameter("owner", str, description=selectors.OWNER_HELP)]
    )
)
class JobViewSet(TeamScopedViewSet, mixins.ListModelMixin, mixins.RetrieveModelMixin):
    """Generation jobs of the user's teams."""

    queryset = _jobs()
    serializer_class = JobSerializer
    view_feature = GENERATION_VIEW
    action_features = {
        "create": GENERATION_CREATE,
        "destroy": GENERATION_MANAGE,
        "partial_update": GENERATION_MANAGE,
        "start": GENERATION_MANAGE,
        "pause": GENERATION_MANAGE,
        "cancel": GENERATION_MANAGE,
        "retry_failed": GENERATION_MANAGE,
        "export_csv": GENERATION_EXPORT,
        "export_json": GENERATION_EXPORT,
    }
    filterset_fields = ["status", "mode"]
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    def filter_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """The list takes ``owner``: ``me``, a user's id, or ``all`` (the default)."""
        queryset = super().filter_queryset(queryset)
        if self.action != "list":
            return queryset
        owner = self.request.query_params.get("owner")
        return selectors.owned_by(queryset, self.request.user, owner)

    def get_base_queryset(self) -> QuerySet[GenerationJob]:
        # Only the list and a job's own page show its prompts and models; every other action
        # on a job needs the row alone (and answers with a fresh ``selectors.jobs()``).
        base = super().get_base_queryset()
        return base if self.action in ("list", "retrieve") else base.prefetch_related(None)

    def _job(self) -> GenerationJob:
        return cast(GenerationJob, self.get_object())

    @extend_schema(request=JOB_BODY, responses={201: JobSerializer})
    @expensive
    def create(self, request, *args, **kwargs):
        """Create a job: team, name, mode, source ({type: manual|prompt_only, format,
        content}, {type: scenario, scenario: id}, or a multipart ``file`` with the rest as
        JSON in ``config``), prompt_versions, models, repetitions, temperatures (null: send
        none), max_tokens, budget_usd,
        max_retries, concurrency, finish_live (batch mode: failed rows finish live).
        Nothing is written unless all of it is valid."""
        data, upload, filename = _job_input(request)
        plan = planning.job_plan(user=request.user, data=data, upload=upload, filename=filename)
        job = services.job_create(user=request.user, plan=plan)
        if data.get("start") is True:
            services.job_start(user=request.user, job=job)
        return Response(
            JobSerializer(_jobs().get(pk=job.pk)).data,
            status.HTTP_201_CREATED,
        )

    @extend_schema(request=JobUpdateSerializer, responses=JobSerializer)
    def partial_update(self, request, *args, **kwargs):
        """Rename, or change the budget (not while running: pause first)."""
        if not isinstance(request.data, dict):
            raise FieldErrors({"non_field_errors": "Send a JSON object."})
        job = services.job_update(user=request.user, job=self._job(), data=dict(request.data))
        return Response(JobSerializer(_jobs().get(pk=job.pk)).data)

    def destroy(self, request, *args, **kwargs):
        services.job_delete(user=request.user, job=self._job())
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _transition(self, fn) -> Response:
        job = fn(user=self.request.user, job=self._job())
        return Response(JobSerializer(_jobs().get(pk=job.pk)).data)

    @extend_schema(request=None, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    @expensive
    def start(self, request, pk=None):
        """Start, or resume a paused job (queued if you already have a job running)."""
        return self._transition(services.job_start)

    @extend_schema(request=None, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def pause(self, request, pk=None):
        return self._transition(services.job_pause)

    @extend_schema(request=None, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        return self._transition(services.job_cancel)

    @extend_schema(request=None, responses=JobSerializer)
    @action(detail=True, methods=["post"], url_path="retry-failed")
    @expensive
    def retry_failed(self, request, pk=None):
        """Run the failed cells again, and only them (the job resumes if it had finished);
        ``retried`` says how many."""
        job, count = services.job_retry_failed(user=request.user, job=self._job())
        return Response(JobSerializer(_jobs().get(pk=job.pk)).data | {"retried": count})

    @extend_schema(responses=OutputSerializer(many=True), filters=True)
    @action(detail=True, methods=["get"])
    def outputs(self, request, pk=None):
        job = self._job()
        qs = OutputFilter(request.query_params, queryset=selectors.outputs(job).order_by("pk"))
        if not qs.is_valid():
            raise FieldErrors({k: v for k, v in qs.errors.items()})
        page = self.paginate_queryset(qs.qs)
        return self.get_paginated_response(OutputSerializer(page, many=True).data)

    @extend_schema(responses=BatchSerializer(many=True))
    @action(detail=True, methods=["get"])
    def batches(self, request, pk=None):
        """The job's provider batches (batch mode): state, counts, round, newest first."""
        page = self.paginate_queryset(selectors.job_batches(self._job()))
        return self.get_paginated_response(BatchSerializer(page, many=True).data)

    @extend_schema(responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["get"])
    def statistics(self, request, pk=None):
        return Response(selectors.statistics_for(self._job()))

    @extend_schema(
        parameters=[OpenApiParameter("field", str, description=CONSISTENCY_FIELD_HELP)],
        responses=OpenApiTypes.OBJECT,
    )
    @action(detail=True, methods=["get"])
    def consistency(self, request, pk=None):
        """Consistency of repeated calls, per item, for one of the reply format's numeric
        fields: n, mean, SD, min and max per item and condition (model, prompt,
        temperature), each condition's summary, and the rank agreement of the items between
        conditions (Spearman and Kendall tau-b with 95% intervals)."""
        job = self._job()
        return Response(selectors.consistency_for(job, request.query_params.get("field") or None))

    @extend_schema(
        parameters=[
            OpenApiParameter("table", str, enum=["items", "agreement"], description=TABLE_HELP),
            OpenApiParameter("field", str, description=CONSISTENCY_FIELD_HELP),
        ],
        responses={(200, "text/csv"): OpenApiTypes.STR},
    )
    @action(detail=True, methods=["get"], url_path="consistency/csv")
    def consistency_csv(self, request, pk=None):
        """The consistency tables as CSV: ``items`` (every numeric field, per item and
        condition) or ``agreement`` (one field's rank agreement between conditions)."""
        job = self._job()
        table = request.query_params.get("table") or "items"
        if table not in ("items", "agreement"):
            raise FieldErrors({"table": TABLE_HELP})
        if table == "items":
            rows = selectors.consistency_items(job)
            columns = CONSISTENCY_ITEM_COLUMNS
        else:
            found = selectors.consistency_for(job, request.query_params.get("field") or None)
            rows = [_flat(r) | {"field": found["field"]} for r in found.get("rank_agreement", [])]
            columns = CONSISTENCY_AGREEMENT_COLUMNS
        lines = [[_cell(r.get(c)) for c in columns] for r in rows]
        return download(
            csv_chunks(columns, lines),
            "text/csv; charset=utf-8",
            f"generation-job-{job.pk}-consistency-{table}.csv",
        )

    @extend_schema(request=None, responses={(200, "text/csv"): OpenApiTypes.STR})
    @action(detail=True, methods=["post"], url_path="export/csv")
    @expensive
    def export_csv(self, request, pk=None):
        """All outputs as CSV with the spec's columns, streamed."""
        job = self._job()
        audit.record(
            user=request.user,
            team=job.team_id,
            action="generation.job.export",
            target=job,
            format="csv",
        )
        return exports.csv_response(job)

    @extend_schema(request=None, responses={(200, "application/json"): OpenApiTypes.OBJECT})
    @action(detail=True, methods=["post"], url_path="export/json")
    @expensive
    def export_json(self, request, pk=None):
        """The job with its full configuration, and every output, streamed."""
        job = self._job()
        audit.record(
            user=request.user,
            team=job.team_id,
            action="generation.job.export",
            target=job,
            format="json",
        )
        return exports.json_response(job, JobSerializer(_jobs().get(pk=job.pk)).data)


class OutputViewSet(TeamScopedViewSet, mixins.RetrieveModelMixin):
    queryset = selectors.outputs()
    serializer_class = OutputSerializer
    view_feature = GENERATION_VIEW


class EstimateView(APIView):
    """Tokens and cost per model (live and batch prices, typical and high) for a job
    configuration, without creating it. Same body as creating a job, plus ``pilot``: run that
    many sampled cells first (1 to 20 real calls, at the live price) and calibrate the
    estimate with their measured reply lengths (median as typical, p90 as high)."""

    parser_classes = [JSONParser, MultiPartParser, FormParser]

    @extend_schema(request=JOB_BODY, responses=OpenApiTypes.OBJECT)
    @expensive
    def post(self, request):
        if not policy.has_feature_anywhere(request.user, GENERATION_CREATE):
            return Response({"detail": "You may not create generation jobs."}, status=403)
        data, upload, filename = _job_input(request)
        pilot.pilot_cells(data)  # a bad pilot value is a 400 before anything runs
        plan = planning.job_plan(user=request.user, data=data, upload=upload, filename=filename)
        return Response(pilot.job_estimate_with_pilot(plan, data, user=request.user))


REGISTRY_FILTERS = [
    OpenApiParameter("job", int, description="A job's id (another team's is a 404)."),
    OpenApiParameter("team", str, description="A team's slug."),
    OpenApiParameter("provider", str, description="Connection kinds, comma-separated."),
    OpenApiParameter("connection", int, description="A connection's id."),
    OpenApiParameter("state", str, description="Batch states, comma-separated."),
    OpenApiParameter("since", str, description="Submitted at or after: ISO date or time."),
    OpenApiParameter("until", str, description="Submitted at or before (a date: that day)."),
]


class BatchRegistryViewSet(TeamScopedViewSet):
    """The batch registry: every provider batch of the generation jobs you may view, newest
    first, with what resuming or auditing one needs (docs/generation.md, "Batch registry")."""

    view_feature = GENERATION_VIEW
    serializer_class = BatchRegistrySerializer

    def get_queryset(self):
        filters = batch_registry.filters_from(self.request.user, self.request.query_params)
        return batch_registry.batches(self.request.user, filters)

    @extend_schema(operation_id="generation_batches_list", parameters=REGISTRY_FILTERS)
    def list(self, request):
        page = self.paginate_queryset(self.get_queryset())
        rows = list(batch_registry.rows_of(page or []))
        return self.get_paginated_response(BatchRegistrySerializer(rows, many=True).data)

    @extend_schema(
        operation_id="generation_batches_csv",
        parameters=REGISTRY_FILTERS,
        responses={(200, "text/csv"): OpenApiTypes.STR, 404: OpenApiTypes.OBJECT},
    )
    @expensive
    def csv(self, request):
        """The same rows as CSV (columns: ``generation.batch_registry.COLUMNS``), streamed,
        every cell formula-safe."""
        rows = self.get_queryset()  # a bad filter is a 400 here, before anything streams
        out = BatchRegistrySerializer()

        lines = (
            list(out.to_representation(r).values())
            for r in batch_registry.rows_of(rows.iterator(chunk_size=2000))
        )
        return download(
            csv_chunks(batch_registry.COLUMNS, lines),
            "text/csv; charset=utf-8",
            "generation-batches.csv",
        )
