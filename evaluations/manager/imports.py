"""Importing judgments collected elsewhere into a scenario, so its analyses cover them.

CSV (with a header) or JSON lines, read row by row by the scenario's type (``scenarios.types``,
those with ``import_columns``), in the columns of its CSV export. Comparison scenarios:
``item_id, variant_a, variant_b, winner, rater`` (``winner`` is A, B or tie: the variant shown
first or second). Rating scenarios: ``item_id, variant, rater, dimension, score`` (one row a
score; the rows of one rater and variant make one judgment). Labeling scenarios: ``item_id,
variant, rater, labels, text`` (one row a judgment, the labels joined by ``|``). Ranking
scenarios: ``item_id, rater, variant, rank`` (one row a place; the rows of one rater and item
make one ranking, of every variant of the item once). Variants are named by their
``variant_id`` within the item. A pair, variant or ranked item without a task gets one.
Raters that are not the team's users become external raters. Every bad row is reported by
line, and nothing is imported unless all rows are valid. Imported judgments take no evaluator
places (they are outside assignment).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from evalplatform import bulk
from evalplatform.accounts import policy
from evalplatform.accounts.models import Membership
from evalplatform.accounts.roles import SCENARIOS_MANAGE
from evalplatform.errors import FieldErrors, Forbidden
from evaluations.judgments.models import Judgment, RaterKind
from evaluations.manager.models import ExternalRater
from generation import sources
from scenarios import services as scenario_services
from scenarios.models import GoldKind, Scenario, Task, Variant
from scenarios.types import registry
from scenarios.types.base import ImportedRow, ScenarioKind, TaskSpec


def _line(fmt: str, index: int) -> str:
    return f"line {index + 1}" if fmt == "csv" else f"line {index}"


def holds_nul(value: Any) -> bool:
    """Whether a row's value (text, or JSON's lists and objects) holds a NUL character,
    which PostgreSQL's text and JSON columns refuse."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(holds_nul(k) or holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_nul(v) for v in value)
    return False


# Rows written per transaction (each commits in a fraction of a second).
CHUNK = 5000

# Each judgment read: by rater and the variants it was shown (several rows may make one).
Read = dict[tuple[str, tuple[Any, ...]], ImportedRow]


def import_judgments(
    *, user: Any, scenario: Scenario, raw: sources.Upload, filename: str = ""
) -> int:
    """Import every row or none; returns the number of judgments created."""
    if not policy.may(user, SCENARIOS_MANAGE, scenario):
        raise Forbidden()
    kind = _importable_kind(scenario)
    fmt = sources.detect_format(filename, "")
    if fmt not in ("csv", "jsonl"):
        raise FieldErrors({"file": "CSV with a header, or JSON lines."})
    cap = settings.JUDGMENT_IMPORT_MAX_ROWS
    try:
        rows = sources.parse_upload(
            raw, fmt, most=cap, why=" (JUDGMENT_IMPORT_MAX_ROWS): split the file", noun="rows"
        )
    except sources.TooManyItems as exc:
        raise FieldErrors({"file": exc.errors["source.file"][0]}) from exc
    reading = _Reading(scenario, kind)
    reading.read(rows, fmt)
    if reading.errors:
        raise FieldErrors(reading.errors)
    return _write(scenario, kind, reading.judgments)


def _importable_kind(scenario: Scenario) -> ScenarioKind:
    kind = registry.of(scenario)
    if not kind.importable:
        # Alphabetical: "comparison, labeling, ranking and rating".
        importable = sorted(k.value for k in registry.every() if k.importable)
        names = registry.listed(importable, "and")
        raise FieldErrors({"scenario": f"Judgments can be imported into {names} scenarios."})
    return kind


