"""The analytics JSON as flat tables, for CSV downloads (one table per part)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TABLES = (
    "bradley_terry",
    "elo",
    "win_matrix",
    "position_bias",
    "reverse_consistency",
    "by_model",
    "by_prompt",
    "by_configuration",
    "ratings",
    "stability",
    "rankings",
    "labels",
    "agreement",
    "agreement_by_item",
    "judges",
)


def _flat(prefix: str, value: Any, into: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flat(f"{prefix}.{key}" if prefix else str(key), inner, into)
    elif (
        isinstance(value, list)
        and value
        and not all(isinstance(v, str | int | float) for v in value)
    ):
        into[prefix] = repr(value)
    elif isinstance(value, list):
        into[prefix] = "|".join(str(v) for v in value)
    else:
        into[prefix] = value


def rows(result: dict[str, Any], table: str) -> list[dict[str, Any]]:
    """The rows of one table (each a flat dict); empty when the scenario's type has none."""
    if table == "agreement_by_item":
        return [_disputed(entry) for entry in (result.get("agreement") or {}).get("by_item", [])]
    part = result.get(table)
    if part is None:
        return []
    if table in ("by_model", "by_prompt", "by_configuration"):
        return _grouped(part, table[3:])
    flatten = _TABLES.get(table)
    return flatten(part) if flatten else []


def _judges(part: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each judge overall (temperature "all"), then at each of its temperatures."""
    out = []
    for judge in part:
        head = {k: v for k, v in judge.items() if k != "by_temperature"}
        out.append(_flat_row(head | {"temperature": "all"}))
        for at in judge.get("by_temperature", []):
            out.append(_flat_row({"judge": judge["judge"], "name": judge["name"]} | at))
    return out


def _each(part: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row each."""
    return [_flat_row(r) for r in part]


def _grouped(part: dict[str, Any], group: str) -> list[dict[str, Any]]:
    """The strengths of groups (models, prompts, configurations), named by ``group``."""
    return [{group: r["variant"], **_flat_row(r, skip="variant")} for r in part["bradley_terry"]]


def _by_rater(part: dict[str, Any]) -> list[dict[str, Any]]:
    """Overall (rater "(all)"), then each rater's."""
    out = [{"rater": "(all)", **_flat_row(part["overall"])}]
    out += [{"rater": rater, **_flat_row(v)} for rater, v in part["by_rater"].items()]
    return out


def _ratings(part: dict[str, Any]) -> list[dict[str, Any]]:
    """Each dimension's summaries by each grouping, then overall."""
    out = []
    for dim in part["dimensions"]:
        for key in ("by_model", "by_prompt", "by_configuration"):
            for group in dim.get(key) or []:
                out.append(
                    {
                        "dimension": dim["dimension"],
                        "grouping": key[3:],
                        **_flat_row(group),
                    }
                )
        out.append(
            {
                "dimension": dim["dimension"],
                "grouping": "overall",
                "group": "",
                **_flat_row(dim["overall"]),
            }
        )
    return out


def _stability(part: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each judge's (and dimension's) conditions, one a row."""
    return [
        {"rater": s["rater"], "dimension": s["dimension"] or "", **_flat_row(c)}
        for s in part
        for c in s["conditions"]
    ]


def _rankings(part: dict[str, Any]) -> list[dict[str, Any]]:
    """The mean ranks."""
    return [_flat_row(r) for r in part["mean_rank"]]


def _labels(part: dict[str, Any]) -> list[dict[str, Any]]:
    """Each label's count."""
    return [{"label": k, "count": v} for k, v in part["overall"].items()]


def _agreement(part: dict[str, Any]) -> list[dict[str, Any]]:
    """The people's agreement (overall, by dimension, by label), then the people's with
    each judge (by dimension for scores)."""
    nested = ("human_vs_judge", "by_dimension", "pairwise", "pairwise_kappa", "by_label")
    top = {k: v for k, v in part.items() if k not in nested}
    out = [{"between": "people", "dimension": "", **_figures(top)}]
    for dimension, figures in (part.get("by_dimension") or {}).items():
        out.append({"between": "people", "dimension": dimension, **_figures(figures)})
    for figures in part.get("by_label") or []:
        out.append({"between": "people", "dimension": "", **_figures(figures)})
    for judge, figures in part["human_vs_judge"].items():
        nested_figures = (
            figures if all(isinstance(v, dict) for v in figures.values()) else {"": figures}
        )
        for dimension, values in nested_figures.items():
            out.append(
                {"between": f"people and {judge}", "dimension": dimension, **_figures(values)}
            )
    return out


AGREEMENT_LISTS = ("by_category", "by_item", "warnings")  # in their own table, or on the page


def _figures(figures: dict[str, Any]) -> dict[str, Any]:
    """Agreement figures as columns: each ``…_ci`` interval as ``…_ci_low`` and
    ``…_ci_high``; the lists left out."""
    flat: dict[str, Any] = {}
    for key, value in figures.items():
        if key in AGREEMENT_LISTS:
            continue
        if key.endswith("_ci"):
            flat[f"{key}_low"], flat[f"{key}_high"] = value if value else (None, None)
        else:
            flat[key] = value
    return _flat_row(flat)


def _disputed(entry: dict[str, Any]) -> dict[str, Any]:
    """A disputed unit as a row, its values as ``value: count`` pairs."""
    values = "; ".join(f"{value}: {count}" for value, count in entry["values"].items())
    return _flat_row({k: v for k, v in entry.items() if k != "variants"} | {"values": values})


def _flat_row(row: dict[str, Any], skip: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    _flat("", {k: v for k, v in row.items() if k != skip}, flat)
    return flat


def _matrix(part: dict[str, Any]) -> list[dict[str, Any]]:
    if "pairs" in part:
        return list(part["pairs"])
    names = part["variants"]
    out = []
    for i, row_name in enumerate(names):
        for j, column in enumerate(names):
            if i != j and (part["wins"][i][j] or part["ties"][i][j] or part["losses"][i][j]):
                out.append(
                    {
                        "variant": row_name,
                        "opponent": column,
                        "wins": part["wins"][i][j],
                        "ties": part["ties"][i][j],
                        "losses": part["losses"][i][j],
                    }
                )
    return out


_TABLES: dict[str, Callable[[Any], list[dict[str, Any]]]] = {
    "judges": _judges,
    "bradley_terry": _each,
    "elo": _each,
    "win_matrix": _matrix,
    "position_bias": _by_rater,
    "reverse_consistency": _by_rater,
    "ratings": _ratings,
    "stability": _stability,
    "rankings": _rankings,
    "labels": _labels,
    "agreement": _agreement,
}
