"""From the scenario pages' form fields to the services' data (the API's shapes): the fields
every scenario has, and the type's settings (read by its type: ``scenarios.types``); back to
the form, the rubric as rows of fields. The services check everything; these functions only
collect."""

from __future__ import annotations

from typing import Any

from scenarios.types import registry
from scenarios.types.base import form_int

EMPTY_DIMENSION_ROWS = 2


def anchors_text(anchors: dict[str, str]) -> str:
    return "; ".join(f"{point}={label}" for point, label in anchors.items())


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
        "overlap": form_int(post.get("overlap", "1")),
    }


def dimension_rows(dimensions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rubric as form rows, with empty rows to add dimensions."""
    rows = [
        {**dim, "anchors_text": anchors_text(dim.get("anchors") or {}), "n": n}
        for n, dim in enumerate(dimensions)
    ]
    start = len(rows)
    rows += [
        {"name": "", "description": "", "min": 1, "max": 5, "anchors_text": "", "n": start + k}
        for k in range(EMPTY_DIMENSION_ROWS)
    ]
    return rows
