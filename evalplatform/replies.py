"""Reading what an LLM wrote: pure functions, no database. A judge's verdict
(``evaluations.judges.verdicts``), a judge file's reply and a generation job's scored output
(``generation.replies``) are all read with these.

A JSON reply may be fenced (```json ... ```) or wrapped in prose: the first complete JSON
object is taken. XML-like tags (``<score>7</score>``) are read in one linear pass.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["TAG_NAME", "Unreadable", "extract_json", "path", "tags"]

FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)


class Unreadable(ValueError):
    """The reply cannot be read as asked; the message says why."""


def extract_json(text: str) -> tuple[dict[str, Any], str]:
    """The reply's JSON object and how it was found ("ok": the reply was the object itself;
    "extracted": it was fenced or in prose)."""
    stripped = text.strip()
    try:
        value = json.loads(stripped)
    except ValueError:
        pass
    else:
        if isinstance(value, dict):
            return value, "ok"
        raise Unreadable("The reply is JSON but not an object.")
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
        raise Unreadable("The reply holds no complete JSON object (cut off, or malformed).")
    raise Unreadable("The reply holds no JSON object.")


TAG_NAME = r"[A-Za-z_][\w.-]{0,63}"
_OPEN_TAG = re.compile(rf"<({TAG_NAME})>")
_CLOSE_TAG = re.compile(rf"</({TAG_NAME})>")


def tags(text: str, *, most: int = 20_000, name: str = TAG_NAME) -> list[tuple[str, str]]:
    """The ``<name>value</name>`` parts of ``text``, in order, each value the text up to the
    first closing tag of its name, at most ``most`` characters; a part inside a part found
    is not read again. ``name``: the names to read (a pattern).

    Linear in the text: the closing tags are found in one pass and each opening tag looks
    its own up by position (a backreferencing regex tried every opening tag against up to
    ``most`` characters: 60 KB of "<a>" took seconds)."""
    closes: dict[str, list[int]] = {}
    for found in _CLOSE_TAG.finditer(text):
        closes.setdefault(found.group(1), []).append(found.start())
    allowed = re.compile(name)
    parts: list[tuple[str, str]] = []
    position = 0
    for found in _OPEN_TAG.finditer(text):
        tag, start, end = found.group(1), found.start(), found.end()
        if start < position or allowed.fullmatch(tag) is None:
            continue
        at = closes.get(tag, [])
        index = bisect.bisect_left(at, end)
        if index < len(at) and at[index] - end <= most:
            parts.append((tag, text[end : at[index]]))
            position = at[index] + len(tag) + 3
    return parts


def path(found: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted path of a JSON object (``scores.total``), or None."""
    value: Any = found
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value
