"""Judgment exports, unblinded (which variant was which model and prompt), streamed.

CSV rows are long-form, one fact a row, with columns per scenario type (``columns``); after
the judges' columns come the evaluator's ``comment`` and ``flag``, and last ``adjudicated``:
the task's adjudicated answer in the row's terms (empty without one;
the scenario type's ``export_cell``). JSON holds the scenario (configuration
included), its variants, every judgment (each with its task's ``adjudicated`` answer) and
every flag.

Both are read a column at a time (``evalplatform.exporting``, as the generation outputs
export is): one SELECT of the judgments' plain columns and their joins' (no model instance
a row), a server-side cursor on PostgreSQL, timestamps written as text by PostgreSQL; the
bytes are those the row-by-row export wrote
(``tests/evaluations/manager/test_scenario_exports.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import StreamingHttpResponse

from evalplatform import exporting
from evalplatform.api import uploads
from evalplatform.api.uploads import download
from evaluations.judgments.models import Judgment, ParseStatus
from evaluations.review.models import Adjudication
from evaluations.review.selectors import adjudicated_tasks
from evaluations.workspace.models import TaskFlag
from scenarios import selectors as scenario_selectors
from scenarios.models import Scenario
from scenarios.types import registry

_COMMON = ["judgment_id", "item_id", "task_id", "rater", "rater_kind"]
# LLM judges' calls (empty for people): which call, how its reply parsed, what it cost.
_JUDGE = [
    "judge_model",
    "judge_prompt",
    "repetition",
    "temperature",
    "swapped",
    "parse_status",
    "input_tokens",
    "output_tokens",
    "cost_usd",
]
# An evaluator's comment on the task and their flag on it (``reason: note``), after the
# judges' columns so that the columns before them keep their places.
_FEEDBACK = ["comment", "flag"]
_TAIL = ["rationale", "time_spent_ms", "created_at", *_JUDGE, *_FEEDBACK]
_ADJUDICATED = "adjudicated"
# A JSON judgment's keys before ``adjudicated``: a person's, and a judge's (with its call).
_PERSON_KEYS = [
    "id",
    "task",
    "item_id",
    "rater",
    "rater_kind",
    "presented",
    "payload",
    "rationale",
    "time_spent_ms",
    "created_at",
    "revised_at",
    "comment",
]
_JUDGE_KEYS = [*_PERSON_KEYS, *_JUDGE, "judge", "parse_error", "raw_reply"]


def columns(scenario: Scenario) -> list[str]:
    """The CSV header: the common columns, the scenario type's answer columns, the tail,
    the adjudicated answer."""
    return [*_COMMON, *registry.of(scenario).export_columns, *_TAIL, _ADJUDICATED]


# The judgments' fields an export reads, in one SELECT (``evalplatform.exporting``): no
# model instance a row.
_FIELDS = [
    "pk",
    "task_id",
    "task__item__item_id",
    "task__reverse_of_id",
    "evaluator_id",
    f"evaluator__{get_user_model().USERNAME_FIELD}",
    "judge_id",
    "judge__name",
    "external_rater__name",
    "rater_kind",
    "presented",
    "payload",
    "rationale",
    "time_spent_ms",
    "created_at",
    "revised_at",
    "comment",
    "judge__llm_model__model_id",
    "judge__prompt_version__template__name",
    "judge__prompt_version__number",
    "repetition",
    "temperature",
    "swapped",
    "parse_status",
    "parse_error",
    "output_id",
    "output__input_tokens",
    "output__output_tokens",
    "output__cost_usd",
]
# The JSON export also gives a judge's raw reply.
_JSON_FIELDS = [*_FIELDS, "output__content"]
_DATETIMES = ("created_at", "revised_at")


class _Judgments:
    """A batch of judgments, a list of values per field (``_FIELDS``), with the columns
    both exports derive from them."""

    def __init__(self, columns: list[Any]) -> None:
        (
            self.pk,
            self.task_id,
            self.item_id,
            self.reverse_of_id,
            self.evaluator_id,
            self.username,
            self.judge_id,
            self.judge_name,
            self.external_name,
            self.rater_kind,
            self.presented,
            self.payload,
            self.rationale,
            self.time_spent_ms,
            self.created_at,
            self.revised_at,
            self.comment,
            self.judge_model,
            self.template_name,
            self.version_number,
            self.repetition,
            self.temperature,
            self.swapped,
            self.parse_status,
            self.parse_error,
            self.output_id,
            self.input_tokens,
            self.output_tokens,
            self.cost_usd,
        ) = columns[: len(_FIELDS)]
        # A judge's raw replies (read for the JSON export only).
        self.content: list[Any] = columns[len(_FIELDS)] if len(columns) > len(_FIELDS) else []
        self.rater = [
            username
            if evaluator is not None
            else judge_name
            if judge is not None
            else (external if external is not None else "")
            for evaluator, username, judge, judge_name, external in zip(
                self.evaluator_id,
                self.username,
                self.judge_id,
                self.judge_name,
                self.external_name,
                strict=True,
            )
        ]
        self.judge_prompt = [
            "" if judge is None else f"{name} v{number}"
            for judge, name, number in zip(
                self.judge_id, self.template_name, self.version_number, strict=True
            )
        ]
        # A judge's call figures, "" for a judgment without its call's output.
        has_output = [output is not None for output in self.output_id]
        self.call_input_tokens = _where(has_output, self.input_tokens)
        self.call_output_tokens = _where(has_output, self.output_tokens)
        self.call_cost = [
            str(cost) if has else "" for has, cost in zip(has_output, self.cost_usd, strict=True)
        ]

    def judge_columns(self) -> list[list[Any]]:
        """``_JUDGE``'s columns, for every judgment (a person's are read as blanks)."""
        return [
            self.judge_model,
            self.judge_prompt,
            self.repetition,
            self.temperature,
            self.swapped,
            self.parse_status,
            self.call_input_tokens,
            self.call_output_tokens,
            self.call_cost,
        ]


def _where(keep: list[bool], values: list[Any]) -> list[Any]:
    return [value if kept else "" for kept, value in zip(keep, values, strict=True)]


@dataclass(frozen=True)
class Only:
    """The judgments an export keeps: all; one LLM judge's (``judge``); or one run's of it
    (``run``, with its ``judge`` and its generation ``job``)."""

    judge: int | None = None
    run: int | None = None
    job: int | None = None

    def kept(self, queryset: QuerySet[Judgment]) -> QuerySet[Judgment]:
        if self.judge is not None:
            queryset = queryset.filter(judge_id=self.judge)
        if self.job is not None:
            queryset = queryset.filter(output__job_id=self.job)
        return queryset

    @property
    def suffix(self) -> str:
        if self.run is not None:
            return f"-run-{self.run}"
        return f"-judge-{self.judge}" if self.judge is not None else ""


EVERYTHING = Only()


def _batches(
    scenario: Scenario, fields: list[str], only: Only = EVERYTHING
) -> Iterator[_Judgments]:
    """The scenario's judgments (``only``: those it keeps), a batch of columns at a time."""
    queryset = only.kept(Judgment.objects.filter(scenario=scenario).order_by("pk"))
    for columns in exporting.column_batches(queryset, fields, _DATETIMES):
        yield _Judgments(columns)


