"""The statements of the live loop without the ORM's work on every call: a select compiled
once (its SQL and the converters of its columns) and run again with new parameters; rows
updated by id in one statement, their values prepared by their fields. A step of a live run
runs a handful of statements; compiling each through the ORM cost more CPU than running it
(measured by bench/generation_throughput.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connections, router
from django.db.models import Model, QuerySet

CHUNK = 500  # ids in one UPDATE ... WHERE id IN (...)
# Fields whose str, int, float or None values go to the database as they are.
_PLAIN = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "BigIntegerField",
        "CharField",
        "FloatField",
        "ForeignKey",
        "IntegerField",
        "PositiveBigIntegerField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "SmallIntegerField",
        "TextField",
    }
)


class CompiledSelect:
    """A queryset compiled once; ``rows(params)`` runs it again with ``params`` in place of
    the ones it was compiled with (same number and order), converting values as the ORM
    does. ``names``: the selected fields' attribute names, in order."""

    def __init__(self, queryset: QuerySet[Any]) -> None:
        self.db = queryset.db
        compiler = queryset.query.get_compiler(self.db)
        self.sql, self.params = compiler.as_sql()
        columns = [expression for expression, _, _ in compiler.select[: compiler.col_count]]
        self.names: list[str] = [c.target.attname for c in columns]
        self._compiler = compiler
        self._converters = compiler.get_converters(columns)

    def rows(self, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with connections[self.db].cursor() as cursor:
            cursor.execute(self.sql, self.params if params is None else params)
            rows = cursor.fetchall()
        if not self._converters:
            return [tuple(row) for row in rows]
        return [tuple(row) for row in self._compiler.apply_converters(rows, self._converters)]


def prepare(field: Any, value: Any, connection: Any) -> Any:
    """``value`` as ``field`` sends it to the database (a model instance: its key)."""
    if value is None or (type(value) in (str, int, float) and field.get_internal_type() in _PLAIN):
        return value
    if hasattr(value, "prepare_database_save"):
        value = value.prepare_database_save(field)
    return field.get_db_prep_save(value, connection)


def update_by_pk(model: type[Model], pks: Iterable[int], values: dict[str, Any]) -> int:
    """Set ``values`` (by field name) on the rows of ``model`` whose ids are ``pks``: one
    UPDATE per CHUNK ids. Returns the number of rows changed."""
    meta = model._meta
    connection = connections[router.db_for_write(model)]
    quote = connection.ops.quote_name
    pk_column = quote(str(meta.pk.column))  # type: ignore[union-attr]
    table = quote(meta.db_table)
    fields: list[Any] = [meta.get_field(name) for name in values]
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    prepared = [prepare(f, v, connection) for f, v in zip(fields, values.values(), strict=True)]
    ids = list(pks)
    changed = 0
    with connection.cursor() as cursor:
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            marks = ", ".join(["%s"] * len(chunk))
            # Only quoted names of the model go into the text; values are parameters.
            sql = f"UPDATE {table} SET {assignments} WHERE {pk_column} IN ({marks})"  # noqa: S608
            cursor.execute(sql, [*prepared, *chunk])
            changed += cursor.rowcount
    return changed


def save_fields(instance: Model, names: Sequence[str]) -> None:
    """``instance.save(update_fields=names)`` in one plain UPDATE (no signals are sent): an
    ``auto_now`` field among ``names`` is set to now, as ``save`` does."""
    meta = instance._meta
    values = {}
    for name in dict.fromkeys(names):
        field: Any = meta.get_field(name)
        values[name] = field.pre_save(instance, add=False)
    update_by_pk(type(instance), [instance.pk], values)


def ids_where(
    model: type[Model], pks: Sequence[int], *, lock: bool = False, **equal: Any
) -> set[int]:
    """Which of ``pks`` are ids of rows of ``model`` whose fields equal ``equal`` (by field
    name); with ``lock``, those rows are locked (``FOR UPDATE``, where the database has it)."""
    if not pks:
        return set()
    meta = model._meta
    connection = connections[router.db_for_write(model)]
    quote = connection.ops.quote_name
    pk_column = quote(str(meta.pk.column))  # type: ignore[union-attr]
    table = quote(meta.db_table)
    fields: list[Any] = [meta.get_field(name) for name in equal]
    conditions = "".join(f" AND {quote(f.column)} = %s" for f in fields)
    values = [prepare(f, v, connection) for f, v in zip(fields, equal.values(), strict=True)]
    suffix = " FOR UPDATE" if lock and connection.features.has_select_for_update else ""
    found: set[int] = set()
    with connection.cursor() as cursor:
        for start in range(0, len(pks), CHUNK):
            chunk = list(pks[start : start + CHUNK])
            marks = ", ".join(["%s"] * len(chunk))
            # Only quoted names of the model go into the text; values are parameters.
            sql = (
                f"SELECT {pk_column} FROM {table} "  # noqa: S608
                f"WHERE {pk_column} IN ({marks}){conditions}{suffix}"
            )
            cursor.execute(sql, [*chunk, *values])
            found.update(row[0] for row in cursor.fetchall())
    return found
