"""Evaluators revise their own answers while the scenario is open.

The judgment row keeps the latest answer (what analytics and exports read); each answer it
replaces is kept as a ``JudgmentRevision`` with the time it was given. A revision is checked
exactly like a submit: the type's answer check against the order the variants were shown in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from evalplatform.errors import Conflict, NotFound
from evaluations.judgments.models import Judgment
from evaluations.workspace import access
from evaluations.workspace.models import JudgmentRevision
from evaluations.workspace.services import checked_answer
from scenarios.models import ScenarioStatus


def judgment_revise(*, user: Any, judgment: Judgment | int, data: Mapping[str, Any]) -> Judgment:
    """Replace the answer of one of the user's own judgments (``answer``, ``rationale``,
    ``comment``, ``time_spent_ms``: the body of a submit); the answer it replaces goes to
    the history. ``NotFound`` for anyone else's judgment; ``Conflict`` once the scenario is
    not open."""
    pk = judgment.pk if isinstance(judgment, Judgment) else judgment
    with transaction.atomic():
        found = (
            Judgment.objects.select_for_update(of=("self",))
            .select_related("scenario")
            .filter(pk=pk, evaluator_id=user.pk)
            .first()
        )
        if found is None or not access.may_evaluate(user, found.scenario):
            raise NotFound()
        scenario = found.scenario
        if scenario.status != ScenarioStatus.OPEN:
            raise Conflict(f"The scenario is {scenario.status}: answers cannot change.")
        answer = checked_answer(scenario, list(found.presented), data)
        now = timezone.now()
        JudgmentRevision.objects.create(
            judgment=found,
            payload=found.payload,
            rationale=found.rationale,
            comment=found.comment,
            time_spent_ms=found.time_spent_ms,
            answered_at=found.revised_at or found.created_at,
            replaced_at=now,
        )
        found.payload, found.rationale, found.comment = (
            answer.payload,
            answer.rationale,
            answer.comment,
        )
        if answer.time_spent_ms is not None:
            found.time_spent_ms = answer.time_spent_ms
        found.revised_at = now
        found.save(update_fields=["payload", "rationale", "comment", "time_spent_ms", "revised_at"])
    return found
