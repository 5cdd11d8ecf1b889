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

import contextlib
import errno
import re
import sys
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, OperationalError
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
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


# What the server cannot do for now, from the exception a request ended with: a database
# another request holds locked (SQLite's one writer; PostgreSQL's lock timeout), a disk with
# no room left. Answered by what it is, with a message, never an anonymous 500.
LOCKED_RETRY_S = 5


def _unavailable(exc: BaseException | None) -> tuple[int, str, dict[str, str]] | None:
    """(status, message, headers) for a failure that is not the request's fault and
    passes, or None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:  # the exception and its causes
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return (
                507,
                "The server has no disk space left: nothing was saved. Try again once an "
                "administrator has made room.",
                {},
            )
        text = str(exc).lower()
        if isinstance(exc, OperationalError) and any(
            words in text for words in ("database is locked", "lock timeout", "obtain lock")
        ):
            return (
                503,
                "The database is busy with another request: nothing was saved. Try again in "
                f"{LOCKED_RETRY_S} seconds.",
                {"Retry-After": str(LOCKED_RETRY_S)},
            )
        exc = exc.__cause__ or exc.__context__
    return None


def server_error(request: HttpRequest) -> HttpResponse:
    """The project's 500 handler (Django calls it while the request's exception is being
    handled, and has logged it): a locked database is a 503 with ``Retry-After``, a full
    disk a 507; the API answers JSON, pages a page of the site. Anything else stays a 500,
    as JSON on the API."""
    found = _unavailable(sys.exc_info()[1])
    code, message, headers = found or (500, "A server error: it has been logged.", {})
    if code == 507:
        _discard_uploads(request)
    if request.path_info.startswith(("/api/", "/v1/")):
        response: HttpResponse = JsonResponse({"detail": message}, status=code)
        if request.path_info.startswith("/v1/"):  # OpenAI's shape, beside the API's
            response = JsonResponse(
                {"error": {"message": message, "type": "server_error"}, "detail": message},
                status=code,
            )
    else:
        # No request context: its processors would ask the database again.
        page = render_to_string("web/unavailable.html", {"message": message, "code": code})
        response = HttpResponse(page, status=code)
    for name, value in headers.items():
        response[name] = value
    return response


def _discard_uploads(request: HttpRequest) -> None:
    """Close the files the request's upload handlers were writing when the disk filled up:
    a temporary upload file removes itself when closed, so nothing half-written is left."""
    for handler in getattr(request, "_upload_handlers", None) or []:
        file = getattr(handler, "file", None)
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()
