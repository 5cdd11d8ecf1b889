"""Request bodies with a file: the upload (size-checked) and the configuration beside it
(a JSON ``config`` field in a multipart request, or the JSON body itself); and streamed
downloads, with CSV cells a spreadsheet cannot run as formulas (OWASP's CSV injection):
every CSV the platform writes is made by ``csv_chunks`` (or ``csv_line``), header included,
and ``tests/core/test_csv_exports.py`` requests every CSV route to hold it to that.

An uploaded file is handed on as Django's ``UploadedFile``, never read into memory here:
Django keeps one over ``FILE_UPLOAD_MAX_MEMORY_SIZE`` in a temporary file, and the parsers
(``generation.sources.parse_upload``) read it as a stream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.http import StreamingHttpResponse

from evalplatform.errors import FieldErrors
from evalplatform.validation import storable_problems

# Streamed downloads are made in blocks of about this size; under ASGI, each trip to the
# request's sync thread fetches about PULL_BYTES of them.
BLOCK_BYTES = 64 * 1024
PULL_BYTES = 512 * 1024


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


# Files that are no text, by how they start: what a text upload (JSON, JSON lines, CSV) is
# refused as, by name, before any of it is read as lines.
BINARY_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive (or an Office document)"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\xd0\xcf\x11\xe0", "an old Office document"),
    (b"SQLite format 3\x00", "an SQLite database"),
)


def binary_kind(head: bytes) -> str | None:
    """What a file starting with ``head`` (its first 4 KB) is, when it is no UTF-8 text: a
    known binary format by its signature, text in UTF-16 by its byte-order mark, or "a binary
    file" when over a tenth of its first bytes are NUL; None for what may be text (a stray
    NUL in text is the reader's to replace)."""
    for signature, name in BINARY_SIGNATURES:
        if head.startswith(signature):
            return name
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "a WebP image"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "text in UTF-16 (save it as UTF-8)"
    head = head[:4096]
    return "a binary file" if head and head.count(0) * 10 > len(head) else None


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
        # The configuration stands for a JSON body: its fields are named as a body's are.
        if problems := storable_problems(data):
            raise FieldErrors(problems)
        return data, *upload
    if not isinstance(request.data, dict):
        raise FieldErrors({"non_field_errors": "Send a JSON object."})
    return dict(request.data), None, ""


def formula_safe(value: Any) -> Any:
    """A CSV cell that a spreadsheet would run as a formula, quoted (``'=1+1``)."""
    if isinstance(value, str) and value[:1] in _FORMULA_STARTS:
        return "'" + value
    return value


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> str:
    """One formula-safe cell as ``csv.writer`` writes it (the excel dialect, minimal
    quoting), made with str methods: several times faster than the writer on long text."""
    if isinstance(value, str):
        if value[:1] in _FORMULA_STARTS:
            value = "'" + value
        if '"' in value:
            return '"' + value.replace('"', '""') + '"'
        if "," in value or "\n" in value or "\r" in value:
            return '"' + value + '"'
        return value
    return "" if value is None else str(value)


def csv_line(row: Iterable[Any]) -> str:
    """A formula-safe CSV row, ``\r\n`` ended, exactly as ``csv.writer`` would write it."""
    cells = [_csv_cell(value) for value in row]
    if cells == [""]:
        return '""\r\n'  # a lone empty field, quoted so the line is not blank
    return ",".join(cells) + "\r\n"


def csv_lines(rows: Sequence[Sequence[Any]]) -> str:
    """``csv_line`` of each of ``rows``, joined (the same text): ``csv_column_lines`` of
    their columns."""
    width = len(rows[0]) if rows else 0
    if width < 2 or any(len(row) != width for row in rows):
        return "".join([csv_line(row) for row in rows])
    return csv_column_lines(list(zip(*rows, strict=True)))


