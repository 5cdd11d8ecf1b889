"""Who may evaluate which scenario: the one place that says it.

The pool of a scenario is the members of its team holding ``feature:evaluations:submit``,
plus the people who accepted an invitation to that scenario (and only that scenario: an
invitation makes nobody a member of the team). Every evaluation surface (services, API,
pages) asks here.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from evalplatform.accounts import policy
from evalplatform.accounts.roles import EVALUATIONS_SUBMIT
from evalplatform.errors import NotFound
from evaluations.models import Invitation
from scenarios.models import Scenario


def _invited(user: Any) -> QuerySet[Invitation]:
    return Invitation.objects.filter(accepted_by_id=user.pk, revoked_at__isnull=True)


def evaluable(user: Any, queryset: QuerySet[Scenario] | None = None) -> QuerySet[Scenario]:
    """The scenarios of ``queryset`` (default: all) this user may evaluate."""
    queryset = Scenario.objects.all() if queryset is None else queryset
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return queryset.none()
    if policy.is_superuser(user):
        return queryset
    return queryset.filter(
        Q(team_id__in=policy.team_ids_with(user, EVALUATIONS_SUBMIT))
        | Q(pk__in=_invited(user).values("scenario_id"))
    )


def may_evaluate(user: Any, scenario: Scenario) -> bool:
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    if policy.may(user, EVALUATIONS_SUBMIT, scenario):
        return True
    return _invited(user).filter(scenario_id=scenario.pk).exists()


def scenario_to_evaluate(
    user: Any, pk: Any, queryset: QuerySet[Scenario] | None = None
) -> Scenario:
    """One scenario the user may evaluate; ``NotFound`` for anything else (missing, another
    team's, not invited)."""
    try:
        return evaluable(user, queryset).get(pk=pk)
    except (Scenario.DoesNotExist, ValueError, TypeError) as exc:
        raise NotFound() from exc
