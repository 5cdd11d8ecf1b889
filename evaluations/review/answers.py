"""Answers compared across raters, by the analysis their scenario type names
(``ScenarioKind.analysis``, as ``evaluations.analytics.analyze.ANALYSES``): what a judgment's
answer is whatever order it was shown in (``value``), how much a task's answers disagree
(``disagreement``), an answer under the task's own keys (``in_task_keys``) and in words
(``summary``), and the adjudicated answer as one cell of an export row (``export_cell``).
Pure functions over plain data; a type that names no analysis has no disagreement.

Disagreement, from 0 (every answer alike) to at most 1, over a task's valid answers (each
judgment one answer: a judge asked several times gives several), None under two answers:

- comparisons (the winning variant, or a tie) and labels (the set of labels): 1 - the share
  of the most frequent answer;
- ratings: per dimension, the standard deviation of the scores (n in the denominator) over
  half the dimension's scale, the most it can be; the mean over the dimensions;
- rankings: (1 - the mean Kendall tau of every two rankings) / 2, so that 1 means every two
  rankings are reversals of each other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from scenarios.types.base import KEYS

PAIRWISE, RATINGS, RANKINGS, LABELS = "pairwise", "ratings", "rankings", "labels"


def value(analysis: str | None, payload: Mapping[str, Any], presented: Sequence[int]) -> Any:
    """A judgment's answer, independent of the order it was shown in: a comparison's winning
    variant id (or "tie"), a ranking's variant ids best first, a label set (sorted tuple), a
    rating's scores by dimension; None when it has none."""
    if analysis == PAIRWISE:
        winner = payload.get("winner")
        if winner == "tie":
            return "tie"
        if winner in ("A", "B") and len(presented) >= 2:
            return presented["AB".index(winner)]
        return None
    if analysis == RANKINGS:
        ranking = payload.get("ranking")
        return tuple(ranking) if isinstance(ranking, list) and ranking else None
    if analysis == LABELS:
        labels = payload.get("labels")
        return tuple(sorted(map(str, labels))) if isinstance(labels, list) else None
    if analysis == RATINGS:
        scores = payload.get("scores")
        return dict(scores) if isinstance(scores, dict) else None
    return None


def kendall_tau(one: Sequence[Any], other: Sequence[Any]) -> float | None:
    """Kendall's tau of two rankings (best first) over the variants both hold."""
    held = set(other)
    common = [v for v in one if v in held]
    if len(common) < 2:
        return None
    place = {v: i for i, v in enumerate(other)}
    concordant = sum(
        1 if place[a] < place[b] else -1 for a, b in combinations(common, 2)
    )  # ``common`` is in ``one``'s order: a before b there
    return concordant / (len(common) * (len(common) - 1) / 2)


def disagreement(
    analysis: str | None, values: Sequence[Any], config: Mapping[str, Any]
) -> float | None:
    """How much the answers (``value``s, None left out) of one task disagree, 0 to 1; None
    under two answers or for a type without an analysis."""
    found = [v for v in values if v is not None]
    if len(found) < 2:
        return None
    if analysis in (PAIRWISE, LABELS):
        return 1 - Counter(found).most_common(1)[0][1] / len(found)
    if analysis == RANKINGS:
        taus = [t for a, b in combinations(found, 2) if (t := kendall_tau(a, b)) is not None]
        return (1 - sum(taus) / len(taus)) / 2 if taus else None
    if analysis == RATINGS:
        spreads = []
        for dim in config.get("dimensions", []):
            scores = [float(s[dim["name"]]) for s in found if s.get(dim["name"]) is not None]
            half = (dim["max"] - dim["min"]) / 2
            if len(scores) >= 2 and half > 0:
                mean = sum(scores) / len(scores)
                sd = (sum((x - mean) ** 2 for x in scores) / len(scores)) ** 0.5
                spreads.append(min(1.0, sd / half))
        return sum(spreads) / len(spreads) if spreads else None
    return None


def dimension_spread(values: Sequence[Any], config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Ratings: each dimension's scores of a task, with their mean, SD (n) and range."""
    rows = []
    for dim in config.get("dimensions", []):
        scores = [float(s[dim["name"]]) for s in values if s and s.get(dim["name"]) is not None]
        if not scores:
            continue
        mean = sum(scores) / len(scores)
        sd = (sum((x - mean) ** 2 for x in scores) / len(scores)) ** 0.5
        rows.append(
            {
                "dimension": dim["name"],
                "n": len(scores),
                "mean": round(mean, 4),
                "sd": round(sd, 4),
                "range": max(scores) - min(scores),
            }
        )
    return rows


def in_task_keys(
    analysis: str | None,
    payload: Mapping[str, Any],
    presented: Sequence[int],
    task_order: Sequence[int],
) -> dict[str, Any]:
    """An answer as if given to the task in its own order (A its first variant, ...): what a
    manager reads side by side, and the shape ``PUT …/adjudication`` takes."""
    keys = {pk: KEYS[i] for i, pk in enumerate(task_order)}
    found = value(analysis, payload, presented)
    if analysis == PAIRWISE:
        return {"winner": found if found in (None, "tie") else keys.get(found)}
    if analysis == RANKINGS:
        return {"ranking": [keys.get(pk) for pk in found or ()]}
    return dict(payload)


def summary(
    analysis: str | None,
    payload: Mapping[str, Any],
    presented: Sequence[int],
    task_order: Sequence[int],
) -> str:
    """An answer in a few words, under the task's keys: "A", "tie", "B > A > C",
    "clarity 4 · tone 2", "helpful, safe"."""
    shown = in_task_keys(analysis, payload, presented, task_order)
    if analysis == PAIRWISE:
        return str(shown["winner"] or "")
    if analysis == RANKINGS:
        return " > ".join(str(k) for k in shown["ranking"])
    if analysis == LABELS:
        text = payload.get("text") or ""
        return ", ".join(map(str, payload.get("labels") or [])) + (f" · “{text}”" if text else "")
    if analysis == RATINGS:
        scores = payload.get("scores") or {}
        return " · ".join(f"{dim} {score}" for dim, score in scores.items())
    return ", ".join(f"{k}: {v}" for k, v in payload.items())


def export_cell(
    analysis: str | None,
    payload: Mapping[str, Any],
    presented: Sequence[int],
    row: Mapping[str, Any],
    variant_ids: Mapping[int, str],
) -> Any:
    """The adjudicated answer in the terms of one export row (``row``: its answer cells by
    column): a comparison's winning variant id or "tie" (as ``winner_variant``), the
    adjudicated score of the row's ``dimension``, the labels joined by ``|`` (as
    ``labels``), the adjudicated rank of the row's ``variant``; otherwise the answer as
    it is stored."""
    found = value(analysis, payload, presented)
    if found is None:
        return ""
    if analysis == PAIRWISE:
        return found if found == "tie" else variant_ids.get(found, "")
    if analysis == RATINGS:
        return found.get(row.get("dimension"), "")
    if analysis == LABELS:
        return "|".join(found)
    if analysis == RANKINGS:
        ranked = [variant_ids.get(pk) for pk in found]
        variant = row.get("variant")
        return ranked.index(variant) + 1 if variant in ranked else ""
    return dict(payload)
