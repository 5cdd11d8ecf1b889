"""Set-based writes of many rows of one model, for the paths that write thousands of rows at
once (a job's cells, a batch's results): a fraction of the cost of ``bulk_create`` and
``bulk_update``, which compile every value of every row through the ORM (and a CASE per
field for an update).

``insert(model, fields, rows)``: new rows, ``fields`` given per row and every other concrete
field (the auto primary key aside) at its default, computed once. ``update(model, fields,
rows)``: existing rows by primary key, each ``(pk, *values)``. On PostgreSQL an insert is a
``COPY ... FROM STDIN`` and an update one ``UPDATE ... FROM jsonb_to_recordset(...)`` per
chunk of rows (the rows as one JSON parameter); on SQLite each is one prepared statement run
with ``executemany``.

Values are prepared by their fields (``get_db_prep_save``), except where the field's type
takes the Python value as it is (integers, floats, text, booleans and keys to them): there
the caller passes values of that type. Only quoted table and column names of the model go
into the SQL text; every value is a parameter.
"""

from __future__ import annotations

import datetime
import functools
import itertools
import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any, cast

from django.db import connections, models, transaction

# Rows per statement (PostgreSQL's JSON parameter) and per executemany or COPY block.
CHUNK = 1000
# At most this much JSON text in one PostgreSQL UPDATE ... FROM jsonb_to_recordset(...).
STATEMENT_BYTES = 8 * 1024 * 1024

# Field types whose database value is the Python value itself (of the field's own type).
_PLAIN = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "SmallAutoField",
        "IntegerField",
        "BigIntegerField",
        "SmallIntegerField",
        "PositiveIntegerField",
        "PositiveBigIntegerField",
        "PositiveSmallIntegerField",
        "CharField",
        "TextField",
        "SlugField",
        "FloatField",
        "BooleanField",
    }
)


def _fields(model: type[models.Model], names: Sequence[str]) -> list[models.Field]:
    """The concrete fields named (by name or attname: ``job`` or ``job_id``)."""
    return [cast(models.Field, model._meta.get_field(name)) for name in names]


def _field_type(field: models.Field) -> str:
    target = field.target_field if field.is_relation else field  # type: ignore[attr-defined]
    return target.get_internal_type()


def _preparer(field: models.Field, connection: Any) -> Callable[[Any], Any] | None:
    """How a value of ``field`` is made ready for the database; None: it already is."""
    if _field_type(field) in _PLAIN:
        return None
    return lambda value: field.get_db_prep_save(value, connection)


def _prepared(
    rows: Iterable[Sequence[Any]], preparers: Sequence[Callable[[Any], Any] | None]
) -> list[list[Any]]:
    """``rows`` with each value prepared by its column's preparer, a column at a time."""
    columns: list[Any] = list(zip(*rows, strict=True))
    for index, prepare in enumerate(preparers):
        if prepare is not None:
            columns[index] = _prepared_column(prepare, columns[index])
    return [list(row) for row in zip(*columns, strict=True)]


def _prepared_column(prepare: Callable[[Any], Any], column: Sequence[Any]) -> list[Any]:
    """``prepare`` of each value, once per distinct value (a column often repeats a few:
    the time now, a price, zero)."""
    done: dict[tuple[type, Any], Any] = {}
    prepared = []
    for value in column:
        # Keyed by type too: True, 1 and 1.0 are equal keys but not the same JSON.
        key = (type(value), value)
        try:
            prepared.append(done[key])
        except KeyError:
            prepared.append(done.setdefault(key, prepare(value)))
        except TypeError:  # not hashable (JSON)
            prepared.append(prepare(value))
    return prepared


def _first(row: Sequence[Any]) -> Any:
    return row[0]


def _cast_type(field: models.Field, connection: Any) -> str:
    db_type = str(field.db_type(connection))
    return "varchar" if db_type.startswith("varchar(") else db_type


def _by_size(rows: list[str]) -> Iterator[list[str]]:
    """``rows`` (each a row's JSON) in runs of at most ``STATEMENT_BYTES`` of text (about
    what one statement's text holds), at least one row each: a thousand long replies would
    otherwise make one statement of hundreds of megabytes."""
    start, size = 0, 0
    for index, row in enumerate(rows):
        weight = len(row)
        if index > start and size + weight > STATEMENT_BYTES:
            yield rows[start:index]
            start, size = index, 0
        size += weight
    if start < len(rows):
        yield rows[start:]


