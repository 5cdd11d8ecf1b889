"""The shared field checkers: one set of bounds, every column's range respected."""

from __future__ import annotations

from decimal import Decimal

import pytest

from evalplatform import validation
from evalplatform.validation import INT_MAX


def check(fn, value, **kwargs):
    errors: dict[str, str] = {}
    return fn(value, errors=errors, **kwargs), errors


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, 1), ("12", 12), (" 7 ", 7), (None, None), ("", None), (100, 100)],
)
def test_whole_number_accepts_integers_and_digit_strings(value, expected):
    assert check(validation.whole_number, value, name="n", lo=1, hi=100) == (expected, {})


@pytest.mark.parametrize(
    "value", [0, 101, 10**20, -1, True, 2.0, 5e9, "x", "²", "1.5", [1], {"a": 1}, "9" * 5000]
)
def test_whole_number_refuses_everything_else_by_name(value):
    got, errors = check(validation.whole_number, value, name="n", lo=1, hi=100, default=3)
    assert got == 3 and errors == {"n": "A whole number from 1 to 100."}


@pytest.mark.parametrize("value", [1, validation.MAX_TOKENS, "4096", None])
def test_max_tokens_within_the_bound(value):
    assert check(validation.max_tokens, value)[1] == {}


@pytest.mark.parametrize("value", [0, validation.MAX_TOKENS + 1, 10**20, 5e9, -3])
def test_max_tokens_past_the_bound(value):
    assert "max_tokens" in check(validation.max_tokens, value)[1]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.0001", Decimal("0.0001")),
        (5, Decimal(5)),
        ("99999999.9999", Decimal("99999999.9999")),
        (None, None),
        ("", None),
    ],
)
def test_usd_amounts(value, expected):
    assert check(validation.usd, value) == (expected, {})


@pytest.mark.parametrize(
    "value",
    ["1e20", "100000000", "0", "-1", "0.00001", "NaN", "Infinity", True, [1], {}, "abc", 1e300],
)
def test_usd_refuses_what_no_budget_column_holds(value):
    got, errors = check(validation.usd, value)
    assert got is None and set(errors) == {"budget_usd"}


def test_every_integer_bound_fits_a_postgresql_integer():
    for bound in (validation.MAX_TOKENS, validation.SEED_MAX, validation.TIME_SPENT_MAX_MS):
        assert bound <= INT_MAX


@pytest.mark.parametrize("value", [0, 12345, INT_MAX, None])
def test_seed_in_range(value):
    got, errors = check(validation.seed, value)
    assert errors == {} and got == (value or 0)


@pytest.mark.parametrize("value", [-1, INT_MAX + 1, 10**20, 1.5, "x", False])
def test_seed_out_of_range(value):
    got, errors = check(validation.seed, value)
    assert got == 0 and "seed" in errors


@pytest.mark.parametrize("value", [-1, validation.TIME_SPENT_MAX_MS + 1, 10**20])
def test_time_spent_out_of_range(value):
    assert "time_spent_ms" in check(validation.time_spent_ms, value)[1]


def test_temperatures():
    assert check(validation.temperatures, [0, 0.7, 2], default=[1.0]) == ([0.0, 0.7, 2.0], {})
    for bad in ([], [2.5], [True], "0.7", [0.5, 0.5], None):
        got, errors = check(validation.temperatures, bad, default=[1.0])
        assert got == [1.0] and "temperatures" in errors


def test_temperatures_with_null_slots():
    def allowed(value):
        return check(validation.temperatures, value, default=[1.0], allow_none=True)

    assert allowed([None]) == ([None], {})
    assert allowed([None, 0, 0.7]) == ([None, 0.0, 0.7], {})
    assert allowed([]) == (
        [1.0],
        {"temperatures": "Give at least one temperature; use [null] to send none."},
    )
    for bad in ([None, None], [float("nan")], [1e20], [2.5], ["0.7"], [True], [[None]], None):
        got, errors = allowed(bad)
        assert got == [1.0] and "temperatures" in errors, bad
    # Without ``allow_none`` (judges), null stays refused.
    assert "temperatures" in check(validation.temperatures, [None], default=[1.0])[1]


def test_flag_is_a_json_boolean():
    assert check(validation.flag, None, name="f", default=True) == (True, {})
    assert check(validation.flag, False, name="f", default=True) == (False, {})
    assert check(validation.flag, "false", name="f", default=True) == (
        True,
        {"f": "true or false."},
    )


def test_text_bounds_and_nul():
    assert check(validation.text, " a ", name="t", max_length=3, required=True) == ("a", {})
    assert check(validation.text, "abcd", name="t", max_length=3)[1] == {
        "t": "Text of at most 3 characters."
    }
    assert "t" in check(validation.text, "a\x00b", name="t", max_length=10)[1]
    assert "t" in check(validation.text, "  ", name="t", max_length=10, required=True)[1]
    assert "t" in check(validation.text, 5, name="t", max_length=10)[1]


def test_bounds_in_messages_read_as_people_write_them():
    from evalplatform import validation

    errors: dict[str, str] = {}
    validation.number("2e9", name="budget", lo=0, hi=1e6, errors=errors)
    validation.number("x", name="share", lo=0, hi=0.5, errors=errors)
    assert errors == {
        "budget": "A number from 0 to 1,000,000.",
        "share": "A number from 0 to 0.5.",
    }
    assert validation.readable(-2.0) == "-2" and validation.readable(1234.5) == "1,234.5"
