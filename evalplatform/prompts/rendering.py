"""Prompt rendering: blocks + variables → (system, user) messages. Pure functions, no database.

- A block titled ``System`` (case and surrounding spaces ignored) is the system prompt; if
  several are, they join in order. All other blocks join, in order, into one user message,
  separated by a blank line. Block titles are labels for authors and are not sent.
- ``{{ name }}`` is replaced by the item's value. A name from an alias group (the generation
  spec's table) is satisfied by any field of its group, in the group's order; exact names win.
- Values come from the item first, then from the version's default variables.
- Every missing variable is reported, for every item, before anything is rendered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalplatform.errors import ApplicationError

VARIABLE_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
SYSTEM_TITLE = "system"

ALIAS_GROUPS: tuple[tuple[str, ...], ...] = (
    ("content", "input", "text_content", "thread_content", "thread"),
    ("messages", "email_thread", "email_content"),
    ("subject", "betreff"),
)
_GROUP_OF = {name: group for group in ALIAS_GROUPS for name in group}


@dataclass(frozen=True)
class Block:
    title: str
    body: str

    @property
    def is_system(self) -> bool:
        return self.title.strip().lower() == SYSTEM_TITLE


@dataclass(frozen=True)
class RenderedPrompt:
    system: str
    user: str


@dataclass(frozen=True)
class MissingVariable:
    item_id: str
    variable: str


class MissingVariables(ApplicationError):
    default_message = "Some items lack variables the prompt uses."

    def __init__(self, missing: Sequence[MissingVariable]):
        self.missing = list(missing)
        lines = [f"item {m.item_id}: {{{{{m.variable}}}}}" for m in self.missing[:20]]
        more = len(self.missing) - len(lines)
        summary = "; ".join(lines) + (f"; and {more} more" if more > 0 else "")
        super().__init__(
            f"Missing variables: {summary}.",
            extra={
                "missing": [{"item_id": m.item_id, "variable": m.variable} for m in self.missing]
            },
        )


def variables_in(blocks: Iterable[Block]) -> list[str]:
    """Variable names used by the blocks, in order of first use."""
    seen: dict[str, None] = {}
    for block in blocks:
        for name in VARIABLE_RE.findall(block.body):
            seen.setdefault(name, None)
    return list(seen)


def _lookup(name: str, source: Mapping[str, Any]) -> tuple[bool, Any]:
    if source.get(name) is not None:
        return True, source[name]
    for alias in _GROUP_OF.get(name, ()):
        if source.get(alias) is not None:
            return True, source[alias]
    return False, None


def resolve(name: str, item: Mapping[str, Any], defaults: Mapping[str, Any]) -> tuple[bool, Any]:
    found, value = _lookup(name, item)
    if not found:
        found, value = _lookup(name, defaults)
    return found, value


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def missing_for(
    blocks: Sequence[Block],
    items: Iterable[tuple[str, Mapping[str, Any]]],
    defaults: Mapping[str, Any] | None = None,
) -> list[MissingVariable]:
    names = variables_in(blocks)
    defaults = defaults or {}
    return [
        MissingVariable(item_id=str(item_id), variable=name)
        for item_id, item in items
        for name in names
        if not resolve(name, item, defaults)[0]
    ]


def render(
    blocks: Sequence[Block],
    item: Mapping[str, Any],
    defaults: Mapping[str, Any] | None = None,
    *,
    item_id: str = "-",
) -> RenderedPrompt:
    defaults = defaults or {}
    missing = missing_for(blocks, [(item_id, item)], defaults)
    if missing:
        raise MissingVariables(missing)

    def substitute(match: re.Match[str]) -> str:
        return _as_text(resolve(match.group(1), item, defaults)[1])

    system = [VARIABLE_RE.sub(substitute, b.body) for b in blocks if b.is_system]
    user = [VARIABLE_RE.sub(substitute, b.body) for b in blocks if not b.is_system]
    return RenderedPrompt(system="\n\n".join(system), user="\n\n".join(user))


def render_all(
    blocks: Sequence[Block],
    items: Sequence[tuple[str, Mapping[str, Any]]],
    defaults: Mapping[str, Any] | None = None,
) -> list[RenderedPrompt]:
    """Render for every item, or raise ``MissingVariables`` listing every gap of every item."""
    missing = missing_for(blocks, items, defaults)
    if missing:
        raise MissingVariables(missing)
    return [render(blocks, item, defaults, item_id=item_id) for item_id, item in items]
