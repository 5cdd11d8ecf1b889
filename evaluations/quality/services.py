"""Who evaluates a scenario, its gold tasks, and whose judgments its analytics leave out.

- ``assignees_set``: the members and groups chosen to evaluate it (none: every member of the
  team who may submit, as by default) with their quotas, and the scenario's default quota.
- ``gold_set``: its gold tasks with their known answers (each checked as an evaluator's
  answer would be) and the rate they are mixed in at (attention checks, the other kind of
  ``GoldTask``, are ``evaluations.quality.attention``'s and stay as they are).
- ``rater_exclude`` / ``rater_include``: leave an evaluator's judgments out of the analytics,
  or take them back in.

Each takes the acting user (``feature:scenarios:manage``), checks everything before writing,
writes in one transaction and records itself in the audit log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from evalplatform import validation
from evalplatform.accounts import audit, policy
from evalplatform.accounts.models import Membership, TeamGroup
from evalplatform.accounts.roles import EVALUATIONS_SUBMIT, ROLE_FEATURES, SCENARIOS_MANAGE
from evalplatform.errors import FieldErrors, Forbidden, NotFound
from evaluations.invitations.models import Invitation
from evaluations.judgments.models import Judgment
from evaluations.quality.models import RaterExclusion
from evaluations.workspace import services as workspace
from scenarios.models import (
    GoldKind,
    GoldTask,
    Scenario,
    ScenarioAssignee,
    ScenarioAssigneeGroup,
    Task,
)

MAX_ASSIGNEES = 1000
MAX_GOLD = 10_000
QUOTA_MAX = validation.QUOTA_MAX
GOLD_RATE_MAX = 0.5


def _manage(user: Any, scenario: Scenario) -> None:
    if not policy.may(user, SCENARIOS_MANAGE, scenario):
        raise Forbidden()


def _quota(value: Any, *, name: str, errors: dict[str, str]) -> int | None:
    return validation.whole_number(
        value,
        name=name,
        lo=1,
        hi=QUOTA_MAX,
        errors=errors,
        message=f"A whole number of tasks from 1 to {QUOTA_MAX:,}, or null for no limit.",
    )


def submitters(scenario: Scenario) -> dict[int, Any]:
    """The members of the scenario's team who may submit judgments, by user id."""
    roles = [role for role, codes in ROLE_FEATURES.items() if EVALUATIONS_SUBMIT in codes]
    members = Membership.objects.filter(
        team_id=scenario.team_id, role__in=roles, user__is_active=True
    ).select_related("user")
    return {m.user_id: m.user for m in members}


