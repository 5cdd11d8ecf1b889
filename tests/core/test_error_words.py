"""Form errors in a page's words: the key of a field (the API's) never shown as it is."""

from __future__ import annotations

import pytest

from evalplatform.errors import in_words, readable


@pytest.mark.parametrize(
    ("key", "labels", "shown"),
    [
        ("gold_rate", None, "Gold rate"),
        ("tasks.1.answer.winner", None, "Tasks #2 answer winner"),
        ("assignees[0].quota", None, "Assignees #1 quota"),
        ("min_kappa", {"min_kappa": "Least κ with people"}, "Least κ with people"),
        ("grid.3.x", {"grid": "Grid"}, "Grid #4 x"),
        ("non_field_errors", None, ""),
        ("__all__", None, ""),
    ],
)
def test_a_key_in_words(key, labels, shown):
    assert readable(key, labels) == shown


def test_errors_in_one_line():
    line = in_words({"gold_rate": ["0 to 0.5."], "non_field_errors": ["Closed."]})
    assert line == "Gold rate: 0 to 0.5.; Closed."
