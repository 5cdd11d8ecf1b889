"""Reads of quality control: a scenario's assignees and groups, its gold tasks, and the
quality figures of each of its evaluators.

``quality(scenario)``, per evaluator: judgments; accuracy on gold (``gold_correct``); agreement
with the other people on the same (non-gold) tasks: for comparisons, rankings and labels the
share of their answers equal to the others' most common answer (tasks where the others tie are
left out), for ratings the mean absolute difference from the others' mean score (per dimension,
averaged); the median time per task; and flags: ``straight-lining`` (the same answer in at
least ``STRAIGHT_SHARE`` of at least ``STRAIGHT_MIN`` judgments, or, for ratings, one score
for every judgment of a dimension) and ``fast`` (a median time under ``FAST_SECONDS`` of the
type's analysis, over at least ``FAST_MIN`` timed judgments) and ``failed-attention`` (fewer
than ``ATTENTION_PASS`` of the attention checks answered as their instruction asked:
``attention_passed``, ``attention_failed``, ``attention_pass_rate``; checks count in
``judgments`` and nowhere else). Comparisons are compared by
the variant chosen, so raters shown a pair in either order agree when they chose the same
variant; straight-lining looks at the position chosen ("always A").
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count

from evalplatform.accounts.models import TeamGroup
from evaluations.models import Judgment, RaterExclusion, RaterKind
from evaluations.quality.services import submitters
from evaluations.workspace.services import presented
from scenarios.models import GoldKind, GoldTask, Scenario, ScenarioAssignee, ScenarioAssigneeGroup
from scenarios.types import registry

STRAIGHT_MIN = 20
STRAIGHT_SHARE = 0.9
FAST_MIN = 5
FAST_SECONDS = {"rankings": 5.0}
FAST_SECONDS_DEFAULT = 3.0
# A rating on a gold task counts as correct when every dimension is within this of gold's.
GOLD_RATING_TOLERANCE = 1
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
    return FAST_SECONDS.get(registry.of(scenario).analysis or "", FAST_SECONDS_DEFAULT)


def _winner(payload: Mapping[str, Any], shown: Sequence[int]) -> Any:
    """The variant chosen (or "tie"), whatever the order it was shown in."""
    winner = payload.get("winner")
    index = {"A": 0, "B": 1}.get(winner) if isinstance(winner, str) else None
    return shown[index] if index is not None and index < len(shown) else winner


def _key(analysis: str | None, payload: Mapping[str, Any], shown: Sequence[int]) -> Any:
    """The answer as one comparable value (what agreement compares)."""
    if analysis == "pairwise":
        return _winner(payload, shown)
    if analysis == "labels":
        return tuple(sorted(map(str, payload.get("labels") or [])))
    if analysis == "rankings":
        return tuple(payload.get("ranking") or [])
    return tuple(sorted((payload.get("scores") or {}).items()))


def _position_key(analysis: str | None, payload: Mapping[str, Any], shown: Sequence[int]) -> Any:
    """The answer by position (what straight-lining looks at)."""
    if analysis == "pairwise":
        return payload.get("winner")
    if analysis == "rankings":
        order = list(shown)
        return tuple(order.index(v) if v in order else v for v in payload.get("ranking") or [])
    return _key(analysis, payload, shown)


def _followed(analysis: str | None, payload: Mapping[str, Any], asked: Mapping[str, Any]) -> bool:
    """Whether an answer to an attention check is what its instruction asked for: exactly
    (by position for comparisons: "choose B" means the one shown second)."""
    if analysis == "pairwise":
        return payload.get("winner") == asked.get("winner")
    if analysis == "ratings":
        return (payload.get("scores") or {}) == (asked.get("scores") or {})
    if analysis == "labels":
        return sorted(payload.get("labels") or []) == sorted(asked.get("labels") or [])
    return list(payload.get("ranking") or []) == list(asked.get("ranking") or [])


def _correct(analysis: str | None, payload: Mapping[str, Any], gold: Mapping[str, Any]) -> bool:
    if analysis == "ratings":
        scores, wanted = payload.get("scores") or {}, gold.get("scores") or {}
        return all(
            isinstance(scores.get(dim), int | float)
            and abs(scores[dim] - value) <= GOLD_RATING_TOLERANCE
            for dim, value in wanted.items()
        )
    if analysis == "labels":
        return sorted(payload.get("labels") or []) == sorted(gold.get("labels") or [])
    if analysis == "rankings":
        return list(payload.get("ranking") or []) == list(gold.get("ranking") or [])
    return False  # comparisons: by the variant chosen, in ``quality``


def quality(scenario: Scenario) -> dict[str, Any]:
    """Every evaluator's quality figures (those with judgments, and the excluded)."""
    analysis = registry.of(scenario).analysis
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
    by_task: dict[int, dict[str, Any]] = defaultdict(dict)
    scores_by_task: dict[int, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for task, kind, user, username, external, shown, payload, spent in rows:
        shown = shown or []
        who = f"u{user}" if kind == RaterKind.HUMAN else f"x{external}"
        if kind == RaterKind.HUMAN and user is not None:
            names[user] = username
            mine[user].append(
                (
                    task,
                    _key(analysis, payload, shown),
                    _position_key(analysis, payload, shown),
                    payload,
                    shown,
                )
            )
            if spent is not None:
                times[user].append(spent)
        if task in known or (kind == RaterKind.HUMAN and user in excluded):
            continue
        by_task[task][who] = _key(analysis, payload, shown)
        scores_by_task[task][who] = payload.get("scores") or {}
    # Gold's answer of a comparison is the variant it names (answers given in another order,
    # imported ones, are compared by variant).
    gold_winner = (
        {pk: _winner(g.answer, presented(g.task)) for pk, g in gold.items()}
        if analysis == "pairwise"
        else {}
    )
    threshold = fast_seconds(scenario)
    evaluators = []
    for user in sorted(set(mine) | excluded, key=lambda u: names.get(u, "")):
        answers = mine.get(user, [])
        checks = [a for a in answers if a[0] in attention]
        passed = sum(_followed(analysis, a[3], attention[a[0]].answer) for a in checks)
        answers = [a for a in answers if a[0] not in attention]
        right = answered = 0
        for task, key, _, payload, _ in answers:
            if task in gold:
                answered += 1
                if analysis == "pairwise":
                    right += key == gold_winner[task]
                else:
                    right += _correct(analysis, payload, gold[task].answer)
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
                "agreement": _agreement(
                    analysis, f"u{user}", answers, gold, by_task, scores_by_task
                ),
                "median_seconds": (
                    round(statistics.median(times[user]) / 1000, 3) if times.get(user) else None
                ),
                "attention_passed": passed,
                "attention_failed": len(checks) - passed,
                "attention_pass_rate": round(passed / len(checks), 4) if checks else None,
                "flags": _flags(analysis, answers, times.get(user, []), threshold)
                + (
                    ["failed-attention"] if checks and passed / len(checks) < ATTENTION_PASS else []
                ),
                "excluded": user in excluded,
            }
        )
    return {
        "scenario": scenario.pk,
        "agreement_measure": (
            "mean absolute difference from the others' mean score"
            if analysis == "ratings"
            else "share of answers equal to the others' most common answer"
        ),
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


def _username(user_id: int) -> str:
    found = get_user_model().objects.filter(pk=user_id).first()
    return found.get_username() if found is not None else str(user_id)


def _agreement(
    analysis: str | None,
    me: str,
    answers: list[tuple[int, Any, Any, Mapping[str, Any], list[int]]],
    gold: Mapping[int, Any],
    by_task: Mapping[int, Mapping[str, Any]],
    scores_by_task: Mapping[int, Mapping[str, Mapping[str, Any]]],
) -> dict[str, Any]:
    compared: list[float] = []
    for task, key, _, payload, _ in answers:
        if task in gold:
            continue
        if analysis == "ratings":
            others = [s for who, s in scores_by_task.get(task, {}).items() if who != me]
            diffs = []
            for dim, value in (payload.get("scores") or {}).items():
                theirs = [o[dim] for o in others if isinstance(o.get(dim), int | float)]
                if theirs and isinstance(value, int | float):
                    diffs.append(abs(value - statistics.fmean(theirs)))
            if diffs:
                compared.append(statistics.fmean(diffs))
            continue
        counts = Counter(k for who, k in by_task.get(task, {}).items() if who != me)
        if not counts:
            continue
        (top, n), *rest = counts.most_common(2)
        if rest and rest[0][1] == n:
            continue  # the others tie: no majority to agree with
        compared.append(1.0 if key == top else 0.0)
    return {
        "tasks": len(compared),
        "value": round(statistics.fmean(compared), 4) if compared else None,
    }


def _flags(
    analysis: str | None,
    answers: list[tuple[int, Any, Any, Mapping[str, Any], list[int]]],
    times: list[int],
    threshold: float,
) -> list[str]:
    flags = []
    if len(answers) >= STRAIGHT_MIN:
        same = Counter(position for _, _, position, _, _ in answers).most_common(1)[0][1]
        flat = False
        if analysis == "ratings":
            by_dim: dict[str, set[Any]] = defaultdict(set)
            for _, _, _, payload, _ in answers:
                for dim, value in (payload.get("scores") or {}).items():
                    by_dim[dim].add(value)
            flat = any(len(values) == 1 for values in by_dim.values())
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
