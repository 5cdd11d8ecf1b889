"""From the scenario pages' form fields to the services' data (the API's shapes): the fields
every scenario has, and the type's settings (read by its type: ``scenarios.types``). The
services check everything; these functions only collect."""

from __future__ import annotations

from typing import Any

from scenarios.types import registry
from scenarios.types.base import form_int


def config_from_post(kind: str, post: Any, current: dict[str, Any] | None = None) -> dict[str, Any]:
    """The configuration for ``kind`` from the form (none for an unknown type: the service
    names that); ``current``: the scenario's own when editing it (what cannot change, such as
    a pair design, is kept)."""
    found = registry.find(kind)
    return found.config_from_form(post, current) if found is not None else {}


def scenario_fields(post: Any) -> dict[str, Any]:
    """The fields every scenario has."""
    return {
        "name": post.get("name", ""),
        "instructions": post.get("instructions", ""),
        "blind": post.get("blind") == "1",
        "context_fields": context_fields_from_text(post.get("context_fields", "")),
        "overlap": form_int(post.get("overlap", "1")),
    }


def context_fields_from_text(text: Any) -> list[str] | None:
    """The context fields typed as names separated by commas or lines; blank: all (None)."""
    names = [n.strip() for n in str(text or "").replace("\n", ",").split(",")]
    names = [n for n in names if n]
    return names or None
