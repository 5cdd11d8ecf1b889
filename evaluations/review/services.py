"""Setting and removing a task's adjudicated answer (``feature:scenarios:manage``).

The answer is given as a person would give it for the task shown in its own order (A its
first variant, ...) and checked by the scenario type's strict check (``check_answer``), so
it is stored in the shape of a judgment's payload. Setting it again keeps the answer it
replaces in the adjudication's ``history``; every set, replacement and removal is audited.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from evalplatform import validation
from evalplatform.accounts import audit, policy
from evalplatform.accounts.roles import SCENARIOS_MANAGE
from evalplatform.errors import FieldErrors, Forbidden, NotFound
from evaluations.review.models import Adjudication
from evaluations.workspace.services import presented as task_order
from scenarios.models import Scenario, Task
from scenarios.types import registry

MAX_NOTE = 5000
MAX_HISTORY = 100  # earlier answers kept on the row (the audit log has every change)


def _task(user: Any, scenario: Scenario, task_id: Any) -> Task:
    if not policy.may(user, SCENARIOS_MANAGE, scenario):
        raise Forbidden()
    task = None
    if (number := validation.digits(str(task_id))) is not None:
        task = Task.objects.filter(scenario=scenario, pk=number).first()
    if task is None:
        raise NotFound()
    return task


def adjudication_set(*, user: Any, scenario: Scenario, task_id: Any, data: Any) -> Adjudication:
    """Set (or replace) the adjudicated answer of one task: ``data`` is ``{"answer": {...},
    "note": "..."}``, the answer under the task's keys. Nothing is written unless it passes
    the type's check."""
    task = _task(user, scenario, task_id)
    errors: dict[str, Any] = {}
    if not isinstance(data, dict):
        raise FieldErrors({"answer": "A JSON object {answer, note}."})
    note = validation.text(data.get("note"), name="note", errors=errors, max_length=MAX_NOTE)
    answer = data.get("answer")
    order = task_order(task)
    payload: dict[str, Any] = {}
    if not isinstance(answer, dict):
        errors["answer"] = "An object: the answer under the task's keys (A is shown first)."
    else:
        try:
            payload = registry.of(scenario).check_answer(
                answer, config=scenario.config, presented=order
            )
        except FieldErrors as exc:
            errors |= exc.errors
    if errors:
        raise FieldErrors(errors)
    with transaction.atomic():
        # The task's row lock: two managers setting the first answer at once make one row.
        Task.objects.select_for_update().filter(pk=task.pk).first()
        adjudication = Adjudication.objects.filter(task=task).first()
        now = timezone.now()
        if adjudication is None:
            adjudication = Adjudication.objects.create(
                scenario=scenario,
                task=task,
                presented=order,
                payload=payload,
                note=note,
                set_by=user,
                set_at=now,
            )
            action = "scenario.adjudication.set"
        else:
            earlier = {
                "payload": adjudication.payload,
                "presented": adjudication.presented,
                "note": adjudication.note,
                "set_by": adjudication.set_by.get_username() if adjudication.set_by else None,
                "set_at": adjudication.set_at.isoformat(),
            }
            adjudication.history = [*adjudication.history, earlier][-MAX_HISTORY:]
            adjudication.presented, adjudication.payload, adjudication.note = order, payload, note
            adjudication.set_by, adjudication.set_at = user, now
            adjudication.save()
            action = "scenario.adjudication.replace"
        audit.record(
            user=user, team=scenario.team_id, action=action, target=task, scenario=scenario.pk
        )
    return adjudication


def adjudication_delete(*, user: Any, scenario: Scenario, task_id: Any) -> bool:
    """Remove a task's adjudicated answer; whether there was one."""
    task = _task(user, scenario, task_id)
    with transaction.atomic():
        deleted, _ = Adjudication.objects.filter(task=task).delete()
        if deleted:
            audit.record(
                user=user,
                team=scenario.team_id,
                action="scenario.adjudication.delete",
                target=task,
                scenario=scenario.pk,
            )
    return bool(deleted)
