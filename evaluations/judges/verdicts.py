"""Reading an LLM judge's reply: pure functions, no database.

The reply should be one JSON object. Markdown fences are stripped, and when the model wraps
the object in prose the first complete JSON object is taken. The object is then checked
against the scenario by its type's lenient reader (``scenarios.types``): known dimensions
with scores inside their scale (rating), a winner among A / B (and tie when ties are
allowed) (comparison), every presented key once (ranking), labels from the set (labeling).
Anything else is a ``Rejected`` reply, kept with its raw text and retried alone on request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scenarios.types import registry
from scenarios.types.base import KEYS, Rejected

__all__ = ["KEYS", "Rejected", "Verdict", "extract_json", "read"]

FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)


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
    return Verdict(registry.get(kind).read_verdict(found, config=config, keys=keys), rationale, how)
