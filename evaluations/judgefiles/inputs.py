"""The declared input of a judge-file batch (``BatchInput``): the body of OpenAI's
``POST /v1/batches`` with the platform's own keys (``budget_usd``, ``live``, ``judge``), as
the API and the batches page give it, checked without the database. ``services.batch_create``
reads a request with it, then looks up the team's file and judge. The keys and messages are
the API's (and OpenAI's SDK sends them).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from evalplatform import inputs, validation

ENDPOINT = "/v1/chat/completions"
WINDOWS = {"24h": timedelta(hours=24)}
METADATA_PAIRS, METADATA_KEY, METADATA_VALUE = 16, 64, 512


def _endpoint(raw: Any) -> Any:
    if raw != ENDPOINT:
        raise inputs.Invalid(f"Only {ENDPOINT}.")
    return raw


def _window(raw: Any) -> Any:
    if not isinstance(raw, str) or raw not in WINDOWS:
        raise inputs.Invalid("Only 24h.")
    return raw


def _metadata(raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if (
        not isinstance(raw, dict)
        or len(raw) > METADATA_PAIRS
        or not all(
            isinstance(k, str)
            and isinstance(v, str)
            and len(k) <= METADATA_KEY
            and len(v) <= METADATA_VALUE
            for k, v in raw.items()
        )
        or any("\x00" in k or "\x00" in v for k, v in raw.items())
    ):
        raise inputs.Invalid(
            f"At most {METADATA_PAIRS} pairs of text: keys up to {METADATA_KEY} characters, "
            f"values up to {METADATA_VALUE}."
        )
    return dict(raw)


def _judge(raw: Any) -> Any:
    if raw is not None and not validation.is_id(raw):
        raise inputs.Invalid("The id of an LLM judge of one of the team's scenarios.")
    return raw


class BatchInput(inputs.Input):
    """A batch's request (checked in this order, so the errors are listed in it)."""

    # One of the team's files: looked up by the service.
    input_file_id = inputs.Given(
        openapi={"type": "string", "description": "A batch input file, or an error file."},
    )
    endpoint = inputs.Rule(_endpoint, openapi={"type": "string", "enum": [ENDPOINT]})
    completion_window = inputs.Rule(
        _window, missing="24h", fallback="24h", openapi={"type": "string", "enum": list(WINDOWS)}
    )
    metadata = inputs.Rule(
        _metadata,
        fallback={},
        openapi={
            "type": "object",
            "additionalProperties": {"type": "string", "maxLength": METADATA_VALUE},
            "maxProperties": METADATA_PAIRS,
            "nullable": True,
        },
    )
    budget_usd = inputs.Usd(help_text="Stop spending at this many USD; null: no budget.")
    live = inputs.Flag(help_text="Send the rows live, not through the provider's batch API.")
    judge = inputs.Rule(
        _judge,
        openapi=inputs.ID_SCHEMA
        | {
            "nullable": True,
            "description": "An LLM judge whose scenario the rows' tasks belong to.",
        },
    )
