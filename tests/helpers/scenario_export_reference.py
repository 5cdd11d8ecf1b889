"""The scenario judgments export as it was made before it was read column-wise (model
instances row by row): the reference that ``test_scenario_exports`` and ``bench/export.py``
hold the streamed export to, byte for byte."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from evalplatform.api.uploads import csv_chunks as csv_stream
from evaluations.models import Adjudication, Judgment, ParseStatus, TaskFlag
from evaluations.review.selectors import adjudicated_tasks
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


def columns(scenario: Scenario) -> list[str]:
    """The CSV header: the common columns, the scenario type's answer columns, the tail,
    the adjudicated answer."""
    return [*_COMMON, *registry.of(scenario).export_columns, *_TAIL, _ADJUDICATED]


def _judgments(scenario: Scenario):
    return (
        Judgment.objects.filter(scenario=scenario)
        .select_related(
            "task__item",
            "evaluator",
            "external_rater",
            "judge__llm_model",
            "judge__prompt_version__template",
            "output",
        )
        .order_by("pk")
        .iterator(chunk_size=2000)
    )


def _rater(judgment: Judgment) -> str:
    if judgment.evaluator is not None:
        return judgment.evaluator.get_username()
    if judgment.judge is not None:
        return judgment.judge.name
    return judgment.external_rater.name if judgment.external_rater is not None else ""


def _judge_fields(j: Judgment) -> dict[str, Any]:
    if j.judge is None:
        return dict.fromkeys(_JUDGE, "")
    version = j.judge.prompt_version
    output = j.output
    return {
        "judge_model": j.judge.llm_model.model_id,
        "judge_prompt": f"{version.template.name} v{version.number}",
        "repetition": j.repetition,
        "temperature": j.temperature,
        "swapped": j.swapped,
        "parse_status": j.parse_status,
        "input_tokens": output.input_tokens if output else "",
        "output_tokens": output.output_tokens if output else "",
        "cost_usd": str(output.cost_usd) if output else "",
    }


def _flags(scenario: Scenario) -> dict[tuple[int, int], TaskFlag]:
    """The scenario's flags by task and evaluator."""
    flags = TaskFlag.objects.filter(scenario=scenario).select_related("evaluator", "task__item")
    return {(f.task_id, f.evaluator_id): f for f in flags}


def _flag_text(flag: TaskFlag | None) -> str:
    if flag is None:
        return ""
    return f"{flag.reason}: {flag.note}" if flag.note else flag.reason


def rows(scenario: Scenario) -> Iterator[list[Any]]:
    variants = scenario_selectors.variants_by_pk(scenario)
    kind = registry.of(scenario)
    flags = _flags(scenario)
    adjudications = adjudicated_tasks(scenario)
    variant_ids = {pk: v.variant_id for pk, v in variants.items()}

    def adjudicated(task_id: int, cells: list[Any]) -> Any:
        found = adjudications.get(task_id)
        if found is None:
            return ""
        row = dict(zip(kind.export_columns, cells, strict=True))
        return kind.export_cell(found.payload, found.presented, row, variant_ids)

    for j in _judgments(scenario):
        task = j.task
        head = [
            j.pk,
            task.item.item_id if task.item else "",
            task.pk,
            _rater(j),
            j.rater_kind,
        ]
        flag = flags.get((j.task_id, j.evaluator_id)) if j.evaluator_id else None
        tail = [
            j.rationale,
            j.time_spent_ms,
            j.created_at.isoformat(),
            *_judge_fields(j).values(),
            j.comment,
            _flag_text(flag),
        ]
        shown = [variants[pk] for pk in j.presented if pk in variants]
        if j.parse_status == ParseStatus.FAILED:  # a judge's reply that was no verdict
            blanks = [""] * len(kind.export_columns)
            yield [*head, *blanks, *tail, adjudicated(task.pk, blanks)]
        else:
            for cells in kind.export_rows(
                payload=j.payload, shown=shown, variants=variants, task=task
            ):
                yield [*head, *cells, *tail, adjudicated(task.pk, list(cells))]


def csv_chunks(scenario: Scenario) -> Iterator[str]:
    """Formula-safe, in blocks."""
    return csv_stream(columns(scenario), rows(scenario))


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


def json_chunks(scenario: Scenario, head: dict[str, Any]) -> Iterator[str]:
    variants = scenario_selectors.variants_by_pk(scenario)
    adjudications = adjudicated_tasks(scenario)
    yield '{"scenario": ' + json.dumps(head, default=str) + ', "variants": '
    yield json.dumps(
        [
            {
                "id": v.pk,
                "item_id": v.item.item_id,
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
    first = True
    for j in _judgments(scenario):
        record = {
            "id": j.pk,
            "task": j.task_id,
            "item_id": j.task.item.item_id if j.task.item else None,
            "rater": _rater(j),
            "rater_kind": j.rater_kind,
            "presented": j.presented,
            "payload": j.payload,
            "rationale": j.rationale,
            "time_spent_ms": j.time_spent_ms,
            "created_at": j.created_at,
            "revised_at": j.revised_at,
            "comment": j.comment,
        }
        if j.judge is not None:
            record |= _judge_fields(j) | {
                "judge": j.judge_id,
                "parse_error": j.parse_error,
                "raw_reply": j.output.content if j.output else None,
            }
        record["adjudicated"] = _adjudicated_record(adjudications.get(j.task_id))
        yield ("" if first else ",") + json.dumps(record, default=str)
        first = False
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
