"""Each rater held to the adjudicated answers: the ``adjudicated`` part of a scenario's
analytics (docs/analytics.md, "Adjudicated answers").

On the tasks that have an adjudicated answer, every valid judgment of a rater (each
evaluator, imported rater and judge; and the people together) is compared with it, read as
the review reads answers (``evaluations.review.answers.value``: whatever order it was shown
in). Comparisons and labels: ``accuracy`` (the share of judgments that give the adjudicated
answer) and Cohen's kappa between the judgments and the adjudicated answers; ratings: the
share of exact scores and the mean absolute error, over every dimension and by dimension;
rankings: the share of identical rankings and the mean Kendall tau.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from evaluations.analytics.data import Reference, Row
from evaluations.models import RaterKind
from evaluations.review import answers


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.7g}")


def cohen_kappa(pairs: list[tuple[Any, Any]]) -> float | None:
    """Cohen's kappa of (rater, reference) pairs of categories; None when chance agreement is
    certain (one category only) or there are no pairs."""
    if not pairs:
        return None
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[c] * second[c] for c in first) / (n * n)
    return None if expected >= 1 else (observed - expected) / (1 - expected)


def _category(analysis: str | None, found: Any, presented: list[int]) -> Any:
    """A comparison's winner as the pair's lower or higher variant id (or a tie), so that the
    categories mean the same in every task; anything else as it is."""
    if analysis == answers.PAIRWISE and found not in (None, "tie"):
        return "lower" if found == min(presented) else "higher"
    return found


def _figures(
    analysis: str | None, rows: list[Row], references: Mapping[int, Reference], config: dict
) -> dict[str, Any]:
    held = [row for row in rows if row.task in references]
    entry: dict[str, Any] = {
        "n": len(held),
        "tasks": len({row.task for row in held}),
    }
    if analysis in (answers.PAIRWISE, answers.LABELS):
        pairs = []
        for row in held:
            ref = references[row.task]
            mine = answers.value(analysis, row.payload, row.presented)
            theirs = answers.value(analysis, ref.payload, ref.presented)
            shown = ref.presented
            pairs.append((_category(analysis, mine, shown), _category(analysis, theirs, shown)))
        entry["accuracy"] = _round(sum(a == b for a, b in pairs) / len(pairs)) if pairs else None
        entry["cohen_kappa"] = _round(cohen_kappa(pairs))
    elif analysis == answers.RATINGS:
        by_dimension: dict[str, list[float]] = defaultdict(list)
        for row in held:
            ref = references[row.task]
            mine = answers.value(analysis, row.payload, row.presented) or {}
            theirs = answers.value(analysis, ref.payload, ref.presented) or {}
            for dim in config.get("dimensions", []):
                name = dim["name"]
                if mine.get(name) is not None and theirs.get(name) is not None:
                    by_dimension[name].append(float(mine[name]) - float(theirs[name]))
        every = [d for diffs in by_dimension.values() for d in diffs]

        def scored(diffs: list[float]) -> dict[str, Any]:
            return {
                "scores": len(diffs),
                "accuracy": _round(sum(d == 0 for d in diffs) / len(diffs)) if diffs else None,
                "mean_abs_error": _round(sum(abs(d) for d in diffs) / len(diffs))
                if diffs
                else None,
            }

        entry |= scored(every)
        entry["by_dimension"] = {name: scored(diffs) for name, diffs in by_dimension.items()}
    elif analysis == answers.RANKINGS:
        same, taus = [], []
        for row in held:
            ref = references[row.task]
            mine = answers.value(analysis, row.payload, row.presented)
            theirs = answers.value(analysis, ref.payload, ref.presented)
            if mine is None or theirs is None:
                continue
            same.append(mine == theirs)
            tau = answers.kendall_tau(mine, theirs)
            if tau is not None:
                taus.append(tau)
        entry["accuracy"] = _round(sum(same) / len(same)) if same else None
        entry["mean_kendall_tau"] = _round(sum(taus) / len(taus)) if taus else None
    return entry


def adjudicated(
    analysis: str | None, rows: list[Row], references: Mapping[int, Reference], config: dict
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
        "humans": _figures(analysis, people, references, config),
        "by_rater": [
            {"rater": name, "kind": raters[name][0].kind}
            | _figures(analysis, raters[name], references, config)
            for name in sorted(raters, key=order)
        ],
    }


def held_to(
    analysis: str | None, rows: list[Row], references: Mapping[int, Reference], config: dict
) -> dict[str, Any]:
    """Some judgments (a judge card's) held to the adjudicated answers: ``n``, ``tasks``
    and the figures of ``by_rater``'s entries."""
    return _figures(analysis, rows, references, config)
