"""Each rater held to the adjudicated answers: the ``adjudicated`` part of a scenario's
analytics (docs/analytics.md, "Adjudicated answers").

On the tasks that have an adjudicated answer, every valid judgment of a rater (each
evaluator, imported rater and judge; and the people together) is compared with it, read as
the review reads answers (the scenario type's ``answer_value``: whatever order it was shown
in); the type gives the figures (``held_to``). Comparisons and labels: ``accuracy`` (the
share of judgments that give the adjudicated answer) and Cohen's kappa between the judgments
and the adjudicated answers; ratings: the share of exact scores and the mean absolute error,
over every dimension and by dimension; rankings: the share of identical rankings and the
mean Kendall tau.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from evaluations.analytics.data import Reference, Row
from evaluations.judgments.models import RaterKind
from scenarios.types.base import ScenarioKind


def _figures(
    answers_of: ScenarioKind, rows: list[Row], references: Mapping[int, Reference], config: dict
) -> dict[str, Any]:
    """``n`` and ``tasks`` of the judgments held to an adjudicated answer, and the figures
    the scenario type gives of (judgment, adjudicated answer) pairs (``held_to``)."""
    held = [row for row in rows if row.task in references]
    pairs = []
    for row in held:
        ref = references[row.task]
        pairs.append(
            (
                answers_of.answer_value(row.payload, row.presented),
                answers_of.answer_value(ref.payload, ref.presented),
                ref.presented,
            )
        )
    return {"n": len(held), "tasks": len({row.task for row in held})} | answers_of.held_to(
        pairs, config
    )


def adjudicated(
    answers_of: ScenarioKind, rows: list[Row], references: Mapping[int, Reference], config: dict
) -> dict[str, Any]:
    """The ``adjudicated`` block: ``tasks`` (adjudicated), ``humans`` (the people's judgments
    together) and ``by_rater`` (each person, then each judge)."""
    raters: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        raters[row.rater].append(row)
    people = [row for row in rows if row.kind != RaterKind.JUDGE]

    def order(name: str) -> tuple[bool, str]:
        return raters[name][0].kind == RaterKind.JUDGE, name

    return {
        "tasks": len(references),
        "humans": _figures(answers_of, people, references, config),
        "by_rater": [
            {"rater": name, "kind": raters[name][0].kind}
            | _figures(answers_of, raters[name], references, config)
            for name in sorted(raters, key=order)
        ],
    }


def held_to(
    answers_of: ScenarioKind, rows: list[Row], references: Mapping[int, Reference], config: dict
) -> dict[str, Any]:
    """Some judgments (a judge card's) held to the adjudicated answers: ``n``, ``tasks``
    and the figures of ``by_rater``'s entries."""
    return _figures(answers_of, rows, references, config)
