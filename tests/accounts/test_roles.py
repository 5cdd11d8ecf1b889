"""The role-by-feature matrix, written out here on purpose: a change to a role is a change to
this table, reviewed like any other contract."""

from __future__ import annotations

import pytest

from evalplatform.accounts import policy
from evalplatform.accounts.roles import FEATURES, Role

A, M, C, E, V = "admin", "manager", "creator", "evaluator", "viewer"

EXPECTED = {
    "feature:generation:view": {A, M, C, V},
    "feature:generation:create": {A, M, C},
    "feature:generation:manage": {A, M, C},
    "feature:generation:export": {A, M, C},
    "feature:generation:to_scenario": {A, M, C},
    "feature:scenarios:view": {A, M, C, V},
    "feature:scenarios:create": {A, M, C},
    "feature:scenarios:manage": {A, M},
    "feature:scenarios:export": {A, M, C},
    "feature:evaluations:view_all": {A, M, C, V},
    "feature:evaluations:submit": {A, M, C, E},
    "feature:evaluations:judge": {A, M, C},
    "feature:evaluations:export": {A, M, C},
    "feature:evaluations:judge_files": {A, M, C},
    "feature:prompts:view": {A, M, C, V},
    "feature:prompts:edit": {A, M, C},
    "feature:providers:view": {A, M, C, V},
    "feature:providers:manage": {A, M},
    "feature:accounts:view": {A, M, C, V},
    "feature:accounts:manage": {A},
    "feature:admin:access": {A, M},
}


def test_the_table_covers_every_feature_and_role():
    assert set(EXPECTED) == set(FEATURES)
    assert {A, M, C, E, V} == set(Role.values)


@pytest.mark.django_db
@pytest.mark.parametrize("role", Role.values)
def test_role_grants_exactly_the_expected_features(role, team_a, team_b, member):
    user = member(team_a, role)
    for feature, roles in EXPECTED.items():
        assert policy.has_feature(user, feature, team_a) is (role in roles), (role, feature)
        # Membership in team A grants nothing in team B.
        assert policy.has_feature(user, feature, team_b) is False, (role, feature)


@pytest.mark.django_db
def test_superuser_may_do_everything_everywhere(superuser, team_a):
    assert all(policy.has_feature(superuser, f, team_a) for f in FEATURES)
    assert policy.granted(superuser, team_a) == frozenset(FEATURES)


@pytest.mark.django_db
def test_inactive_user_may_do_nothing(team_a, member):
    user = member(team_a, Role.ADMIN)
    user.is_active = False
    user.save()
    policy.forget(user)
    assert not any(policy.has_feature(user, f, team_a) for f in FEATURES)


@pytest.mark.django_db
def test_roles_per_team_are_independent(team_a, team_b, member):
    from tests.factories import MembershipFactory

    user = member(team_a, Role.ADMIN)
    MembershipFactory(user=user, team=team_b, role=Role.EVALUATOR)
    assert policy.has_feature(user, "feature:prompts:edit", team_a)
    assert not policy.has_feature(user, "feature:prompts:edit", team_b)
    assert policy.has_feature(user, "feature:evaluations:submit", team_b)
    assert list(policy.teams_with(user, "feature:prompts:edit")) == [team_a]


@pytest.mark.django_db
def test_me_returns_user_teams_roles_and_features(api, team_a, team_b, member):
    from tests.factories import MembershipFactory

    user = member(team_a, Role.CREATOR, username="carol")
    MembershipFactory(user=user, team=team_b, role=Role.EVALUATOR)
    response = api(user).get("/api/me")
    assert response.status_code == 200
    body = response.json()
    assert body["username"] == "carol"
    assert body["is_superuser"] is False
    teams = {t["slug"]: t for t in body["teams"]}
    assert set(teams) == {"team-a", "team-b"}
    assert teams["team-a"]["role"] == "creator"
    assert set(teams["team-a"]["features"]) == {f for f, r in EXPECTED.items() if C in r}
    assert teams["team-b"]["features"] == ["feature:evaluations:submit"]


@pytest.mark.django_db
def test_me_requires_authentication(api):
    assert api().get("/api/me").status_code == 401
