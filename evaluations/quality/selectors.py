"""Reads of quality control: a scenario's assignees and groups, its gold tasks, and the
quality figures of each of its evaluators.

``quality(scenario)``, per evaluator: judgments; accuracy on gold (``gold_correct``); agreement
with the other people on the same (non-gold) tasks: for comparisons, rankings and labels the
share of their answers equal to the others' most common answer (tasks where the others tie are
left out), for ratings the mean absolute difference from the others' mean score (per dimension,
averaged); the median time per task; and flags: ``straight-lining`` (the same answer in at
least ``STRAIGHT_SHARE`` of at least ``STRAIGHT_MIN`` judgments, or, for ratings, one score
for every judgment of a dimension) and ``fast`` (a median time under the type's ``fast_seconds``,
over at least ``FAST_MIN`` timed judgments) and ``failed-attention`` (fewer
than ``ATTENTION_PASS`` of the attention checks answered as their instruction asked:
``attention_passed``, ``attention_failed``, ``attention_pass_rate``; checks count in
``judgments`` and nowhere else). Comparisons are compared by
the variant chosen, so raters shown a pair in either order agree when they chose the same
variant; straight-lining looks at the position chosen ("always A").
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count

from evalplatform.accounts.models import TeamGroup
from evaluations.judgments.models import Judgment, RaterKind
from evaluations.quality.models import RaterExclusion
from evaluations.quality.services import submitters
from evaluations.workspace.services import presented
from scenarios.models import GoldKind, GoldTask, Scenario, ScenarioAssignee, ScenarioAssigneeGroup
from scenarios.types import registry
from scenarios.types.base import ScenarioKind
from scenarios.types.rating import GOLD_TOLERANCE

STRAIGHT_MIN = 20
STRAIGHT_SHARE = 0.9
FAST_MIN = 5
# A rating on a gold task counts as correct when every dimension is within this of gold's.
GOLD_RATING_TOLERANCE = GOLD_TOLERANCE
# An evaluator who follows fewer than this share of the attention checks they answered is
# flagged "failed-attention".
ATTENTION_PASS = 0.8


def assignees(scenario: Scenario) -> list[ScenarioAssignee]:
    return list(ScenarioAssignee.objects.filter(scenario=scenario).select_related("user"))


def gold_tasks(scenario: Scenario, kind: str = GoldKind.GOLD) -> list[GoldTask]:
    """The scenario's gold tasks (``kind``: or its attention checks) with their tasks."""
    return list(GoldTask.objects.filter(scenario=scenario, kind=kind).select_related("task"))


def excluded_ids(scenario: Scenario) -> set[int]:
    return set(
        RaterExclusion.objects.filter(scenario=scenario).values_list("evaluator_id", flat=True)
    )


def fast_seconds(scenario: Scenario) -> float:
    return registry.of(scenario).fast_seconds


def quality(scenario: Scenario) -> dict[str, Any]:
    """Every evaluator's quality figures (those with judgments, and the excluded)."""
    answers_of = registry.of(scenario)  # the scenario type: what its answers mean
    gold = {g.task_id: g for g in gold_tasks(scenario)}
    attention = {g.task_id: g for g in gold_tasks(scenario, GoldKind.ATTENTION)}
    # Neither kind is a real task: what others answered there is no agreement to measure.
    known = gold.keys() | attention.keys()
    excluded = excluded_ids(scenario)
    rows = list(
        Judgment.objects.filter(scenario=scenario)
        .exclude(rater_kind=RaterKind.JUDGE)
        .values_list(
            "task_id",
            "rater_kind",
            "evaluator_id",
            "evaluator__username",
            "external_rater_id",
            "presented",
            "payload",
            "time_spent_ms",
        )
        .order_by("pk")
    )
    names: dict[int, str] = {}
    mine: dict[int, list[tuple[int, Any, Any, Mapping[str, Any], list[int]]]] = defaultdict(list)
    times: dict[int, list[int]] = defaultdict(list)
    # Each task's answers by rater ("u<id>" evaluators, "x<id>" imported raters), gold left out
    # and excluded evaluators too: others agree with the raters the analytics keep.
    by_task: dict[int, dict[str, tuple[Any, Mapping[str, Any]]]] = defaultdict(dict)
    for task, kind, user, username, external, shown, payload, spent in rows:
        shown = shown or []
        who = f"u{user}" if kind == RaterKind.HUMAN else f"x{external}"
        if kind == RaterKind.HUMAN and user is not None:
            names[user] = username
            mine[user].append(
                (
                    task,
                    answers_of.agreement_key(payload, shown),
                    answers_of.position_key(payload, shown),
                    payload,
                    shown,
                )
            )
            if spent is not None:
                times[user].append(spent)
        if task in known or (kind == RaterKind.HUMAN and user in excluded):
            continue
        by_task[task][who] = (answers_of.agreement_key(payload, shown), payload)
    # Gold's answer as the task presents it (answers given in another order, imported ones,
    # are compared by variant where the type's answers name variants).
    gold_shown = {pk: presented(g.task) for pk, g in gold.items()}
    threshold = fast_seconds(scenario)
    evaluators = []
    for user in sorted(set(mine) | excluded, key=lambda u: names.get(u, "")):
        answers = mine.get(user, [])
        checks = [a for a in answers if a[0] in attention]
        passed = sum(answers_of.followed(a[3], attention[a[0]].answer) for a in checks)
        answers = [a for a in answers if a[0] not in attention]
        held = [(p, s, gold[t].answer, gold_shown[t]) for t, _, _, p, s in answers if t in gold]
        answered, right = len(held), sum(answers_of.correct(*one) for one in held)
        evaluators.append(
            {
                "evaluator": user,
                "username": names.get(user) or _username(user),
                "judgments": len(answers) + len(checks),
                "gold": {
                    "answered": answered,
                    "correct": right,
                    "accuracy": right / answered if answered else None,
                },
                "agreement": _agreement(answers_of, f"u{user}", answers, gold, by_task),
                "median_seconds": _median_seconds(times.get(user, [])),
            }
            | _attention(passed, len(checks))
            | {
                "flags": _flags(answers_of, answers, times.get(user, []), threshold)
                + (["failed-attention"] if _failed(passed, len(checks)) else []),
                "excluded": user in excluded,
            }
        )
    return {
        "scenario": scenario.pk,
        "agreement_measure": answers_of.agreement_measure,
        "thresholds": {
            "straight_lining": {"share": STRAIGHT_SHARE, "min_judgments": STRAIGHT_MIN},
            "fast": {"median_seconds": threshold, "min_timed": FAST_MIN},
            "gold_rating_tolerance": GOLD_RATING_TOLERANCE,
            "attention_pass_rate": ATTENTION_PASS,
        },
        "gold_tasks": len(gold),
        "attention_checks": len(attention),
        "evaluators": evaluators,
    }


