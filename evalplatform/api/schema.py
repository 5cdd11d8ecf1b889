"""The OpenAPI schema documents the error answers too.

Every operation may answer with the errors of the one exception handler
(``evalplatform.api.exceptions``), all shaped ``{"detail": ..., ...}``; this schema class
adds them to each operation, by what the operation takes, unless its ``extend_schema``
already declares that status code.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular import openapi
from drf_spectacular.plumbing import ResolvedComponent

from evalplatform import throttling

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An error (docs/api.md, Errors). Some carry more keys, e.g. ``missing``.",
    "properties": {
        "detail": {"type": "string", "description": "What went wrong, for a person."},
        "errors": {
            "type": "object",
            "description": "Invalid input: the messages by field (``blocks[2].body``).",
            "additionalProperties": {},
        },
        "retry_after": {
            "type": "integer",
            "description": "Too many requests (429): seconds until one may be sent again.",
        },
    },
    "required": ["detail"],
    "additionalProperties": {},
}

_UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
RETRY_AFTER: dict[str, Any] = {
    "description": "Seconds until a request may be sent again.",
    "schema": {"type": "integer", "minimum": 1},
    "required": True,
}


class AutoSchema(openapi.AutoSchema):
    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        component = ResolvedComponent(
            name="Error", type=ResolvedComponent.SCHEMA, object="Error", schema=ERROR_SCHEMA
        )
        self.registry.register_on_missing(component)
        responses = operation["responses"]
        for code, description in self._error_codes(operation).items():
            answer: dict[str, Any] = {
                "description": description,
                "content": {"application/json": {"schema": component.ref}},
            }
            if code == 429:
                answer["headers"] = {"Retry-After": RETRY_AFTER}
            responses.setdefault(str(code), answer)
        return operation

    def _error_codes(self, operation: dict[str, Any]) -> dict[int, str]:
        parameters = operation.get("parameters", [])
        in_path = any(p["in"] == "path" for p in parameters)
        in_query = [p["name"] for p in parameters if p["in"] == "query"]
        codes: dict[int, str] = {}
        if self.method in _UNSAFE or in_query or "requestBody" in operation:
            codes[400] = "Invalid input: ``errors`` names the fields."
        codes[401] = "Not signed in, or an unknown or revoked token."
        codes[403] = "Your role lacks the feature this needs."
        if in_path or "page" in in_query:
            codes[404] = "Not found, or another team's (the same answer); or no such page."
        if self.method in _UNSAFE and in_path:
            codes[409] = "The object's state forbids this (e.g. editing a used version)."
        scopes = throttling.scopes(self.view, self.method, maybe=True)
        if scopes:
            codes[429] = (
                f"Over your rate of {' and '.join(scopes)} requests (docs/security.md): "
                "``retry_after`` and the ``Retry-After`` header say when to try again."
            )
        return codes