def assignees_set(*, user: Any, scenario: Scenario, data: Any) -> list[ScenarioAssignee]:
    """Replace the scenario's assignees. ``data``: a list of ``{"user": id or username,
    "quota": n or null}``, or ``{"assignees": [...], "groups": [id or name, ...],
    "default_quota": n or null}`` (what is left out stays as it is: a list leaves the groups
    and the default quota). The members of an assigned group evaluate it as they are when
    they ask (with the default quota, unless named with their own). No assignees and no
    groups give the scenario back to every member who may submit."""
    _manage(user, scenario)
    errors: dict[str, str] = {}
    default_quota = scenario.default_quota
    group_refs: Any = None
    if isinstance(data, Mapping):
        unknown = set(data) - {"assignees", "groups", "default_quota"}
        if unknown:
            errors["non_field_errors"] = f"Unknown fields: {', '.join(sorted(map(str, unknown)))}."
        if "default_quota" in data:
            default_quota = _quota(data["default_quota"], name="default_quota", errors=errors)
        entries = data.get("assignees", [])
        group_refs = data.get("groups")
    else:
        entries = data
    if not isinstance(entries, list):
        raise FieldErrors({"assignees": "A list of {user, quota}."})
    if len(entries) > MAX_ASSIGNEES:
        raise FieldErrors({"assignees": f"At most {MAX_ASSIGNEES:,} assignees."})
    pool = submitters(scenario)
    by_name = {u.get_username(): pk for pk, u in pool.items()}
    chosen: dict[int, int | None] = {}
    for index, entry in enumerate(entries):
        where = f"assignees.{index}"
        if not isinstance(entry, Mapping) or set(entry) - {"user", "quota"}:
            errors[where] = "An object {user, quota}."
            continue
        ref = entry.get("user")
        found: int | None = None
        if isinstance(ref, int) and not isinstance(ref, bool):
            found = ref if ref in pool else None
        elif isinstance(ref, str):
            found = by_name.get(ref)
        if found is None:
            errors[f"{where}.user"] = (
                f"{str(ref)[:200]!r} is no member of the team who may evaluate "
                "(feature:evaluations:submit)."
            )
            continue
        if found in chosen:
            errors[f"{where}.user"] = f"{str(ref)[:200]!r} is named twice."
            continue
        chosen[found] = _quota(entry.get("quota"), name=f"{where}.quota", errors=errors)
    groups = None if group_refs is None else _groups(scenario, group_refs, errors)
    if errors:
        raise FieldErrors(errors)
    with transaction.atomic():
        Scenario.objects.filter(pk=scenario.pk).update(default_quota=default_quota)
        scenario.default_quota = default_quota
        ScenarioAssignee.objects.filter(scenario=scenario).delete()
        rows = ScenarioAssignee.objects.bulk_create(
            ScenarioAssignee(scenario=scenario, user_id=pk, quota=quota)
            for pk, quota in chosen.items()
        )
        if groups is not None:
            ScenarioAssigneeGroup.objects.filter(scenario=scenario).delete()
            ScenarioAssigneeGroup.objects.bulk_create(
                ScenarioAssigneeGroup(scenario=scenario, group=group) for group in groups
            )
        audit.record(
            user=user,
            team=scenario.team_id,
            action="scenario.assignees.set",
            target=scenario,
            assignees={pool[pk].get_username(): quota for pk, quota in chosen.items()},
            default_quota=default_quota,
            groups=sorted(
                ScenarioAssigneeGroup.objects.filter(scenario=scenario).values_list(
                    "group__name", flat=True
                )
            ),
        )
    return rows


def _groups(scenario: Scenario, refs: Any, errors: dict[str, str]) -> list[TeamGroup]:
    """The groups of the scenario's team that ``refs`` names (ids or names)."""
    if not isinstance(refs, list):
        errors["groups"] = "A list of groups of the team (ids or names)."
        return []
    if len(refs) > MAX_ASSIGNEES:
        errors["groups"] = f"At most {MAX_ASSIGNEES:,} groups."
        return []
    team_groups = list(TeamGroup.objects.filter(team_id=scenario.team_id))
    return validation.each_named(
        refs,
        by_id={g.pk: g for g in team_groups},
        by_name={g.name: g for g in team_groups},
        field="groups",
        errors=errors,
        unknown="no group of the team",
    )


def gold_entries(raw: Any, filename: str = "") -> Any:
    """The entries of an uploaded gold file: JSON (a list, or an object with ``tasks``) or
    JSON lines of ``{"task", "answer"}``."""
    text = raw.read() if hasattr(raw, "read") else raw
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FieldErrors({"file": "The file is not UTF-8 text."}) from exc
    try:
        return validation.json_value(text)
    except validation.UnstorableJSON as exc:
        raise FieldErrors({"file": str(exc)}) from exc
    except ValueError:
        pass
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append(validation.json_value(line))
        except validation.UnstorableJSON as exc:
            raise FieldErrors({"file": f"Line {number}: {exc}"}) from exc
        except ValueError as exc:
            raise FieldErrors(
                {"file": f"Line {number} is not JSON: give a JSON list or JSON lines."}
            ) from exc
    return entries


