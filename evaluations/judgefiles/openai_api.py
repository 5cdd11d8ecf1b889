"""The OpenAI Files + Batches API, served by the platform for judge files: the official SDK
works with ``base_url="<platform>/v1"`` and a platform API token as its key.

``POST /v1/files`` (multipart ``file``, ``purpose`` "batch"), ``GET /v1/files``,
``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``; ``POST /v1/batches``
(``input_file_id``, ``endpoint`` "/v1/chat/completions", ``completion_window`` "24h",
``metadata``; the platform's own ``budget_usd`` and ``live``), ``GET /v1/batches`` (``limit``,
``after``), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``. Objects, statuses and
errors (``{"error": {"message", "type", "param", "code"}}``) are OpenAI's.

Authentication: ``Authorization: Bearer <platform token>``. The team: the
``OpenAI-Organization`` header (the SDK's ``organization``) names it by slug; without it, the
user's only team with judge files. Reading needs ``feature:evaluations:view_all``; uploading,
creating and cancelling ``feature:evaluations:judge_files``. Another team's file or batch is a
404, as a missing one.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.negotiation import BaseContentNegotiation, DefaultContentNegotiation
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from evalplatform.accounts import policy
from evalplatform.accounts.authentication import ApiTokenAuthentication
from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import EVALUATIONS_JUDGE_FILES, EVALUATIONS_VIEW_ALL
from evalplatform.api.parsers import FormParser, JSONParser, MultiPartParser
from evalplatform.api.uploads import download
from evalplatform.errors import ApplicationError, FieldErrors, Forbidden, NotFound
from evalplatform.throttling import expensive, retry_after
from evaluations.judgefiles import services
from evaluations.judgefiles.inputs import BatchInput
from evaluations.judgefiles.models import JudgeBatch, JudgeFile


def _stamp(value: Any) -> int | None:
    return int(value.timestamp()) if value is not None else None


def file_object(file: JudgeFile) -> dict[str, Any]:
    return {
        "id": file.public_id,
        "object": "file",
        "bytes": file.bytes,
        "created_at": _stamp(file.created_at),
        "filename": file.filename,
        "purpose": file.purpose,
        "status": "processed",
        "status_details": None,
        "expires_at": None,
    }


def batch_object(batch: JudgeBatch) -> dict[str, Any]:
    return {
        "id": batch.public_id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "errors": batch.errors,
        "input_file_id": batch.input_file.public_id,
        "completion_window": batch.completion_window,
        "status": batch.status,
        "output_file_id": batch.output_file.public_id if batch.output_file else None,
        "error_file_id": batch.error_file.public_id if batch.error_file else None,
        "created_at": _stamp(batch.created_at),
        "in_progress_at": _stamp(batch.in_progress_at),
        "expires_at": _stamp(batch.expires_at),
        "finalizing_at": _stamp(batch.finalizing_at),
        "completed_at": _stamp(batch.completed_at),
        "failed_at": _stamp(batch.failed_at),
        "expired_at": _stamp(batch.expired_at) if batch.status == "expired" else None,
        "cancelling_at": _stamp(batch.cancelling_at),
        "cancelled_at": _stamp(batch.cancelled_at),
        "request_counts": {
            "total": batch.total,
            "completed": batch.completed,
            "failed": batch.failed,
        },
        "metadata": batch.metadata or None,
        # The platform's own: its job (pages, events) and budget.
        "job_id": batch.job_id,
        "parent_batch_id": batch.parent.public_id if batch.parent else None,
        "budget_usd": str(batch.budget_usd) if batch.budget_usd is not None else None,
        "judge": batch.judge_id,
    }


def _error(status_code: int, message: str, *, kind: str, code: str | None = None, param=None):
    # ``detail`` too: the platform's error shape beside OpenAI's (clients read either).
    return Response(
        {
            "error": {"message": message, "type": kind, "param": param, "code": code},
            "detail": message,
        },
        status=status_code,
    )


class AnyAccept(BaseContentNegotiation):
    """JSON whatever the client accepts (the SDK asks for application/binary, and more)."""

    def select_parser(self, request, parsers):
        return DefaultContentNegotiation().select_parser(request, parsers)

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class OpenAIView(APIView):
    """Token-authenticated, answering errors in OpenAI's shape."""

    content_negotiation_class = AnyAccept
    renderer_classes = [JSONRenderer]
    authentication_classes = [ApiTokenAuthentication]
    permission_classes = [IsAuthenticated]
    parser_classes = [JSONParser]

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, FieldErrors):
            param = next(iter(exc.errors))
            text = " ".join(
                f"{field}: {' '.join(m if isinstance(m, list) else [m])}"
                for field, m in exc.errors.items()
            )
            return _error(400, text, kind="invalid_request_error", param=param)
        if isinstance(exc, NotFound | exceptions.NotFound):
            return _error(404, "No such object.", kind="invalid_request_error", code="not_found")
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            response = _error(
                401, str(exc.detail), kind="invalid_request_error", code="invalid_api_key"
            )
            response["WWW-Authenticate"] = "Bearer"
            return response
        if isinstance(exc, ApplicationError):
            return _error(exc.status_code, exc.message, kind="invalid_request_error")
        if isinstance(exc, exceptions.Throttled):
            seconds = retry_after(getattr(exc, "wait", None))
            response = _error(
                429,
                f"Rate limit reached: try again in {seconds} s.",
                kind="requests",
                code="rate_limit_exceeded",
            )
            response["Retry-After"] = str(seconds)
            return response
        if isinstance(exc, exceptions.APIException):
            return _error(exc.status_code, str(exc.detail), kind="invalid_request_error")
        return super().handle_exception(exc)

    # The headers that may name the team by its slug, in the order they are read.
    team_headers: tuple[str, ...] = ("OpenAI-Organization",)

    def team(self, request) -> Team:
        """The team a new file or batch belongs to (see the module's docstring): named by
        the first of ``team_headers`` sent (or ``?team=``), else the user's only team with
        judge files."""
        slug = next((v for h in self.team_headers if (v := request.headers.get(h))), None)
        slug = slug or request.query_params.get("team")
        anywhere(request.user, EVALUATIONS_JUDGE_FILES)
        teams = policy.teams_with(request.user, EVALUATIONS_JUDGE_FILES)
        if slug:
            found = (
                teams.filter(slug=slug).first() if slug.isascii() and "\x00" not in slug else None
            )
            if found is None:
                raise FieldErrors({"organization": "None of your teams with judge files."})
            return found
        choices = list(teams[:2])
        if len(choices) != 1:
            raise FieldErrors(
                {"organization": "Name the team by its slug (the OpenAI-Organization header)."}
            )
        return choices[0]