class _Task:
    """What a scenario type's ``export_rows`` reads of a task (``TaskLike``)."""

    __slots__ = ("reverse_of_id",)

    def __init__(self, reverse_of_id: Any) -> None:
        self.reverse_of_id = reverse_of_id


def _flags(scenario: Scenario) -> dict[tuple[int, int], TaskFlag]:
    """The scenario's flags by task and evaluator."""
    flags = TaskFlag.objects.filter(scenario=scenario).select_related("evaluator", "task__item")
    return {(f.task_id, f.evaluator_id): f for f in flags}


def _flag_text(flag: TaskFlag | None) -> str:
    if flag is None:
        return ""
    return f"{flag.reason}: {flag.note}" if flag.note else flag.reason


def _csv_batches(scenario: Scenario, only: Only = EVERYTHING) -> Iterator[str]:
    """The CSV lines of the judgments, in blocks of at most ``EXPORT_BATCH`` rows, written
    a column at a time: the scenario type's ``export_rows`` gives each judgment's answer
    cells (no row, one or more), every other column is the batch's own (repeated where a
    judgment has several rows)."""
    variants = scenario_selectors.export_variants(scenario)
    kind = registry.of(scenario)
    flags = _flags(scenario)
    adjudications = adjudicated_tasks(scenario)
    variant_ids = {pk: v.variant_id for pk, v in variants.items()}

    def adjudicated(task_id: int, cells: Sequence[Any]) -> Any:
        found = adjudications.get(task_id) if adjudications else None
        if found is None:
            return ""
        row = dict(zip(kind.export_columns, cells, strict=True))
        return kind.export_cell(found.payload, found.presented, row, variant_ids)

    blanks = [""] * len(kind.export_columns)
    for batch in _batches(scenario, _FIELDS, only):
        # Each row's judgment (its index in the batch), answer cells and adjudicated cell.
        of: list[int] = []
        cells_of: list[Sequence[Any]] = []
        adjudicated_of: list[Any] = []
        for n, (task_id, reverse_of_id, presented, payload, parse_status) in enumerate(
            zip(
                batch.task_id,
                batch.reverse_of_id,
                batch.presented,
                batch.payload,
                batch.parse_status,
                strict=True,
            )
        ):
            if parse_status == ParseStatus.FAILED:  # a judge's reply that was no verdict
                of.append(n)
                cells_of.append(blanks)
                adjudicated_of.append(adjudicated(task_id, blanks))
                continue
            shown = [variants[v] for v in presented if v in variants]
            for cells in kind.export_rows(
                payload=payload, shown=shown, variants=variants, task=_Task(reverse_of_id)
            ):
                of.append(n)
                cells_of.append(cells)
                adjudicated_of.append(adjudicated(task_id, list(cells)))
        if not of:
            continue
        is_judge = [judge is not None for judge in batch.judge_id]
        if flags:
            flag_texts = [
                _flag_text(flags.get((task, evaluator))) if evaluator else ""
                for task, evaluator in zip(batch.task_id, batch.evaluator_id, strict=True)
            ]
        else:
            flag_texts = [""] * len(batch.pk)
        head = [
            batch.pk,
            ["" if item is None else item for item in batch.item_id],
            batch.task_id,
            batch.rater,
            batch.rater_kind,
        ]
        tail = [
            batch.rationale,
            batch.time_spent_ms,
            batch.created_at,
            *[_where(is_judge, column) for column in batch.judge_columns()],
            batch.comment,
            flag_texts,
        ]
        if of != list(range(len(batch.pk))):  # not one row a judgment: repeat their cells
            head = [[column[n] for n in of] for column in head]
            tail = [[column[n] for n in of] for column in tail]
        columns = [*head, *zip(*cells_of, strict=True), *tail, adjudicated_of]
        size = exporting.EXPORT_BATCH  # rows a block, however many a judgment has
        for start in range(0, len(of), size):
            block = columns if len(of) <= size else [c[start : start + size] for c in columns]
            yield uploads.csv_column_lines(block)


