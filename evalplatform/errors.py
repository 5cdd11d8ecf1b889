"""The one error type for expected failures. Services raise these; one handler maps them to HTTP."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


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