def anywhere(user: Any, feature: str) -> None:
    """Refused (403) before any lookup when the user holds ``feature`` in no team."""
    if not policy.has_feature_anywhere(user, feature):
        raise Forbidden()


def _file(request, file_id: str, feature: str = EVALUATIONS_VIEW_ALL) -> JudgeFile:
    anywhere(request.user, feature)
    if not services.is_public_id(file_id):
        raise NotFound()
    return policy.access(
        request.user, feature, JudgeFile.objects.written(), view_feature=EVALUATIONS_VIEW_ALL,
        public_id=file_id,
    )  # fmt: skip


def _batch(request, batch_id: str, feature: str = EVALUATIONS_VIEW_ALL) -> JudgeBatch:
    anywhere(request.user, feature)
    if not services.is_public_id(batch_id):
        raise NotFound()
    return policy.access(
        request.user,
        feature,
        JudgeBatch.objects.select_related(
            "job", "input_file", "output_file", "error_file", "parent"
        ),
        view_feature=EVALUATIONS_VIEW_ALL,
        public_id=batch_id,
    )


def _page(request, queryset, as_object) -> Response:
    """OpenAI's list: ``limit`` (1 to 100, default 20) after the object ``after``."""
    try:
        limit = int(request.query_params.get("limit") or 20)
    except ValueError as exc:
        raise FieldErrors({"limit": "A whole number from 1 to 100."}) from exc
    if not 1 <= limit <= 100:
        raise FieldErrors({"limit": "A whole number from 1 to 100."})
    after = request.query_params.get("after")
    if after:
        anchor = queryset.filter(public_id=after).first() if services.is_public_id(after) else None
        if anchor is None:
            raise FieldErrors({"after": "The id of an object of this list."})
        queryset = queryset.filter(pk__lt=anchor.pk)
    rows = list(queryset.order_by("-pk")[: limit + 1])
    data = [as_object(row) for row in rows[:limit]]
    return Response(
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": len(rows) > limit,
        }
    )


