"""Importing judgments collected elsewhere into a scenario, so its analyses cover them.

CSV (with a header) or JSON lines. Comparison scenarios: ``item_id, variant_a, variant_b,
winner, rater`` (``winner`` is A, B or tie: the variant shown first or second). Rating
scenarios: ``item_id, variant, rater, dimension, score`` (one row a score; the rows of one
rater and variant make one judgment). Variants are named by their ``variant_id`` within the
item. A pair or variant without a task gets one. Raters that are not the team's users become
external raters. Every bad row is reported by line, and nothing is imported unless all rows
are valid. Imported judgments take no evaluator places (they are outside assignment).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from evalplatform.accounts import policy
from evalplatform.accounts.models import Membership
from evalplatform.accounts.roles import SCENARIOS_MANAGE
from evalplatform.errors import FieldErrors, Forbidden
from evaluations.models import ExternalRater, Judgment, RaterKind
from generation import sources
from scenarios import services as scenario_services
from scenarios.models import Scenario, ScenarioType, Task, Variant


def _line(fmt: str, index: int) -> str:
    return f"line {index + 1}" if fmt == "csv" else f"line {index}"


def import_judgments(*, user: Any, scenario: Scenario, raw: bytes, filename: str = "") -> int:
    """Import every row or none; returns the number of judgments created."""
    if not policy.may(user, SCENARIOS_MANAGE, scenario):
        raise Forbidden()
    if scenario.type not in (ScenarioType.COMPARISON, ScenarioType.RATING):
        raise FieldErrors(
            {"scenario": "Judgments can be imported into comparison and rating scenarios."}
        )
    fmt = sources.detect_format(filename, "")
    if fmt not in ("csv", "jsonl"):
        raise FieldErrors({"file": "CSV with a header, or JSON lines."})
    rows = sources.parse_upload(raw, fmt)
    variants = {
        (v.item.item_id, v.variant_id): v
        for v in Variant.objects.filter(scenario=scenario).select_related("item")
    }
    errors: dict[str, str] = {}
    comparisons: list[tuple[str, Variant, Variant, str]] = []
    scores: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
    dims = {d["name"]: d for d in scenario.config.get("dimensions", [])}
    seen: set[tuple[str, int, int]] = set()
    for index, (_, row) in enumerate(rows, 1):
        where = _line(fmt, index)
        item = str(row.get("item_id") or "").strip()
        rater = str(row.get("rater") or "").strip()
        problems = [] if rater else ["rater is missing"]
        if scenario.type == ScenarioType.COMPARISON:
            a = variants.get((item, str(row.get("variant_a") or "").strip()))
            b = variants.get((item, str(row.get("variant_b") or "").strip()))
            winner = str(row.get("winner") or "").strip()
            if a is None or b is None:
                problems.append(f"item {item!r} has no such variant_a / variant_b")
            elif a == b:
                problems.append("variant_a and variant_b are the same")
            if winner not in ("A", "B", "tie"):
                problems.append("winner is A, B or tie")
            elif winner == "tie" and not scenario.config.get("ties", True):
                problems.append("this scenario allows no ties")
            if not problems and a is not None and b is not None:
                if (rater, a.pk, b.pk) in seen:
                    problems.append(f"{rater} judged this pair in this order twice")
                seen.add((rater, a.pk, b.pk))
                comparisons.append((rater, a, b, winner))
        else:
            v = variants.get((item, str(row.get("variant") or "").strip()))
            dimension = str(row.get("dimension") or "").strip()
            raw_score = row.get("score")
            try:
                score = int(str(raw_score).strip())
            except (TypeError, ValueError):
                score = None
            if v is None:
                problems.append(f"item {item!r} has no such variant")
            if dimension not in dims:
                problems.append(f"unknown dimension {dimension!r}")
            elif score is None or not dims[dimension]["min"] <= score <= dims[dimension]["max"]:
                d = dims[dimension]
                problems.append(f"score is a whole number from {d['min']} to {d['max']}")
            if not problems and v is not None and score is not None:
                given = scores[(rater, v.pk)]
                if dimension in given:
                    problems.append(f"{rater} scored {dimension} of this variant twice")
                given[dimension] = score
        if problems:
            errors[where] = "; ".join(problems) + "."
            if len(errors) >= sources.MAX_ERRORS:
                break
    if not errors and not rows:
        errors["file"] = "The file has no rows."
    if errors:
        raise FieldErrors(errors)
    return _write(scenario, comparisons, scores)


def _write(
    scenario: Scenario,
    comparisons: list[tuple[str, Variant, Variant, str]],
    scores: dict[tuple[str, int], dict[str, int]],
) -> int:
    names = {r for r, *_ in comparisons} | {r for r, _ in scores}
    members = set(
        Membership.objects.filter(team=scenario.team).values_list("user__username", flat=True)
    )
    users = {
        u.get_username(): u for u in get_user_model().objects.filter(username__in=names & members)
    }
    with transaction.atomic():
        externals = {
            name: ExternalRater.objects.get_or_create(team=scenario.team, name=name)[0]
            for name in names - set(users)
        }
        found: dict[tuple[Any, Any], Task] = {}
        for t in Task.objects.filter(scenario=scenario):
            if t.variant_b_id:
                found[(t.variant_a_id, t.variant_b_id)] = t
            elif t.variant_a_id:
                found[(t.variant_a_id, None)] = t
        scored = Variant.objects.select_related("item").in_bulk([pk for _, pk in scores])
        shown = [(a, b) for _, a, b, _ in comparisons] + [(scored[pk], None) for _, pk in scores]
        # A pair or variant without a task gets one, in the order they first appear.
        missing: dict[tuple[int, int | None], scenario_services.NewTask] = {}
        for a, b in shown:
            key = (a.pk, b.pk if b else None)
            if key not in found and key not in missing:
                missing[key] = scenario_services.NewTask(
                    item_id=a.item_id, variant_a_id=a.pk, variant_b_id=key[1]
                )
        made_tasks = scenario_services.tasks_add(scenario=scenario, tasks=list(missing.values()))
        found.update(zip(missing, made_tasks, strict=True))

        def task_for(a: Variant, b: Variant | None) -> Task:
            return found[(a.pk, b.pk if b else None)]

        def rater_fields(name: str) -> dict[str, Any]:
            if name in users:
                return {"rater_kind": RaterKind.HUMAN, "evaluator": users[name]}
            return {"rater_kind": RaterKind.EXTERNAL, "external_rater": externals[name]}

        made = []
        for name, a, b, winner in comparisons:
            made.append(
                Judgment(
                    scenario=scenario,
                    task=task_for(a, b),
                    presented=[a.pk, b.pk],
                    payload={"winner": winner},
                    **rater_fields(name),
                )
            )
        for (name, variant_pk), given in scores.items():
            variant = scored[variant_pk]
            made.append(
                Judgment(
                    scenario=scenario,
                    task=task_for(variant, None),
                    presented=[variant.pk],
                    payload={"scores": given, "justifications": {}},
                    **rater_fields(name),
                )
            )
        answered = set(
            Judgment.objects.filter(scenario=scenario, evaluator__isnull=False).values_list(
                "task_id", "evaluator_id"
            )
        )
        for judgment in made:
            if judgment.evaluator_id is None:
                continue
            key = (judgment.task_id, judgment.evaluator_id)
            if key in answered:
                raise FieldErrors(
                    {"file": f"{judgment.evaluator} has judged task {judgment.task_id} already."}
                )
            answered.add(key)
        Judgment.objects.bulk_create(made, batch_size=2000)
    return len(made)