def insert(
    model: type[models.Model],
    fields: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    using: str = "default",
) -> int:
    """Insert ``rows`` (values of ``fields``, attnames such as ``job_id``, in that order);
    every other concrete field but the auto primary key takes its default (``auto_now_add``
    and ``auto_now`` the time now), the same for every row. Returns how many rows were
    written. Runs in the caller's transaction."""
    connection = connections[using]
    meta = model._meta
    given = _fields(model, fields)
    names = {f.attname for f in given}
    template = model()
    rest = [
        f
        for f in meta.concrete_fields
        if f.attname not in names and not (f.primary_key and isinstance(f, models.AutoField))
    ]
    constants = [f.get_db_prep_save(f.pre_save(template, add=True), connection) for f in rest]
    columns = [str(f.column) for f in given] + [str(f.column) for f in rest]
    preparers = [_preparer(f, connection) for f in given]
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    column_list = ", ".join(quote(c) for c in columns)
    written = 0
    iterator = iter(rows)
    with connection.cursor() as cursor:
        while chunk := list(itertools.islice(iterator, CHUNK)):
            prepared = _prepared(chunk, preparers)
            if connection.vendor == "postgresql":
                copy = f"COPY {table} ({column_list}) FROM STDIN"
                with cursor.cursor.copy(copy) as block:
                    for row in prepared:
                        block.write_row(row + constants)
            else:
                marks = ", ".join(["%s"] * len(columns))
                sql = f"INSERT INTO {table} ({column_list}) VALUES ({marks})"  # noqa: S608
                cursor.executemany(sql, [row + constants for row in prepared])
            written += len(prepared)
    return written


def update(
    model: type[models.Model],
    fields: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    using: str = "default",
) -> int:
    """Set ``fields`` (attnames) of existing rows: each row is ``(pk, *values)``. Returns
    how many rows were given. Runs in the caller's transaction."""
    count = 0
    with connections[using].cursor() as cursor:
        for sql, params, many, size in update_statements(model, fields, rows, using=using):
            if many:
                cursor.executemany(sql, params)
            else:
                cursor.execute(sql, params)
            count += size
    return count


def update_statements(
    model: type[models.Model],
    fields: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    using: str = "default",
) -> Iterator[tuple[str, Any, bool, int]]:
    """``update``'s statements, for a caller that runs them itself (with others, in one
    round trip): each ``(sql, params, many, rows)``, ``many`` when ``params`` is a sequence
    of rows for ``executemany`` (SQLite), ``rows`` how many rows the statement writes."""
    connection = connections[using]
    preparers = [None, *(_preparer(f, connection) for f in _fields(model, fields))]
    sql = _update_sql(model, tuple(fields), using)
    aliases = _aliases(len(fields))
    iterator = iter(rows)
    while chunk := list(itertools.islice(iterator, CHUNK)):
        # In the table's order: neighbouring rows share pages (results come back in any
        # order).
        chunk.sort(key=_first)
        prepared = _prepared(chunk, preparers)
        if connection.vendor == "postgresql":
            encoded = [
                _json_dumps(dict(zip(aliases, map(_finite, row), strict=True))) for row in prepared
            ]
            for part in _by_size(encoded):
                yield sql, ["[" + ",".join(part) + "]"], False, len(part)
        else:
            yield sql, [[*row[1:], row[0]] for row in prepared], True, len(prepared)


def _aliases(count: int) -> list[str]:
    """The names of a row's values in ``update``'s statement: ``pk``, then one a field."""
    return ["pk", *(f"v{n}" for n in range(count))]


