"""The declared input of a job request (``JobInput``): what each field of a request to plan
a job must look like, checked without the database. ``planning.job_plan`` reads a request
with it, then adds the team's prompt versions, models and items, and the checks across
fields. The API documents its body with it, and the wizard's fields become the same mapping.
The keys and messages are the API's: tests and clients depend on them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from evalplatform import inputs, validation
from evalplatform.providers.llm import kinds
from evalplatform.providers.llm.types import ResponseSchema
from generation import replies
from generation.models import JobMode


def _name(raw: Any) -> str:
    text = str(raw or "").strip()
    if not text or len(text) > 200:
        raise inputs.Invalid("A job needs a name of at most 200 characters.")
    return text


def _model_entries(raw: Any) -> list[dict[str, Any]]:
    """Each model configuration as an object ``{model, label, params, response_schema}``
    (a bare id is ``{"model": id}``); their fields are checked with the model they name
    (``params_problem``, ``response_schema_problem``)."""
    entries = raw or []
    if not isinstance(entries, list) or not entries:
        raise inputs.Invalid(
            "Choose at least one model (ids, or objects {model, label, params, response_schema})."
        )
    return [m if isinstance(m, dict) else {"model": m} for m in entries]


def _source(raw: Any) -> dict[str, Any]:
    source = raw or {}
    if not isinstance(source, dict):
        raise inputs.Invalid("The source is an object: {type, format, content}.")
    return source


def _reply_format(raw: Any) -> dict[str, Any] | None:
    """How replies are scored (``generation.replies``). A structured format naming no
    fields is read with the models' response schemas (``planning.job_plan``)."""
    if isinstance(raw, dict) and raw.get("kind") == "structured" and raw.get("fields") is None:
        if set(raw) - {"kind", "fields"}:
            raise inputs.Invalid("Only kind and fields.")
        return {"kind": "structured"}
    try:
        return replies.check(raw)
    except ValueError as exc:
        raise inputs.Invalid(str(exc)) from None


def _starts(raw: Any) -> bool:
    return raw is True  # anything else creates the job without starting it


class JobInput(inputs.Input):
    """A request to plan (and create) a generation job: the API's body, the wizard's fields
    and the internal sources' configurations alike."""

    # Looked up first, with the user's rights (``planning.job_plan``).
    team = inputs.Given(
        openapi={"type": "string", "description": "The team's slug; optional with one team."},
    )
    name = inputs.Rule(
        _name, fallback="", label="Job name", openapi={"type": "string", "maxLength": 200}
    )
    mode = inputs.OneOf(JobMode.choices, message="live or batch.", missing=JobMode.LIVE)
    finish_live = inputs.Flag(
        strict=True,
        label="Finish failed rows live",
        help_text="Batch mode: rows the batch failed finish live.",
    )
    repetitions = inputs.Whole(
        1, 100, default=1, help_text="Calls per item, prompt, model and temperature."
    )
    max_tokens = inputs.Whole(
        1, validation.MAX_TOKENS, help_text="A reply's token limit; null: the model's."
    )
    max_retries = inputs.Whole(0, 10, default=3, help_text="Retries of a failed call.")
    concurrency = inputs.Whole(1, 256, default=8, help_text="Calls at once.")
    temperatures = inputs.Temperatures(
        allow_none=True,
        missing=lambda data: [data.get("temperature", 0.7)],
        help_text="Distinct temperatures from 0 to 2; null: a slot sending none.",
    )
    budget_usd = inputs.Usd(
        label="Budget limit (USD)", help_text="A budget in USD, 4 decimals at most; null for none."
    )
    prompt_versions = inputs.Ids(
        label="Prompt templates", message="Choose at least one prompt version (a list of ids)."
    )
    models = inputs.Rule(
        _model_entries,
        label="LLM models",
        fallback=[],
        openapi={
            "type": "array",
            "items": {},
            "description": "Model ids, or objects {model, label, params, response_schema}.",
        },
    )
    # The request's key; a declared field shadows ``Field.source`` only in the type checker.
    source = inputs.Rule(  # type: ignore[assignment]
        _source,
        label="Input data",
        fallback={},
        openapi={
            "type": "object",
            "additionalProperties": {},
            "description": "{type: manual|prompt_only, format, content}, or "
            "{type: scenario, scenario: id}.",
        },
    )
    reply_format = inputs.Rule(
        _reply_format,
        label="Reply format",
        openapi={
            "type": "object",
            "nullable": True,
            "additionalProperties": {},
            "description": "How replies are scored into fields: " + replies.HELP,
        },
    )
    start = inputs.Rule(
        _starts,
        openapi={"type": "boolean", "description": "true: start the job once it is created."},
    )


def params_problem(params: Any) -> str | None:
    """What is wrong with a model configuration's parameters, if anything."""
    if not isinstance(params, dict):
        return "Parameters are an object."
    if reserved := reserved_params(params):
        return (
            f"{', '.join(reserved)} are set by the job (model, prompt, max_tokens, "
            "temperature, one reply), not by parameters; "
            '"temperature": null sends no temperature for this model.'
        )
    return None


# Request fields the job sets itself: parameters may not override them, or the budget
# reservation (based on max_tokens and one reply) and the pricing would be wrong.
def reserved_params(params: Mapping[str, Any]) -> list[str]:
    """The parameters a job sets itself (each provider's words: ``kinds.reserved_params``);
    ``"temperature": null`` (send none) is allowed."""
    return kinds.reserved_params(params)


# A response schema's name: what OpenAI's ``json_schema.name`` and Anthropic's tool names
# take (letters, digits, "_" and "-", at most 64).
_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
SCHEMA_MAX_CHARS = 50_000


def response_schema_problem(value: Any) -> str | None:
    """What is wrong with a model configuration's ``response_schema``, if anything: an
    object ``{"name": ..., "schema": {...}}`` (OpenAI's ``json_schema`` shape; the name is
    optional), or null for free text."""
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("schema"), dict)
        or set(value) - {"name", "schema"}
    ):
        return 'A response schema is {"name": ..., "schema": {a JSON schema}}, or null.'
    if "name" in value and not (
        isinstance(value["name"], str) and _SCHEMA_NAME.fullmatch(value["name"])
    ):
        return "A schema's name is 1 to 64 letters, digits, _ or -."
    if len(json.dumps(value["schema"])) > SCHEMA_MAX_CHARS:
        return f"A schema of at most {SCHEMA_MAX_CHARS:,} characters as JSON."
    return None


def response_schema(stored: Mapping[str, Any]) -> ResponseSchema:
    """The neutral request field of a stored ``response_schema``."""
    return ResponseSchema(schema=stored["schema"], name=stored.get("name") or "reply")
