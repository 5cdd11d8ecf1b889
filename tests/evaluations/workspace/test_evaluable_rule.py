"""``access.scenario_to_evaluate`` (one scenario, one prepared query, the rule decided in
Python) grants exactly what ``access.evaluable`` (the queryset every list uses) grants, for
every kind of person and scenario: members with and without ``evaluations:submit``, open
scenarios and ones chosen for people by name or by group, another team's, invitations
accepted, revoked or never accepted, superusers, inactive users."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from evalplatform.accounts.models import TeamGroup
from evalplatform.accounts.roles import Role
from evalplatform.errors import NotFound
from evaluations.models import Invitation
from evaluations.workspace import access
from scenarios.models import Scenario, ScenarioAssignee, ScenarioAssigneeGroup
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def vetted(user, pk) -> bool:
    try:
        access.scenario_to_evaluate(user, pk)
    except NotFound:
        return False
    return True


def test_one_scenario_is_granted_exactly_as_the_list_grants_it(team_a, team_b, member):
    owner = member(team_a, Role.MANAGER, username="owner")
    people = {
        "evaluator": member(team_a, Role.EVALUATOR, username="evaluator"),
        "named": member(team_a, Role.EVALUATOR, username="named"),
        "grouped": member(team_a, Role.EVALUATOR, username="grouped"),
        "viewer": member(team_a, Role.VIEWER, username="viewer"),
        "other team": member(team_b, Role.EVALUATOR, username="other"),
        "invited": UserFactory(username="invited"),
        "revoked": UserFactory(username="revoked"),
        "unaccepted": UserFactory(username="unaccepted"),
        "superuser": UserFactory(username="root", is_superuser=True),
        "inactive": member(team_a, Role.EVALUATOR, username="inactive", is_active=False),
    }

    def scenario(name: str, team=team_a) -> Scenario:
        return Scenario.objects.create(team=team, created_by=owner, name=name, type="comparison")

    open_to_all, by_name, by_group = scenario("all"), scenario("name"), scenario("group")
    elsewhere = scenario("elsewhere", team_b)
    ScenarioAssignee.objects.create(scenario=by_name, user=people["named"])
    group = TeamGroup.objects.create(team=team_a, name="Linguists")
    group.members.add(people["grouped"])
    ScenarioAssigneeGroup.objects.create(scenario=by_group, group=group)
    later = timezone.now() + timedelta(days=1)
    for who, target, revoked, accepted in (
        ("invited", by_name, None, True),
        ("revoked", open_to_all, timezone.now(), True),
        ("unaccepted", by_group, None, False),
        ("invited", elsewhere, None, True),
    ):
        Invitation.objects.create(
            scenario=target,
            email=f"{who}@example.com",
            token_hash=f"{who}-{target.pk}",
            expires_at=later,
            accepted_by=people[who] if accepted else None,
            revoked_at=revoked,
        )
    scenarios = [open_to_all, by_name, by_group, elsewhere]
    granted = {}
    for who, user in people.items():
        listed = set(access.evaluable(user).values_list("pk", flat=True))
        for s in scenarios:
            assert vetted(user, s.pk) == (s.pk in listed), (who, s.name)
            granted[who, s.name] = s.pk in listed
        assert not vetted(user, 10**9) and not vetted(user, 2**70) and not vetted(user, "x")
    # The matrix is not trivial: each kind of grant and refusal happens.
    assert granted["evaluator", "all"] and not granted["evaluator", "name"]
    assert granted["named", "name"] and not granted["named", "group"]
    assert granted["grouped", "group"] and not granted["grouped", "name"]
    assert not any(granted["viewer", s.name] for s in scenarios)
    assert granted["other team", "elsewhere"] and not granted["other team", "all"]
    assert granted["invited", "name"] and granted["invited", "elsewhere"]
    assert not granted["invited", "all"] and not granted["revoked", "all"]
    assert not granted["unaccepted", "group"]
    assert all(granted["superuser", s.name] for s in scenarios)
    assert not any(granted["inactive", s.name] for s in scenarios)
