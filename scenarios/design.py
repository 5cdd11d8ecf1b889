"""Checking a scenario's configuration, and its task design: pure, seeded functions.

Comparison design (``seeds/pairwise-batch-workflows.md``): pairs within each item or across
the whole variant set; all pairs or a sample (a count or a share); each pair's presentation
order drawn at random; a share of pairs also asked in reverse order. The same seed gives the
same tasks in the same order.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scenarios.models import ScenarioType

MAX_DIMENSIONS = 20
MAX_LABELS = 100
MAX_SCALE_STEPS = 100


def _bool(config: Mapping[str, Any], key: str, default: bool, errors: dict[str, str]) -> bool:
    value = config.get(key, default)
    if not isinstance(value, bool):
        errors[f"config.{key}"] = "true or false."
        return default
    return value


def _share(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def check_config(kind: str, config: Any) -> dict[str, Any]:
    """The configuration for a scenario type, normalized; ``FieldErrors`` names what is wrong."""
    from evalplatform.errors import FieldErrors

    if not isinstance(config, dict):
        raise FieldErrors({"config": "The configuration is an object."})
    errors: dict[str, str] = {}
    clean: dict[str, Any] = {}
    if kind == ScenarioType.RATING:
        dimensions = config.get("dimensions")
        if not isinstance(dimensions, list) or not 1 <= len(dimensions) <= MAX_DIMENSIONS:
            raise FieldErrors(
                {"config.dimensions": f"A list of 1 to {MAX_DIMENSIONS} rubric dimensions."}
            )
        names: set[str] = set()
        clean["dimensions"] = []
        for index, dim in enumerate(dimensions):
            where = f"config.dimensions[{index}]"
            if not isinstance(dim, dict):
                errors[where] = "A dimension is an object {name, description, min, max, anchors}."
                continue
            name = str(dim.get("name") or "").strip()
            low, high = dim.get("min", 1), dim.get("max", 5)
            if not name or len(name) > 100:
                errors[f"{where}.name"] = "A name of at most 100 characters."
            elif name in names:
                errors[f"{where}.name"] = "Each dimension once."
            names.add(name)
            if (
                not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high))
                or not low < high
                or high - low > MAX_SCALE_STEPS
            ):
                errors[f"{where}.scale"] = (
                    f"Whole numbers min < max, at most {MAX_SCALE_STEPS} steps apart."
                )
                continue
            anchors = dim.get("anchors") or {}
            if not isinstance(anchors, dict) or not all(
                str(k).lstrip("-").isdigit() and low <= int(k) <= high and isinstance(v, str)
                for k, v in anchors.items()
            ):
                errors[f"{where}.anchors"] = 'Labels for scale points: {"1": "poor", ...}.'
                anchors = {}
            clean["dimensions"].append(
                {
                    "name": name,
                    "description": str(dim.get("description") or ""),
                    "min": low,
                    "max": high,
                    "anchors": {str(int(k)): v for k, v in anchors.items()},
                    "justification": bool(dim.get("justification", False)),
                }
            )
    elif kind == ScenarioType.LABELING:
        labels = config.get("labels")
        if (
            not isinstance(labels, list)
            or not 2 <= len(labels) <= MAX_LABELS
            or not all(isinstance(label, str) and label.strip() for label in labels)
        ):
            raise FieldErrors({"config.labels": f"A list of 2 to {MAX_LABELS} label names."})
        labels = [label.strip() for label in labels]
        if len(set(labels)) != len(labels):
            errors["config.labels"] = "Each label once."
        clean = {
            "labels": labels,
            "multiple": _bool(config, "multiple", False, errors),
            "free_text": _bool(config, "free_text", False, errors),
        }
    elif kind == ScenarioType.COMPARISON:
        pairing = config.get("pairing", "within_item")
        if pairing not in ("within_item", "across"):
            errors["config.pairing"] = "within_item or across."
        count = config.get("sample_count")
        share = config.get("sample_share")
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or count < 1
        ):
            errors["config.sample_count"] = "A number of pairs, at least 1."
        if share is not None and (_share(share) is None or not 0 < float(share) <= 1):
            errors["config.sample_share"] = "A share of all pairs, above 0 and at most 1."
        if count is not None and share is not None:
            errors["config.sample_count"] = "Give sample_count or sample_share, not both."
        reverse = config.get("reverse_share", 0)
        if _share(reverse) is None or not 0 <= float(reverse) <= 1:
            errors["config.reverse_share"] = "A share from 0 to 1 of pairs also asked reversed."
            reverse = 0
        clean = {
            "pairing": pairing,
            "sample_count": count,
            "sample_share": share,
            "reverse_share": float(reverse),
            "ties": _bool(config, "ties", True, errors),
        }
    elif kind == ScenarioType.RANKING:
        clean = {}
    if errors:
        raise FieldErrors(errors)
    return clean


@dataclass(frozen=True)
class TaskSpec:
    """One task of the design, by variant keys: ``a`` (and ``b`` for a pair, shown second),
    or ``order`` for a ranking; ``reverse_of`` is the index of the pair it mirrors."""

    item: Any | None
    a: Any | None = None
    b: Any | None = None
    order: tuple[Any, ...] = ()
    reverse_of: int | None = None


def design(
    kind: str,
    items: Sequence[tuple[Any, Sequence[Any]]],
    config: Mapping[str, Any],
    seed: int,
) -> list[TaskSpec]:
    """The tasks of a scenario from its items' variant keys, in presentation order."""
    rng = random.Random(seed)  # noqa: S311 (a reproducible design, not a secret)
    if kind in (ScenarioType.RATING, ScenarioType.LABELING):
        tasks = [TaskSpec(item, a=v) for item, variants in items for v in variants]
        rng.shuffle(tasks)
        return tasks
    if kind == ScenarioType.RANKING:
        tasks = []
        for item, variants in items:
            order = list(variants)
            rng.shuffle(order)
            tasks.append(TaskSpec(item, order=tuple(order)))
        rng.shuffle(tasks)
        return tasks
    return comparison_design(items, config, rng)


