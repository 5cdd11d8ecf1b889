"""Importing judgments collected elsewhere into a scenario, so its analyses cover them.

CSV (with a header) or JSON lines, read row by row by the scenario's type (``scenarios.types``,
those with ``import_columns``). Comparison scenarios: ``item_id, variant_a, variant_b,
winner, rater`` (``winner`` is A, B or tie: the variant shown first or second). Rating
scenarios: ``item_id, variant, rater, dimension, score`` (one row a score; the rows of one
rater and variant make one judgment). Variants are named by their ``variant_id`` within the
item. A pair or variant without a task gets one. Raters that are not the team's users become
external raters. Every bad row is reported by line, and nothing is imported unless all rows
are valid. Imported judgments take no evaluator places (they are outside assignment).
"""

from __future__ import annotations

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
from scenarios.models import Scenario, Task, Variant
from scenarios.types import registry
from scenarios.types.base import ImportedRow


def _line(fmt: str, index: int) -> str:
    return f"line {index + 1}" if fmt == "csv" else f"line {index}"


def import_judgments(*, user: Any, scenario: Scenario, raw: bytes, filename: str = "") -> int:
    """Import every row or none; returns the number of judgments created."""
    if not policy.may(user, SCENARIOS_MANAGE, scenario):
        raise Forbidden()
    kind = registry.of(scenario)
    if not kind.importable:
        # Alphabetical: "comparison and rating".
        importable = sorted(k.value for k in registry.every() if k.importable)
        names = registry.listed(importable, "and")
        raise FieldErrors({"scenario": f"Judgments can be imported into {names} scenarios."})
    fmt = sources.detect_format(filename, "")
    if fmt not in ("csv", "jsonl"):
        raise FieldErrors({"file": "CSV with a header, or JSON lines."})
    rows = sources.parse_upload(raw, fmt)
    variants = {
        (v.item.item_id, v.variant_id): v
        for v in Variant.objects.filter(scenario=scenario).select_related("item")
    }
    errors: dict[str, str] = {}
    # Each judgment, by rater and the variants in the order shown (several rows may make one).
    judgments: dict[tuple[str, tuple[Any, ...]], ImportedRow] = {}
    for index, (_, row) in enumerate(rows, 1):
        where = _line(fmt, index)
        item = str(row.get("item_id") or "").strip()
        rater = str(row.get("rater") or "").strip()
        problems = [] if rater else ["rater is missing"]
        read = kind.read_import_row(
            row, item=item, variants=variants, config=scenario.config, problems=problems
        )
        if read is not None:
            key = (rater, tuple(v.pk for v in read.presented))
            if key not in judgments:
                judgments[key] = read
            elif problem := kind.merge_imported(
                rater=rater, earlier=judgments[key].answer, later=read.answer
            ):
                problems.append(problem)
        if problems:
            errors[where] = "; ".join(problems) + "."
            if len(errors) >= sources.MAX_ERRORS:
                break
    if not errors and not rows:
        errors["file"] = "The file has no rows."
    if errors:
        raise FieldErrors(errors)
    return _write(scenario, judgments)


def _task_key(read: ImportedRow) -> tuple[int, int | None]:
    """The task an imported judgment answers: its pair, or its one variant."""
    first, *others = read.presented
    return first.pk, others[0].pk if others else None


def _write(scenario: Scenario, judgments: dict[tuple[str, tuple[Any, ...]], ImportedRow]) -> int:
    names = {rater for rater, _ in judgments}
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
        # A pair or variant without a task gets one, in the order they first appear.
        missing: dict[tuple[int, int | None], scenario_services.NewTask] = {}
        for read in judgments.values():
            key = _task_key(read)
            if key not in found and key not in missing:
                missing[key] = scenario_services.NewTask(
                    item_id=read.presented[0].item_id, variant_a_id=key[0], variant_b_id=key[1]
                )
        made_tasks = scenario_services.tasks_add(scenario=scenario, tasks=list(missing.values()))
        found.update(zip(missing, made_tasks, strict=True))

        def rater_fields(name: str) -> dict[str, Any]:
            if name in users:
                return {"rater_kind": RaterKind.HUMAN, "evaluator": users[name]}
            return {"rater_kind": RaterKind.EXTERNAL, "external_rater": externals[name]}

        made = [
            Judgment(
                scenario=scenario,
                task=found[_task_key(read)],
                presented=[v.pk for v in read.presented],
                payload=read.answer,
                **rater_fields(name),
            )
            for (name, _), read in judgments.items()
        ]
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
