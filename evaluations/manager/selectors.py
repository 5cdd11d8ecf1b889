"""Reads of the scenario manager's pages: the scenario list with its counts, and a scenario
page's progress per evaluator, its judges with their runs and the judge form's choices."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from evalplatform.accounts import policy
from evalplatform.accounts.roles import SCENARIOS_VIEW
from evalplatform.prompts.models import PromptVersion
from evalplatform.prompts.rendering import Block, variables_in
from evalplatform.providers.models import LLMModel
from evaluations.analytics.trust import stored_trust
from evaluations.judgments.models import (
    Assignment,
    AssignmentStatus,
    JudgeRun,
    Judgment,
    ParseStatus,
    RaterKind,
)
from evaluations.workspace import selectors as workspace_selectors
from scenarios.models import Scenario, Task
from scenarios.types import registry
from scenarios.types.base import KEYS

LIST_LENGTH = 200


def scenario_list(user: Any) -> QuerySet[Scenario]:
    """The scenarios the user may see, with their tasks, people's judgments and LLM judges'
    judgments counted."""

    # Counted in subqueries: two joined Counts would multiply tasks by judgments.
    def count_of(model, **only) -> Coalesce:
        rows = model.objects.filter(scenario=OuterRef("pk"), **only).order_by().values("scenario")
        return Coalesce(Subquery(rows.annotate(n=Count("pk")).values("n")), 0)

    # Progress is the people's judgments; LLM judges' are counted apart.
    return policy.visible(user, SCENARIOS_VIEW, Scenario.objects.select_related("team")).annotate(
        task_count=count_of(Task),
        judgment_count=count_of(Judgment, rater_kind=RaterKind.HUMAN),
        judge_count=count_of(Judgment, rater_kind=RaterKind.JUDGE),
    )[:LIST_LENGTH]


def per_evaluator(scenario: Scenario) -> QuerySet[Any, Any]:
    """Each evaluator's answered, reserved and skipped tasks, the most answered first."""
    return (
        Assignment.objects.filter(scenario=scenario)
        .values("evaluator__username")
        .annotate(
            done=Count("pk", filter=Q(status=AssignmentStatus.DONE)),
            reserved=Count("pk", filter=Q(status=AssignmentStatus.RESERVED)),
            skipped=Count("pk", filter=Q(status=AssignmentStatus.SKIPPED)),
        )
        .order_by("-done", "evaluator__username")
    )


def human_judgment_count(scenario: Scenario) -> int:
    """Progress counts evaluators' judgments (imported and LLM judges' ones are apart)."""
    return Judgment.objects.filter(scenario=scenario, rater_kind=RaterKind.HUMAN).count()


def judges(scenario: Scenario) -> list[dict[str, Any]]:
    """The scenario's judges with their verdicts, unparseable replies and runs."""
    counts: dict[tuple[int, str], int] = {
        (judge_id, status): n
        for judge_id, status, n in Judgment.objects.filter(scenario=scenario, judge__isnull=False)
        .values("judge_id", "parse_status")
        .annotate(n=Count("pk"))
        .values_list("judge_id", "parse_status", "n")
    }
    rows = []
    trusted = stored_trust(scenario)
    judges = scenario.judges.select_related("llm_model", "prompt_version__template")
    runs_of = Prefetch("runs", queryset=JudgeRun.objects.select_related("job"))
    for judge in judges.prefetch_related(runs_of):
        runs = list(judge.runs.all())
        rows.append(
            {
                "judge": judge,
                "verdicts": counts.get((judge.pk, ParseStatus.OK), 0)
                + counts.get((judge.pk, ParseStatus.EXTRACTED), 0),
                "unparseable": counts.get((judge.pk, ParseStatus.FAILED), 0),
                "failed_calls": sum(run.job.failed_cells for run in runs),
                "runs": runs,
                "trust": trusted.get(judge.pk),
            }
        )
    return rows


def judge_form_choices(scenario: Scenario) -> dict[str, Any]:
    """The Add-judge form's models, and the team's prompts that can judge this scenario's
    type: those using one of the type's response variables (``response``, ``response_a`` …,
    ``responses``, fenced or not); a generation prompt uses none of them."""
    versions = (
        PromptVersion.objects.filter(template__team=scenario.team)
        .select_related("template")
        .prefetch_related("blocks")
        .order_by("template__name", "-number")[:200]
    )
    wanted = judge_response_variables(scenario.type)
    return {
        "judge_models": LLMModel.objects.filter(
            connection__team=scenario.team, active=True
        ).select_related("connection"),
        "judge_prompts": [
            v
            for v in versions
            if wanted & set(variables_in(Block(b.title, b.body) for b in v.blocks.all()))
        ],
    }


def judge_response_variables(kind: str) -> set[str]:
    """The variables a judge prompt of scenario type ``kind`` shows its responses by."""
    found = registry.get(kind).judge_responses(["", ""], list(KEYS[:2]))
    names = {name for name in found if name.startswith("response")}
    return names | {f"{name}_fenced" for name in names}


FEEDBACK_ROWS = 200


def feedback(scenario: Scenario) -> dict[str, Any]:
    """The scenario page's flags and evaluators' comments: the latest of each, and how many
    there are."""
    flags = workspace_selectors.flags(scenario)
    comments = (
        Judgment.objects.filter(scenario=scenario, evaluator__isnull=False)
        .exclude(comment="")
        .select_related("evaluator", "task__item")
        .order_by("-pk")
    )
    return {
        "flags": list(flags[:FEEDBACK_ROWS]),
        "flag_count": flags.count(),
        "comments": list(comments[:FEEDBACK_ROWS]),
        "comment_count": comments.count(),
    }