def _gold_answers(
    scenario: Scenario, entries: list[Any], errors: dict[str, str]
) -> dict[int, dict[str, Any]]:
    """Each entry's checked answer by task id; what is wrong goes to ``errors``."""
    answers: dict[int, dict[str, Any]] = {}
    if entries:
        ids = [e.get("task") for e in entries if isinstance(e, Mapping)]
        wanted = [i for i in ids if isinstance(i, int) and 0 < i <= validation.INT_MAX]
        # An attention check is no task to make gold of (it shows its instruction instead).
        tasks = (
            Task.objects.filter(scenario=scenario, pk__in=wanted)
            .exclude(gold__kind=GoldKind.ATTENTION)
            .in_bulk()
        )
        for index, entry in enumerate(entries):
            where = f"tasks.{index}"
            if not isinstance(entry, Mapping) or set(entry) != {"task", "answer"}:
                errors[where] = "An object {task, answer}."
                continue
            ref = entry["task"]
            task = None if isinstance(ref, bool) or not isinstance(ref, int) else tasks.get(ref)
            if task is None:
                errors[f"{where}.task"] = f"{str(ref)[:50]!r} is no task of this scenario."
                continue
            if task.pk in answers:
                errors[f"{where}.task"] = f"Task {task.pk} is named twice."
                continue
            try:
                answers[task.pk] = workspace.check_answer(scenario, task, entry["answer"])
            except FieldErrors as exc:
                for key, messages in exc.errors.items():
                    errors[f"{where}.{key}"] = " ".join(messages)
    return answers


def gold_set(*, user: Any, scenario: Scenario, data: Any) -> list[GoldTask]:
    """Replace the scenario's gold tasks. ``data``: a list of ``{"task": id, "answer": {…}}``
    (the answer as an evaluator would send it, in the task's presented order), or
    ``{"tasks": [...], "gold_rate": r}`` (``gold_rate`` from 0 to 0.5; a list leaves it as it
    is; without ``tasks`` the gold tasks stay as they are)."""
    _manage(user, scenario)
    errors: dict[str, str] = {}
    rate = scenario.gold_rate
    entries: Any = None
    if isinstance(data, Mapping):
        unknown = set(data) - {"tasks", "gold_rate"}
        if unknown:
            errors["non_field_errors"] = f"Unknown fields: {', '.join(sorted(map(str, unknown)))}."
        if "gold_rate" in data:
            checked = validation.number(
                data["gold_rate"], name="gold_rate", lo=0.0, hi=GOLD_RATE_MAX, errors=errors
            )
            rate = rate if checked is None else checked
        entries = data.get("tasks")
    else:
        entries = data
    if entries is not None and not isinstance(entries, list):
        raise FieldErrors({"tasks": "A list of {task, answer}."})
    if entries is not None and len(entries) > MAX_GOLD:
        raise FieldErrors({"tasks": f"At most {MAX_GOLD:,} gold tasks."})
    answers = _gold_answers(scenario, entries or [], errors)
    if errors:
        raise FieldErrors(errors)
    with transaction.atomic():
        Scenario.objects.filter(pk=scenario.pk).update(gold_rate=rate)
        scenario.gold_rate = rate
        if entries is not None:
            GoldTask.objects.filter(scenario=scenario, kind=GoldKind.GOLD).delete()
            GoldTask.objects.bulk_create(
                GoldTask(scenario=scenario, task_id=pk, answer=answer)
                for pk, answer in answers.items()
            )
        audit.record(
            user=user,
            team=scenario.team_id,
            action="scenario.gold.set",
            target=scenario,
            gold_rate=rate,
            tasks=None if entries is None else sorted(answers),
        )
    return list(GoldTask.objects.filter(scenario=scenario, kind=GoldKind.GOLD))


