"""Reading form fields for the services, which check them: the pages never validate on
their own."""

from __future__ import annotations

from typing import Any


def number_or_text(value: str | None) -> Any:
    """A form field as a number (int, else float), None when empty, or the text itself when
    it is no number (so that the service names the field that is wrong)."""
    value = (value or "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value
