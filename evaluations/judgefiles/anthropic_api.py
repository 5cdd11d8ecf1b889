"""Anthropic's Message Batches API, served by the platform over judge files: the official
``anthropic`` SDK's ``messages.batches`` calls work with ``base_url="<platform>"`` and a
platform API token as its key.

``POST /v1/messages/batches`` (``requests``: ``[{custom_id, params}]``, each ``params`` a
Messages request), ``GET /v1/messages/batches`` (``limit``, ``after_id``, ``before_id``),
``GET /v1/messages/batches/{id}``, ``GET /v1/messages/batches/{id}/results`` (JSON lines
``{custom_id, result: {type: succeeded | errored | canceled | expired, ...}}`` once the
batch has ``ended``), ``POST /v1/messages/batches/{id}/cancel``. Objects and errors
(``{"type": "error", "error": {"type", "message"}}``) are Anthropic's.

A batch is a judge-file batch (the same pages, budget, events and re-submission): the
requests become a stored input file of Anthropic-shaped lines, each routed to the team's
model it names (at the batch price where the model has a batch API), checked as the
batch validates (a request that cannot run is an ``errored`` result).

Authentication: ``x-api-key: <platform token>`` as the SDK sends it (``Authorization:
Bearer`` too). The team: the ``anthropic-workspace-id`` header (the SDK's
``workspace_id``) names it by slug; without it, the user's only team with judge files.
Reading needs ``feature:evaluations:view_all``; creating and cancelling
``feature:evaluations:judge_files``. Another team's batch is a 404, as a missing one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.urls import reverse
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions
from rest_framework.response import Response

from evalplatform.accounts import policy
from evalplatform.accounts.authentication import ApiTokenAuthentication, token_authenticate
from evalplatform.accounts.roles import EVALUATIONS_JUDGE_FILES, EVALUATIONS_VIEW_ALL
from evalplatform.api.uploads import download
from evalplatform.errors import ApplicationError, FieldErrors, Forbidden, NotFound
from evalplatform.throttling import expensive, retry_after
from evaluations.judgefiles import services
from evaluations.judgefiles.models import BatchStatus, JudgeBatch, JudgeFile
from evaluations.judgefiles.openai_api import OpenAIView, _batch, anywhere

# The batch statuses as Anthropic's ``processing_status``.
PROCESSING = {
    BatchStatus.VALIDATING: "in_progress",
    BatchStatus.IN_PROGRESS: "in_progress",
    BatchStatus.FINALIZING: "in_progress",
    BatchStatus.CANCELLING: "canceling",
}
# A finish reason as Anthropic's ``stop_reason``.
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "end_turn": "end_turn"}
# The platform's error kinds as Anthropic's error types.
ERROR_TYPES = {
    "rate_limit": "rate_limit_error",
    "quota": "rate_limit_error",
    "overloaded": "overloaded_error",
    "auth": "authentication_error",
    "permission": "permission_error",
    "not_found": "not_found_error",
    "bad_request": "invalid_request_error",
    "content_filter": "invalid_request_error",
    "too_large": "request_too_large",
}


def _stamp(value: Any) -> str | None:
    """RFC 3339, as Anthropic writes it."""
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def _ended_at(batch: JudgeBatch) -> Any:
    return batch.completed_at or batch.failed_at or batch.cancelled_at or batch.expired_at


def batch_object(request: Any, batch: JudgeBatch) -> dict[str, Any]:
    """A judge-file batch as Anthropic's ``message_batch``."""
    processing = PROCESSING.get(BatchStatus(batch.status), "ended")
    ended = processing == "ended"
    left = max(0, batch.total - batch.completed - batch.failed)
    counts = {
        "processing": 0 if ended else left,
        "succeeded": batch.completed,
        "errored": batch.failed,
        "canceled": left if ended and batch.status == BatchStatus.CANCELLED else 0,
        "expired": left if ended and batch.status == BatchStatus.EXPIRED else 0,
    }
    if ended and batch.status in (BatchStatus.FAILED, BatchStatus.COMPLETED):
        counts["errored"] += left  # rows that never ran in a failed batch
    results = reverse("anthropic-api:batch-results", args=[batch.public_id])
    return {
        "id": batch.public_id,
        "type": "message_batch",
        "processing_status": processing,
        "request_counts": counts,
        "ended_at": _stamp(_ended_at(batch)) if ended else None,
        "created_at": _stamp(batch.created_at),
        "expires_at": _stamp(batch.expires_at),
        "archived_at": None,
        "cancel_initiated_at": _stamp(batch.cancelling_at),
        "results_url": request.build_absolute_uri(results) if ended else None,
        # The platform's own: its job (pages, events) and the same batch's OpenAI shape.
        "job_id": batch.job_id,
        "status": batch.status,
    }


