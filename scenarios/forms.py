"""From the scenario pages' form fields to the services' data (the API's shapes): the
rubric as rows of fields, the label set one per line, the pair design. The services check
everything; these functions only collect."""

from __future__ import annotations

from typing import Any

from scenarios.models import ScenarioType

EMPTY_DIMENSION_ROWS = 2


def _int(value: str) -> int | str:
    value = (value or "").strip()
    return int(value) if value.lstrip("-").isdigit() else value


def _anchors(text: str) -> dict[str, str] | str:
    """``1=Poor; 5=Great`` → ``{"1": "Poor", "5": "Great"}`` (the text itself when it does not
    parse, so that the service names the problem)."""
    anchors: dict[str, str] = {}
    for part in (text or "").split(";"):
        if not part.strip():
            continue
        point, sep, label = part.partition("=")
        if not sep:
            return text
        anchors[point.strip()] = label.strip()
    return anchors


def anchors_text(anchors: dict[str, str]) -> str:
    return "; ".join(f"{point}={label}" for point, label in anchors.items())


def dimensions_from_rows(post: Any) -> list[dict[str, Any]]:
    """Rows ``dim-N-name``, ``-description``, ``-min``, ``-max``, ``-anchors``,
    ``-justification``; a row without a name is left out."""
    rows = sorted(
        {
            int(key.split("-")[1])
            for key in post
            if key.startswith("dim-") and key.count("-") == 2 and key.split("-")[1].isdigit()
        }
    )
    dimensions = []
    for n in rows:
        name = post.get(f"dim-{n}-name", "").strip()
        if not name:
            continue
        dimensions.append(
            {
                "name": name,
                "description": post.get(f"dim-{n}-description", "").strip(),
                "min": _int(post.get(f"dim-{n}-min", "1")),
                "max": _int(post.get(f"dim-{n}-max", "5")),
                "anchors": _anchors(post.get(f"dim-{n}-anchors", "")),
                "justification": post.get(f"dim-{n}-justification") == "1",
            }
        )
    return dimensions


def config_from_post(kind: str, post: Any, current: dict[str, Any] | None = None) -> dict[str, Any]:
    """The configuration for ``kind`` from the form; ``current``: the scenario's own (its pair
    design is kept, since it cannot change)."""
    current = current or {}
    if kind == ScenarioType.RATING:
        return {"dimensions": dimensions_from_rows(post)}
    if kind == ScenarioType.LABELING:
        labels = [line.strip() for line in post.get("labels", "").splitlines() if line.strip()]
        return {
            "labels": labels,
            "multiple": post.get("multiple") == "1",
            "free_text": post.get("free_text") == "1",
        }
    if kind == ScenarioType.COMPARISON:
        if current:
            return {**current, "ties": post.get("ties") == "1"}
        sample = post.get("sample", "").strip()
        config: dict[str, Any] = {
            "pairing": post.get("pairing", "within_item"),
            "reverse_share": _share(post.get("reverse_share", "0")),
            "ties": post.get("ties") == "1",
        }
        if sample.endswith("%"):
            config["sample_share"] = _share(sample[:-1], percent=True)
        elif sample:
            config["sample_count"] = _int(sample)
        return config
    return {}


def _share(value: str, *, percent: bool = False) -> float | str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return number / 100 if percent else number


def scenario_fields(post: Any) -> dict[str, Any]:
    """The fields every scenario has."""
    return {
        "name": post.get("name", ""),
        "instructions": post.get("instructions", ""),
        "blind": post.get("blind") == "1",
        "overlap": _int(post.get("overlap", "1")),
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
