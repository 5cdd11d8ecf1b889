"""The analysis of labeling (``LabelsAnalysis``): the labels' counts, overall and by
model; agreement on the label set of a task, and on each label.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from evaluations.analytics.agreement import task_name, unit_values, versus
from evaluations.analytics.common import Analysis
from evaluations.analytics.data import Row
from scenarios.models import Variant


def labels(rows: list[Row], variants: dict[int, Variant]) -> dict[str, Any]:
    """How often each label was given, overall (most given first) and by model."""
    overall: Counter[str] = Counter()
    by_model: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        for label in row.payload.get("labels") or []:
            overall[label] += 1
            by_model[variants[row.presented[0]].model_label or "(none)"][label] += 1
    return {
        "overall": dict(overall.most_common()),
        "by_model": {model: dict(c) for model, c in sorted(by_model.items())},
    }


class LabelsAnalysis(Analysis):
    """Labels: their counts, overall and by model; agreement on the label set of a task,
    and on each label."""

    label_sets = True

    def results(
        self, rows: list[Row], variants: dict[int, Variant], config: dict, options: dict
    ) -> dict[str, Any]:
        return {"labels": labels(rows, variants)}

    def unit_value(
        self, row: Row, dimension: str | None, names: Mapping[int, str]
    ) -> tuple[Any, Any] | None:
        return task_name(row, names), tuple(sorted(row.payload.get("labels") or []))

    def judge_figures(
        self, subset: list[Row], people: list[Row], config: dict, options: dict
    ) -> dict[str, Any]:
        against = versus(
            unit_values(people, self), unit_values(subset, self), scored=False, per_verdict=True
        )
        return {"agreement_with_human_majority": against["agreement_with_human_majority"]}
