"""Queries whose shape never changes, built and compiled by the ORM once per process, then run
again with new values.

A request of the evaluator API runs a handful of short queries; building each queryset
(filters, ``Exists`` subqueries, annotations) and compiling it to SQL cost more CPU than
running it (measured by ``bench/load.py``: most of a request's CPU). ``Prepared`` builds the
queryset once, with a marker value for each named parameter, compiles it, and remembers
where in the SQL's parameters each marker went. A call substitutes the real values there,
runs the SQL through Django's cursor (so it is logged and wrapped like any query) and turns
the rows into model instances as the ORM does: ``select_related`` objects and annotations
included.

Only the values change, never the shape: a parameter is a single value (an ``int`` or a
``str``), not a list whose length would change the SQL. An ``int`` outside the 64-bit range
makes the query answer no rows without asking the database (which would refuse it on
SQLite): right for ids compared for equality, which is what to use ``int`` parameters for
(values inside ``exclude`` or an inequality come from the database, never from a request). The
queryset is built and compiled twice, with two sets of markers (small positive integers,
which every integer field accepts; strings with a random part): a parameter is a slot where
the two compilations hold the two markers of one name, and a constant where they agree.
Compiling fails loudly when the SQL differs between the two, or a marker did not reach the
parameters unchanged (a lookup that transformed it).
"""

from __future__ import annotations

import functools
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.models import Model, QuerySet
from django.db.models.query import ModelIterable, ValuesListIterable, get_related_populators
from django.db.transaction import TransactionManagementError

# The range of the integer columns (64-bit): a value outside it matches no row, as the ORM
# answers an exact lookup of such a value (without asking the database, which would refuse
# it on SQLite).
_INT_RANGE = range(-(2**63), 2**63)
PREPARE_THRESHOLD = 5  # psycopg's default (these statements are prepared on their first run)


@dataclass(frozen=True)
class _Compiled:
    alias: str
    sql: str
    params: tuple[Any, ...]
    slots: tuple[tuple[int, str], ...]  # (position in params, parameter name)
    converters: dict[int, Any]
    locks: bool
    # Model rows (None for ``values_list``): the model, where its fields are in a row and
    # their attribute names, the select_related populators, the annotations' positions.
    model: type[Model] | None
    fields: tuple[int, int]
    init_list: tuple[str, ...]
    populators: tuple[Any, ...]
    annotations: tuple[tuple[str, int], ...]


class Prepared:
    """``build(**markers)`` returns the queryset; ``kinds`` names its parameters and their
    types (``int`` or ``str``). ``objects(**values)``: the model instances (or, for a
    ``values_list`` queryset, the rows as tuples) for these values."""

    def __init__(self, build: Callable[..., QuerySet[Any]], **kinds: type) -> None:
        if not kinds or any(kind not in (int, str) for kind in kinds.values()):
            raise TypeError("Prepared parameters are int or str.")
        self._build = build
        self._kinds = kinds
        self._compiled: _Compiled | None = None
        self._lock = threading.Lock()

    def objects(self, **values: Any) -> list[Any]:
        values = self._checked(values)
        compiled = self._compiled_for()
        if any(type(value) is int and value not in _INT_RANGE for value in values.values()):
            return []
        connection = connections[compiled.alias]
        if compiled.locks and connection.get_autocommit():
            raise TransactionManagementError(
                "select_for_update cannot be used outside of a transaction."
            )
        params = list(compiled.params)
        for position, name in compiled.slots:
            params[position] = values[name]
        with _cursor(connection) as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        if compiled.converters:
            rows = list(_converted(rows, compiled.converters, connection))
        if compiled.model is None:
            return [tuple(row) for row in rows]
        return list(self._instances(compiled, rows))

    def first(self, **values: Any) -> Any:
        """The first of ``objects`` (build the queryset with ``[:1]``), None for none."""
        found = self.objects(**values)
        return found[0] if found else None

    def _checked(self, values: dict[str, Any]) -> dict[str, Any]:
        """The values as plain ``int`` and ``str`` (choices are subclasses of them)."""
        if values.keys() != self._kinds.keys():
            raise TypeError(f"Prepared parameters are {sorted(self._kinds)}.")
        plain = {}
        for name, value in values.items():
            kind = self._kinds[name]
            if not isinstance(value, kind) or isinstance(value, bool):
                raise TypeError(f"{name}: {kind.__name__} expected.")
            plain[name] = int.__index__(value) if kind is int else str.__str__(value)  # type: ignore[arg-type]
        return plain

    def _compiled_for(self) -> _Compiled:
        # One database in this project: the alias is the built queryset's, compiled once.
        if self._compiled is None:
            with self._lock:
                if self._compiled is None:
                    self._compiled = self._compile()
        return self._compiled

    def _compile(self) -> _Compiled:
        token = secrets.token_hex(8)
        builds = []
        for round_ in (1, 2):
            markers = {
                name: 1000 * round_ + n if kind is int else f"prepared:{token}:{round_}:{name}"
                for n, (name, kind) in enumerate(self._kinds.items())
            }
            queryset = self._build(**markers)
            _check_shape(queryset)
            compiler = queryset.query.get_compiler(using=queryset.db)
            sql, params = compiler.as_sql()
            builds.append((markers, queryset, compiler, sql, tuple(params)))
        (markers, _, _, sql, params), (other, queryset, compiler, other_sql, other_params) = builds
        if sql != other_sql or len(params) != len(other_params):
            raise ValueError("A prepared query's SQL depends on its parameters' values.")
        alias = queryset.db
        slots = []
        for position, (first, second) in enumerate(zip(params, other_params, strict=True)):
            if first == second:
                continue
            names = [n for n in markers if first == markers[n] and second == other[n]]
            if len(names) != 1:
                raise ValueError(f"A prepared query's parameter {position} is no marker.")
            slots.append((position, names[0]))
        missing = set(markers) - {name for _, name in slots}
        if missing:
            raise ValueError(f"Prepared parameters {sorted(missing)} did not reach the SQL.")
        select = compiler.select
        columns = [expression for expression, _, _ in select[: compiler.col_count]]
        converters = compiler.get_converters(columns)
        klass_info = compiler.klass_info
        model: type[Model] | None = None
        fields: tuple[int, int] = (0, 0)
        init_list: tuple[str, ...] = ()
        populators: tuple[Any, ...] = ()
        if klass_info is not None and not queryset._fields:  # type: ignore[attr-defined]
            model = klass_info["model"]
            start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
            fields = (start, end)
            init_list = tuple(column[0].target.attname for column in select[start:end])
            # Django 5.2's signature (the stubs know 6.0's, which adds ``fetch_mode``).
            populators = tuple(get_related_populators(klass_info, select, alias))  # type: ignore[call-arg]
        return _Compiled(
            alias=alias,
            sql=sql,
            params=tuple(params),
            slots=tuple(slots),
            converters=converters,
            locks=bool(queryset.query.select_for_update)
            and connections[alias].features.has_select_for_update,
            model=model,
            fields=fields,
            init_list=init_list,
            populators=populators,
            annotations=tuple(compiler.annotation_col_map.items()),
        )

    @staticmethod
    def _instances(compiled: _Compiled, rows: Any) -> Iterator[Model]:
        model, (start, end) = compiled.model, compiled.fields
        assert model is not None
        for row in rows:
            obj = model.from_db(compiled.alias, compiled.init_list, row[start:end])
            for populator in compiled.populators:
                populator.populate(row, obj)
            for name, position in compiled.annotations:
                setattr(obj, name, row[position])
            yield obj


