"""The request body limit: no request may send more than ``REQUEST_MAX_BYTES``, except a
multipart one (a file upload) to a route that takes uploads (``UPLOAD_PATHS``):
``UPLOAD_MAX_BYTES`` plus 1 MiB for the fields beside the file. Other routes, the sign-in
page among them, never take a large body, so a client cannot fill the disk through them.

Uploads are checked against ``UPLOAD_MAX_BYTES`` where they are read, with a field-level
message; this is the outer wall. Django's ASGI handler spools the whole body to disk before a
view runs, so without it a client could stream gigabytes (declared or chunked) into a
temporary file. ``BodyLimit`` wraps the ASGI application and counts the bytes as they arrive;
``RequestSizeLimitMiddleware`` does the same check for WSGI servers, on the declared length.
A multipart body's file parts never sit in memory (Django writes them to temporary files);
its other fields, like any other body, are capped by ``DATA_UPLOAD_MAX_MEMORY_SIZE``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

# The most containers (objects, arrays) a JSON request body, a JSON field of a form or an
# uploaded row may nest (``evalplatform.validation.storable_problems``); deeper is a 400.
# Python's own parser would give up (RecursionError) somewhere near a thousand.
JSON_MAX_DEPTH = 64

# Paths whose bodies may be larger: the judge files uploads, API and page
# (``JUDGE_FILE_MAX_BYTES``).
LARGE_BODY_PATHS = ("/v1/files", "/judge-files")


# Routes that take an uploaded file (``evalplatform.api.uploads.read_upload``): job items
# (API and wizard), scenario rows (API, preview and the page) and judgment imports.
UPLOAD_PATHS = re.compile(
    r"/(api/generation/(jobs|estimate)|generation/new(/estimate)?"
    r"|api/scenarios(/preview|/\d+/import)?|scenarios/new)/?"
)


def limit_for(path: str, content_type: str | bytes | None = None) -> int:
    """The most bytes a request to ``path`` with this ``Content-Type`` may send."""
    if path.rstrip("/") in LARGE_BODY_PATHS:
        return settings.JUDGE_FILE_MAX_BYTES + 1024 * 1024
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    multipart = (content_type or "").lower().startswith("multipart/form-data")
    if multipart and UPLOAD_PATHS.fullmatch(path):
        return max(settings.REQUEST_MAX_BYTES, settings.UPLOAD_MAX_BYTES + 1024 * 1024)
    return settings.REQUEST_MAX_BYTES


def _message(size: int | None, limit: int | None = None) -> str:
    limit = limit or settings.REQUEST_MAX_BYTES
    if size is None:
        return f"The request body is over the limit of {limit:,} bytes."
    return f"The request body has {size:,} bytes; the limit is {limit:,}."


def _declared_length(value: str | bytes | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None  # Django answers a malformed length itself.


class _TooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware answering 413 to an HTTP request whose body passes the limit."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        limit = limit_for(scope.get("path", ""), headers.get(b"content-type"))
        declared = _declared_length(headers.get(b"content-length"))
        if declared is not None and declared > limit:
            await self._refuse(send, declared, limit)
            return
        received = 0
        started = False

        async def counting_receive() -> dict:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge
            return message

        async def watching_send(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except _TooLarge:
            if not started:
                await self._refuse(send, None, limit)

    @staticmethod
    async def _refuse(send: Any, size: int | None, limit: int) -> None:
        body = json.dumps({"detail": _message(size, limit)}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class RequestSizeLimitMiddleware:
    """Django middleware: 413 for a declared body length over the limit (WSGI servers, and
    a second wall behind ``BodyLimit``)."""

    def __init__(self, get_response: Any):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        declared = _declared_length(request.META.get("CONTENT_LENGTH"))
        limit = limit_for(request.path_info, request.META.get("CONTENT_TYPE"))
        if declared is not None and declared > limit:
            return JsonResponse({"detail": _message(declared, limit)}, status=413)
        return self.get_response(request)
