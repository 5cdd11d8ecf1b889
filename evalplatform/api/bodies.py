"""OpenAPI schemas of the request bodies that no declared input (``evalplatform.inputs``)
describes yet: their numeric fields with the bounds of ``evalplatform.validation``, so
``/api/schema/`` documents every number the API takes with its ``minimum`` and ``maximum``
(``tests/core/test_numeric_bounds.py`` walks them). Other keys stay free
(``additionalProperties``): the services name what they refuse. ``request`` also takes a
use case's ``Input`` (jobs, judges, plan requests, scenarios, judge-file batches).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from rest_framework.serializers import Serializer

from evalplatform import validation

# The other bodies the views with uploads or forms take (a ``config`` field beside a
# ``file``, or form fields): documented as free objects.
FORMS = ("multipart/form-data", "application/x-www-form-urlencoded")


def whole(lo: int, hi: int, description: str, *, nullable: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "integer",
        "minimum": lo,
        "maximum": hi,
        "description": description,
    }
    if nullable:
        schema["nullable"] = True
    return schema


def number(lo: float, hi: float, description: str) -> dict[str, Any]:
    return {"type": "number", "minimum": lo, "maximum": hi, "description": description}


def body(**properties: dict[str, Any]) -> dict[str, Any]:
    """A JSON object documenting ``properties``; other keys are the service's to judge."""
    return {"type": "object", "properties": properties, "additionalProperties": {}}


def request(schema: dict[str, Any] | type[Serializer], *others: str) -> dict[str, Any]:
    """``extend_schema(request=...)``: ``schema`` (or a use case's declared input,
    ``evalplatform.inputs.Input``) for a JSON body, free objects for the ``others`` media
    types."""
    return {"application/json": schema, **dict.fromkeys(others, OpenApiTypes.OBJECT)}


BUDGET_USD = {
    "type": "number",
    "minimum": float(validation.USD_MIN),
    "maximum": float(validation.USD_MAX),
    "nullable": True,
    "description": "A budget in USD, 4 decimals at most (a number or a decimal string); "
    "null for none.",
}
MAX_TOKENS = whole(
    1, validation.MAX_TOKENS, "A reply's token limit; null: the model's.", nullable=True
)
TEMPERATURES = {
    "type": "array",
    "items": number(validation.TEMPERATURE_MIN, validation.TEMPERATURE_MAX, "A temperature."),
    "description": "Distinct temperatures from 0 to 2 (a job's may hold null: none sent).",
}
MAX_RETRIES = whole(0, 10, "Retries of a failed call.")
CONCURRENCY = whole(1, 256, "Calls at once.")
SEED = whole(0, validation.SEED_MAX, "Seeds the pair design and the orders.")
TIME_SPENT_MS = whole(
    0, validation.TIME_SPENT_MAX_MS, "Milliseconds spent on the task.", nullable=True
)
QUOTA = whole(1, validation.QUOTA_MAX, "Most tasks per evaluator; null: no limit.", nullable=True)

JUDGE_RUN = request(body(budget_usd=BUDGET_USD, max_retries=MAX_RETRIES, concurrency=CONCURRENCY))
ANSWER = request(body(time_spent_ms=TIME_SPENT_MS), *FORMS)
REGENERATE = request(body(seed=SEED), *FORMS)
ASSIGNEES = request(
    body(
        default_quota=QUOTA,
        assignees={
            "type": "array",
            "items": body(quota=QUOTA),
            "description": "Who evaluates: {user, quota}.",
        },
    )
)
GOLD = request(
    {
        "oneOf": [
            body(gold_rate=number(0.0, 0.5, "The share of gold tasks mixed in.")),
            {"type": "array", "items": {"type": "object"}, "description": "The gold tasks."},
        ]
    },
    "multipart/form-data",
)


def _share(description: str) -> dict[str, Any]:
    return number(0.0, 1.0, description) | {"nullable": True}


TRUST_GATE = request(
    body(
        min_kappa=number(-1.0, 1.0, "Least Cohen's kappa with people; null: not checked.")
        | {"nullable": True},
        min_shared_items=whole(
            0, validation.SHARED_ITEMS_MAX, "Least items judged by the judge and by people."
        ),
        max_flip_rate=_share("Most position-swap flips (a share); null: not checked."),
        max_parse_failure_rate=_share("Most unparseable replies (a share); null: not checked."),
        min_self_consistency=_share("Least identical repeated calls (a share); null: not checked."),
        min_adjudicated_accuracy=_share(
            "Least accuracy on adjudicated answers (a share); null: not checked."
        ),
    )
)
