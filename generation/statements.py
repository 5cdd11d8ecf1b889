"""The statements of the live loop without the ORM's work on every call: a select compiled
once (its SQL and the converters of its columns) and run again with new parameters; rows
updated by id in one statement, their values prepared by their fields; and trips, which
send several statements to the database at once. A step of a live run runs a handful of
statements; compiling each through the ORM cost more CPU than running it, and on PostgreSQL
each round trip costs ~0.1 ms of the client's CPU in context, more than most statements
(measured by bench/generation_throughput.py)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from django.db import connections
from django.db.models import Model, QuerySet

CHUNK = 500  # ids in one UPDATE ... WHERE id IN (...)
# At most this much text (SQL and parameters, roughly) in one execute of a trip: a trip of
# long replies goes in several (as ``evalplatform.bulk`` bounds its statements).
TRIP_BYTES = 8 * 1024 * 1024
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


class Result:
    """One statement's result once its trip has run: the rows it returned, through the
    statement's ``read`` (without one, they are not fetched), and how many rows it changed
    or returned."""

    __slots__ = ("rowcount", "rows")

    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.rowcount = -1


class _Statement(NamedTuple):
    sql: str
    params: Any
    many: bool
    result: Result
    read: Callable[[list[Any]], list[Any]] | None


class Trip:
    """Statements that go to the database together, in the order added, then what runs
    after them (``then``), all on one cursor in the caller's transaction. On PostgreSQL
    (Django's client-side binding, its default) the statements go as one execute, one
    round trip, read back result by result; elsewhere (SQLite, in-process: no round trip to
    save) one execute each. A statement's ``Result`` is filled when the trip runs, so a
    statement can never depend on the rows of another in the same trip."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self._statements: list[_Statement] = []
        self._after: list[Callable[[], None]] = []

    def add(
        self,
        sql: str,
        params: Sequence[Any] = (),
        *,
        many: bool = False,
        read: Callable[[list[Any]], list[Any]] | None = None,
    ) -> Result:
        """``sql`` with ``params`` (with ``many``, a sequence of parameter rows for
        ``executemany``, run on its own). ``read``: the statement returns rows, which it
        turns into the result's (``list``: as they are)."""
        result = Result()
        self._statements.append(_Statement(sql, params, many, result, read))
        return result

    def then(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the statements have run (in the same transaction)."""
        self._after.append(callback)

    def run(self) -> None:
        statements, self._statements = self._statements, []
        if _joins(self.cursor):
            group: list[_Statement] = []
            size = 0
            for statement in statements:
                weight = len(statement.sql) + sum(
                    len(p) for p in statement.params if isinstance(p, str)
                )
                if statement.many or (group and size + weight > TRIP_BYTES):
                    self._run_joined(group)
                    group, size = [], 0
                if statement.many:
                    self._run_one(statement)
                else:
                    group.append(statement)
                    size += weight
            self._run_joined(group)
        else:
            for statement in statements:
                self._run_one(statement)
        after, self._after = self._after, []
        for callback in after:
            callback()

    def _run_one(self, statement: _Statement) -> None:
        if statement.many:
            self.cursor.executemany(statement.sql, statement.params)
        else:
            self.cursor.execute(statement.sql, statement.params)
        self._take(statement)

    def _run_joined(self, group: list[_Statement]) -> None:
        if len(group) <= 1:
            for statement in group:
                self._run_one(statement)
            return
        params: list[Any] = []
        for statement in group:
            params += statement.params
        # Client-side binding sends the text by the simple query protocol, which takes
        # several statements; each returns its own result, in order.
        self.cursor.execute("; ".join(statement.sql for statement in group), params)
        for index, statement in enumerate(group):
            if index:
                self.cursor.nextset()
            self._take(statement)

    def _take(self, statement: _Statement) -> None:
        statement.result.rowcount = self.cursor.rowcount
        if statement.read is not None:
            statement.result.rows = statement.read(self.cursor.fetchall())


def _joins(cursor: Any) -> bool:
    """Whether ``cursor`` (Django's) sends several statements in one execute: psycopg's
    client-side binding cursor does (not its server-side binding one)."""
    if cursor.db.vendor != "postgresql":
        return False
    try:
        import psycopg
    except ImportError:  # psycopg2: one result an execute
        return False
    return isinstance(cursor.cursor, psycopg.ClientCursor)


class CompiledSelect:
    """A queryset compiled once; ``rows(params)`` runs it again with ``params`` in place of
    the ones it was compiled with (same number and order), converting values as the ORM
    does (``add_to`` adds it to a trip instead). ``names``: the selected fields' attribute
    names, in order."""

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
            return self.convert(cursor.fetchall())

    def add_to(self, trip: Trip, params: Sequence[Any] | None = None) -> Result:
        """The select in ``trip``; its result's rows are converted."""
        return trip.add(self.sql, self.params if params is None else params, read=self.convert)

    def convert(self, rows: Iterable[Any]) -> list[tuple[Any, ...]]:
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


def update_by_pk(
    trip: Trip, model: type[Model], pks: Iterable[int], values: dict[str, Any]
) -> None:
    """Set ``values`` (by field name) on the rows of ``model`` whose ids are ``pks``, in
    ``trip`` (on its cursor's database): one UPDATE per CHUNK ids."""
    connection = trip.cursor.db
    fields, sql = _update_sql(model, tuple(values), connection.alias)
    prepared = [prepare(f, v, connection) for f, v in zip(fields, values.values(), strict=True)]
    ids = list(pks)
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        trip.add(sql + ", ".join(["%s"] * len(chunk)) + ")", [*prepared, *chunk])


@functools.lru_cache(maxsize=128)
def _update_sql(model: type[Model], names: tuple[str, ...], using: str) -> tuple[list[Any], str]:
    """``update_by_pk``'s fields and its statement's text up to its ids' placeholders,
    built once (quoting names costs more than running the statement for a few rows)."""
    meta = model._meta
    quote = connections[using].ops.quote_name
    fields: list[Any] = [meta.get_field(name) for name in names]
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    table, pk_column = quote(meta.db_table), quote(str(meta.pk.column))  # type: ignore[union-attr]
    # Only quoted names of the model go into the text; values are parameters.
    return fields, f"UPDATE {table} SET {assignments} WHERE {pk_column} IN ("  # noqa: S608


def save_fields(trip: Trip, instance: Model, names: Sequence[str]) -> None:
    """``instance.save(update_fields=names)`` as one plain UPDATE in ``trip`` (no signals
    are sent): an ``auto_now`` field among ``names`` is set to now, as ``save`` does."""
    meta = instance._meta
    values = {}
    for name in dict.fromkeys(names):
        field: Any = meta.get_field(name)
        values[name] = field.pre_save(instance, add=False)
    update_by_pk(trip, type(instance), [instance.pk], values)


def ids_where(
    trip: Trip, model: type[Model], pks: Sequence[int], *, lock: bool = False, **equal: Any
) -> list[Result]:
    """Which of ``pks`` are ids of rows of ``model`` whose fields equal ``equal`` (by field
    name), selected in ``trip``; with ``lock``, those rows are locked (``FOR UPDATE``, where
    the database has it). The ids are the first column of the results' rows (``ids``)."""
    if not pks:
        return []
    meta = model._meta
    connection = trip.cursor.db
    quote = connection.ops.quote_name
    pk_column = quote(str(meta.pk.column))  # type: ignore[union-attr]
    table = quote(meta.db_table)
    fields: list[Any] = [meta.get_field(name) for name in equal]
    conditions = "".join(f" AND {quote(f.column)} = %s" for f in fields)
    values = [prepare(f, v, connection) for f, v in zip(fields, equal.values(), strict=True)]
    suffix = " FOR UPDATE" if lock and connection.features.has_select_for_update else ""
    results = []
    for start in range(0, len(pks), CHUNK):
        chunk = list(pks[start : start + CHUNK])
        marks = ", ".join(["%s"] * len(chunk))
        # Only quoted names of the model go into the text; values are parameters.
        sql = (
            f"SELECT {pk_column} FROM {table} "  # noqa: S608
            f"WHERE {pk_column} IN ({marks}){conditions}{suffix}"
        )
        results.append(trip.add(sql, [*chunk, *values], read=list))
    return results


def ids(results: Iterable[Result]) -> set[int]:
    """The ids ``ids_where``'s results found (once their trip has run)."""
    return {row[0] for result in results for row in result.rows}
