"""The declared input of a scenario (``ScenarioInput``): the settings every scenario has, as
the API's bodies (an upload's ``config`` field, a job's conversion, an edit) and the pages'
forms give them, checked without the database. ``services`` reads each request with it,
then checks what needs the team and the type: a name no other scenario has, the type's
configuration, the items. The keys and messages are the API's.
"""

from __future__ import annotations

from typing import Any

from evalplatform import inputs, validation
from scenarios.types import registry

# Context fields a blind scenario shows: at most this many names of at most 200 characters.
MAX_CONTEXT_FIELDS = 200
MAX_INSTRUCTIONS = 20_000


def _name(raw: Any) -> str:
    text = str(raw or "").strip()
    if not text or len(text) > 200:
        raise inputs.Invalid("A scenario needs a name of at most 200 characters.")
    return text


def _types() -> str:
    return registry.listed(registry.values(), "or") + "."


def _context_fields(raw: Any) -> list[str] | None:
    """The names of the context fields shown in blind mode, in order, once each; None: all."""
    if raw is None:
        return None
    if (
        not isinstance(raw, list)
        or len(raw) > MAX_CONTEXT_FIELDS
        or not all(isinstance(v, str) and 0 < len(v.strip()) <= 200 for v in raw)
        or any("\x00" in v for v in raw)
    ):
        raise inputs.Invalid(
            f"A list of at most {MAX_CONTEXT_FIELDS} field names (each 1 to 200 characters), "
            "or null for all."
        )
    return list(dict.fromkeys(v.strip() for v in raw))


def _instructions(raw: Any) -> str:
    if not isinstance(raw, str) or len(raw) > MAX_INSTRUCTIONS:
        raise inputs.Invalid(f"Text of at most {MAX_INSTRUCTIONS:,} characters.")
    return raw


class ScenarioInput(inputs.Input):
    """A scenario's settings (checked in this order, so the errors are listed in it)."""

    team = inputs.Given(
        openapi={"type": "string", "description": "The team's slug; optional with one team."},
    )
    name = inputs.Rule(_name, fallback="", openapi={"type": "string", "maxLength": 200})
    type = inputs.OneOf(registry.choices, message=_types)
    blind = inputs.Flag(
        default=True, strict=True, help_text="Evaluators see no model or prompt names."
    )
    context_fields = inputs.Rule(
        _context_fields,
        label="Item fields blind evaluators see",
        openapi={
            "type": "array",
            "items": {"type": "string", "maxLength": 200},
            "maxItems": MAX_CONTEXT_FIELDS,
            "nullable": True,
            "description": "The context fields a blind scenario shows; null: all.",
        },
    )
    overlap = inputs.Whole(
        1,
        50,
        label="Evaluators per task",
        default=1,
        message="Evaluators per task: 1 to 50.",
        help_text="Judgments wanted per task.",
    )
    seed = inputs.Whole(
        0, validation.SEED_MAX, default=0, help_text="Seeds the pair design and the orders."
    )
    instructions = inputs.Rule(
        _instructions,
        missing="",
        fallback="",
        openapi={"type": "string", "maxLength": MAX_INSTRUCTIONS},
    )
    config = inputs.Given(
        label="Configuration",
        openapi={
            "type": "object",
            "additionalProperties": {},
            "description": "The rubric, label set or pair design (docs/scenarios.md).",
        },
    )


class ScenarioUploadInput(ScenarioInput):
    """A scenario of outputs made elsewhere: the settings, and the rows (a multipart
    ``file``, or ``content`` in JSON)."""

    format = inputs.Given(
        openapi={
            "type": "string",
            "enum": ["csv", "jsonl", "json"],
            "description": "Default: the file's.",
        },
    )
    content = inputs.Given(
        openapi={"type": "string", "description": "The rows, when no file is uploaded."},
    )


class ScenarioFromJobInput(ScenarioInput):
    """A scenario of a generation job's outputs: the settings, which outputs, and whether
    only to preview it."""

    outputs = inputs.Given(
        openapi={
            "type": "object",
            "additionalProperties": {},
            "description": "Which outputs: {status, models, prompts, repetitions, "
            "temperatures}; completed ones of all by default.",
        },
    )
    preview = inputs.Given(
        openapi={"type": "boolean", "description": "true: answer the preview, write nothing."},
    )
