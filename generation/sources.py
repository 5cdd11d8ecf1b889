"""Input items for a job: uploads (JSON array, JSONL, CSV with a header, plain text), prompt-only,
and items of other apps through a registry that those apps fill from their ``AppConfig.ready``
with ``register`` (``evaluations`` registers "judge": the tasks of a scenario, for an LLM
judge), so ``generation`` never imports them.

Uploads are checked whole before anything is written: encoding, shape, size, emptiness and
duplicate ids; errors name the line (or array index) and the field. They are read as streams,
a chunk at a time (a JSON array element by element), so only the items are kept in memory,
never the file's bytes and text beside them.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any, BinaryIO, cast

from django.conf import settings

from evalplatform import validation
from evalplatform.api import uploads
from evalplatform.errors import FieldErrors

Item = tuple[str, dict[str, Any]]
# An upload: its bytes, or a binary file (Django's ``UploadedFile``: large ones are on disk).
Upload = bytes | IO[bytes]
FORMATS = ("json", "jsonl", "csv", "text")
MAX_ERRORS = 20
# Uploads are read this much at a time (bytes when checked, characters when parsed).
READ_BYTES = 1024 * 1024
READ_CHARS = 1024 * 1024
# A JSON value ending (or failing) this close to the end of the window is read again with
# more text: a number, literal or escape may go on past it.
_MARGIN = 32
_SPACE = re.compile(r"[ \t\n\r]*")

# Sources of other apps (``register``): name → function(user, team, spec) → items.
SOURCE_REGISTRY: dict[str, Callable[..., list[Item]]] = {}
# Sources only their own app may use (its service passes ``internal=True`` to ``job_plan``):
# a judge run's job is made by the judge service, never from the jobs API.
INTERNAL_SOURCES: set[str] = set()
# What the wizard offers of a public source: name → (label, function(user, team) → the
# choices [(id, label)] of its ``spec[name]``).
SOURCE_CHOICES: dict[str, tuple[str, Callable[..., list[tuple[Any, str]]]]] = {}


def register(
    kind: str,
    source: Callable[..., list[Item]],
    *,
    internal: bool = False,
    label: str = "",
    choices: Callable[..., list[tuple[Any, str]]] | None = None,
) -> None:
    """Add another app's source of items (call from its ``AppConfig.ready``). ``internal``:
    only that app's own service may plan jobs from it. ``label`` and ``choices``: the
    wizard offers the source as a select of ``choices(user=..., team=...)``."""
    SOURCE_REGISTRY[kind] = source
    if internal:
        INTERNAL_SOURCES.add(kind)
    elif choices is not None:
        SOURCE_CHOICES[kind] = (label or f"From {kind}", choices)


def public_kinds() -> list[str]:
    """The source types users may name: never an internal one."""
    return ["manual", "prompt_only", *(k for k in SOURCE_REGISTRY if k not in INTERNAL_SOURCES)]


def detect_format(filename: str, declared: str = "") -> str:
    if declared:
        if declared not in FORMATS:
            raise FieldErrors(
                {"source.format": f"Unknown format; use one of {', '.join(FORMATS)}."}
            )
        return declared
    suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    return {"json": "json", "jsonl": "jsonl", "ndjson": "jsonl", "csv": "csv", "txt": "text"}.get(
        suffix, "text"
    )


def _open(upload: Upload) -> IO[bytes]:
    """The upload as a binary file at its start (bytes are wrapped, not copied)."""
    if isinstance(upload, bytes | bytearray):
        return io.BytesIO(upload)
    upload.seek(0)
    return upload


def _check(file: IO[bytes]) -> None:
    """Size, UTF-8 and emptiness, read a chunk at a time (then back to the start)."""
    limit = settings.UPLOAD_MAX_BYTES
    size = file.seek(0, io.SEEK_END)
    file.seek(0)
    if size > limit:
        raise FieldErrors({"source.file": f"The file has {size:,} bytes; the limit is {limit:,}."})
    if kind := uploads.binary_kind(file.read(4096)):
        raise FieldErrors({"source.file": f"This is {kind}, not JSON, JSON lines, CSV or text."})
    file.seek(0)
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0  # bytes read before ``chunk``
    line = 1  # the line ``chunk`` starts on
    content = False
    chunk = b""
    while True:
        chunk = file.read(READ_BYTES)
        pending = len(decoder.getstate()[0])  # bytes of a character split across chunks
        try:
            text = decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as exc:
            # ``exc.start`` counts from the pending bytes, which hold no newline.
            line += chunk[: max(0, exc.start - pending)].count(b"\n")
            raise FieldErrors(
                {
                    "source.file": f"Not UTF-8 text: line {line}, "
                    f"byte {offset - pending + exc.start}. Save the file as UTF-8."
                }
            ) from exc
        if not chunk:
            break
        content = content or bool((text.lstrip("\ufeff") if offset == 0 else text).strip())
        offset += len(chunk)
        line += chunk.count(b"\n")
    file.seek(0)
    if not content:
        raise FieldErrors({"source.file": "The file is empty."})


@contextmanager
def _text(file: IO[bytes], newline: str | None) -> Iterator[io.TextIOWrapper]:
    """The (checked) file as text; the file itself is left open for its owner."""
    wrapper = io.TextIOWrapper(cast(BinaryIO, file), encoding="utf-8-sig", newline=newline)
    try:
        yield wrapper
    finally:
        wrapper.detach()


class _JSONArray:
    """The elements of a JSON array read from a text stream a window at a time. Each element
    is decoded whole by the standard library's decoder (``raw_decode``), so values and error
    messages are exactly ``json.loads``'s; only the window and one element are in memory."""

    def __init__(self, stream: io.TextIOWrapper):
        self.stream = stream
        self.buffer = ""
        self.pos = 0
        self.eof = False
        self.line = 1  # the line and column (0-based) where ``buffer`` starts
        self.column = 0
        self.decoder = json.JSONDecoder()

    def _more(self, at_least: int = 0) -> bool:
        """Read more text, dropping what is consumed; False at the end of the file."""
        if self.eof:
            return False
        consumed = self.buffer[: self.pos]
        newlines = consumed.count("\n")
        self.line += newlines
        self.column = (
            len(consumed) - consumed.rfind("\n") - 1 if newlines else self.column + len(consumed)
        )
        text = self.stream.read(max(at_least, READ_CHARS))
        self.buffer = self.buffer[self.pos :] + text
        self.pos = 0
        self.eof = not text
        return bool(text)

    def error(self, message: str, pos: int) -> FieldErrors:
        line = self.line + self.buffer.count("\n", 0, pos)
        newline = self.buffer.rfind("\n", 0, pos)
        column = pos - newline if newline >= 0 else self.column + pos + 1
        return FieldErrors(
            {"source.file": f"Invalid JSON at line {line}, column {column}: {message}."}
        )

    def _skip_space(self) -> str:
        """The next significant character ("" at the end), at ``self.pos``."""
        while True:
            self.pos = _SPACE.match(self.buffer, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self._more():
                return ""

    def _value(self) -> Any:
        """Decode the value at ``self.pos``, reading more while it may be cut off by the end
        of the window (an error or an end near it, or an unterminated string)."""
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(self.buffer) - _MARGIN or exc.msg.startswith("Unterminated")
                if cut and not self.eof:
                    self._more(len(self.buffer) - self.pos)
                    continue
                raise self.error(exc.msg, exc.pos) from exc
            if end >= len(self.buffer) - _MARGIN and not self.eof:
                self._more(len(self.buffer) - self.pos)
                continue  # a number may go on past the window
            self.pos = end
            return value

    def _end(self) -> None:
        if self._skip_space():
            raise self.error("Extra data", self.pos)

    def __iter__(self) -> Iterator[Any]:
        first = self._skip_space()
        if first != "[":
            self._value()  # the JSON is valid, or its error is reported
            self._end()
            raise FieldErrors({"source.file": "A JSON upload is an array of items."})
        self.pos += 1
        if self._skip_space() == "]":
            self.pos += 1
            self._end()
            return
        while True:
            if not self._skip_space():
                raise self.error("Expecting value", self.pos)
            yield self._value()
            after = self._skip_space()
            if after == "]":
                self.pos += 1
                self._end()
                return
            if after != ",":
                raise self.error("Expecting ',' delimiter", self.pos)
            self.pos += 1


def _item(where: str, value: Any, position: int, errors: dict[str, str]) -> Item | None:
    if isinstance(value, str):
        value = {"content": value}
    if not isinstance(value, dict):
        errors[where] = "An item must be an object of fields (or a string)."
        return None
    if not value:
        errors[where] = "The item is empty."
        return None
    raw_id = value.get("id", position)
    if not isinstance(raw_id, str | int) or isinstance(raw_id, bool) or str(raw_id).strip() == "":
        errors[f"{where}.id"] = "The id must be a non-empty string or a number."
        return None
    item_id = str(raw_id).strip()
    if len(item_id) > 200:
        errors[f"{where}.id"] = "The id has more than 200 characters."
        return None
    if problems := validation.storable_problems(value, path=where, most=1):
        errors.update(problems)
        return None
    return item_id, value


def _too_long_a_number(exc: ValueError) -> bool:
    """An integer longer than Python converts (``sys.get_int_max_str_digits``, 4,300)."""
    return "integer string conversion" in str(exc)


class TooManyItems(FieldErrors):
    """An upload with more items than its use may take: refused as soon as the reading
    passes the bound, so memory never holds more (``parse_upload``'s ``most``)."""


def parse_upload(
    raw: Upload, fmt: str, *, most: int | None = None, why: str = "", noun: str = "items"
) -> list[Item]:
    """Items of an upload (bytes, or a binary file such as Django's ``UploadedFile``, read as
    a stream: the file is never held whole in memory), or ``FieldErrors`` naming every bad
    line (up to 20). ``most``: the reading stops, refused, at the item past it (``why`` says
    where the bound comes from)."""
    file = _open(raw)
    _check(file)
    errors: dict[str, str] = {}
    items: list[Item] = []

    def add(where: str, value: Any) -> None:
        if most is not None and len(items) >= most:
            raise TooManyItems({"source.file": f"More than {most:,} {noun}{why}."})
        parsed = _item(where, value, len(items) + 1, errors)
        if parsed is not None:
            items.append(parsed)

    _READERS.get(fmt, _read_text)(file, add, errors)
    if not items and not errors:
        errors["source.file"] = "The file holds no items."
    _check_ids(items, errors)
    if errors:
        shown = dict(list(errors.items())[:MAX_ERRORS])
        more = len(errors) - len(shown)
        if more:
            shown["source"] = f"... and {more} more problems."
        raise FieldErrors(shown)
    return items


# A reader of one format: (the checked file, ``add(where, value)`` for each item read, the
# errors of the upload). A problem that ends the reading raises ``FieldErrors``; one of an
# item (a line) goes to the errors, and the reading goes on.
_Add = Callable[[str, Any], None]


def _read_json(file: IO[bytes], add: _Add, errors: dict[str, str]) -> None:
    with _text(file, newline="") as text:
        try:
            for index, value in enumerate(_JSONArray(text)):
                add(f"items[{index}]", value)
        except RecursionError as exc:
            raise FieldErrors({"source.file": "The JSON is nested too deeply."}) from exc
        except ValueError as exc:
            if not _too_long_a_number(exc):
                raise
            raise FieldErrors({"source.file": "The JSON has a number too long."}) from exc


def _read_jsonl(file: IO[bytes], add: _Add, errors: dict[str, str]) -> None:
    with _text(file, newline=None) as text:
        for number, line in enumerate(text, 1):
            if line.strip():
                try:
                    add(f"line {number}", json.loads(line.removesuffix("\n")))
                except RecursionError:
                    errors[f"line {number}"] = "The JSON is nested too deeply."
                except json.JSONDecodeError as exc:
                    errors[f"line {number}"] = f"Invalid JSON: {exc.msg} (column {exc.colno})."
                except ValueError as exc:
                    if not _too_long_a_number(exc):
                        raise
                    errors[f"line {number}"] = "The JSON has a number too long."


def _read_csv(file: IO[bytes], add: _Add, errors: dict[str, str]) -> None:
    csv.field_size_limit(max(csv.field_size_limit(), settings.UPLOAD_MAX_BYTES))
    with _text(file, newline="") as text:
        reader = csv.reader(text)
        header = next(reader, [])
        names = [h.strip() for h in header]
        if not names or any(not n for n in names):
            raise FieldErrors({"source.file": "Line 1 must be a header naming every column."})
        if len(set(names)) != len(names):
            raise FieldErrors({"source.file": "Line 1 (the header) repeats a column name."})
        for row in reader:
            number = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(names):
                errors[f"line {number}"] = f"{len(row)} fields; the header has {len(names)}."
                continue
            add(f"line {number}", dict(zip(names, row, strict=True)))


def _read_text(file: IO[bytes], add: _Add, errors: dict[str, str]) -> None:
    with _text(file, newline=None) as text:
        for number, line in enumerate(text, 1):
            if line.strip():
                add(f"line {number}", {"id": number, "content": line.strip()})


# Any other format is plain text (``detect_format`` names only these).
_READERS: dict[str, Callable[[IO[bytes], _Add, dict[str, str]], None]] = {
    "json": _read_json,
    "jsonl": _read_jsonl,
    "csv": _read_csv,
}


def _check_ids(items: list[Item], errors: dict[str, str]) -> None:
    """Each item's id is used once."""
    seen: dict[str, int] = {}
    for index, (item_id, _) in enumerate(items):
        if item_id in seen:
            errors[f"items[{index}].id"] = (
                f"Duplicate id {item_id!r} (first used by item {seen[item_id] + 1})."
            )
        seen.setdefault(item_id, index)


PROMPT_ONLY_ITEM: Item = ("prompt", {})
