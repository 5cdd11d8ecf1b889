"""A judge file's reply read as a verdict: ``score``, ``verdict``, ``rationale`` and the
reply's other fields.

In order: the reply's JSON object (alone, fenced in markdown, or inside prose); XML-like
tags (``<BETTER_SAMPLE>SAMPLE_1</BETTER_SAMPLE>``, ``<score>4</score>``); a reply that
opens with its choice ("A. Because ...", "Verdict: B"). The score is the first number of
``score``, ``total_score``, ``overall_score``, ``rating`` or ``grade``; the verdict the first
of ``verdict``, ``winner``, ``better``, ``choice``, ``label``, ``decision`` (or a tag whose
name holds "better" or "winner"); the rationale ``rationale``, ``reason``, ``explanation``
or ``justification``. A reply none of this reads is kept, flagged (``parsed`` false).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from evaluations.judges.verdicts import extract_json, tags
from scenarios.types.base import Rejected

SCORE_KEYS = ("score", "total_score", "overall_score", "rating", "grade")
VERDICT_KEYS = ("verdict", "winner", "better", "choice", "label", "decision")
RATIONALE_KEYS = ("rationale", "reason", "explanation", "justification")
TAG_NAME = r"[A-Za-z_][\w-]{0,63}"  # no dots: the judges' own reply formats take them
OPENING = re.compile(
    r"^\W{0,5}(?:(?:verdict|winner|answer|better(?: answer| one)?)\s*(?:is|:)?\s*)?"
    r"(?:answer\s+|response\s+|sample\s+)?([AB])\**"
    r"(?:$|[.:,;)\]]|\s+[-\u2014\u2013]|\s+(?=(?:is|wins|because)\b))\s*(.*)$",
    re.IGNORECASE | re.DOTALL,
)
MAX_TEXT = 20_000


@dataclass
class Read:
    score: float | None = None
    verdict: str = ""
    rationale: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    parsed: bool = True
    problem: str = ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) >= 2**63:
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        match = re.match(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*\d+)?\s*$", value)
        if not match:
            return None
        number = float(match.group(1))
    else:
        return None
    return number if math.isfinite(number) and abs(number) < 1e300 else None


def _first(found: dict[str, Any], keys: tuple[str, ...]) -> Any:
    lowered = {str(k).lower(): v for k, v in found.items()}
    for key in keys:
        if key in lowered and lowered[key] not in (None, ""):
            return lowered[key]
    return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:MAX_TEXT]


def _from_fields(found: dict[str, Any]) -> Read:
    score = _number(_first(found, SCORE_KEYS))
    verdict = _first(found, VERDICT_KEYS)
    if verdict is None:
        verdict = next(
            (v for k, v in found.items() if "better" in k.lower() or "winner" in k.lower()), None
        )
    rationale = _first(found, RATIONALE_KEYS)
    return Read(
        score=score,
        verdict=_text(verdict)[:200] if verdict is not None else "",
        rationale=_text(rationale),
        fields={str(k)[:100]: v for k, v in list(found.items())[:50]},
    )


def read_reply(text: str) -> Read:
    """The verdict in a reply (see the module's docstring); never raises (a reply it cannot
    read, however malformed, is a flagged ``Read``)."""
    try:
        return _read(text)
    except (RecursionError, ValueError, OverflowError, TypeError) as exc:
        return Read(parsed=False, problem=f"The reply could not be read ({type(exc).__name__}).")


def _read(text: str) -> Read:
    try:
        found, _ = extract_json(text[:1_000_000])
    except Rejected as exc:
        problem = str(exc)
    else:
        read = _from_fields(found)
        if read.score is not None or read.verdict:
            return read
        problem = "The reply's JSON has no score or verdict field."
        return Read(fields=read.fields, rationale=read.rationale, parsed=False, problem=problem)
    found_tags = {n: v.strip() for n, v in tags(text[:200_000], most=2000, name=TAG_NAME)}
    if found_tags:
        read = _from_fields(found_tags)
        if read.score is not None or read.verdict:
            return read
    opening = OPENING.match(text.strip()[:MAX_TEXT])
    if opening:
        return Read(verdict=opening.group(1).upper(), rationale=opening.group(2).strip())
    return Read(parsed=False, problem=problem[:300])
