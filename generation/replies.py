"""A job's reply format and its outputs read by it: pure functions, no database.

A job may say how its replies are scored (``reply_format`` in the job's request, frozen in
its configuration), in the kinds judges take:

- ``{"kind": "json", "fields": {"total": "scores.total", ...}}``: the reply holds one JSON
  object (fenced or wrapped in prose is read too); each field is the value at its dotted
  path. ``fields`` may be a list of names, each its own path.
- ``{"kind": "tags", "fields": {"winner": "BETTER_SAMPLE"}}``: each field is the text of
  an XML-like tag; a number written as one (``<score>7</score>``) is read as a number.
- ``{"kind": "structured"}``: the models reply under their ``response_schema`` (provider
  structured output); the fields are the schemas' top-level properties unless named.

Each completed output keeps its ``parsed`` fields and a ``parse_status``: ``ok`` (the reply
was the object, every field found), ``extracted`` (fenced, in prose, or from tags),
``partial`` (some fields missing: null), ``failed`` (none found; the raw text is kept and
``parse_error`` says why).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from evalplatform.replies import TAG_NAME, Unreadable, extract_json, path, tags

KINDS = ("json", "tags", "structured")
STATUSES = ("ok", "extracted", "partial", "failed")
MAX_FIELDS = 50
# A field's name is a column of the exports (``parsed.<name>``).
FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_PATH = re.compile(r"[^.\x00]{1,100}(\.[^.\x00]{1,100}){0,9}")
# A value longer than this as JSON text is not kept (the raw reply still is).
MAX_VALUE_CHARS = 20_000
# Replies are read up to this many characters.
MAX_REPLY_CHARS = 1_000_000
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")

HELP = (
    '{"kind": "json" or "tags", "fields": {name: dotted path or tag}} (or a list of names), '
    'or {"kind": "structured"} with a response schema on the models; null for free text.'
)


def check(value: Any, schemas: Iterable[Mapping[str, Any] | None] = ()) -> dict[str, Any] | None:
    """The reply format as stored (``{"kind", "fields": {name: path}, "order": [name, ...]}``:
    a JSON column on PostgreSQL keeps no key order, so the fields' order is kept apart),
    or None for none.
    ``schemas``: the job's models' response schemas (``{"name", "schema"}`` or None), whose
    top-level properties are a structured format's fields when it names none. Raises
    ``ValueError`` with the message for the field."""
    if value in (None, {}):
        return None
    if not isinstance(value, dict) or value.get("kind") not in KINDS:
        raise ValueError(HELP)
    if set(value) - {"kind", "fields"}:
        raise ValueError("Only kind and fields.")
    kind = value["kind"]
    raw = value.get("fields")
    if raw is None and kind == "structured":
        raw = _schema_fields(schemas)
        if not raw:
            raise ValueError(
                "Structured replies need a response_schema with properties on a model, "
                "or fields named here."
            )
    if isinstance(raw, list):
        raw = {name: name for name in raw} if all(isinstance(n, str) for n in raw) else None
    if not isinstance(raw, dict) or not raw:
        raise ValueError("fields: {name: path} or a list of names, at least one.")
    if len(raw) > MAX_FIELDS:
        raise ValueError(f"At most {MAX_FIELDS} fields.")
    fields: dict[str, str] = {}
    for name, where in raw.items():
        if not FIELD_NAME.fullmatch(name):
            raise ValueError(
                f"A field's name is 1 to 64 letters, digits, _ . or -, not a digit first: {name!r}."
            )
        if kind == "tags":
            if not (isinstance(where, str) and re.fullmatch(TAG_NAME, where)):
                raise ValueError(f"fields.{name}: a tag's name (letters, digits, _ . -).")
        elif not (isinstance(where, str) and _PATH.fullmatch(where)):
            raise ValueError(f"fields.{name}: a dotted path of at most 10 parts.")
        fields[name] = where
    return {"kind": kind, "fields": fields, "order": list(fields)}


def field_names(reply_format: Mapping[str, Any] | None) -> list[str]:
    """The names of a stored reply format's fields, in the order they were given."""
    if not reply_format:
        return []
    return list(reply_format.get("order") or reply_format.get("fields") or {})


def shown(reply_format: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A stored reply format as the API shows it: ``{"kind", "fields"}``, fields in order."""
    if not reply_format:
        return None
    fields = reply_format.get("fields") or {}
    return {
        "kind": reply_format["kind"],
        "fields": {n: fields[n] for n in field_names(reply_format) if n in fields},
    }


def _schema_fields(schemas: Iterable[Mapping[str, Any] | None]) -> dict[str, str]:
    names: dict[str, str] = {}
    for stored in schemas:
        properties = ((stored or {}).get("schema") or {}).get("properties")
        if isinstance(properties, dict):
            names |= {n: n for n in properties if isinstance(n, str) and FIELD_NAME.fullmatch(n)}
    return dict(list(names.items())[:MAX_FIELDS])


@dataclass(frozen=True)
class Parsed:
    fields: dict[str, Any] | None
    status: str
    error: str = ""


def read(text: str, reply_format: Mapping[str, Any]) -> Parsed:
    """The output's fields under ``reply_format`` (as ``check`` stores it), never raising:
    a reply that cannot be read is a ``failed`` parse with the reason."""
    fields: Mapping[str, str] = reply_format["fields"]
    text = text[:MAX_REPLY_CHARS]
    try:
        if reply_format["kind"] == "tags":
            found: dict[str, str] = {}
            for tag, value in tags(text):
                found.setdefault(tag, value.strip())
            values = {name: _number(found.get(tag)) for name, tag in fields.items()}
            how = "extracted"
        else:
            source, how = extract_json(text)
            values = {name: _kept(path(source, where)) for name, where in fields.items()}
    except (Unreadable, RecursionError) as exc:
        message = str(exc) if isinstance(exc, Unreadable) else "The reply is nested too deeply."
        return Parsed(None, "failed", message)
    missing = [name for name, value in values.items() if value is None]
    if len(missing) == len(values):
        return Parsed(values, "failed", "None of the fields was found.")
    if missing:
        return Parsed(values, "partial", "Not found: " + ", ".join(missing)[:480] + ".")
    return Parsed(values, how)


def _number(value: str | None) -> Any:
    """A tag's text: a number when it is written as one."""
    if value is None or not _NUMBER.fullmatch(value):
        return _kept(value)
    number = float(value)
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def _kept(value: Any) -> Any:
    """A value as stored: non-finite numbers are null (no JSON column takes them), and a
    value longer than ``MAX_VALUE_CHARS`` as JSON is not kept."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return value if len(value) <= MAX_VALUE_CHARS else None
    if isinstance(value, (dict, list)):
        try:
            text = json.dumps(value, allow_nan=False)
        except ValueError:
            return None
        return value if len(text) <= MAX_VALUE_CHARS else None
    return value


def numeric(value: Any) -> float | None:
    """A parsed value as a number for the statistics: numbers (not true/false) and text
    written as a number; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value) if abs(value) < 10**300 else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        number = float(value)
        return number if math.isfinite(number) else None
    return None
