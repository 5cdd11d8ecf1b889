"""Every read of a scenario's analytics, into plain data: its judgments as ``Row``s (valid
verdicts only; each judge's unparseable replies counted), its variants with their items, its
judges with their models and prompts. ``analyze`` computes from this and reads nothing else.

Two kinds of judgments never reach the analytics, and ``judgments`` is the one place that
leaves them out: those of gold tasks (quality control: ``scenarios.models.GoldTask``), and
those of the evaluators a manager excluded (``RaterExclusion``). ``left_out`` says which, for
the fingerprint of stored analyses.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet

from evaluations.analytics.models import GateThresholds, TeamTrustGate, TrustGate
from evaluations.judgments.models import JudgeRun, Judgment, LLMJudge, ParseStatus, RaterKind
from evaluations.quality.models import RaterExclusion
from evaluations.review.models import Adjudication
from scenarios import selectors as scenario_selectors
from scenarios.models import GoldTask, Scenario, Variant


@dataclass
class Row:
    pk: int
    task: int
    rater: str
    kind: str
    judge: int | None
    presented: list[int]
    payload: dict[str, Any]
    repetition: int
    temperature: float | None
    swapped: bool
    cost: Decimal | None
    # A judge's reply: the generation job that made it, and what the provider reported
    # (the model snapshot, the reasoning tokens counted apart; None: not counted).
    job: int | None = None
    model_version: str = ""
    reasoning_tokens: int | None = None


def judgments(scenario: Scenario) -> QuerySet[Judgment]:
    """The scenario's judgments the analytics read: all but gold tasks' and excluded
    evaluators'."""
    return (
        Judgment.objects.filter(scenario=scenario)
        .exclude(task_id__in=GoldTask.objects.filter(scenario=scenario).values("task_id"))
        .exclude(
            evaluator_id__in=RaterExclusion.objects.filter(scenario=scenario).values("evaluator_id")
        )
    )


def left_out(scenario: Scenario) -> list[list[int]]:
    """What ``judgments`` leaves out: the gold tasks' ids, the excluded evaluators' ids."""
    return [
        sorted(GoldTask.objects.filter(scenario=scenario).values_list("task_id", flat=True)),
        sorted(
            RaterExclusion.objects.filter(scenario=scenario).values_list("evaluator_id", flat=True)
        ),
    ]


def verdicts(scenario: Scenario) -> tuple[list[Row], dict[int, int]]:
    """Every valid verdict of the scenario, and each judge's unparseable replies."""
    rows, failures = verdicts_and_failures(scenario)
    unparseable: Counter[int] = Counter()
    for (judge, _), n in failures.items():
        unparseable[judge] += n
    return rows, dict(unparseable)


def verdicts_and_failures(
    scenario: Scenario,
) -> tuple[list[Row], dict[tuple[int, float | None], int]]:
    """Every valid verdict of the scenario, and the unparseable replies of each judge at
    each temperature."""
    fields = (
        "pk",
        "task_id",
        "rater_kind",
        "evaluator__username",
        "external_rater__name",
        "judge_id",
        "judge__name",
        "presented",
        "payload",
        "repetition",
        "temperature",
        "swapped",
        "output__cost_usd",
        "parse_status",
        "output__job_id",
        "output__model_version",
        "output__reasoning_tokens",
    )
    rows: list[Row] = []
    unparseable: Counter[tuple[int, float | None]] = Counter()
    query = judgments(scenario).order_by("created_at", "pk")
    for values in query.values_list(*fields).iterator(chunk_size=5000):
        (pk, task, kind, user, external, judge, judge_name, presented, payload) = values[:9]
        repetition, temperature, swapped, cost, parse_status = values[9:14]
        job, model_version, reasoning_tokens = values[14:]
        if parse_status == ParseStatus.FAILED:
            unparseable[(judge, temperature)] += 1
            continue
        rater = (
            f"judge:{judge_name}"
            if kind == RaterKind.JUDGE
            else (user if user is not None else f"external:{external}")
        )
        rows.append(
            Row(
                pk,
                task,
                rater,
                kind,
                judge,
                presented,
                payload,
                repetition,
                temperature,
                bool(swapped),
                cost,
                job,
                model_version or "",
                reasoning_tokens,
            )
        )
    return rows, dict(unparseable)


@dataclass(frozen=True)
class Reference:
    """A task's adjudicated answer: the task's order (its variant ids) and the stored answer."""

    presented: list[int]
    payload: dict[str, Any]


@dataclass
class AnalysisData:
    """What ``analyze`` computes from: the scenario (id, name, type, configuration), its valid
    verdicts oldest first, each judge's unparseable replies, its variants by id (with their
    items), its judges (with their models, connections and prompt versions), its tasks'
    adjudicated answers by task id, and the model that generated each generated variant."""

    scenario: Scenario
    rows: list[Row]
    unparseable: dict[int, int]
    variants: dict[int, Variant]
    judges: list[LLMJudge]
    adjudications: dict[int, Reference] = field(default_factory=dict)
    # The generated variants' models by variant id: (model id, connection kind).
    sources: dict[int, tuple[str, str]] = field(default_factory=dict)
    # Unparseable replies by (judge, temperature); the configuration each judge run
    # recorded when it started, by its generation job's id; the scenario's trust gate.
    failures: dict[tuple[int, float | None], int] = field(default_factory=dict)
    run_configurations: dict[int, dict[str, Any]] = field(default_factory=dict)
    gate: GateThresholds | None = None


def load(scenario: Scenario) -> AnalysisData:
    rows, failures = verdicts_and_failures(scenario)
    unparseable: Counter[int] = Counter()
    for (judge, _), n in failures.items():
        unparseable[judge] += n
    return AnalysisData(
        scenario=scenario,
        rows=rows,
        unparseable=dict(unparseable),
        failures=failures,
        run_configurations=dict(
            JudgeRun.objects.filter(judge__scenario=scenario).values_list("job_id", "configuration")
        ),
        gate=gate_for(scenario),
        variants=scenario_selectors.variants_by_pk(scenario),
        judges=list(
            scenario.judges.select_related("llm_model__connection", "prompt_version__template")
        ),
        adjudications=adjudications(scenario),
        sources=scenario_selectors.variant_source_models(scenario),
    )


def adjudications(scenario: Scenario) -> dict[int, Reference]:
    """The scenario's adjudicated answers by task id."""
    found = Adjudication.objects.filter(scenario=scenario)
    return {
        task: Reference(presented, payload)
        for task, presented, payload in found.values_list("task_id", "presented", "payload")
    }


def variant_items(scenario: Scenario) -> list[tuple[int, int]]:
    """The scenario's variants as (id, item id), for the adaptive design."""
    return list(Variant.objects.filter(scenario=scenario).values_list("pk", "item_id"))


def gate_for(scenario: Scenario) -> GateThresholds | None:
    """The gate a scenario's judges are held to: its own (``source`` "scenario"), which
    overrides its team's default entirely, else the team's (``source`` "team"), else None."""
    own = TrustGate.objects.filter(scenario=scenario).select_related("updated_by").first()
    if own is not None:
        return own
    return (
        TeamTrustGate.objects.filter(team_id=scenario.team_id).select_related("updated_by").first()
    )
