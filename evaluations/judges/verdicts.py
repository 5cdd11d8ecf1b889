"""Reading an LLM judge's reply: pure functions, no database.

The reply should be one JSON object. Markdown fences are stripped, and when the model wraps
the object in prose the first complete JSON object is taken. The object is then checked
against the scenario: known dimensions with scores inside their scale (rating), a winner
among A / B (and tie when ties are allowed) (comparison), every presented key once
(ranking), labels from the set (labeling). Anything else is a ``Rejected`` reply, kept with
its raw text and retried alone on request.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scenarios.models import ScenarioType

FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
KEYS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class Rejected(ValueError):
    """The reply is not a valid verdict; the message says why."""


@dataclass
class Verdict:
    payload: dict[str, Any]
    rationale: str = ""
    # "ok": the reply was the JSON object itself; "extracted": it was fenced or in prose.
    parse_status: str = "ok"
    notes: list[str] = field(default_factory=list)


def extract_json(text: str) -> tuple[dict[str, Any], str]:
    """The reply's JSON object and how it was found ("ok" or "extracted")."""
    stripped = text.strip()
    try:
        value = json.loads(stripped)
    except ValueError:
        pass
    else:
        if isinstance(value, dict):
            return value, "ok"
        raise Rejected("The reply is JSON but not an object.")
    candidates = [m.group(1) for m in FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except ValueError:
                start = candidate.find("{", start + 1)
                continue
            if isinstance(value, dict):
                return value, "extracted"
            start = candidate.find("{", start + 1)
    if "{" in text:
        raise Rejected("The reply holds no complete JSON object (cut off, or malformed).")
    raise Rejected("The reply holds no JSON object.")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _rationale(found: Mapping[str, Any]) -> str:
    value = found.get("rationale", found.get("reason", found.get("explanation", "")))
    return value if isinstance(value, str) else json.dumps(value)[:20_000]


def read(
    kind: str, config: Mapping[str, Any], text: str, *, keys: Sequence[str] = ("A", "B")
) -> Verdict:
    """The verdict in the stored shape of ``kind`` (keys as presented: comparison winner A/B
    is the first/second shown; a ranking lists presented keys, best first)."""
    found, how = extract_json(text)
    rationale = _rationale(found)
    if kind == ScenarioType.COMPARISON:
        winner = found.get("winner")
        if isinstance(winner, str):
            winner = {"a": "A", "b": "B", "tie": "tie"}.get(winner.strip().lower(), winner)
        allowed = ["A", "B", "tie"] if config.get("ties", True) else ["A", "B"]
        if winner not in allowed:
            raise Rejected(f"winner must be {' or '.join(allowed)}; the reply has {winner!r}.")
        return Verdict({"winner": winner}, rationale, how)
    if kind == ScenarioType.RATING:
        scores = found.get("scores")
        if not isinstance(scores, dict):
            raise Rejected('No "scores" object {dimension: number}.')
        dimensions = config.get("dimensions", [])
        names = {d["name"] for d in dimensions}
        unknown = sorted(set(scores) - names)
        if unknown:
            raise Rejected(f"Unknown dimensions: {', '.join(map(str, unknown))}.")
        clean: dict[str, float | int] = {}
        for dim in dimensions:
            if dim["name"] not in scores:
                raise Rejected(f"No score for {dim['name']}.")
            number = _number(scores[dim["name"]])
            if number is None:
                raise Rejected(f"The score for {dim['name']} is not a number.")
            if not dim["min"] <= number <= dim["max"]:
                raise Rejected(
                    f"The score for {dim['name']} ({number:g}) is outside "
                    f"{dim['min']}-{dim['max']}."
                )
            clean[dim["name"]] = int(number) if number.is_integer() else number
        return Verdict({"scores": clean, "justifications": {}}, rationale, how)
    if kind == ScenarioType.RANKING:
        ranking = found.get("ranking")
        if not isinstance(ranking, list):
            raise Rejected('No "ranking" list.')
        given = [str(k).strip().upper() for k in ranking]
        if sorted(given) != sorted(keys):
            raise Rejected(f"The ranking must list {', '.join(keys)} once each.")
        return Verdict({"ranking": given}, rationale, how)
    labels = found.get("labels", found.get("label"))
    if isinstance(labels, str):
        labels = [labels]
    allowed_labels = config.get("labels", [])
    if not isinstance(labels, list) or not labels:
        raise Rejected('No "labels" list.')
    by_folded = {str(label).casefold(): label for label in allowed_labels}
    chosen = []
    for label in labels:
        match = by_folded.get(str(label).strip().casefold())
        if match is None:
            raise Rejected(f"{label!r} is not one of the labels.")
        if match not in chosen:
            chosen.append(match)
    if len(chosen) > 1 and not config.get("multiple"):
        raise Rejected("One label only.")
    text_note = found.get("text", "")
    return Verdict(
        {"labels": chosen, "text": text_note if isinstance(text_note, str) else ""},
        rationale,
        how,
    )
