"""The one error type for expected failures. Services raise these; one handler maps them to HTTP."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError


class ApplicationError(Exception):
    status_code = 400
    default_message = "The request could not be completed."

    def __init__(self, message: str | None = None, *, extra: dict[str, Any] | None = None):
        self.message = message or self.default_message
        self.extra = extra or {}
        super().__init__(self.message)


class FieldErrors(ApplicationError):
    """Validation failed; ``errors`` maps field names to lists of messages."""

    default_message = "Invalid input."

    def __init__(self, errors: Mapping[str, Sequence[str] | str], message: str | None = None):
        normalized = {k: [v] if isinstance(v, str) else list(v) for k, v in errors.items()}
        super().__init__(message, extra={"errors": normalized})
        self.errors = normalized


class NotFound(ApplicationError):
    """Raised alike for a missing object and for another team's object."""

    status_code = 404
    default_message = "Not found."


class Forbidden(ApplicationError):
    status_code = 403
    default_message = "You do not have permission to perform this action."


class Conflict(ApplicationError):
    status_code = 409
    default_message = "The object is not in a state that allows this."


_UNIQUE_CODES = {"unique", "unique_together"}


def validate_instance(instance: Any, *, unique_field: str | None = None) -> None:
    """``full_clean`` the model instance; raise ``FieldErrors`` naming the fields.

    Unique-together violations land on ``unique_field`` (the one a user chose, e.g. a name
    within a team) instead of on ``non_field_errors``.
    """
    try:
        instance.full_clean()
    except DjangoValidationError as exc:
        errors: dict[str, list[str]] = {}
        for field, items in exc.error_dict.items():
            for item in items:
                target = field
                if field == NON_FIELD_ERRORS and unique_field and item.code in _UNIQUE_CODES:
                    target = unique_field
                errors.setdefault(target, []).extend(item.messages)
        raise FieldErrors(errors) from exc


_HEAD = re.compile(r"[^.\[]+")
_INDEX = re.compile(r"\[(\d+)\]|\.(\d+)(?=[.\[]|$)")


def readable(key: str, labels: Mapping[str, str] | None = None) -> str:
    """An error's key in words, as a page names the field: the form's label where it gives
    one, else the name with spaces ("gold_rate" is "Gold rate"), an index counted from 1
    ("tasks.1.answer" is "Tasks #2 answer"); "" for the form as a whole. A page never shows
    the API's key itself."""
    labels = labels or {}
    if key in ("", NON_FIELD_ERRORS, "non_field_errors"):
        return ""
    if key in labels:
        return labels[key]
    head = _HEAD.match(key)
    name = head.group() if head else key
    label = labels.get(name) or name.replace("_", " ").capitalize()
    rest = _INDEX.sub(lambda m: f" #{int(m.group(1) or m.group(2)) + 1}", key[len(name) :])
    return (label + rest.replace(".", " ").replace("_", " ")).strip()


def in_words(errors: Mapping[str, Sequence[str]], labels: Mapping[str, str] | None = None) -> str:
    """Field errors in one line for a page's message: "Gold rate: …; Tasks #2 answer: …"."""
    return "; ".join(
        f"{name}: {' '.join(problems)}" if (name := readable(key, labels)) else " ".join(problems)
        for key, problems in errors.items()
    )


def report_on_page(
    request: Any, exc: ApplicationError, labels: Mapping[str, str] | None = None
) -> None:
    """Show an expected failure of a page's form as messages: one per field problem, the
    field named in words (``readable``; ``labels``: the form's own labels of its fields)."""
    from django.contrib import messages

    if isinstance(exc, FieldErrors):
        for field, problems in exc.errors.items():
            name = readable(field, labels)
            for problem in problems:
                messages.error(request, f"{name}: {problem}" if name else problem)
    else:
        messages.error(request, exc.message)
