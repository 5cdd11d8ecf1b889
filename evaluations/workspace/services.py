"""Handing tasks to evaluators and taking their answers.

``next_task``: the evaluator's open reservation in the scenario if there is one (resume where
you left off); else a task they were never handed, among those with a free place (fewer than
``overlap`` reservations and judgments), the least taken first (balancing the load). The
task row is locked while its place is taken (``SELECT … FOR UPDATE SKIP LOCKED`` on
PostgreSQL; SQLite's write lock, taken at the start of every transaction, serializes it
there), so under any number of concurrent evaluators no task gets more than ``overlap``
judgments; one evaluator's concurrent requests take turns on their user row, and hold one
reservation per scenario (a constraint). Reservations last ``RESERVATION`` and expire when
abandoned: a scheduled sweep gives their places back, and so does ``next_task`` when it
finds nothing else. An evaluator with a quota (``access.quota_of``) is handed nothing more once
they hold that many judgments and reservations in the scenario (counted under their user
row's lock); gold tasks and attention checks come only through the seeded draws of
``_gold_draw``, at the scenario's ``gold_rate`` and ``attention_rate``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from evalplatform import validation
from evalplatform.errors import Conflict, FieldErrors, NotFound
from evalplatform.prepared import Prepared
from evaluations.judgments.models import Assignment, AssignmentStatus, Judgment, RaterKind
from evaluations.workspace import access
from evaluations.workspace.selectors import TASK_VIEW
from scenarios.models import GoldKind, GoldTask, Scenario, ScenarioStatus, Task, Variant
from scenarios.types import registry
from scenarios.types.base import KEYS

RESERVATION = timedelta(minutes=30)


def _may_submit(user: Any, scenario: Scenario) -> None:
    if not access.may_evaluate(user, scenario):
        raise NotFound()


def presented(task: Task) -> list[int]:
    """The variant ids in the order the rater sees them."""
    if task.order:
        return list(task.order)
    return [v for v in (task.variant_a_id, task.variant_b_id) if v is not None]


def expire_reservations(scenario: Scenario | None = None) -> int:
    """Abandoned reservations give their places back (in one scenario, or in all)."""
    now = timezone.now()
    expired = 0
    stale_rows = Assignment.objects.filter(status=AssignmentStatus.RESERVED, expires_at__lt=now)
    if scenario is not None:
        stale_rows = stale_rows.filter(scenario=scenario)
    with transaction.atomic():
        stale = list(stale_rows.select_for_update().values_list("pk", "task_id"))
        for pk, task_id in stale:
            if Assignment.objects.filter(pk=pk, status=AssignmentStatus.RESERVED).update(
                status=AssignmentStatus.EXPIRED
            ):
                Task.objects.filter(pk=task_id, taken__gt=0).update(taken=F("taken") - 1)
                expired += 1
    return expired


def next_task(*, user: Any, scenario: Scenario) -> Assignment | None:
    """The evaluator's current or next assignment in an open scenario; None when there is
    nothing left for them."""
    _may_submit(user, scenario)
    if scenario.status != ScenarioStatus.OPEN:
        raise Conflict(f"The scenario is {scenario.status}: there is nothing to evaluate.")
    found = _reserve(user, scenario)
    if found is None and expire_reservations(scenario):
        # Abandoned places are swept here when nothing else is left (and every few minutes
        # by ``evaluations.tasks.expire_reservations``), not on every request.
        found = _reserve(user, scenario)
    return found


def _reserve(user: Any, scenario: Scenario) -> Assignment | None:
    try:
        return _reserve_once(user, scenario)
    except IntegrityError:
        # Another request of this evaluator reserved meanwhile (the constraint
        # ``one_reservation_per_evaluator`` let only one in): that reservation is the answer.
        return _reserve_once(user, scenario)


# The queries of every "next", compiled once per process (``evalplatform.prepared``):
# the user's row locked, with their own quota in the scenario (``access.own_quota``) ...
_LOCK_USER = Prepared(
    lambda user, scenario: (
        get_user_model()
        .objects.select_for_update()
        .filter(pk=user)
        .annotate(own_quota=access.own_quota(user, scenario))
        .values_list("own_quota")
    ),
    user=int,
    scenario=int,
)
# ... their open reservation in the scenario, with its task as the task's view needs it ...
_RESERVED = Prepared(
    lambda user, scenario: (
        Assignment.objects.filter(
            scenario_id=scenario, evaluator_id=user, status=AssignmentStatus.RESERVED
        )
        .select_related(*(f"task__{name}" for name in TASK_VIEW))
        .order_by("created_at")[:1]
    ),
    user=int,
    scenario=int,
)


def _candidates(user: Any, scenario: Any, overlap: Any) -> Any:
    """The tasks with a free place the user was never handed, gold aside, least taken first:
    the first of them locked (skipping those locked by others) where the database can.

    The task is chosen from the task table alone, the user's tasks and the gold ones as
    lists (``NOT IN``: PostgreSQL hashes each once), and only the one chosen is joined to
    what the task's view shows. The plan then stays cheap when the statistics are stale,
    as they are until autovacuum's next look after a scenario's tasks were made in bulk:
    joined before the limit and with the user's tasks looked up task by task, PostgreSQL
    planned for one row and spent 28 ms a ``next`` on 1,400 tasks, against 0.8 ms."""
    gold = GoldTask.objects.filter(scenario_id=scenario).values("task_id")
    mine = Assignment.objects.filter(scenario_id=scenario, evaluator_id=user).values("task_id")
    first = (
        Task.objects.filter(scenario_id=scenario, taken__lt=overlap)
        .exclude(pk__in=mine)
        .exclude(pk__in=gold)
        .order_by("taken", "position")
    )
    if connection.features.has_select_for_update_skip_locked:
        first = first.select_for_update(skip_locked=True)
    return Task.objects.filter(pk__in=first.values("pk")[:1]).select_related(*TASK_VIEW).order_by()


# ... and the next task to hand them.
_CANDIDATE = Prepared(_candidates, user=int, scenario=int, overlap=int)


def _reserve_once(user: Any, scenario: Scenario) -> Assignment | None:
    now = timezone.now()
    with transaction.atomic():
        # One evaluator's requests take turns (their user row is the lock), so concurrent
        # "next" requests find the reservation the first one made. The same query reads
        # their own quota in the scenario.
        ((own_quota,),) = _LOCK_USER.objects(user=user.pk, scenario=scenario.pk)
        current = _RESERVED.first(user=user.pk, scenario=scenario.pk)
        if current is not None and current.expires_at <= now:
            # Past its time but not swept yet: it still holds its place, so it is renewed
            # (unless the sweep takes it meanwhile; then the evaluator gets another task).
            renewed = Assignment.objects.filter(
                pk=current.pk, status=AssignmentStatus.RESERVED
            ).update(expires_at=now + RESERVATION)
            current.expires_at = now + RESERVATION
            current = current if renewed else None
        if current is not None:
            current.scenario = scenario
            return current
        limit = access.quota_of(scenario, own_quota)
        if limit is not None and _held(user, scenario) >= limit:
            return None
        task = _gold_draw(user, scenario)
        if task is None:
            task = _CANDIDATE.first(user=user.pk, scenario=scenario.pk, overlap=scenario.overlap)
            if task is None:
                return None
            Task.objects.filter(pk=task.pk).update(taken=F("taken") + 1)
        assignment = Assignment.objects.create(
            task=task,
            scenario=scenario,
            evaluator=user,
            expires_at=now + RESERVATION,
        )
        assignment.scenario = scenario
        return assignment


def _held(user: Any, scenario: Scenario) -> int:
    """The tasks of the scenario the evaluator holds: answered or reserved."""
    answered = Judgment.objects.filter(scenario=scenario, evaluator=user).count()
    return (
        answered
        + Assignment.objects.filter(
            scenario=scenario, evaluator=user, status=AssignmentStatus.RESERVED
        ).count()
    )


def _gold_draw(user: Any, scenario: Scenario) -> Task | None:
    """A gold task the evaluator was never handed, with chance ``gold_rate``, else an
    attention check they were never handed, with chance ``attention_rate``: each drawn from
    a generator seeded by the kind, the scenario's seed, the evaluator and the number of tasks
    they were handed, so a stream is reproducible. Neither kind holds a place of the overlap
    (every evaluator may answer each), so they are neither locked nor counted in ``taken``."""
    handed: int | None = None
    for kind, rate in (
        (GoldKind.GOLD.value, scenario.gold_rate),
        (GoldKind.ATTENTION.value, scenario.attention_rate),
    ):
        if rate <= 0:
            continue
        if handed is None:
            handed = Assignment.objects.filter(scenario=scenario, evaluator=user).count()
        seed = f"{kind}:{scenario.seed}:{scenario.pk}:{user.pk}:{handed}"
        draw = random.Random(seed).random()  # noqa: S311 (a reproducible draw, not a secret)
        if draw >= rate:
            continue
        unseen = (
            Task.objects.filter(scenario=scenario, gold__kind=kind)
            .select_related(*TASK_VIEW)
            .exclude(assignments__evaluator=user)
            .order_by("position")
        )
        found = unseen.first()
        if found is not None:
            return found
    return None


def skip(*, user: Any, assignment: Assignment) -> Assignment:
    """Give the task back; it is not handed to this evaluator again."""
    with transaction.atomic():
        assignment = _own(user, assignment)
        if assignment.status != AssignmentStatus.RESERVED:
            raise Conflict(f"This task is already {assignment.status}.")
        assignment.status, assignment.completed_at = AssignmentStatus.SKIPPED, timezone.now()
        assignment.save(update_fields=["status", "completed_at"])
        Task.objects.filter(pk=assignment.task_id, taken__gt=0).update(taken=F("taken") - 1)
    return assignment


def own_locked(user: Any, assignment: Assignment) -> Assignment:
    """The user's own assignment, locked, with its scenario and task (run in a transaction);
    ``NotFound`` for anyone else's."""
    return _own(user, assignment)