def _median_seconds(times: list[int]) -> float | None:
    return round(statistics.median(times) / 1000, 3) if times else None


def _attention(passed: int, checks: int) -> dict[str, Any]:
    return {
        "attention_passed": passed,
        "attention_failed": checks - passed,
        "attention_pass_rate": round(passed / checks, 4) if checks else None,
    }


def _failed(passed: int, checks: int) -> bool:
    """Fewer than ``ATTENTION_PASS`` of the attention checks followed."""
    return bool(checks) and passed / checks < ATTENTION_PASS


def _username(user_id: int) -> str:
    found = get_user_model().objects.filter(pk=user_id).first()
    return found.get_username() if found is not None else str(user_id)


def _agreement(
    kind: ScenarioKind,
    me: str,
    answers: list[tuple[int, Any, Any, Mapping[str, Any], list[int]]],
    gold: Mapping[int, Any],
    by_task: Mapping[int, Mapping[str, tuple[Any, Mapping[str, Any]]]],
) -> dict[str, Any]:
    """A person's agreement with the others on the same tasks, as the type measures it."""
    compared: list[float] = []
    for task, key, _, payload, _ in answers:
        if task in gold:
            continue
        others = [given for who, given in by_task.get(task, {}).items() if who != me]
        found = kind.agreement_with(payload, key, others)
        if found is not None:
            compared.append(found)
    return {
        "tasks": len(compared),
        "value": round(statistics.fmean(compared), 4) if compared else None,
    }


def _flags(
    kind: ScenarioKind,
    answers: list[tuple[int, Any, Any, Mapping[str, Any], list[int]]],
    times: list[int],
    threshold: float,
) -> list[str]:
    flags = []
    if len(answers) >= STRAIGHT_MIN:
        same = Counter(position for _, _, position, _, _ in answers).most_common(1)[0][1]
        flat = kind.flat([payload for _, _, _, payload, _ in answers])
        if flat or same / len(answers) >= STRAIGHT_SHARE:
            flags.append("straight-lining")
    if len(times) >= FAST_MIN and statistics.median(times) < threshold * 1000:
        flags.append("fast")
    return flags


def gold_view(scenario: Scenario) -> dict[str, Any]:
    """The gold tasks as the API shows them to managers."""
    return {
        "gold_rate": scenario.gold_rate,
        "tasks": [
            {"task": g.task_id, "position": g.task.position, "answer": g.answer}
            for g in gold_tasks(scenario)
        ],
    }


def assigned_groups(scenario: Scenario) -> list[ScenarioAssigneeGroup]:
    """The scenario's assigned groups, each with ``member_count`` (its members now)."""
    return list(
        ScenarioAssigneeGroup.objects.filter(scenario=scenario)
        .select_related("group")
        .annotate(member_count=Count("group__members"))
        .order_by("group__name")
    )


def assignees_view(scenario: Scenario) -> dict[str, Any]:
    rows = assignees(scenario)
    groups = assigned_groups(scenario)
    return {
        "default_quota": scenario.default_quota,
        "everyone": not rows and not groups,
        "assignees": [
            {"user": a.user_id, "username": a.user.get_username(), "quota": a.quota} for a in rows
        ],
        "groups": [
            {"group": g.group_id, "name": g.group.name, "members": g.member_count}  # type: ignore[attr-defined]
            for g in groups
        ],
    }


def page_context(scenario: Scenario) -> dict[str, Any]:
    """What the scenario page's "Who evaluates" and "Quality" sections show a manager: each
    member who may submit (chosen or not, with their quota), the quality figures, the gold
    tasks' number and rate."""
    chosen = {a.user_id: a.quota for a in assignees(scenario)}
    members = sorted(submitters(scenario).items(), key=lambda pair: pair[1].get_username())
    groups_chosen = {g.group_id for g in assigned_groups(scenario)}
    team_groups = TeamGroup.objects.filter(team_id=scenario.team_id).annotate(
        member_count=Count("members")
    )
    return {
        "who": [{"user": u, "chosen": pk in chosen, "quota": chosen.get(pk)} for pk, u in members],
        "who_groups": [
            {"group": g, "chosen": g.pk in groups_chosen, "members": g.member_count}  # type: ignore[attr-defined]
            for g in team_groups.order_by("name")
        ],
        "who_everyone": not chosen and not groups_chosen,
        "attention_checks": gold_tasks(scenario, GoldKind.ATTENTION),
        "quality": quality(scenario),
    }
