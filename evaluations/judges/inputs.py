"""The declared input of a judge (``JudgeInput``): its settings as the API's body, the judge
form's fields and the demo's configurations give them, checked without the database.
``services.judge_create`` and ``judge_update`` read a request with it (on an update, a key
left out keeps the judge's own value), then check what needs the scenario, the team's
prompt versions and models, and the fields together. The keys and messages are the API's.
"""

from __future__ import annotations

from typing import Any

from evalplatform import inputs, validation
from generation.job_input import reserved_params
from generation.models import JobMode

MAX_REPETITIONS = validation.JUDGE_REPETITIONS_MAX
NAME_MESSAGE = "A judge needs a name of at most 200 characters."


def _name(raw: Any) -> str:
    text = str(raw or "").strip()
    if not text or len(text) > 200:
        raise inputs.Invalid(NAME_MESSAGE)
    return text


def _id(message: str, *, required: bool) -> Any:
    """An id (an integer, not a boolean); null is none, unless ``required``."""

    def rule(raw: Any) -> int | None:
        if raw is None and not required:
            return None
        if not validation.is_id(raw):
            raise inputs.Invalid(message)
        return raw

    return rule


def _params(raw: Any) -> Any:
    """Provider parameters (e.g. thinking settings), none of those a run sets itself."""
    if not isinstance(raw, dict):
        raise inputs.Invalid("Parameters are an object (e.g. thinking settings).")
    if reserved := reserved_params(raw):
        raise inputs.Invalid(
            f"{', '.join(reserved)} are set by the judge's runs (model, prompt, max_tokens, "
            "temperature, one reply), not by parameters."
        )
    return raw


def _reply_format(raw: Any) -> Any:
    """How replies are read: checked against the scenario's dimensions by the service."""
    return raw or {}


class JudgeInput(inputs.Input):
    """A judge's settings (checked in this order, so the errors are listed in it)."""

    name = inputs.Rule(_name, fallback="", openapi={"type": "string", "maxLength": 200})
    prompt_version = inputs.Rule(
        _id("Unknown prompt version in this team.", required=False),
        source="prompt_version_id",
        label="Judge prompt",
        openapi=inputs.ID_SCHEMA
        | {
            "nullable": True,
            "description": "A prompt version's id; null: the team's default judge prompt.",
        },
    )
    model = inputs.Rule(
        _id("Unknown or inactive model in this team.", required=True),
        source="llm_model_id",
        openapi=inputs.ID_SCHEMA | {"description": "An active model's id."},
    )
    params = inputs.Rule(
        _params,
        missing={},
        fallback={},
        openapi={
            "type": "object",
            "additionalProperties": {},
            "description": "Provider parameters (e.g. thinking settings).",
        },
    )
    temperatures = inputs.Temperatures(
        default=[0.0],
        allow_none=True,
        help_text="Distinct, each from 0 to 2; null: none sent (the provider's default).",
    )
    repetitions = inputs.Whole(
        1,
        MAX_REPETITIONS,
        default=1,
        message=f"Calls per task and temperature: 1 to {MAX_REPETITIONS}.",
        help_text="Calls per task and temperature.",
    )
    swap = inputs.Flag(
        strict=True, label="Position swap", help_text="Also ask each task in the reverse order."
    )
    mode = inputs.OneOf(JobMode.choices, message="live or batch.", missing=JobMode.LIVE)
    # The same bounds as the generation job each run becomes.
    max_tokens = inputs.Whole(
        1, validation.MAX_TOKENS, help_text="A reply's token limit; null: the model's."
    )
    budget_usd = inputs.Usd(
        label="Budget (US$)", help_text="A budget in USD per run; null for none."
    )
    reply_format = inputs.Rule(
        _reply_format,
        fallback={},
        openapi={
            "type": "object",
            "additionalProperties": {},
            "description": "How replies are read (docs/judges.md).",
        },
    )