# Only the assignment's row is locked (one answer, skip or flag at a time): its scenario is
# held by ``_hold_scenario``, and its task needs no lock (a live reservation holds its place;
# ``taken`` changes by atomic updates, and an expired one locks the task itself).
_OWN_LOCKED = Prepared(
    lambda pk, user: access.with_scenario_open_to(
        access.Someone(user),
        Assignment.objects.select_for_update(of=("self",))
        .select_related("scenario", "task")
        .filter(pk=pk, evaluator_id=user)
        .order_by("pk"),
    )[:1],
    pk=int,
    user=int,
)


def _own(user: Any, assignment: Assignment) -> Assignment:
    _hold_scenario(user, assignment)
    found = access.scenario_open_to(user, _OWN_LOCKED.first(pk=assignment.pk, user=user.pk))
    if found is None:
        raise NotFound()
    _may_submit(user, found.scenario)
    return found


def _hold_scenario(user: Any, assignment: Assignment) -> None:
    """PostgreSQL: a shared lock (``FOR KEY SHARE``) on the scenario of the user's assignment
    for the rest of the transaction, taken before the assignment's row is read. Closing a
    scenario locks its row exclusively (``FOR UPDATE``), so it waits for the answers under
    way, and an answer that comes meanwhile waits for the close and then reads the scenario
    closed: no answer is stored in a closed scenario. Answers do not wait for each other (a
    shared lock, where locking the scenario row for update made every answer of the
    scenario take its turn). SQLite: every transaction holds the database's write lock."""
    if connection.vendor != "postgresql":
        return
    quote = connection.ops.quote_name
    scenarios, assignments = Scenario._meta.db_table, Assignment._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {quote(scenarios)} WHERE {quote('id')} = ("  # noqa: S608 (names)
            f"SELECT {quote('scenario_id')} FROM {quote(assignments)} "
            f"WHERE {quote('id')} = %s AND {quote('evaluator_id')} = %s) FOR KEY SHARE",
            [assignment.pk, user.pk],
        )