def _check_shape(queryset: QuerySet[Any]) -> None:
    """Model instances or ``values_list`` tuples, nothing the ORM adds after the query."""
    shapes = (ModelIterable, ValuesListIterable)
    if queryset._iterable_class not in shapes:  # type: ignore[attr-defined]
        raise ValueError("A prepared query gives model instances or values_list tuples.")
    if queryset._prefetch_related_lookups or queryset._known_related_objects:  # type: ignore[attr-defined]
        raise ValueError("A prepared query has no prefetch_related.")


def _converted(rows: list[Any], converters: dict[int, Any], connection: Any) -> Iterator[list]:
    """The rows' values as the ORM converts them (``SQLCompiler.apply_converters``, with
    this thread's connection)."""
    items = list(converters.items())
    for row in map(list, rows):
        for position, (functions, expression) in items:
            value = row[position]
            for function in functions:
                value = function(value, expression, connection)
            row[position] = value
        yield row


def _cursor(connection: Any) -> Any:
    """Django's cursor on ``connection``; on PostgreSQL (psycopg 3) one that binds its
    parameters on the server and prepares its statements on the connection: PostgreSQL then
    parses each once per connection and, after five runs, keeps a generic plan when it is no
    costlier than planning each run. Planning the joins of these short queries cost more
    than running them (0.5 to 1.9 ms against 0.03 to 0.15 ms, ``EXPLAIN ANALYZE``). Django's
    own cursors bind on the client (the SQL holds the values) and prepare nothing."""
    factory = _preparing_cursor(connection)
    if factory is None:
        return connection.cursor()
    connection.ensure_connection()
    raw = connection.connection
    client_side = raw.cursor_factory
    raw.cursor_factory = factory
    try:
        return connection.cursor()
    finally:
        raw.cursor_factory = client_side


@functools.cache
def _preparing_cursor_class() -> Any:
    from django.db.backends.postgresql import base

    binding = getattr(base, "ServerBindingCursor", None)  # psycopg 3 only
    if binding is None:
        return None

    class PreparingCursor(binding):  # type: ignore[misc, valid-type]
        """Binds on the server and prepares every statement (psycopg keeps the latest
        ``prepared_max`` per connection, 100)."""

        def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
            # Django turns psycopg's statement cache off on the connection (its cursors bind
            # on the client and prepare nothing): on for this statement only, so the cache
            # neither counts nor keeps Django's own statements (their SQL holds their
            # values). psycopg's rollback() forgets the prepared statements all the same.
            connection = self.connection
            threshold = connection.prepare_threshold
            connection.prepare_threshold = PREPARE_THRESHOLD
            try:
                return super().execute(query, params, prepare=True, **options)
            finally:
                connection.prepare_threshold = threshold

    return PreparingCursor


def _preparing_cursor(connection: Any) -> Any:
    # While queries are logged (``DEBUG``, ``CaptureQueriesContext``) the log needs the SQL
    # with its values, which psycopg keeps only for statements it did not prepare.
    if connection.vendor != "postgresql" or not settings.DB_PREPARE or connection.queries_logged:
        return None
    return _preparing_cursor_class()