def gold_mark(*, user: Any, scenario: Scenario, task_id: Any, answer: Any) -> GoldTask:
    """Make one task gold with ``answer`` (as an evaluator would send it, in the task's
    presented order), or replace its gold answer: the review page's form, one task at a
    time. The other gold tasks stay."""
    _manage(user, scenario)
    errors: dict[str, str] = {}
    answers = _gold_answers(scenario, [{"task": task_id, "answer": answer}], errors)
    found = {key.removeprefix("tasks.0."): message for key, message in errors.items()}
    others = GoldTask.objects.filter(scenario=scenario, kind=GoldKind.GOLD)
    if isinstance(task_id, int):
        others = others.exclude(task_id=task_id)
    if not found and others.count() >= MAX_GOLD:
        found["task"] = f"At most {MAX_GOLD:,} gold tasks."
    if found:
        raise FieldErrors(found)
    ((pk, checked),) = answers.items()
    with transaction.atomic():
        gold, _ = GoldTask.objects.update_or_create(
            task_id=pk, defaults={"scenario": scenario, "kind": GoldKind.GOLD, "answer": checked}
        )
        audit.record(
            user=user, team=scenario.team_id, action="scenario.gold.mark", target=scenario, task=pk
        )
    return gold


def gold_unmark(*, user: Any, scenario: Scenario, task_id: int) -> bool:
    """The task is gold no more (its answers count again); False when it was not gold."""
    _manage(user, scenario)
    with transaction.atomic():
        removed, _ = GoldTask.objects.filter(
            scenario=scenario, task_id=task_id, kind=GoldKind.GOLD
        ).delete()
        if removed:
            audit.record(
                user=user,
                team=scenario.team_id,
                action="scenario.gold.unmark",
                target=scenario,
                task=task_id,
            )
    return bool(removed)


def rater(scenario: Scenario, ref: Any) -> Any:
    """An evaluator of the scenario by id or username: a member of its team, someone
    invited to it, or someone who judged it; ``NotFound`` for anyone else."""
    users = get_user_model().objects.all()
    ref = str(ref)
    if ref.isascii() and ref.isdigit():
        number = validation.digits(ref, most=10)
        short = number is not None and number <= validation.INT_MAX
        found = users.filter(pk=number).first() if short and number is not None else None
    else:
        found = users.filter(username=ref[:150]).first()
    if found is None or not (
        Membership.objects.filter(team_id=scenario.team_id, user=found).exists()
        or Invitation.objects.filter(scenario=scenario, accepted_by=found).exists()
        or Judgment.objects.filter(scenario=scenario, evaluator=found).exists()
    ):
        raise NotFound()
    return found


def rater_exclude(
    *, user: Any, scenario: Scenario, evaluator: Any, reason: Any = ""
) -> tuple[RaterExclusion, bool]:
    """Leave the evaluator's judgments out of the scenario's analytics (the judgments stay);
    (the exclusion, whether it is new)."""
    _manage(user, scenario)
    errors: dict[str, str] = {}
    reason = validation.text(reason, name="reason", errors=errors, max_length=500)
    if errors:
        raise FieldErrors(errors)
    found = RaterExclusion.objects.filter(scenario=scenario, evaluator=evaluator).first()
    if found is not None:
        return found, False
    try:
        with transaction.atomic():
            exclusion = RaterExclusion.objects.create(
                scenario=scenario, evaluator=evaluator, excluded_by=user, reason=reason
            )
            audit.record(
                user=user,
                team=scenario.team_id,
                action="scenario.rater.exclude",
                target=scenario,
                evaluator=evaluator.get_username(),
                reason=reason,
            )
    except IntegrityError:  # excluded by a request at the same moment
        return RaterExclusion.objects.get(scenario=scenario, evaluator=evaluator), False
    return exclusion, True


def rater_include(*, user: Any, scenario: Scenario, evaluator: Any) -> None:
    """Take an excluded evaluator's judgments back into the analytics (nothing to do, and
    nothing audited, when they are not excluded)."""
    _manage(user, scenario)
    with transaction.atomic():
        deleted, _ = RaterExclusion.objects.filter(scenario=scenario, evaluator=evaluator).delete()
        if deleted:
            audit.record(
                user=user,
                team=scenario.team_id,
                action="scenario.rater.include",
                target=scenario,
                evaluator=evaluator.get_username(),
            )
