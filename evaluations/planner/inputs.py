"""The declared input of a budget plan's request (``PlanInput``): the question, the budget
and the raters, as the API's body and the plan page's form give them, checked without the
scenario. ``services.check_request`` reads a request with it (the context's ``entities``,
the scenario's models, bound ``k``), then checks what needs the scenario: the pair's models,
the top k's size, the raters among the scenario's judges, a budget of some kind. The keys
and messages are the API's.
"""

from __future__ import annotations

from typing import Any

from evalplatform import inputs
from evaluations.planner import design

MAX_ENTITIES = 100
MAX_TASKS = 500
BUDGET_USD_MAX = 1_000_000.0
BUDGET_HOURS_MAX = 100_000.0
HOURLY_RATE_MAX = 10_000.0
SECONDS_MAX = 86_400.0
WIDTH_MIN, WIDTH_MAX = 0.01, 100.0
TAU_MIN, TAU_MAX = 0.5, 0.99


def _top(context: Any) -> int:
    """The largest k: one less than the scenario's models."""
    return max(1, len(context["entities"]) - 1)


class PlanInput(inputs.Input):
    """A proposal's request. Every number is checked whatever the question (one that does
    not use it included); ``a``, ``b`` and ``raters`` against the scenario's models and
    judges, by the service."""

    question = inputs.OneOf(design.QUESTIONS, label="Question", message="pair, top_k or ranking.")
    k = inputs.Whole(
        1, _top, most=MAX_ENTITIES - 1, label="k", help_text="top_k: how many at the top."
    )
    tau = inputs.Number(
        TAU_MIN, TAU_MAX, default=0.9, label="τ", help_text="ranking: the Kendall tau wanted."
    )
    a = inputs.Given(
        label="a",
        openapi={"type": "string", "description": "pair: one model (by name)."},
    )
    b = inputs.Given(
        label="b",
        openapi={"type": "string", "description": "pair: the other model."},
    )
    budget_usd = inputs.Number(
        0.0, BUDGET_USD_MAX, default=0.0, label="Money (USD)", help_text="Money to spend."
    )
    budget_hours = inputs.Number(
        0.0, BUDGET_HOURS_MAX, default=0.0, label="People's hours", help_text="People's hours."
    )
    hourly_rate_usd = inputs.Number(
        0.0, HOURLY_RATE_MAX, default=0.0, label="Hourly rate (USD)", help_text="People's pay."
    )
    seconds_per_judgment = inputs.Number(
        1.0, SECONDS_MAX, help_text="People's time per judgment (default: the median)."
    )
    target_width = inputs.Number(
        WIDTH_MIN, WIDTH_MAX, help_text="Stop once the interval is this wide."
    )
    max_tasks = inputs.Whole(
        1, MAX_TASKS, default=MAX_TASKS, help_text="The most tasks to propose."
    )
    raters = inputs.Given(
        label="Raters",
        openapi={
            "type": "array",
            "items": {"type": "string"},
            "description": "human, judge:<id>; default all.",
        },
    )
