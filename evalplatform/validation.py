"""The field checkers every service uses, with one set of bounds.

Jobs, judges, scenarios, the wizard and the API all check their numbers and flags here, so a
value one service accepts is never refused (or stored and then choked on) by another: a judge
takes the same budgets and token limits as the generation job its run becomes, and nothing
that passes fits no database column (PostgreSQL's ``integer`` is the narrowest one used).

Each checker takes the raw value (JSON, or a form field read by
``evalplatform.web.fields.number_or_text``), the field's name and the ``errors`` dict the
service collects; it returns the clean value, or records a message under the name and returns
the default. Nothing here raises: the service raises ``FieldErrors(errors)`` once, before
writing anything.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection
from decimal import Decimal, InvalidOperation
from typing import Any, TypeGuard

from django.core.validators import MaxValueValidator, MinValueValidator

from evalplatform.limits import JSON_MAX_DEPTH

# The widest integer every supported database stores in an ``IntegerField`` (PostgreSQL's
# ``integer``); ``PositiveIntegerField`` columns share the upper end.
INT_MAX = 2**31 - 1

MAX_TOKENS = 1_000_000
USD_MIN = Decimal("0.0001")
USD_MAX = Decimal("99999999.9999")  # DecimalField(max_digits=12, decimal_places=4)
USD_QUANTUM = Decimal("0.0001")
TEMPERATURE_MIN, TEMPERATURE_MAX = 0.0, 2.0
SEED_MAX = INT_MAX  # numpy's generators take no negative seeds
TIME_SPENT_MAX_MS = 7 * 24 * 3600 * 1000  # a week on one task
QUOTA_MAX = 1_000_000  # tasks one evaluator may be handed
JUDGE_REPETITIONS_MAX = 20
REQUESTS_PER_MINUTE_MAX = 1_000_000
CONTEXT_WINDOW_MAX = 100_000_000  # tokens
SHARED_ITEMS_MAX = 1_000_000  # items a trust gate may ask a judge to share with people


def bounded(lo: int | float | Decimal, hi: int | float | Decimal) -> list[Any]:
    """A model field's validators for these bounds: the admin's forms and the API's model
    serializers check them (and the schema documents them), so a column never gets a value
    one database stores and the other refuses (SQLite's integers are 64-bit, PostgreSQL's
    ``integer`` 32-bit)."""
    return [MinValueValidator(lo), MaxValueValidator(hi)]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_integer(value: Any) -> TypeGuard[int]:
    """An integer, and not a boolean (JSON's ``true`` is no id): what an id in a request is."""
    return _is_int(value)


# The largest primary key (``BigAutoField``): an id past it names nothing, and a database
# driver refuses to bind it (SQLite raises ``OverflowError``), so it is refused as input.
ID_MAX = 2**63 - 1


def is_id(value: Any) -> TypeGuard[int]:
    """An integer that can be an object's id: from 1 to ``ID_MAX``, and not a boolean."""
    return _is_int(value) and 1 <= value <= ID_MAX


def digits(text: Any, *, most: int = 18, signed: bool = False) -> int | None:
    """The whole number a text field holds, or None: ASCII digits only (``"²".isdigit()`` is
    true, but ``int("²")`` fails) and at most ``most`` of them (``int`` refuses 4,300 and
    more; no bound here needs more than 18). ``signed``: a leading "-" is allowed."""
    if not isinstance(text, str):
        return None
    body = text.strip()
    if signed:
        body = body.removeprefix("-")
    if not (body.isascii() and body.isdigit() and len(body) <= most):
        return None
    return int(text.strip())


def each_named(
    refs: list[Any],
    *,
    by_id: dict[int, Any],
    by_name: dict[str, Any],
    field: str,
    errors: dict[str, str],
    unknown: str,
) -> list[Any]:
    """The objects a list of references names, once each and in order: an integer is an id, a
    text a name. A reference that names nothing (``unknown`` says what it should be: "no
    group of the team") or names an object again is recorded under ``<field>.<index>``."""
    found: dict[int, Any] = {}
    for index, ref in enumerate(refs):
        chosen = (
            by_id.get(ref) if _is_int(ref) else by_name.get(ref) if isinstance(ref, str) else None
        )
        shown = repr(str(ref)[:200])
        if chosen is None:
            errors[f"{field}.{index}"] = f"{shown} is {unknown}."
        elif chosen.pk in found:
            errors[f"{field}.{index}"] = f"{shown} is named twice."
        else:
            found[chosen.pk] = chosen
    return list(found.values())


def whole_number(
    value: Any,
    *,
    name: str,
    lo: int,
    hi: int,
    errors: dict[str, str],
    default: int | None = None,
    message: str | None = None,
) -> int | None:
    """An integer from ``lo`` to ``hi``; None or "" is ``default``. A string of digits counts
    (form fields); floats, booleans and anything else do not."""
    if value is None or value == "":
        return default
    number: int | None = None
    if _is_int(value):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:  # also a digit string past Python's conversion limit
            number = None
    if number is None or not lo <= number <= hi:
        errors[name] = message or f"A whole number from {lo:,} to {hi:,}."
        return default
    return number


def number(
    value: Any,
    *,
    name: str,
    lo: float,
    hi: float,
    errors: dict[str, str],
    default: float | None = None,
    message: str | None = None,
) -> float | None:
    """A finite number (integer or decimal) from ``lo`` to ``hi``; None or "" is ``default``.
    A numeric string counts (form fields); booleans, infinities and NaN do not."""
    if value is None or value == "":
        return default
    found: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        found = float(value)
    elif isinstance(value, str) and len(value) <= 100:
        try:
            found = float(value.strip())
        except ValueError:
            found = None
    if found is None or not math.isfinite(found) or not lo <= found <= hi:
        errors[name] = message or f"A number from {readable(lo)} to {readable(hi)}."
        return default
    return found


def readable(number: float) -> str:
    """A bound as people write it: 1,000,000 (not 1e+06), 0.5, -2."""
    if float(number).is_integer():
        return f"{int(number):,}"
    return f"{number:,.6f}".rstrip("0").rstrip(".")


def max_tokens(value: Any, *, errors: dict[str, str], name: str = "max_tokens") -> int | None:
    """A reply's token limit, or None for the model's own."""
    return whole_number(value, name=name, lo=1, hi=MAX_TOKENS, errors=errors)


def seed(value: Any, *, errors: dict[str, str], name: str = "seed", default: int = 0) -> int:
    checked = whole_number(value, name=name, lo=0, hi=SEED_MAX, errors=errors, default=default)
    return default if checked is None else checked


def time_spent_ms(value: Any, *, errors: dict[str, str], name: str = "time_spent_ms") -> int | None:
    """Milliseconds an evaluator spent on a task, or None when not measured."""
    return whole_number(
        value,
        name=name,
        lo=0,
        hi=TIME_SPENT_MAX_MS,
        errors=errors,
        message=f"Milliseconds, a whole number from 0 to {TIME_SPENT_MAX_MS:,}.",
    )


def usd(value: Any, *, errors: dict[str, str], name: str = "budget_usd") -> Decimal | None:
    """An amount in US dollars (a budget), or None for none. Four decimals at most, and no
    more than the budget columns hold."""
    if value is None or value == "":
        return None
    try:
        if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
            raise InvalidOperation
        amount = Decimal(str(value).strip())
        if (
            not amount.is_finite()
            or not USD_MIN <= amount <= USD_MAX
            or amount != amount.quantize(USD_QUANTUM)
        ):
            raise InvalidOperation
    except InvalidOperation:
        errors[name] = "An amount in USD from 0.0001 to 99,999,999.9999 (4 decimals)."
        return None
    return amount


def temperatures_problem(temperatures: Any, *, allow_none: bool = False) -> str | None:
    """What is wrong with a list of temperatures, if anything. ``allow_none``: a null entry
    is a slot where no temperature is sent (the provider's default)."""
    if allow_none and temperatures == []:
        return "Give at least one temperature; use [null] to send none."
    if (
        not isinstance(temperatures, list)
        or not temperatures
        or not all(
            (allow_none and t is None)
            or (
                isinstance(t, int | float)
                and not isinstance(t, bool)
                and TEMPERATURE_MIN <= t <= TEMPERATURE_MAX
            )
            for t in temperatures
        )
    ):
        if allow_none:
            return "A list of temperatures, each from 0 to 2 or null (send none)."
        return "A list of temperatures, each from 0 to 2."
    if len(set(temperatures)) != len(temperatures):
        return "Each temperature once."
    return None


def temperatures(
    value: Any,
    *,
    errors: dict[str, str],
    default: list[float],
    name: str = "temperatures",
    allow_none: bool = False,
) -> list[float | None]:
    """A list of distinct temperatures from 0 to 2, as floats; with ``allow_none``, null
    entries (no temperature sent) stay None."""
    if problem := temperatures_problem(value, allow_none=allow_none):
        errors[name] = problem
        return list(default)
    return [None if t is None else float(t) for t in value]


def one_of(
    value: Any, *, name: str, choices: Collection[Any], errors: dict[str, str], message: str
) -> Any:
    """One of ``choices`` (compared by equality: ``"live"`` is ``JobMode.LIVE``), or None."""
    if value in choices:
        return value
    errors[name] = message
    return None


def flag(value: Any, *, name: str, errors: dict[str, str], default: bool) -> bool:
    """true or false (JSON booleans only: "false" as text is not false)."""
    if value is None:
        return default
    if not isinstance(value, bool):
        errors[name] = "true or false."
        return default
    return value


def text(
    value: Any,
    *,
    name: str,
    errors: dict[str, str],
    max_length: int,
    required: bool = False,
    message: str | None = None,
) -> str:
    """A string of at most ``max_length`` characters (stripped when required), without NUL
    characters (PostgreSQL's text columns refuse them)."""
    if value is None:
        value = ""
    if isinstance(value, str) and required:
        value = value.strip()
    if not isinstance(value, str) or len(value) > max_length or (required and not value):
        errors[name] = message or f"Text of at most {max_length:,} characters."
        return ""
    if problem := text_problem(value):
        errors[name] = problem
        return ""
    return value


# What neither database stores in a text column or a JSON document: NUL (PostgreSQL's text
# and jsonb refuse it; SQLite would keep it, so a value would work on one and not the
# other) and the lone surrogates a JSON ``"\ud800"`` escape makes (not UTF-8 at all).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
NUL_MESSAGE = "Holds a NUL character (\\u0000), which cannot be stored."
SURROGATE_MESSAGE = "Holds a lone surrogate (\\ud800 to \\udfff), which is not text."


def text_problem(value: str) -> str | None:
    """Why the databases cannot store this text, or None."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    return NUL_MESSAGE if found.group() == "\x00" else SURROGATE_MESSAGE


def path_join(path: str, key: str | int) -> str:
    """``blocks[2].body``: the path of a field inside a body, as error keys name it."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def storable_problems(
    value: Any, *, path: str = "", max_depth: int = JSON_MAX_DEPTH, most: int = 20
) -> dict[str, str]:
    """What in a parsed JSON value (a request body, an uploaded row) the databases cannot
    store, by path (``items[3].content``; the value itself is ``path`` or "body"): text
    ``text_problem`` refuses (in keys too), a number that is not finite (``NaN``,
    ``Infinity``, ``1e999``), nesting deeper than ``max_depth`` containers. At most
    ``most`` problems. Iterative, so no depth of nesting can exhaust Python's stack."""
    problems: dict[str, str] = {}
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack and len(problems) < most:
        item, where, depth = stack.pop()
        name = where or "body"
        if isinstance(item, str):
            if problem := text_problem(item):
                problems[name] = problem
        elif isinstance(item, float):
            if not math.isfinite(item):
                problems[name] = "A finite number (not NaN or Infinity)."
        elif isinstance(item, dict | list):
            if depth >= max_depth:
                problems[name] = f"Nested more than {max_depth} levels deep."
                continue
            pairs = list(item.items()) if isinstance(item, dict) else list(enumerate(item))
            for key, inner in reversed(pairs):
                if isinstance(key, str) and (problem := text_problem(key)):
                    problems[name] = f"A key {problem[0].lower()}{problem[1:]}"
                    break
                stack.append((inner, path_join(where, key), depth + 1))
    return problems


class UnstorableJSON(ValueError):
    """JSON that parses, but that the databases cannot store (``json_value``)."""


def json_value(raw: str | bytes) -> Any:
    """``json.loads`` for JSON a form field or a file holds: ``ValueError`` when it is not
    JSON, and ``UnstorableJSON`` (its message says where and why) when ``storable_problems``
    finds something, since a ``"\\u0000"`` escape passes every check of the raw text."""
    try:
        value = json.loads(raw)
    except RecursionError as exc:
        raise UnstorableJSON(f"Nested more than {JSON_MAX_DEPTH} levels deep.") from exc
    if problems := storable_problems(value):
        path, message = next(iter(problems.items()))
        raise UnstorableJSON(message if path == "body" else f"{path}: {message}")
    return value
