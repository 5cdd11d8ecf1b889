"""Prompt rendering: blocks + variables → (system, user) messages. Pure functions, no database.

- A block titled ``System`` (case and surrounding spaces ignored) is the system prompt; if
  several are, they join in order. All other blocks join, in order, into one user message,
  separated by a blank line. Block titles are labels for authors and are not sent.
- ``{{ name }}`` is replaced by the item's value. A name is made of Unicode letters, digits,
  ``_`` and ``-`` (``{{inhalt_ä}}``, ``{{email-thread}}``); a dotted path reaches into JSON
  values, by dict key or list index (``{{body.messages.0.content}}``). A field whose name
  holds the dots itself (a CSV column ``a.b``) wins over the path.
- A name from an alias group (the generation spec's table) is satisfied by any field of its
  group, in the group's order; exact names win. In a path, the first part may be an alias.
- Values come from the item first, then from the version's default variables.
- Every ``{{`` opens a placeholder: one that is empty, unclosed or not a name or path
  (``{{}}``, ``{{name}``, ``{{ a..b }}``) is an error (``placeholder_problems``), never text
  sent as it is.
- Every missing variable is reported, for every item, before anything is rendered.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalplatform.errors import ApplicationError, FieldErrors

OPEN, CLOSE = "{{", "}}"
# A name: Unicode letters, digits and "_" (``\w``) and "-"; a path joins names with dots.
NAME_RE = re.compile(r"[\w-]+(?:\.[\w-]+)*")
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


@dataclass(frozen=True)
class Placeholder:
    """One ``{{...}}`` of a body: where it starts and ends, its text, and its variable name
    (None when it is malformed, ``problem`` saying why)."""

    start: int
    end: int
    text: str
    name: str | None
    problem: str = ""


@dataclass(frozen=True)
class PlaceholderProblem:
    block: int  # the block's index
    title: str
    text: str  # the offending text
    problem: str

    def __str__(self) -> str:
        where = f"block {self.block + 1}" + (f" ({self.title})" if self.title else "")
        return f"{where}: {self.text!r} {self.problem}"


class MalformedPlaceholders(FieldErrors):
    """Placeholders that are no variable: per block (``blocks[i].body``), what and why."""

    def __init__(self, problems: Sequence[PlaceholderProblem]):
        self.problems = list(problems)
        errors: dict[str, list[str]] = {}
        counted: dict[str, int] = {}
        for p in self.problems:
            key = f"blocks[{p.block}].body"
            counted[key] = counted.get(key, 0) + 1
            if counted[key] <= _SHOWN_PROBLEMS:  # the rest are counted, not quoted
                errors.setdefault(key, []).append(f"{p.text!r} {p.problem}")
        for key, count in counted.items():
            if count > _SHOWN_PROBLEMS:
                errors[key].append(f"And {count - _SHOWN_PROBLEMS:,} more.")
        super().__init__(errors, "Some placeholders are not variables.")


_SHOWN = 60  # characters of an unclosed placeholder quoted in its error
_SHOWN_PROBLEMS = 20  # malformed placeholders quoted per block


def placeholders(body: str) -> list[Placeholder]:
    """Every placeholder of ``body`` in order: each ``{{`` up to the next ``}}``."""
    return list(_placeholders(body))


@functools.lru_cache(maxsize=512)
def _placeholders(body: str) -> tuple[Placeholder, ...]:
    """``placeholders``, read once per text: a job renders the same few blocks for each of
    its thousands of cells."""
    found: list[Placeholder] = []
    position = 0
    # The next "}}" is searched for again only once the scan has passed it: searching from
    # every "{{" would read the rest of the text each time (quadratic in a text of many
    # "{{" and no "}}": a megabyte took minutes). Linear in the text.
    close = -2
    while (start := body.find(OPEN, position)) != -1:
        if close != -1 and close < start + len(OPEN):
            close = body.find(CLOSE, start + len(OPEN))
        reopen = body.find(OPEN, start + len(OPEN))
        if close == -1 or (reopen != -1 and reopen < close):
            stop = reopen if reopen != -1 else len(body)
            text = body[start:stop].rstrip()
            # Quote up to a lone "}" (``{{name}``), else the rest of the line.
            cut = min((i for i in (text.find("}") + 1, text.find("\n")) if i > 0), default=None)
            text = text[:cut][:_SHOWN]
            found.append(Placeholder(start, stop, text, None, "has no closing '}}'."))
            position = stop
            continue
        end = close + len(CLOSE)
        text, inner = body[start:end], body[start + len(OPEN) : close].strip()
        if not inner:
            found.append(Placeholder(start, end, text, None, "is empty: name a variable."))
        elif NAME_RE.fullmatch(inner) is None:
            found.append(
                Placeholder(
                    start,
                    end,
                    text[:_SHOWN],
                    None,
                    "is not a variable: a name of letters, digits, '_' and '-', or a "
                    "dotted path such as body.messages.0.content.",
                )
            )
        else:
            found.append(Placeholder(start, end, text, inner))
        position = end
    return tuple(found)


def placeholder_problems(blocks: Iterable[Block]) -> list[PlaceholderProblem]:
    """The malformed placeholders of every block, in order."""
    return [
        PlaceholderProblem(index, block.title, p.text, p.problem)
        for index, block in enumerate(blocks)
        for p in placeholders(block.body)
        if p.name is None
    ]


def check_placeholders(blocks: Sequence[Block]) -> None:
    """Raise ``MalformedPlaceholders`` if any placeholder is no variable."""
    if problems := placeholder_problems(blocks):
        raise MalformedPlaceholders(problems)


def variables_in(blocks: Iterable[Block]) -> list[str]:
    """Variable names (and paths) used by the blocks, in order of first use; malformed
    placeholders are left out (``placeholder_problems`` reports them)."""
    seen: dict[str, None] = {}
    for block in blocks:
        for p in placeholders(block.body):
            if p.name is not None:
                seen.setdefault(p.name, None)
    return list(seen)


def _lookup(name: str, source: Mapping[str, Any]) -> tuple[bool, Any]:
    if source.get(name) is not None:
        return True, source[name]
    for alias in _GROUP_OF.get(name, ()):
        if source.get(alias) is not None:
            return True, source[alias]
    return False, None


def field_read(name: str, source: Mapping[str, Any]) -> str | None:
    """The field of ``source`` a variable (or the first part of a path) reads, by the rules
    of ``resolve``; None when it has none (the version's defaults then)."""
    head = name.split(".", 1)[0]
    for candidate in (name, head):
        if source.get(candidate) is not None:
            return candidate
        for alias in _GROUP_OF.get(candidate, ()):
            if source.get(alias) is not None:
                return alias
    return None


def _follow(name: str, source: Mapping[str, Any]) -> tuple[bool, Any]:
    """The value of a name or dotted path in ``source``."""
    found, value = _lookup(name, source)
    if found or "." not in name:
        return found, value
    head, *rest = name.split(".")
    found, value = _lookup(head, source)
    if not found:
        return False, None
    for part in rest:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif (
            isinstance(value, list)
            and part.isascii()
            and part.isdigit()
            and len(part) < 10
            and int(part) < len(value)
        ):
            value = value[int(part)]
        else:
            return False, None
    return (value is not None), value


def resolve(name: str, item: Mapping[str, Any], defaults: Mapping[str, Any]) -> tuple[bool, Any]:
    found, value = _follow(name, item)
    if not found:
        found, value = _follow(name, defaults)
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


def _substitute(body: str, item: Mapping[str, Any], defaults: Mapping[str, Any]) -> str:
    parts: list[str] = []
    position = 0
    for p in placeholders(body):
        # A malformed one is refused before anything runs (``render_all``, when a version is
        # saved and when a job is planned); in a job planned before placeholders were
        # checked, it stays the text it always was.
        value = p.text if p.name is None else _as_text(resolve(p.name, item, defaults)[1])
        parts += [body[position : p.start], value]
        position = p.end
    parts.append(body[position:])
    return "".join(parts)


def render(
    blocks: Sequence[Block],
    item: Mapping[str, Any],
    defaults: Mapping[str, Any] | None = None,
    *,
    item_id: str = "-",
) -> RenderedPrompt:
    """One item's messages (a job's cell). Malformed placeholders are not checked here but
    where a version is saved and a job planned (``render_all``): a job planned before they
    were checked keeps running as it was planned."""
    defaults = defaults or {}
    missing = missing_for(blocks, [(item_id, item)], defaults)
    if missing:
        raise MissingVariables(missing)
    system = [_substitute(b.body, item, defaults) for b in blocks if b.is_system]
    user = [_substitute(b.body, item, defaults) for b in blocks if not b.is_system]
    return RenderedPrompt(system="\n\n".join(system), user="\n\n".join(user))


def render_all(
    blocks: Sequence[Block],
    items: Sequence[tuple[str, Mapping[str, Any]]],
    defaults: Mapping[str, Any] | None = None,
) -> list[RenderedPrompt]:
    """Render for every item, or raise ``MalformedPlaceholders``, or ``MissingVariables``
    listing every gap of every item."""
    check_placeholders(blocks)
    missing = missing_for(blocks, items, defaults)
    if missing:
        raise MissingVariables(missing)
    return [render(blocks, item, defaults, item_id=item_id) for item_id, item in items]
