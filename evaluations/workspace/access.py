"""Who may evaluate which scenario: the one place that says it.

The pool of a scenario is the members of its team holding ``feature:evaluations:submit``
(only its assignees among them when it has any: ``ScenarioAssignee``, and the members of its
assigned groups, ``ScenarioAssigneeGroup``, as the groups are at the time of asking), plus the
people who
accepted an invitation to that scenario (and only that scenario: an invitation makes nobody a
member of the team). Every evaluation surface (services, API, pages) asks here, and here is
how many tasks one evaluator may be handed (``quota_of``).
"""

from __future__ import annotations

from typing import Any

from django.db.models import (
    BooleanField,
    Exists,
    ExpressionWrapper,
    Model,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)

from evalplatform.accounts import policy
from evalplatform.accounts.roles import EVALUATIONS_SUBMIT
from evalplatform.errors import NotFound
from evalplatform.prepared import Prepared
from evaluations.invitations.models import Invitation
from scenarios.models import Scenario, ScenarioAssignee, ScenarioAssigneeGroup


def _invited(user: Any) -> QuerySet[Invitation]:
    return Invitation.objects.filter(accepted_by_id=user.pk, revoked_at__isnull=True)


class Someone:
    """A user's stand-in for building a query: its ``pk`` is a parameter's marker."""

    def __init__(self, pk: Any) -> None:
        self.pk = pk


def evaluable(user: Any, queryset: QuerySet[Scenario] | None = None) -> QuerySet[Scenario]:
    """The scenarios of ``queryset`` (default: all) this user may evaluate."""
    queryset = Scenario.objects.all() if queryset is None else queryset
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return queryset.none()
    if policy.is_superuser(user):
        return queryset
    return queryset.filter(
        Q(team_id__in=policy.team_ids_with(user, EVALUATIONS_SUBMIT)) & _assigned_or_open(user)
        | Q(pk__in=_invited(user).values("scenario_id"))
    )


def _assigned_or_open(user: Any, scenario: Any = None) -> Q:
    """The scenarios (``scenario``: this one) that chose nobody, or chose ``user``: by name
    or as a member of an assigned group."""
    scenario = OuterRef("pk") if scenario is None else scenario
    people = ScenarioAssignee.objects.filter(scenario=scenario)
    groups = ScenarioAssigneeGroup.objects.filter(scenario=scenario)
    return (
        ~Exists(people) & ~Exists(groups)
        | Exists(people.filter(user_id=user.pk))
        | Exists(groups.filter(group__members=user.pk))
    )


# Set on a scenario fetched by ``scenario_to_evaluate``: the id of the user it was vetted for
# (the object lives as long as the request), so ``may_evaluate`` does not ask again.
_VETTED_FOR = "_evaluations_vetted_for"
# Set by ``with_scenario_open_to``: (user id, whether the scenario chose nobody or them).
_OPEN_TO = "_evaluations_open_to"
_OPEN_TO_ANNOTATION = "evaluations_open_to_user"


def with_scenario_open_to(user: Any, queryset: QuerySet[Any]) -> QuerySet[Any]:
    """Rows with a ``scenario`` (assignments, judgments) that also say, in the same query,
    whether their scenario chose nobody or chose ``user``; ``scenario_open_to`` hands the
    answer to their scenario, so that ``may_evaluate`` asks nothing more."""
    chosen = _assigned_or_open(user, OuterRef("scenario_id"))
    return queryset.annotate(
        **{_OPEN_TO_ANNOTATION: ExpressionWrapper(chosen, output_field=BooleanField())}
    )


def scenario_open_to(user: Any, row: Model | None) -> Any:
    """``row`` (from ``with_scenario_open_to``), its scenario told what the row's query said."""
    if row is not None:
        setattr(row.scenario, _OPEN_TO, (user.pk, bool(getattr(row, _OPEN_TO_ANNOTATION))))  # type: ignore[attr-defined]
    return row


def may_evaluate(user: Any, scenario: Scenario) -> bool:
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    if getattr(scenario, _VETTED_FOR, None) == user.pk:
        return True
    if policy.may(user, EVALUATIONS_SUBMIT, scenario):
        if policy.is_superuser(user):
            return True
        known = getattr(scenario, _OPEN_TO, None)
        if known is not None and known[0] == user.pk:
            chosen = known[1]
        else:
            # One query whatever the number of assignees and groups.
            rows = Scenario.objects.filter(_assigned_or_open(user, scenario.pk), pk=scenario.pk)
            chosen = rows.exists()
        if chosen:
            return True
    return _invited(user).filter(scenario_id=scenario.pk).exists()


def own_quota(user_id: Any, scenario_id: Any) -> Subquery:
    """The user's own quota in the scenario as a subquery (to read it with another query)."""
    rows = ScenarioAssignee.objects.filter(scenario_id=scenario_id, user_id=user_id)
    return Subquery(rows.values("quota")[:1])


def quota_of(scenario: Scenario, own: int | None) -> int | None:
    """The most tasks of the scenario a user may hold (judgments and reservations): ``own``,
    their quota as an assignee (``own_quota``), else the scenario's default; None for no
    limit."""
    return own if own is not None else scenario.default_quota


def quotas(user: Any, scenarios: Any) -> dict[int, int | None]:
    """``quota_of`` of several scenarios in one query."""
    own = dict(
        ScenarioAssignee.objects.filter(
            scenario_id__in=[s.pk for s in scenarios], user_id=user.pk, quota__isnull=False
        ).values_list("scenario_id", "quota")
    )
    return {s.pk: own.get(s.pk, s.default_quota) for s in scenarios}


_INVITED_ANNOTATION = "evaluations_invited"
# A scenario with its team, and whether it chose nobody or ``user`` (``_assigned_or_open``)
# and whether ``user`` accepted an invitation to it: one query, compiled once per process.
_SCENARIO_FOR = Prepared(
    lambda pk, user: (
        Scenario.objects.select_related("team")
        .filter(pk=pk)
        .annotate(
            **{
                _OPEN_TO_ANNOTATION: ExpressionWrapper(
                    _assigned_or_open(Someone(user)), output_field=BooleanField()
                ),
                _INVITED_ANNOTATION: Exists(
                    _invited(Someone(user)).filter(scenario_id=OuterRef("pk"))
                ),
            }
        )[:1]
    ),
    pk=int,
    user=int,
)


def scenario_to_evaluate(user: Any, pk: Any) -> Scenario:
    """One scenario the user may evaluate, with its team; ``NotFound`` for anything else
    (missing, another team's, not chosen, not invited). The rule is ``evaluable``'s, asked
    of one scenario in one query."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        raise NotFound()
    try:
        pk = int(pk)
    except (ValueError, TypeError) as exc:
        raise NotFound() from exc
    scenario = _SCENARIO_FOR.first(pk=pk, user=user.pk)
    if scenario is None:
        raise NotFound()
    allowed = (
        policy.is_superuser(user)
        or (
            scenario.team_id in policy.team_ids_with(user, EVALUATIONS_SUBMIT)
            and getattr(scenario, _OPEN_TO_ANNOTATION)
        )
        or getattr(scenario, _INVITED_ANNOTATION)
    )
    if not allowed:
        raise NotFound()
    setattr(scenario, _VETTED_FOR, user.pk)
    return scenario