def result_line(line: dict[str, Any], status: str) -> dict[str, Any]:
    """A line of the batch's output or error file as Anthropic's result line."""
    response = line.get("response") or {}
    body = response.get("body") or {}
    custom_id = line.get("custom_id")
    if response.get("status_code") == 200:
        choice = (body.get("choices") or [{}])[0]
        usage = body.get("usage") or {}
        message = {
            "id": "msg_" + str(body.get("id", "")).removeprefix("chatcmpl-"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [{"type": "text", "text": (choice.get("message") or {}).get("content")}],
            "stop_reason": STOP_REASONS.get(choice.get("finish_reason"), "end_turn"),
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage.get("prompt_tokens", 0),
                "output_tokens": usage.get("completion_tokens", 0),
            },
        }
        return {"custom_id": custom_id, "result": {"type": "succeeded", "message": message}}
    error = line.get("error") or body.get("error") or {}
    code = error.get("code") or error.get("type") or ""
    if code == "not_run" and status in (BatchStatus.CANCELLED, BatchStatus.EXPIRED):
        kind = "canceled" if status == BatchStatus.CANCELLED else "expired"
        return {"custom_id": custom_id, "result": {"type": kind}}
    detail = {
        "type": ERROR_TYPES.get(code, "invalid_request_error" if not response else "api_error"),
        "message": error.get("message") or "The request failed.",
    }
    return {
        "custom_id": custom_id,
        "result": {"type": "errored", "error": {"type": "error", "error": detail}},
    }


def _results(batch: JudgeBatch) -> Iterator[str]:
    for file in (batch.output_file, batch.error_file):
        if file is None:
            continue
        for text in services.file_lines(file):
            yield json.dumps(result_line(json.loads(text), batch.status)) + "\n"


class AnthropicKeyAuthentication(ApiTokenAuthentication):
    """``x-api-key: <platform token>`` (the Anthropic SDK's), or ``Authorization``."""

    def authenticate(self, request):
        key = request.headers.get("x-api-key")
        if key is None:
            return super().authenticate(request)
        token = token_authenticate(key.strip()) if key.isascii() and "\x00" not in key else None
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return token.user, token


class AnthropicKeyScheme(OpenApiAuthenticationExtension):
    target_class = AnthropicKeyAuthentication
    name = "anthropicKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "x-api-key",
            "description": "A platform API token, as the Anthropic SDK sends its key.",
        }


def _error(status_code: int, kind: str, message: str) -> Response:
    return Response(
        {"type": "error", "error": {"type": kind, "message": message}, "detail": message},
        status=status_code,
    )


class AnthropicView(OpenAIView):
    """Token-authenticated (``x-api-key``), answering errors in Anthropic's shape."""

    authentication_classes = [AnthropicKeyAuthentication]

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, FieldErrors):
            text = " ".join(
                f"{field}: {' '.join(m if isinstance(m, list) else [m])}"
                for field, m in exc.errors.items()
            )
            return _error(400, "invalid_request_error", text)
        if isinstance(exc, NotFound | exceptions.NotFound):
            return _error(404, "not_found_error", "No such message batch.")
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            return _error(401, "authentication_error", str(exc.detail))
        if isinstance(exc, Forbidden | exceptions.PermissionDenied):
            return _error(403, "permission_error", "You may not do this in this team.")
        if isinstance(exc, exceptions.Throttled):
            seconds = retry_after(getattr(exc, "wait", None))
            response = _error(429, "rate_limit_error", f"Try again in {seconds} s.")
            response["Retry-After"] = str(seconds)
            return response
        if isinstance(exc, ApplicationError):
            return _error(exc.status_code, "invalid_request_error", exc.message)
        if isinstance(exc, exceptions.APIException):
            return _error(exc.status_code, "invalid_request_error", str(exc.detail))
        return super().handle_exception(exc)

    # The SDK's ``workspace_id`` names the team by its slug (the OpenAI header works too).
    team_headers = ("anthropic-workspace-id", "OpenAI-Organization")