class _Reading:
    """The judgments a file's rows make, and what is wrong with each bad row, by line (at
    most ``sources.MAX_ERRORS``: reading stops there)."""

    def __init__(self, scenario: Scenario, kind: ScenarioKind):
        self.scenario = scenario
        self.kind = kind
        self.variants: dict[tuple[str, str], Variant] = {}
        self.of_item: dict[str, list[Variant]] = {}
        for v in Variant.objects.filter(scenario=scenario).select_related("item"):
            self.variants[(v.item.item_id, v.variant_id)] = v
            self.of_item.setdefault(v.item.item_id, []).append(v)
        self.longest = ExternalRater._meta.get_field("name").max_length or 0
        self.judgments: Read = {}
        self.begun: dict[tuple[str, tuple[Any, ...]], str] = {}  # each judgment's first line
        self.errors: dict[str, str] = {}

    def _refuse(self, where: str, problem: str) -> bool:
        """Record a bad line; whether that is as many as are reported."""
        self.errors[where] = problem
        return len(self.errors) >= sources.MAX_ERRORS

    def read(self, rows: list[sources.Item], fmt: str) -> None:
        """Read the rows, then finish the judgments they make."""
        for index, (_, row) in enumerate(rows, 1):
            where = _line(fmt, index)
            problem = self._row(where, row)
            if problem is not None and self._refuse(where, problem):
                return
        if not rows:
            self.errors["file"] = "The file has no rows."
        if not self.errors:
            self._finish()

    def _row(self, where: str, row: dict[str, Any]) -> str | None:
        """Read one row into its judgment; what is wrong with it, if anything."""
        if holds_nul(row):
            return "The row holds a NUL character."
        item = str(row.get("item_id") or "").strip()
        rater = str(row.get("rater") or "").strip()
        problems = [] if rater else ["rater is missing"]
        if len(rater) > self.longest:
            problems.append(f"rater has more than {self.longest} characters")
        read = self.kind.read_import_row(
            row,
            item=item,
            variants=self.variants,
            item_variants=self.of_item.get(item, []),
            config=self.scenario.config,
            problems=problems,
        )
        if read is not None:
            key = (rater, tuple(v.pk for v in read.presented))
            if key not in self.judgments:
                self.judgments[key] = read
                self.begun[key] = where
            elif problem := self.kind.merge_imported(
                rater=rater, earlier=self.judgments[key].answer, later=read.answer
            ):
                problems.append(problem)
        return "; ".join(problems) + "." if problems else None

    def _finish(self) -> None:
        """A judgment of several rows (a ranking) is whole only once all of them are read."""
        for key, read in self.judgments.items():
            problem = self.kind.finish_imported(
                rater=key[0], answer=read.answer, presented=read.presented
            )
            if problem and self._refuse(self.begun[key], problem + "."):
                return


def _task_key(spec: TaskSpec) -> tuple[Any, ...]:
    """A task as imports find it: its one variant or its pair in the order shown, or (a
    ranking) the set of variants it orders."""
    return (frozenset(spec.order),) if spec.order else (spec.a, spec.b)


def _write(scenario: Scenario, kind: ScenarioKind, judgments: Read) -> int:
    """Write the judgments (every check done first), a chunk per transaction: the raters
    that are new, the tasks that are missing, then the judgments. If a write fails, what
    this import wrote is deleted again."""
    names = {rater for rater, _ in judgments}
    members = set(
        Membership.objects.filter(team=scenario.team).values_list("user__username", flat=True)
    )
    users = {
        u.get_username(): u for u in get_user_model().objects.filter(username__in=names & members)
    }
    specs = {key: kind.import_task(read.presented) for key, read in judgments.items()}
    found: dict[tuple[Any, ...], int] = {
        _task_key(TaskSpec(None, a=a, b=b, order=tuple(order))): pk
        # An attention check repeats the variants of the task it was made from: imported
        # answers belong to the real task, never to a check.
        for pk, a, b, order in Task.objects.filter(scenario=scenario)
        .exclude(gold__kind=GoldKind.ATTENTION)
        .values_list("pk", "variant_a_id", "variant_b_id", "order")
    }
    _check_answered(scenario, judgments, specs, found, users)
    written = _Written()
    try:
        externals = written.raters(scenario, names - set(users))
        # A task a judgment answers that is missing gets one, in the order they first appear.
        missing: dict[tuple[Any, ...], scenario_services.NewTask] = {}
        for key, read in judgments.items():
            spec = specs[key]
            task_key = _task_key(spec)
            if task_key not in found and task_key not in missing:
                missing[task_key] = scenario_services.NewTask(
                    item_id=read.presented[0].item_id,
                    variant_a_id=spec.a,
                    variant_b_id=spec.b,
                    order=list(spec.order),
                )
        found.update(zip(missing, written.tasks(scenario, list(missing.values())), strict=True))
        orders = dict(
            Task.objects.filter(
                pk__in={found[_task_key(spec)] for spec in specs.values()}
            ).values_list("pk", "order")
        )

        def rater_fields(name: str) -> dict[str, Any]:
            if name in users:
                return {"rater_kind": RaterKind.HUMAN, "evaluator": users[name]}
            return {"rater_kind": RaterKind.EXTERNAL, "external_rater_id": externals[name]}

        # A ranking's order shown is not in the file: it is recorded as its task's.
        made = []
        for key, read in judgments.items():
            task = found[_task_key(specs[key])]
            made.append(
                Judgment(
                    scenario=scenario,
                    task_id=task,
                    presented=list(orders[task]) or [v.pk for v in read.presented],
                    payload=read.answer,
                    **rater_fields(key[0]),
                )
            )
        written.judgments(made)
    except BaseException:
        written.undo()
        raise
    return len(made)


