"""Request bodies with a file: the upload (size-checked) and the configuration beside it
(a JSON ``config`` field in a multipart request, or the JSON body itself); and streamed
downloads, with CSV cells a spreadsheet cannot run as formulas."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse

from evalplatform.errors import FieldErrors


def read_upload(request: Any, *, error_key: str = "file") -> tuple[bytes, str] | None:
    """The ``file`` part's bytes and name (None without one); over ``UPLOAD_MAX_BYTES`` is
    a 400 under ``error_key``."""
    upload = request.FILES.get("file")
    if upload is None:
        return None
    if (upload.size or 0) > settings.UPLOAD_MAX_BYTES:
        raise FieldErrors(
            {
                error_key: f"The file has {upload.size:,} bytes; the limit is "
                f"{settings.UPLOAD_MAX_BYTES:,}."
            }
        )
    return upload.read(), upload.name or ""


def config_and_upload(
    request: Any, *, error_key: str = "file"
) -> tuple[dict[str, Any], bytes | None, str]:
    """(configuration, file bytes or None, file name) of a JSON or multipart request."""
    upload = read_upload(request, error_key=error_key)
    if upload is not None:
        try:
            data = json.loads(request.data.get("config") or "{}")
        except (ValueError, RecursionError) as exc:
            raise FieldErrors({"config": "The config field must be JSON."}) from exc
        if not isinstance(data, dict):
            raise FieldErrors({"config": "The config field must be a JSON object."})
        return data, *upload
    if not isinstance(request.data, dict):
        raise FieldErrors({"non_field_errors": "Send a JSON object."})
    return dict(request.data), None, ""


def download(chunks: Iterator[str], content_type: str, filename: str) -> StreamingHttpResponse:
    """A streamed attachment."""
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# A cell starting with one of these is a formula to a spreadsheet (CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CSV_FLUSH_BYTES = 64 * 1024


def inert(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a string that would start a formula gets a
    leading ``'``; anything else is unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_chunks(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """CSV as it is made (flat memory), every cell ``inert``; ``None`` is an empty cell."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    for row in rows:
        writer.writerow([inert(value) for value in row])
        if buffer.tell() > CSV_FLUSH_BYTES:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()
