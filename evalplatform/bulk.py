"""Set-based writes of many rows of one model, for the paths that write thousands of rows at
once (a job's cells, a batch's results): a fraction of the cost of ``bulk_create`` and
``bulk_update``, which compile every value of every row through the ORM (and a CASE per
field for an update).

``insert(model, fields, rows)``: new rows, ``fields`` given per row and every other concrete
field (the auto primary key aside) at its default, computed once. ``update(model, fields,
rows)``: existing rows by primary key, each ``(pk, *values)``. On PostgreSQL an insert is a
``COPY ... FROM STDIN`` and an update one ``UPDATE ... FROM (VALUES ...)`` per chunk of rows;
on SQLite each is one prepared statement run with ``executemany``.

Values are prepared by their fields (``get_db_prep_save``), except where the field's type
takes the Python value as it is (integers, floats, text, booleans and keys to them): there
the caller passes values of that type. Only quoted table and column names of the model go
into the SQL text; every value is a parameter.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

from django.db import connections, models

# Rows per statement (PostgreSQL's VALUES list) and per executemany or COPY block.
CHUNK = 1000
# At most this much text in one PostgreSQL UPDATE ... FROM (VALUES ...) statement.
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


def _weight(value: Any) -> int:
    """About how many bytes a prepared value adds to a statement's text: a string's or
    bytes' length, a JSON value's (psycopg's ``Jsonb`` wrapper holds it in ``obj``)."""
    if isinstance(value, str | bytes):
        return len(value)
    held = getattr(value, "obj", None)
    if held is not None and not isinstance(held, int | float | bool):
        return len(json.dumps(held, default=str))
    return 8


def _by_size(rows: list[list[Any]]) -> Iterator[list[list[Any]]]:
    """``rows`` in runs of at most ``STATEMENT_BYTES`` of text and bytes values (about what
    one statement's text holds), at least one row each: a thousand long replies would
    otherwise make one statement of hundreds of megabytes."""
    start, size = 0, 0
    for index, row in enumerate(rows):
        weight = sum(_weight(v) for v in row)
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
    connection = connections[using]
    meta = model._meta
    given = _fields(model, fields)
    preparers = [None, *(_preparer(f, connection) for f in given)]
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    pk_field = cast(models.Field, meta.pk)
    pk = quote(str(pk_field.column))
    count = 0
    iterator = iter(rows)
    with connection.cursor() as cursor:
        while chunk := list(itertools.islice(iterator, CHUNK)):
            # In the table's order: neighbouring rows share pages (results come back in any
            # order).
            chunk.sort(key=_first)
            prepared = _prepared(chunk, preparers)
            if connection.vendor == "postgresql":
                # Each value is cast to its column's type: a VALUES column of NULLs or of
                # text literals is text until told otherwise. A varchar(n) column's values
                # are cast to varchar (a cast to varchar(n) would cut a longer value where
                # the assignment refuses it, as any other UPDATE does).
                aliases = ["pk", *(f"v{n}" for n in range(len(given)))]
                assignments = ", ".join(
                    f"{quote(str(f.column))} = v.{alias}::{_cast_type(f, connection)}"
                    for f, alias in zip(given, aliases[1:], strict=True)
                )
                marks = "(" + ", ".join(["%s"] * (len(given) + 1)) + ")"
                pk_type = pk_field.db_type(connection)
                for part in _by_size(prepared):
                    sql = (
                        f"UPDATE {table} SET {assignments} FROM (VALUES "  # noqa: S608
                        + ", ".join([marks] * len(part))
                        + f") AS v({', '.join(aliases)}) WHERE {table}.{pk} = v.pk::{pk_type}"
                    )
                    cursor.execute(sql, [value for row in part for value in row])
            else:
                assignments = ", ".join(f"{quote(str(f.column))} = %s" for f in given)
                sql = f"UPDATE {table} SET {assignments} WHERE {pk} = %s"  # noqa: S608
                cursor.executemany(sql, [[*row[1:], row[0]] for row in prepared])
            count += len(prepared)
    return count
