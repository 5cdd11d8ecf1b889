"""One exception handler: every expected failure becomes JSON with a ``detail`` message.

Validation failures are 400 ``{"detail": "Invalid input.", "errors": {field: [messages]}}``
whether they come from a serializer, a model's ``full_clean`` or a service's ``FieldErrors``;
a body in a format the endpoint does not read is a 400 too, naming the ones it reads; a
delete that other rows forbid (``on_delete=PROTECT``) is 409, and so is a write that a
unique constraint refused because a concurrent request made the same thing first (the
services check names before writing; two requests at once can both pass that check); a
request over an API throttle's rate is 429 ``{"detail": ..., "retry_after": seconds}`` with
a ``Retry-After`` header (evalplatform/throttling.py).
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.views import exception_handler as drf_exception_handler

from evalplatform.errors import ApplicationError
from evalplatform.throttling import retry_after


def _field_errors(detail: Any) -> dict[str, Any]:
    if isinstance(detail, dict):
        return {
            key: value if isinstance(value, list | dict) else [value]
            for key, value in detail.items()
        }
    if isinstance(detail, list):
        return {"non_field_errors": detail}
    return {"non_field_errors": [detail]}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        return Response({"detail": exc.message, **exc.extra}, status=exc.status_code)
    if isinstance(exc, ProtectedError | RestrictedError):
        # A delete that other rows forbid (``on_delete=PROTECT``), when the service did not
        # say so in its own words first.
        return Response(
            {"detail": "Other objects use this one, so it cannot be deleted."},
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, IntegrityError) and (conflict := _conflict(exc)) is not None:
        return conflict
    if isinstance(exc, exceptions.UnsupportedMediaType):
        view = context.get("view")
        accepted = [parser.media_type for parser in getattr(view, "parser_classes", [])]
        return Response(
            {
                "detail": "Invalid input.",
                "errors": {"body": [f"Send the body as {' or '.join(accepted) or 'JSON'}."]},
            },
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, exceptions.Throttled):
        return throttled(exc)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(as_serializer_error(exc))
    if isinstance(exc, exceptions.ValidationError):
        return Response(
            {"detail": "Invalid input.", "errors": _field_errors(exc.detail)},
            status=status.HTTP_400_BAD_REQUEST,
        )
    return drf_exception_handler(exc, context)


def throttled(exc: exceptions.Throttled) -> Response:
    """Over a throttle's rate: how long to wait, in the body and in ``Retry-After``."""
    seconds = retry_after(getattr(exc, "wait", None))
    return Response(
        {
            "detail": f"Too many requests: try again in {seconds} second"
            f"{'s' if seconds != 1 else ''}.",
            "retry_after": seconds,
        },
        status=status.HTTP_429_TOO_MANY_REQUESTS,
        headers={"Retry-After": str(seconds)},
    )


def _conflict(exc: IntegrityError) -> Response | None:
    """A unique constraint's refusal as a 409; a clash of names names the field. The
    database's message is not shown (it quotes values and table names)."""
    text = str(exc).lower()
    if "unique" not in text and "duplicate" not in text:
        return None  # not a clash: a bug, left to be a 500 and logged
    body: dict[str, Any] = {
        "detail": "Something of the same identity was created at the same time; reload "
        "and try again."
    }
    if _is_a_name_clash(str(exc)):
        body["errors"] = {"name": ["That name is already taken."]}
    return Response(body, status=status.HTTP_409_CONFLICT)


def _is_a_name_clash(message: str) -> bool:
    """PostgreSQL names the constraint (``…_name_…``) and the key's columns (``Key (team_id,
    name)=…``), SQLite the columns (``table.name``); the values are never read."""
    if found := re.search(r'unique constraint "([^"]+)"', message):
        columns = re.search(r"Key \(([\w, ]+)\)=", message)
        named = columns.group(1).split(", ") if columns else []
        return "name" in found.group(1).split("_") or "name" in named
    if found := re.search(r"UNIQUE constraint failed: ([\w., ]+)", message):
        return any(column.rsplit(".", 1)[-1] == "name" for column in found.group(1).split(", "))
    return False


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """The project's 404 handler: a URL under ``/api/`` that matches no route (e.g. a
    non-numeric id) answers JSON like every other API error; pages keep Django's page."""
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)
    return page_not_found(request, exception or Http404())