def csv_column_lines(columns: Sequence[Sequence[Any]]) -> str:
    """The CSV lines of rows given a column at a time (two or more columns of the same
    length), the text ``csv_line`` would write for each row: a column of ints, or of strings
    that need neither quotes nor the formula guard (checked in bulk), is written as it is,
    with no call per cell; any other column is written cell by cell by ``_csv_cell``."""
    if len(columns) < 2:
        return "".join([csv_line(row) for row in zip(*columns, strict=True)])
    if not columns[0]:
        return ""
    written: list[Iterable[str]] = []
    for column in columns:
        kinds = set(map(type, column))
        if kinds == {str}:
            written.append(_csv_text_column(column))
        elif kinds <= _PLAIN_KINDS:
            written.append(map(str, column))
        else:
            written.append(map(_csv_cell, column))
    return "\r\n".join(map(",".join, zip(*written, strict=True))) + "\r\n"


# Types whose ``str`` never needs quotes nor the formula guard (a str is never among them).
_PLAIN_KINDS = frozenset({int, float, Decimal})


def _csv_text_column(column: Sequence[str]) -> Iterable[str]:
    """A column of strings as ``_csv_cell`` writes them: as they are when no cell starts
    with a formula character or holds a quote, comma or line break (searched for in their
    text joined by NULs, each cell's first character after a NUL: a NUL inside a cell can
    only send the column the slower way)."""
    text = "\x00" + "\x00".join(column)
    if '"' in text or "," in text or "\n" in text or "\r" in text:
        return map(_csv_cell, column)
    if any(start in text for start in _FORMULA_AFTER_NUL):
        return map(_csv_cell, column)
    return column


_FORMULA_AFTER_NUL = tuple("\x00" + start for start in _FORMULA_STARTS)


def csv_chunks(columns: Sequence[str], rows: Iterable[Iterable[Any]]) -> Iterator[str]:
    """A formula-safe CSV of ``rows`` under the header ``columns``, in blocks."""
    block = [csv_line(columns)]
    size = 0
    for row in rows:
        line = csv_line(row)
        block.append(line)
        size += len(line)
        if size >= BLOCK_BYTES:
            yield "".join(block)
            block, size = [], 0
    yield "".join(block)


def csv_dict_chunks(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """``csv_chunks`` of rows given as dicts (``csv.DictWriter``'s way: a missing key is an
    empty cell, a key not among ``columns`` is left out)."""
    return csv_chunks(columns, ([row.get(c) for c in columns] for row in rows))


def _next_parts(parts: Iterator[bytes]) -> list[bytes]:
    """The next parts of a response, up to about ``PULL_BYTES`` ([] at the end)."""
    pulled: list[bytes] = []
    size = 0
    for part in parts:
        pulled.append(part)
        size += len(part)
        if size >= PULL_BYTES:
            break
    return pulled


class StreamedResponse(StreamingHttpResponse):
    """A ``StreamingHttpResponse`` of a synchronous iterator (one that reads the database)
    that streams under both kinds of server. A WSGI server (and the test client) iterates it
    as it is. Under ASGI, Django itself would read a synchronous iterator whole into a list
    before sending a byte (warning "must consume synchronous iterators"); here the iterator
    is pulled a few blocks at a time through ``sync_to_async`` instead. The calls are
    thread-sensitive: Django's ASGI handler runs each request's sync code on one thread, the
    view's, so a database cursor the iterator holds stays on the connection it was opened on.
    """

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.is_async:
            async for part in super().__aiter__():
                yield part
            return
        parts = cast(Iterator[bytes], self.streaming_content)  # not is_async: a map
        pull = sync_to_async(_next_parts, thread_sensitive=True)
        while pulled := await pull(parts):
            for part in pulled:
                yield part


def download(chunks: Iterator[str], content_type: str, filename: str) -> StreamedResponse:
    """A streamed attachment (see ``StreamedResponse``)."""
    response = StreamedResponse(chunks, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