def csv_chunks(scenario: Scenario, only: Only = EVERYTHING) -> Iterator[str]:
    """Formula-safe (``uploads.csv_column_lines``), at most ``EXPORT_BATCH`` rows a
    block; ``only``: the judgments kept."""
    yield uploads.csv_line(columns(scenario))
    yield from _csv_batches(scenario, only)


def _adjudicated_record(found: Adjudication | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {
        "presented": found.presented,
        "payload": found.payload,
        "note": found.note,
        "set_by": found.set_by.get_username() if found.set_by else None,
        "set_at": found.set_at,
    }


def json_chunks(scenario: Scenario, head: dict[str, Any], only: Only = EVERYTHING) -> Iterator[str]:
    variants = scenario_selectors.export_variants(scenario)
    adjudications = adjudicated_tasks(scenario)
    yield '{"scenario": ' + json.dumps(head, default=str) + ', "variants": '
    yield json.dumps(
        [
            {
                "id": v.pk,
                "item_id": v.item_key,
                "variant_id": v.variant_id,
                "model": v.model_label,
                "prompt": v.prompt_label,
                "meta": v.meta,
            }
            for v in variants.values()
        ]
    )
    flags = _flags(scenario)
    yield ', "judgments": ['
    adjudicated = {
        task_id: json.dumps(_adjudicated_record(found), default=str)
        for task_id, found in adjudications.items()
    }
    # Each judgment the text ``json.dumps(record, default=str)`` gives, made from the batch's
    # values a column at a time: a person's record, or a judge's with its call's fields.
    person = ", ".join(f"{json.dumps(key)}: %s" for key in _PERSON_KEYS)
    judge = ", ".join(f"{json.dumps(key)}: %s" for key in _JUDGE_KEYS)
    separator = ""
    for batch in _batches(scenario, _JSON_FIELDS, only):
        has_output = [output is not None for output in batch.output_id]
        columns = [
            batch.pk,
            batch.task_id,
            batch.item_id,
            batch.rater,
            batch.rater_kind,
            batch.presented,
            batch.payload,
            batch.rationale,
            batch.time_spent_ms,
            list(map(_json_datetime, batch.created_at)),
            list(map(_json_datetime, batch.revised_at)),
            batch.comment,
            *batch.judge_columns(),
            batch.judge_id,
            batch.parse_error,
            [c if has else None for has, c in zip(has_output, batch.content, strict=True)],
        ]
        texts = list(zip(*map(exporting.json_column, columns), strict=True))
        records = []
        for judge_id, task_id, values in zip(batch.judge_id, batch.task_id, texts, strict=True):
            found = adjudicated.get(task_id, "null")
            if judge_id is None:
                records.append("{" + person % values[: len(_PERSON_KEYS)] + ', "adjudicated": ')
            else:
                records.append("{" + judge % values + ', "adjudicated": ')
            records[-1] += found + "}"
        yield separator + ",".join(records)
        separator = ","
    # Every flag, answered tasks' and given-back ones' alike.
    yield '], "flags": '
    yield json.dumps(
        [
            {
                "task": f.task_id,
                "item_id": f.task.item.item_id if f.task.item else None,
                "rater": f.evaluator.get_username(),
                "reason": f.reason,
                "note": f.note,
                "created_at": f.created_at,
            }
            for f in flags.values()
        ],
        default=str,
    )
    yield "}"


def _json_datetime(text: str) -> str | None:
    """An ISO 8601 timestamp as ``str(datetime)`` writes it (what ``default=str`` gave)."""
    return text[:10] + " " + text[11:] if text else None


def csv_response(scenario: Scenario, only: Only = EVERYTHING) -> StreamingHttpResponse:
    name = f"scenario-{scenario.pk}{only.suffix}.csv"
    return download(csv_chunks(scenario, only), "text/csv; charset=utf-8", name)


def json_response(
    scenario: Scenario, head: dict[str, Any], only: Only = EVERYTHING
) -> StreamingHttpResponse:
    name = f"scenario-{scenario.pk}{only.suffix}.json"
    return download(json_chunks(scenario, head, only), "application/json", name)