def _requests_file(raw: Any) -> SimpleUploadedFile:
    """The request's ``requests`` as a file of JSON lines (each ``{custom_id, params}``),
    checked for shape; each request's own fields are checked as the batch validates."""
    if not isinstance(raw, list) or not raw:
        raise FieldErrors({"requests": "A non-empty list of {custom_id, params}."})
    if len(raw) > settings.JUDGE_FILE_MAX_LINES:
        raise FieldErrors(
            {"requests": f"At most {settings.JUDGE_FILE_MAX_LINES:,} requests in a batch."}
        )
    for n, entry in enumerate(raw):
        if not isinstance(entry, dict) or set(entry) != {"custom_id", "params"}:
            raise FieldErrors({f"requests[{n}]": "An object {custom_id, params}."})
    lines = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in raw)
    return SimpleUploadedFile("message-batch.jsonl", lines.encode("utf-8", "replace"))


LIST = [
    OpenApiParameter("limit", int),
    OpenApiParameter("after_id", str),
    OpenApiParameter("before_id", str),
]


def _visible(request) -> Any:
    anywhere(request.user, EVALUATIONS_VIEW_ALL)
    return policy.visible(
        request.user,
        EVALUATIONS_VIEW_ALL,
        JudgeBatch.objects.select_related("job", "input_file", "output_file", "error_file"),
    )


class MessageBatchesView(AnthropicView):
    @extend_schema(
        operation_id="listMessageBatches", parameters=LIST, responses={200: OpenApiTypes.OBJECT}
    )
    def get(self, request):
        """The batches, newest first (``limit`` 1 to 1000, default 20; ``after_id``: the
        page after that batch, ``before_id``: the page before it)."""
        batches = _visible(request)
        try:
            limit = int(request.query_params.get("limit") or 20)
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            raise FieldErrors({"limit": "A whole number from 1 to 1000."})
        after, before = request.query_params.get("after_id"), request.query_params.get("before_id")
        order = "-pk"
        for name, value in (("after_id", after), ("before_id", before)):
            if not value:
                continue
            anchor = (
                batches.filter(public_id=value).first() if services.is_public_id(value) else None
            )
            if anchor is None:
                raise FieldErrors({name: "The id of a batch of this list."})
            if name == "after_id":
                batches = batches.filter(pk__lt=anchor.pk)
            else:
                batches, order = batches.filter(pk__gt=anchor.pk), "pk"
        rows = list(batches.order_by(order)[: limit + 1])
        page = rows[:limit]
        if order == "pk":
            page.reverse()
        data = [batch_object(request, services.sync(b)) for b in page]
        return Response(
            {
                "data": data,
                "has_more": len(rows) > limit,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        )

    @extend_schema(
        operation_id="createMessageBatch",
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT},
    )
    @expensive
    def post(self, request):
        """Create a batch of Messages requests (``requests``: ``[{custom_id, params}]``)."""
        team = self.team(request)
        data = request.data if isinstance(request.data, dict) else {}
        upload = _requests_file(data.get("requests"))
        with transaction.atomic():
            stored: JudgeFile = services.file_create(
                user=request.user, team=team, upload=upload, purpose="batch"
            )
            batch = services.batch_create(
                user=request.user,
                team=team,
                data={"input_file_id": stored.public_id, "endpoint": services.ENDPOINT},
            )
        return Response(batch_object(request, batch))


class MessageBatchView(AnthropicView):
    @extend_schema(operation_id="retrieveMessageBatch", responses={200: OpenApiTypes.OBJECT})
    def get(self, request, batch_id: str):
        return Response(batch_object(request, services.sync(_batch(request, batch_id))))


class MessageBatchResultsView(AnthropicView):
    @extend_schema(
        operation_id="messageBatchResults",
        responses={(200, "application/x-jsonl"): OpenApiTypes.STR},
    )
    @expensive
    def get(self, request, batch_id: str):
        """The results, one JSON line per request, once the batch has ended."""
        batch = services.sync(_batch(request, batch_id))
        if PROCESSING.get(BatchStatus(batch.status), "ended") != "ended":
            raise FieldErrors({"batch": "The batch has not ended yet: no results."})
        return download(_results(batch), "application/binary", f"{batch.public_id}.jsonl")


class MessageBatchCancelView(AnthropicView):
    @extend_schema(
        operation_id="cancelMessageBatch", request=None, responses={200: OpenApiTypes.OBJECT}
    )
    def post(self, request, batch_id: str):
        batch = _batch(request, batch_id, EVALUATIONS_JUDGE_FILES)
        cancelled = services.batch_cancel(user=request.user, batch=batch)
        return Response(batch_object(request, cancelled))