def comparison_design(
    items: Sequence[tuple[Any, Sequence[Any]]],
    config: Mapping[str, Any],
    rng: random.Random,
) -> list[TaskSpec]:
    if config.get("pairing", "within_item") == "across":
        everything = [v for _, variants in items for v in variants]
        pairs = [(None, a, b) for a, b in itertools.combinations(everything, 2)]
    else:
        pairs = [
            (item, a, b) for item, variants in items for a, b in itertools.combinations(variants, 2)
        ]
    wanted = len(pairs)
    if config.get("sample_count") is not None:
        wanted = min(len(pairs), int(config["sample_count"]))
    elif config.get("sample_share") is not None:
        wanted = max(1, round(len(pairs) * float(config["sample_share"])))
    if wanted < len(pairs):
        keep = sorted(rng.sample(range(len(pairs)), wanted))
        pairs = [pairs[i] for i in keep]
    tasks = [
        TaskSpec(item, a=a, b=b) if rng.random() < 0.5 else TaskSpec(item, a=b, b=a)
        for item, a, b in pairs
    ]
    reverse_count = round(len(tasks) * float(config.get("reverse_share") or 0))
    for index in sorted(rng.sample(range(len(tasks)), reverse_count)):
        pair = tasks[index]
        tasks.append(TaskSpec(pair.item, a=pair.b, b=pair.a, reverse_of=index))
    # Shuffle the presentation, keeping each reverse pair's link to its original.
    order = list(range(len(tasks)))
    rng.shuffle(order)
    position = {old: new for new, old in enumerate(order)}
    return [
        TaskSpec(
            t.item,
            a=t.a,
            b=t.b,
            reverse_of=position[t.reverse_of] if t.reverse_of is not None else None,
        )
        for t in (tasks[old] for old in order)
    ]
