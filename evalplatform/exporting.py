"""Column-wise reading and writing for streamed exports (the generation outputs export, the
scenario judgments export): one SELECT of plain columns (``values_list``, no model instance
a row), read in chunks (a server-side cursor on PostgreSQL: flat memory), converted a
column at a time and only where the backend needs it, and JSON text made a column at a
time (``json_column``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from functools import partial
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from types import NoneType
from typing import Any

from django.db import connections
from django.db.models import CharField, Func, JSONField, QuerySet
from django.db.models.fields.json import KeyTransform
from django.db.models.sql.constants import MULTI

# Rows read and written per step of an export: a block of the download (about 1 MB at 1 KB
# of text a row; memory stays flat, whatever the export's size).
EXPORT_BATCH = 1000
# Rows fetched per round trip of a PostgreSQL export's server-side cursor (written out
# ``EXPORT_BATCH`` at a time): fewer trips, a few MB held.
EXPORT_FETCH = 5000
# Distinct JSON texts a column of an export decodes once and then hands out again (a
# comparison's few answers, a task's presented order for each of its raters): at most this
# many held, each of at most JSON_MEMO_TEXT characters (a longer text, a free-text answer,
# is decoded each time), so memory stays flat: about a megabyte a column.
JSON_MEMO = 4096
JSON_MEMO_TEXT = 256


def iso_datetime(tz: tzinfo | None) -> Callable[[Any], str]:
    """A datetime column's value as the exports write it: ISO 8601 with its offset, "" for
    NULL. The database's value (on SQLite, text or a naive datetime) is read with
    ``datetime.fromisoformat`` and a naive one taken in the connection's time zone (none
    without ``USE_TZ``), as Django's converter would, at a fraction of the cost."""
    utc = tz is UTC

    def iso(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        if value.tzinfo is None and tz is not None:
            if utc:  # the same text as value.replace(tzinfo=UTC).isoformat(), sooner
                return value.isoformat() + "+00:00"
            value = value.replace(tzinfo=tz)
        return value.isoformat()

    return iso


class IsoUtcText(Func):
    """A timestamp as ``datetime.isoformat`` writes it in UTC (microseconds only when there
    are any), "" for NULL: made by PostgreSQL, where reading it as a datetime costs the
    export more than all else (Django's time-zone-aware loader parses each in Python)."""

    template = (
        "COALESCE(CASE WHEN date_trunc('second', %(expressions)s) = %(expressions)s "
        "THEN to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"') "
        "ELSE to_char(%(expressions)s AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"') END, '')"
    )
    output_field = CharField()


def column_batches(
    queryset: QuerySet[Any], names: Sequence[str], datetimes: Iterable[str] = ()
) -> Iterator[list[Any]]:
    """The rows of ``queryset`` (ordered) in batches of up to ``EXPORT_BATCH``, each batch a
    list of values per field of ``names``: Django's own converters, except for the fields
    ``datetimes`` (among ``names``), given as ISO 8601 text ("" for NULL): written by
    PostgreSQL itself (``IsoUtcText``) where the connection is in UTC, else
    ``iso_datetime``. A JSON field's text is decoded once per distinct text
    (``JSON_MEMO``): rows with the same text share one value, which callers read and never
    change."""
    names = list(names)
    datetimes = [name for name in datetimes if name in names]
    connection = connections[queryset.db]
    in_sql = connection.vendor == "postgresql" and connection.timezone_name == "UTC"
    if in_sql and datetimes:
        aliases = {name: f"{name.replace('__', '_')}_iso_export" for name in datetimes}
        queryset = queryset.annotate(**{a: IsoUtcText(name) for name, a in aliases.items()})
        names = [aliases.get(name, name) for name in names]
    queryset = queryset.values_list(*names)
    compiler = queryset.query.get_compiler(using=queryset.db)
    chunked = not connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
    fetch = EXPORT_FETCH if connection.vendor == "postgresql" else EXPORT_BATCH
    results = compiler.execute_sql(MULTI, chunked_fetch=chunked, chunk_size=fetch)
    selected = [column[0] for column in compiler.select[: compiler.col_count]]
    # Per converted column, the functions applied in turn to each of its values.
    converters: dict[int, list[Callable[[Any], Any]]] = {}
    for index, (functions, expression) in compiler.get_converters(selected).items():
        converters[index] = [
            _json_reader(function, expression, connection)
            if _plain_json(function, expression)
            else partial(_django_converted, function, expression, connection)
            for function in functions
        ]
    if not in_sql:
        iso = iso_datetime(connection.timezone)
        for name in datetimes:
            converters[names.index(name)] = [iso]
    for fetched in results:
        for start in range(0, len(fetched), EXPORT_BATCH):
            chunk = fetched[start : start + EXPORT_BATCH]
            columns: list[Any] = list(zip(*chunk, strict=True))
            for index, functions in converters.items():
                for function in functions:
                    columns[index] = list(map(function, columns[index]))
            yield columns


def _django_converted(function: Callable[..., Any], expression, connection, value: Any) -> Any:
    return function(value, expression, connection)


def _plain_json(function: Callable[..., Any], expression: Any) -> bool:
    """Whether ``function`` is a JSON field's own reading of a whole column's value (no
    decoder of its own, no key taken out of it)."""
    field = getattr(function, "__self__", None)
    return (
        getattr(function, "__func__", None) is JSONField.from_db_value
        and isinstance(field, JSONField)
        and field.decoder is None
        and not isinstance(expression, KeyTransform)
    )


_MISSING = object()


def _json_reader(function: Callable[..., Any], expression, connection) -> Callable[[Any], Any]:
    """``JSONField.from_db_value`` (text decoded, text that is no JSON kept as it is) with
    each distinct short text decoded once (``JSON_MEMO``, ``JSON_MEMO_TEXT``)."""
    memo: dict[str, Any] = {}

    def read(value: Any) -> Any:
        if type(value) is not str:
            return None if value is None else function(value, expression, connection)
        if len(value) > JSON_MEMO_TEXT:
            return function(value, expression, connection)
        found = memo.get(value, _MISSING)
        if found is _MISSING:
            try:
                found = json.loads(value)
            except json.JSONDecodeError:
                found = value
            if len(memo) >= JSON_MEMO:
                memo.clear()
            memo[value] = found
        return found

    return read


def json_column(column: Sequence[Any]) -> Iterable[str]:
    """A column's values as JSON text (``json.dumps(value, default=str)``), with no call per
    cell where the column's type allows."""
    kinds = set(map(type, column))
    if kinds == {str}:
        return map(encode_basestring_ascii, column)
    if kinds == {int}:
        return map(int.__repr__, column)
    if kinds == {Decimal}:
        return map(encode_basestring_ascii, map(str, column))
    if kinds <= {int, NoneType}:
        return map(_int_or_null, column)
    if kinds == {str, NoneType}:
        return map(_text_or_null, column)
    return _json_values(column)


def _int_or_null(value: int | None) -> str:
    return "null" if value is None else int.__repr__(value)


def _text_or_null(value: str | None) -> str:
    return "null" if value is None else encode_basestring_ascii(value)


def _json_values(column: Sequence[Any]) -> list[str]:
    """``json_value`` of each value, written once per object: a column of values decoded
    once per distinct text (``column_batches``) repeats the same objects."""
    written: dict[int, str] = {}
    texts = []
    for value in column:
        text = written.get(id(value))
        if text is None:
            text = written[id(value)] = json_value(value)
        texts.append(text)
    return texts


def json_value(value: Any) -> str:
    return json.dumps(value, default=str)
