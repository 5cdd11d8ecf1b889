"""Evaluators flag tasks for the managers: broken, unclear or offensive, with an optional
note. A task flagged instead of answered is given back like a skipped one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from evalplatform import validation
from evalplatform.errors import Conflict, FieldErrors
from evaluations.judgments.models import Assignment, AssignmentStatus
from evaluations.workspace import services
from evaluations.workspace.models import FlagReason, TaskFlag


def task_flag(*, user: Any, assignment: Assignment, data: Mapping[str, Any]) -> TaskFlag:
    """Flag the task of one of the user's assignments (``reason``: broken, unclear or
    offensive; ``note``: optional text). An open reservation is given back (a skip); an
    answered task keeps its answer. One flag per evaluator and task (``Conflict``)."""
    errors: dict[str, str] = {}
    reason = str(data.get("reason") or "")
    if reason not in FlagReason.values:
        errors["reason"] = "One of: " + ", ".join(FlagReason.values) + "."
    note = validation.text(
        data.get("note", ""), name="note", errors=errors, max_length=services.COMMENT_MAX
    )
    if errors:
        raise FieldErrors(errors)
    with transaction.atomic():
        own = services.own_locked(user, assignment)
        if TaskFlag.objects.filter(task_id=own.task_id, evaluator=user).exists():
            raise Conflict("You flagged this task already.")
        if own.status == AssignmentStatus.RESERVED:
            services.skip(user=user, assignment=own)
        return TaskFlag.objects.create(
            scenario=own.scenario, task=own.task, evaluator=user, reason=reason, note=note
        )