LIST = [OpenApiParameter("limit", int), OpenApiParameter("after", str)]


class FilesView(OpenAIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(operation_id="listFiles", parameters=LIST, responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        anywhere(request.user, EVALUATIONS_VIEW_ALL)
        files = policy.visible(request.user, EVALUATIONS_VIEW_ALL, JudgeFile.objects.written())
        purpose = request.query_params.get("purpose")
        if purpose:
            files = files.filter(purpose=purpose)
        return _page(request, files, file_object)

    @extend_schema(
        operation_id="createFile", request=OpenApiTypes.OBJECT, responses={200: OpenApiTypes.OBJECT}
    )
    @expensive
    def post(self, request):
        """Upload a batch input file: JSON lines, each a request with a ``custom_id`` (up to
        ``JUDGE_FILE_MAX_BYTES`` and ``JUDGE_FILE_MAX_LINES``; read as it streams)."""
        team = self.team(request)
        stored = services.file_create(
            user=request.user,
            team=team,
            upload=request.FILES.get("file"),
            purpose=request.data.get("purpose"),
        )
        return Response(file_object(stored))


class FileView(OpenAIView):
    @extend_schema(operation_id="retrieveFile", responses={200: OpenApiTypes.OBJECT})
    def get(self, request, file_id: str):
        return Response(file_object(_file(request, file_id)))


class FileContentView(OpenAIView):
    @extend_schema(
        operation_id="downloadFile", responses={(200, "application/jsonl"): OpenApiTypes.STR}
    )
    @expensive
    def get(self, request, file_id: str):
        file = _file(request, file_id)
        return download(
            services.file_lines(file), "application/octet-stream", f"{file.public_id}.jsonl"
        )


class BatchesView(OpenAIView):
    @extend_schema(
        operation_id="listBatches", parameters=LIST, responses={200: OpenApiTypes.OBJECT}
    )
    def get(self, request):
        anywhere(request.user, EVALUATIONS_VIEW_ALL)
        batches = policy.visible(
            request.user,
            EVALUATIONS_VIEW_ALL,
            JudgeBatch.objects.select_related(
                "job", "input_file", "output_file", "error_file", "parent"
            ),
        )
        return _page(request, batches, lambda b: batch_object(services.sync(b)))

    @extend_schema(
        operation_id="createBatch",
        request=BatchInput,
        responses={200: OpenApiTypes.OBJECT},
    )
    @expensive
    def post(self, request):
        """Create a batch of an input file (or of a batch's error file: its failed rows)."""
        data = request.data if isinstance(request.data, dict) else {}
        batch = services.batch_create(user=request.user, team=self.team(request), data=data)
        return Response(batch_object(batch), status=status.HTTP_200_OK)


class BatchView(OpenAIView):
    @extend_schema(operation_id="retrieveBatch", responses={200: OpenApiTypes.OBJECT})
    def get(self, request, batch_id: str):
        return Response(batch_object(services.sync(_batch(request, batch_id))))


class BatchCancelView(OpenAIView):
    @extend_schema(operation_id="cancelBatch", request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, batch_id: str):
        batch = _batch(request, batch_id, EVALUATIONS_JUDGE_FILES)
        return Response(batch_object(services.batch_cancel(user=request.user, batch=batch)))
