"""Reads of LLM judges: a scenario's judges, a judge's runs and what each run did."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet

from evalplatform.errors import FieldErrors
from evaluations.judgments.models import JudgeRun, Judgment, LLMJudge, ParseStatus
from generation import consistency
from generation.models import GenerationJob, OutputStatus
from scenarios.models import Scenario


def scenario_judges(scenario: Scenario) -> QuerySet[LLMJudge]:
    """The scenario's judges with their prompts, models and creators."""
    return scenario.judges.select_related("prompt_version__template", "llm_model", "created_by")


def runs(judge: LLMJudge) -> QuerySet[JudgeRun]:
    """The judge's runs with their jobs."""
    return JudgeRun.objects.filter(judge=judge).select_related("job")


def run_summary(run: JudgeRun) -> dict[str, Any]:
    job: GenerationJob = run.job
    counts = dict(
        Judgment.objects.filter(output__job=job)
        .values("parse_status")
        .annotate(n=Count("pk"))
        .values_list("parse_status", "n")
    )
    return {
        "id": run.pk,
        "judge": run.judge_id,
        "job": job.pk,
        "status": job.status,
        "calls": job.total_cells,
        "completed": job.completed_cells,
        "failed": job.failed_cells,
        "pending": job.outputs.filter(
            status__in=[OutputStatus.PENDING, OutputStatus.RUNNING]
        ).count(),
        "verdicts": counts.get(ParseStatus.OK, 0) + counts.get(ParseStatus.EXTRACTED, 0),
        "unparseable": counts.get(ParseStatus.FAILED, 0),
        "cost_usd": str(job.cost_usd),
        "tasks": run.tasks,
        "created_at": run.created_at,
    }


def batch_capable(judge: LLMJudge) -> bool:
    """Whether the judge's model has a batch API here (the offline mock has none)."""
    return judge.llm_model.batch_capable


def consistency_for(judge: LLMJudge, field: str | None = None) -> dict[str, Any]:
    """The consistency of a rating judge's repeated calls, per task, for one dimension of
    the rubric (``field``, else the first): per task and condition (the judge at each
    temperature) n, mean, SD, min, max; each condition's summary; and the rank agreement
    of the tasks between temperatures (``generation.consistency``). Other scenario types
    have no numeric score per call: ``FieldErrors`` on ``judge`` (their verdicts' stability
    is on the judge card), as is an unknown ``field``."""
    scenario = judge.scenario
    if scenario.type != "rating":
        raise FieldErrors(
            {"judge": "Only a rating scenario's judge scores each call; the judge card has "
             "the verdict stability of the others."}
        )  # fmt: skip
    dimensions = [d["name"] for d in scenario.config.get("dimensions") or []]
    if field is not None and field not in dimensions:
        raise FieldErrors({"field": "One of " + ", ".join(dimensions) + "."})
    rows = (
        Judgment.objects.filter(judge=judge)
        .exclude(parse_status=ParseStatus.FAILED)
        .order_by("task_id", "pk")
        .values_list("task_id", "temperature", "payload")
    )
    found = consistency.summarise(
        (
            consistency.Row(f"task {task}", judge.name, "", temperature, payload.get("scores"))
            for task, temperature, payload in rows.iterator(2000)
        ),
        dimensions,
        field,
    )
    return {"judge": judge.pk, "fields": dimensions} | found