def submit(*, user: Any, assignment: Assignment, data: Mapping[str, Any]) -> Judgment:
    """Record the evaluator's answer to their assigned task (checked against the scenario's
    type and configuration), with the order the variants were presented in."""
    with transaction.atomic():
        assignment = _own(user, assignment)
        scenario, task = assignment.scenario, assignment.task
        if scenario.status != ScenarioStatus.OPEN:
            raise Conflict(f"The scenario is {scenario.status}: answers are not taken.")
        if assignment.status == AssignmentStatus.DONE:
            raise Conflict("This task is answered already.")
        if assignment.status == AssignmentStatus.SKIPPED:
            raise Conflict("This task was skipped.")
        answer = checked_answer(scenario, presented(task), data)
        if assignment.status == AssignmentStatus.EXPIRED or assignment.expires_at < timezone.now():
            # The place was given back (or is about to be): take one again if there is room.
            # Only here is the task locked: a live reservation holds its place already.
            locked = Task.objects.select_for_update().get(pk=task.pk)
            if assignment.status == AssignmentStatus.RESERVED:
                Task.objects.filter(pk=task.pk, taken__gt=0).update(taken=F("taken") - 1)
                locked.refresh_from_db()
            if locked.taken >= scenario.overlap:
                assignment.status = AssignmentStatus.EXPIRED
                assignment.save(update_fields=["status"])
                raise Conflict(
                    "Your reservation expired and others have answered this task meanwhile."
                )
            Task.objects.filter(pk=task.pk).update(taken=F("taken") + 1)
        judgment = Judgment.objects.create(
            scenario=scenario,
            task=task,
            rater_kind=RaterKind.HUMAN,
            evaluator=user,
            presented=presented(task),
            payload=answer.payload,
            rationale=answer.rationale,
            comment=answer.comment,
            time_spent_ms=answer.time_spent_ms,
        )
        assignment.status, assignment.completed_at = AssignmentStatus.DONE, timezone.now()
        assignment.save(update_fields=["status", "completed_at"])
    return judgment


