"""Input items for a job: uploads (JSON array, JSONL, CSV with a header, plain text), prompt-only,
and items of other apps through a registry that those apps fill from their ``AppConfig.ready``
with ``register`` (``evaluations`` registers "judge": the tasks of a scenario, for an LLM
judge), so ``generation`` never imports them.

Uploads are checked whole before anything is written: encoding, shape, size, emptiness and
duplicate ids; errors name the line (or array index) and the field.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

from django.conf import settings

from evalplatform.errors import FieldErrors

Item = tuple[str, dict[str, Any]]
FORMATS = ("json", "jsonl", "csv", "text")
MAX_ERRORS = 20

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


def _decode(raw: bytes) -> str:
    limit = settings.UPLOAD_MAX_BYTES
    if len(raw) > limit:
        raise FieldErrors(
            {"source.file": f"The file has {len(raw):,} bytes; the limit is {limit:,}."}
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise FieldErrors(
            {
                "source.file": f"Not UTF-8 text: line {line}, byte {exc.start}. "
                "Save the file as UTF-8."
            }
        ) from exc
    if not text.strip():
        raise FieldErrors({"source.file": "The file is empty."})
    return text


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
    return item_id, value


def parse_upload(raw: bytes, fmt: str) -> list[Item]:
    """Items of an upload, or ``FieldErrors`` naming every bad line (up to 20)."""
    text = _decode(raw)
    errors: dict[str, str] = {}
    items: list[Item] = []

    def add(where: str, value: Any) -> None:
        parsed = _item(where, value, len(items) + 1, errors)
        if parsed is not None:
            items.append(parsed)

    if fmt == "json":
        try:
            data = json.loads(text)
        except RecursionError as exc:
            raise FieldErrors({"source.file": "The JSON is nested too deeply."}) from exc
        except json.JSONDecodeError as exc:
            raise FieldErrors(
                {
                    "source.file": f"Invalid JSON at line {exc.lineno}, "
                    f"column {exc.colno}: {exc.msg}."
                }
            ) from exc
        if not isinstance(data, list):
            raise FieldErrors({"source.file": "A JSON upload is an array of items."})
        for index, value in enumerate(data):
            add(f"items[{index}]", value)
    elif fmt == "jsonl":
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    add(f"line {number}", json.loads(line))
                except RecursionError:
                    errors[f"line {number}"] = "The JSON is nested too deeply."
                except json.JSONDecodeError as exc:
                    errors[f"line {number}"] = f"Invalid JSON: {exc.msg} (column {exc.colno})."
    elif fmt == "csv":
        csv.field_size_limit(max(csv.field_size_limit(), settings.UPLOAD_MAX_BYTES))
        reader = csv.reader(io.StringIO(text, newline=""))
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
    else:
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                add(f"line {number}", {"id": number, "content": line.strip()})
    if not items and not errors:
        errors["source.file"] = "The file holds no items."
    seen: dict[str, int] = {}
    for index, (item_id, _) in enumerate(items):
        if item_id in seen:
            errors[f"items[{index}].id"] = (
                f"Duplicate id {item_id!r} (first used by item {seen[item_id] + 1})."
            )
        seen.setdefault(item_id, index)
    if errors:
        shown = dict(list(errors.items())[:MAX_ERRORS])
        more = len(errors) - len(shown)
        if more:
            shown["source"] = f"... and {more} more problems."
        raise FieldErrors(shown)
    return items


PROMPT_ONLY_ITEM: Item = ("prompt", {})