@functools.lru_cache(maxsize=256)
def _update_sql(model: type[models.Model], fields: tuple[str, ...], using: str) -> str:
    """``update``'s statement for these fields, built once (quoting names and reading
    column types costs more than running it for a few rows)."""
    connection = connections[using]
    meta = model._meta
    given = _fields(model, fields)
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    pk_field = cast(models.Field, meta.pk)
    pk = quote(str(pk_field.column))
    aliases = _aliases(len(given))
    if connection.vendor == "postgresql":
        # The rows go as one JSON parameter, read back as a set of typed rows: the text
        # of the statement is the same whatever the number of rows, so psycopg parses it
        # once (a VALUES list of a placeholder a value is parsed again on every call, and
        # each value quoted on its own), and the JSON is written by ``json.dumps`` in C.
        # A varchar(n) column's values are read as varchar (as varchar(n), a longer value
        # would be cut where the assignment refuses it, as any other UPDATE does). A JSON
        # column's values come as their JSON text, read as jsonb in the assignment: read as
        # jsonb by the record, a JSON null would be SQL NULL.
        def read_as(field: models.Field) -> str:
            return "text" if _is_json(field) else _cast_type(field, connection)

        columns = ", ".join(
            f"{alias} {read_as(f)}" for f, alias in zip([pk_field, *given], aliases, strict=True)
        )
        assignments = ", ".join(
            f"{quote(str(f.column))} = v.{alias}" + ("::jsonb" if _is_json(f) else "")
            for f, alias in zip(given, aliases[1:], strict=True)
        )
        return (
            f"UPDATE {table} SET {assignments} "  # noqa: S608
            f"FROM jsonb_to_recordset(%s::jsonb) AS v({columns}) WHERE {table}.{pk} = v.pk"
        )
    assignments = ", ".join(f"{quote(str(f.column))} = %s" for f in given)
    return f"UPDATE {table} SET {assignments} WHERE {pk} = %s"  # noqa: S608


def _json_value(value: Any) -> Any:
    """A prepared value that JSON has no type for, as the text its column's type reads
    (``jsonb_to_recordset`` reads a JSON string with the type's input function). PostgreSQL
    only (where psycopg is installed)."""
    from psycopg.types.json import Jsonb

    if isinstance(value, Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return f"{value.days} days {value.seconds} seconds {value.microseconds} microseconds"
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, Jsonb):  # a JSON field's value as its text, by the field's encoder
        return (value.dumps or json.dumps)(value.obj)
    raise TypeError(f"{type(value).__name__} values cannot be written by bulk.update")


def _finite(value: Any) -> Any:
    """A float JSON has no number for (NaN, infinities) as the text ``float8`` reads."""
    if type(value) is float and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _is_json(field: models.Field) -> bool:
    return field.get_internal_type() == "JSONField"


_json_dumps = json.JSONEncoder(default=_json_value, ensure_ascii=False, allow_nan=False).encode


# --- long writes, a chunk per transaction -------------------------------------------------------
# SQLite has one writer at a time, and a writer that waits sleeps between tries (up to 100 ms
# each, SQLite's busy handler): a long write that begins its next chunk at once can keep
# another writer out for seconds. So at least every ``COURTESY_EVERY_S`` it leaves a gap
# longer than one such sleep.
COURTESY_S = 0.1
COURTESY_EVERY_S = 0.25
_courtesy = threading.local()


def between_chunks(using: str = "default") -> None:
    """Call after each chunk's transaction of a long write (outside any transaction). On
    SQLite: the write-ahead log is folded back into the database by this writer (not by the
    next one to commit, which would wait for it), and, a quarter of a second after the
    last, other writers get a turn. No-op elsewhere (PostgreSQL locks rows, not the
    database)."""
    connection = connections[using]
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
    now = time.monotonic()
    if now - getattr(_courtesy, "last", 0.0) >= COURTESY_EVERY_S:
        time.sleep(COURTESY_S)
        _courtesy.last = time.monotonic()


def in_chunks(
    rows: Sequence[Any], size: int, write: Callable[[Sequence[Any]], Any]
) -> Iterator[Any]:
    """``write`` each ``size`` of ``rows`` in a transaction of its own, yielding what it
    returns once committed (the caller can note what was written before the next chunk),
    with ``between_chunks`` after each."""
    for first in range(0, len(rows), size):
        with transaction.atomic():
            made = write(rows[first : first + size])
        yield made
        between_chunks()


def delete_in_chunks(
    rows: Any, size: int, *, first: Callable[[list[Any]], object] | None = None
) -> None:
    """Delete the rows of the queryset ``rows``, ``size`` primary keys per transaction, with
    ``between_chunks`` after each; ``first`` runs on each chunk's keys before, in its
    transaction (to undo links between the rows, say)."""
    plain = rows.model._base_manager.db_manager(rows.db)
    while True:
        with transaction.atomic(using=rows.db):
            chunk = list(rows.values_list("pk", flat=True)[:size])
            if not chunk:
                return
            if first is not None:
                first(chunk)
            plain.filter(pk__in=chunk).delete()
        between_chunks()  # (the platform has one database)
