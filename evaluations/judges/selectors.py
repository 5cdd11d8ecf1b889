"""Reads of LLM judges: a scenario's judges, a judge's runs and what each run did."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet

from evaluations.judgments.models import JudgeRun, Judgment, LLMJudge, ParseStatus
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