def check_answer(scenario: Scenario, task: Task, answer: Any) -> dict[str, Any]:
    """The answer in its stored shape; ``FieldErrors`` says what is wrong with it."""
    return _check_answer(scenario, presented(task), answer)


def _check_answer(scenario: Scenario, shown: list[int], answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise FieldErrors({"answer": "An object: see the task's type."})
    return registry.of(scenario).check_answer(answer, config=scenario.config, presented=shown)


# An evaluator's comment to the managers on a task, and a flag's note.
COMMENT_MAX = 2_000


@dataclass(frozen=True)
class Answer:
    payload: dict[str, Any]
    rationale: str
    comment: str
    time_spent_ms: int | None


def checked_answer(scenario: Scenario, shown: list[int], data: Mapping[str, Any]) -> Answer:
    """The body of a submit (or a revision) checked: ``answer`` by the scenario's type
    against the variants as ``shown``, ``rationale``, ``comment``, ``time_spent_ms``;
    ``FieldErrors`` name every problem."""
    payload = _check_answer(scenario, shown, data.get("answer"))
    errors: dict[str, str] = {}
    rationale = validation.text(
        data.get("rationale", ""), name="rationale", errors=errors, max_length=20_000
    )
    comment = validation.text(
        data.get("comment", ""), name="comment", errors=errors, max_length=COMMENT_MAX
    )
    time_spent = validation.time_spent_ms(data.get("time_spent_ms"), errors=errors)
    if errors:
        raise FieldErrors(errors)
    return Answer(payload, rationale, comment, time_spent)


def task_view(assignment: Assignment) -> dict[str, Any]:
    """What the evaluator sees: the item's context and the variants under neutral keys (A, B,
    … in the presented order). In a blind scenario nothing says which model or prompt made
    a variant, and the context holds only the fields the scenario shows (``context_fields``);
    otherwise the labels and every field are included."""
    return {
        "assignment": assignment.pk,
        **shown_task(assignment.scenario, assignment.task, presented(assignment.task)),
        "status": assignment.status,
        "expires_at": assignment.expires_at,
    }


def shown_context(scenario: Scenario, context: Mapping[str, Any]) -> dict[str, Any]:
    """The item's context as evaluators see it: in a blind scenario with ``context_fields``,
    those fields in that order (the others hidden); else all of it."""
    if not scenario.blind or scenario.context_fields is None:
        return dict(context)
    return {name: context[name] for name in scenario.context_fields if name in context}


def _loaded_variants(task: Task, shown: list[int]) -> dict[int, Variant] | None:
    """The shown variants by id when they all came with the task (``TASK_VIEW``: a rating
    or comparison task's), else None."""
    loaded = {
        variant.pk: variant
        for name in ("variant_a", "variant_b")
        if getattr(Task, name).is_cached(task) and (variant := getattr(task, name)) is not None
    }
    return loaded if all(pk in loaded for pk in shown) else None


def _attention_instruction(task: Task) -> str | None:
    """The instruction of an attention check, else None (no query when the task was fetched
    with ``select_related("gold")``)."""
    try:
        gold = task.gold
    except GoldTask.DoesNotExist:
        return None
    return gold.instruction if gold.kind == GoldKind.ATTENTION else None


def shown_task(scenario: Scenario, task: Task, shown: list[int]) -> dict[str, Any]:
    """A task as its evaluators see it, the variants in the order ``shown``. An attention
    check shows its instruction in place of every variant's content."""
    variants = _loaded_variants(task, shown)
    if variants is None:
        variants = {v.pk: v for v in Variant.objects.filter(pk__in=shown)}
    instruction = _attention_instruction(task)
    item = task.item
    view: dict[str, Any] = {
        "scenario": scenario.pk,
        "type": scenario.type,
        "instructions": scenario.instructions,
        "config": scenario.config,
        "context": shown_context(scenario, item.context) if item is not None else {},
        "variants": [],
    }
    for key, pk in zip(KEYS, shown, strict=False):
        content = variants[pk].content if instruction is None else instruction
        shown_variant: dict[str, Any] = {"key": key, "content": content}
        if not scenario.blind:
            shown_variant |= {
                "model": variants[pk].model_label,
                "prompt": variants[pk].prompt_label,
            }
        view["variants"].append(shown_variant)
    return view