def _check_answered(
    scenario: Scenario,
    judgments: Read,
    specs: dict[Any, TaskSpec],
    found: dict[tuple[Any, ...], int],
    users: dict[str, Any],
) -> None:
    """A member of the team judges a task once: refused (before anything is written) when
    the file repeats an answer they gave."""
    answered = set(
        Judgment.objects.filter(scenario=scenario, evaluator__isnull=False).values_list(
            "task_id", "evaluator_id"
        )
    )
    seen: set[tuple[Any, int]] = set()
    for key in judgments:
        user = users.get(key[0])
        if user is None:
            continue
        task_key = _task_key(specs[key])
        task = found.get(task_key)
        done = (task if task is not None else task_key, user.pk)
        if done in answered or done in seen:
            which = f"task {task}" if task is not None else "one of its pairs"
            raise FieldErrors({"file": f"{user} has judged {which} already."})
        seen.add(done)


class _Written:
    """What an import wrote, a chunk per transaction, to delete again if it fails."""

    def __init__(self) -> None:
        self.rater_ids: list[int] = []
        self.task_ids: list[int] = []
        self.judgment_ids: list[int] = []

    def raters(self, scenario: Scenario, names: set[str]) -> dict[str, int]:
        """Each external rater's id; those the team did not have are made."""
        known = dict(
            ExternalRater.objects.filter(team=scenario.team, name__in=names).values_list(
                "name", "pk"
            )
        )
        new = [ExternalRater(team=scenario.team, name=n) for n in sorted(names - set(known))]
        for made in bulk.in_chunks(new, CHUNK, ExternalRater.objects.bulk_create):
            self.rater_ids += [r.pk for r in made]
            known.update((r.name, r.pk) for r in made)
        return known

    def tasks(self, scenario: Scenario, new: list[scenario_services.NewTask]) -> list[int]:
        def add(chunk: Any) -> list[Any]:
            return scenario_services.tasks_add(scenario=scenario, tasks=chunk)

        made: list[int] = []
        for chunk in bulk.in_chunks(new, CHUNK, add):
            made += [t.pk for t in chunk]
            self.task_ids += [t.pk for t in chunk]
        return made

    def judgments(self, made: list[Judgment]) -> None:
        for chunk in bulk.in_chunks(made, CHUNK, Judgment.objects.bulk_create):
            self.judgment_ids += [j.pk for j in chunk]

    def undo(self) -> None:
        for model, ids in (
            (Judgment, self.judgment_ids),
            (Task, self.task_ids),
            (ExternalRater, self.rater_ids),
        ):
            for first in range(0, len(ids), CHUNK):
                with transaction.atomic():
                    model.objects.filter(pk__in=ids[first : first + CHUNK]).delete()
