"""Request bodies with a file: the upload (size-checked) and the configuration beside it
(a JSON ``config`` field in a multipart request, or the JSON body itself); and streamed
downloads.

An uploaded file is handed on as Django's ``UploadedFile``, never read into memory here:
Django keeps one over ``FILE_UPLOAD_MAX_MEMORY_SIZE`` in a temporary file, and the parsers
(``generation.sources.parse_upload``) read it as a stream.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.http import StreamingHttpResponse

from evalplatform.errors import FieldErrors

# Streamed downloads are sent in blocks of about this size.
BLOCK_BYTES = 64 * 1024


def read_upload(request: Any, *, error_key: str = "file") -> tuple[UploadedFile, str] | None:
    """The ``file`` part and its name (None without one); over ``UPLOAD_MAX_BYTES`` is a 400
    under ``error_key``."""
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
    return upload, upload.name or ""


def config_and_upload(
    request: Any, *, error_key: str = "file"
) -> tuple[dict[str, Any], UploadedFile | None, str]:
    """(configuration, uploaded file or None, file name) of a JSON or multipart request."""
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


def formula_safe(value: Any) -> Any:
    """A CSV cell that a spreadsheet would run as a formula, quoted (``'=1+1``)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def csv_chunks(columns: list[str], rows: Iterable[Iterable[Any]]) -> Iterator[str]:
    """A formula-safe CSV of ``rows`` under the header ``columns``, in blocks."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([formula_safe(cell) for cell in row])
        if buffer.tell() > BLOCK_BYTES:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _block(parts: Iterator[bytes]) -> bytes:
    """The next parts of a response, joined up to about ``BLOCK_BYTES`` (b"" at the end)."""
    block: list[bytes] = []
    size = 0
    for part in parts:
        block.append(part)
        size += len(part)
        if size >= BLOCK_BYTES:
            break
    return b"".join(block)


class StreamedResponse(StreamingHttpResponse):
    """A ``StreamingHttpResponse`` of a synchronous iterator (one that reads the database)
    that streams under both kinds of server. A WSGI server (and the test client) iterates it
    as it is. Under ASGI, Django itself would read a synchronous iterator whole into a list
    before sending a byte (warning "must consume synchronous iterators"); here the iterator
    is pulled a block at a time through ``sync_to_async`` instead. The calls are
    thread-sensitive: Django's ASGI handler runs each request's sync code on one thread, the
    view's, so a database cursor the iterator holds stays on the connection it was opened on.
    """

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.is_async:
            async for part in super().__aiter__():
                yield part
            return
        parts = cast(Iterator[bytes], self.streaming_content)  # not is_async: a map
        take = sync_to_async(_block, thread_sensitive=True)
        while block := await take(parts):
            yield block


def download(chunks: Iterator[str], content_type: str, filename: str) -> StreamedResponse:
    """A streamed attachment (see ``StreamedResponse``)."""
    response = StreamedResponse(chunks, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
