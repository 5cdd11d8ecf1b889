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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalplatform.replies import extract_json, path, tags
from scenarios.types import registry
from scenarios.types.base import KEYS, Rejected

__all__ = ["KEYS", "Rejected", "Verdict", "extract_json", "read", "tags"]


@dataclass
class Verdict:
    payload: dict[str, Any]
    rationale: str = ""
    # "ok": the reply was the JSON object itself; "extracted": it was fenced or in prose.
    parse_status: str = "ok"
    notes: list[str] = field(default_factory=list)


def _rationale(found: Mapping[str, Any]) -> str:
    value = found.get("rationale", found.get("reason", found.get("explanation", "")))
    return value if isinstance(value, str) else json.dumps(value)[:20_000]


# A judge's reply format (``LLMJudge.reply_format``): {} the platform's own JSON; "json"
# with ``fields`` naming the reply's field (a dotted path) of each part of the verdict; "tags"
# with ``fields`` naming the XML-like tag of each part. Parts: each scenario type's
# ``reply_parts`` (a comparison's winner, ...) and ``rationale``, a field each; each type's
# ``reply_groups`` ({name: field}: a rating's scores by dimension); ``values`` maps the
# reply's words to the verdict's (e.g. SAMPLE_1 → A).
REPLY_FORMATS = ("json", "tags", "structured")


def check_reply_format(value: Any, dimensions: Sequence[str]) -> str | None:
    """What is wrong with a reply format, if anything."""
    if value in (None, {}):
        return None
    if not isinstance(value, dict) or value.get("kind") not in REPLY_FORMATS:
        return 'An object {"kind": "json", "tags" or "structured", "fields": {...}, ...}.'
    if value["kind"] == "structured":
        return None if set(value) == {"kind"} else 'Structured output is {"kind": "structured"}.'
    if set(value) - {"kind", "fields", "values"}:
        return "Only kind, fields and values."
    fields = value.get("fields") or {}
    values = value.get("values") or {}
    parts, groups = _parts(), _groups()
    if not isinstance(fields, dict) or set(fields) - {*parts, *groups}:
        return f"fields: some of {', '.join((*parts, *groups))}."
    names = [v for k, v in fields.items() if k not in groups]
    for group in groups:
        named = fields.get(group) or {}
        if not isinstance(named, dict) or set(named) - set(dimensions):
            return f"fields.{group}: {{dimension of the rubric: the reply's field}}."
        names += list(named.values())
    if not all(_short_text(n) for n in names):
        return "Each field is a name of at most 100 characters."
    if not _word_pairs(values):
        return "values: at most 50 pairs of text (the reply's word: the verdict's)."
    return None


def _short_text(value: Any) -> bool:
    """Text of 1 to 100 characters without NUL."""
    return isinstance(value, str) and 0 < len(value) <= 100 and "\x00" not in value


def _word_pairs(values: Any) -> bool:
    """At most 50 pairs of text of at most 100 characters each, without NUL."""
    return (
        isinstance(values, dict)
        and len(values) <= 50
        and all(
            isinstance(k, str)
            and isinstance(v, str)
            and (_short_text(k) or k == "")
            and (_short_text(v) or v == "")
            for k, v in values.items()
        )
    )


def verdict_schema(kind: str, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON schema of the platform's verdict of a scenario type (structured output): the
    type's ``verdict_properties`` and a rationale; None for a type that has none."""
    found = registry.find(kind)
    properties = found.verdict_properties(config) if found is not None else None
    if properties is None:
        return None
    properties["rationale"] = {"type": "string", "description": "One or two sentences: why."}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def reshape(text: str, reply_format: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The reply in the platform's verdict shape under a judge's reply format, and how it
    was found."""
    kind = reply_format.get("kind")
    if kind == "tags":
        source: Mapping[str, Any] = {n: v.strip() for n, v in tags(text[:1_000_000])}
        if not source:
            raise Rejected("The reply holds none of the expected tags.")
        how = "extracted"
    else:
        source, how = extract_json(text)
    fields = reply_format.get("fields") or {}
    values = reply_format.get("values") or {}

    def word(value: Any) -> Any:
        if isinstance(value, str):
            return values.get(value.strip(), values.get(value.strip().upper(), value))
        if isinstance(value, list):
            return [word(v) for v in value]
        return value

    found: dict[str, Any] = dict(source) if kind == "json" else {}
    for owner in registry.every():
        for part in owner.reply_parts:
            if part in fields:
                found[part] = word(owner.from_reply(part, path(source, fields[part])))
        for group in owner.reply_groups:
            if group in fields:
                found[group] = {name: path(source, f) for name, f in fields[group].items()}
    if "rationale" in fields:
        found["rationale"] = word(path(source, fields["rationale"]))
    return found, how


def _parts() -> tuple[str, ...]:
    """The verdict parts a reply format may name one field of: every type's, and the
    rationale."""
    return (*dict.fromkeys(p for kind in registry.every() for p in kind.reply_parts), "rationale")


def _groups() -> tuple[str, ...]:
    return tuple(dict.fromkeys(g for kind in registry.every() for g in kind.reply_groups))


def read(
    kind: str,
    config: Mapping[str, Any],
    text: str,
    *,
    keys: Sequence[str] = ("A", "B"),
    reply_format: Mapping[str, Any] | None = None,
) -> Verdict:
    """The verdict in the stored shape of ``kind`` (keys as presented: comparison winner A/B
    is the first/second shown; a ranking lists presented keys, best first), the reply read
    by the judge's ``reply_format`` when it has one."""
    if reply_format and reply_format.get("kind") != "structured":
        try:
            found, how = reshape(text, reply_format)
        except RecursionError as exc:
            raise Rejected("The reply is nested too deeply.") from exc
    else:
        found, how = extract_json(text)
    rationale = _rationale(found)
    return Verdict(registry.get(kind).read_verdict(found, config=config, keys=keys), rationale, how)
