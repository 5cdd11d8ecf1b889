"""People, clients and committed data: helpers every area's tests use."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.test import Client, TransactionTestCase
from rest_framework.test import APIClient

from evalplatform.accounts.roles import Role
from tests.factories import MembershipFactory, UserFactory


def add_member(team, role=Role.VIEWER, **user_fields):
    """A new user holding ``role`` in ``team``."""
    user = UserFactory(**user_fields)
    MembershipFactory(user=user, team=team, role=role)
    return user


def api_client(user=None) -> APIClient:
    """An APIClient authenticated as ``user`` (``None``: anonymous)."""
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@contextmanager
def committed_rows(django_db_blocker) -> Iterator[None]:
    """Rows made in the block are committed, and every table is emptied after it, as after
    a transactional test (with ``_quick_transactional_flush``). For data a class-scoped
    fixture builds once with code that needs its rows committed (a job's run reads them from
    threads with connections of their own), shared by the class's tests, which must each
    run in a transaction rolled back (``django_db`` without ``transaction=True``): a
    transactional test empties the database after it. docs/development.md ("Data shared by
    a class's tests") says when to use it."""

    class Committed(TransactionTestCase):
        pass

    with django_db_blocker.unblock():
        Committed.setUpClass()  # its _pre_setup, as pytest-django runs a transactional test's
        case = Committed(methodName="__init__")
        try:
            yield
        finally:
            case._post_teardown()
            Committed.tearDownClass()
            Committed.doClassCleanups()


def browser(user):
    client = Client()
    client.force_login(user)
    return client


def team_people(team_a, team_b):
    """A manager, a viewer and an evaluator of team A, and an admin of team B."""
    return {
        "manager": add_member(team_a, Role.MANAGER),
        "viewer": add_member(team_a, Role.VIEWER),
        "evaluator": add_member(team_a, Role.EVALUATOR),
        "outsider": add_member(team_b, Role.ADMIN),
    }


def people_of(team_a, team_b, *, named=False, **cast):
    """``cast``: name -> (``"a"`` or ``"b"``, role): each a new member of team A or B with
    that role, made in the order given; ``named``: the name is the username too."""
    teams = {"a": team_a, "b": team_b}
    return {
        name: add_member(teams[team], role, **({"username": name} if named else {}))
        for name, (team, role) in cast.items()
    }


def four_evaluators_people(team_a, team_b):
    """manager, viewer (team A), outsider (admin of team B), and ann, bob, cat and dan,
    evaluators of team A; each name is the username."""
    return {
        "manager": add_member(team_a, Role.MANAGER, username="manager"),
        "viewer": add_member(team_a, Role.VIEWER, username="viewer"),
        "outsider": add_member(team_b, Role.ADMIN, username="outsider"),
        **{
            name: add_member(team_a, Role.EVALUATOR, username=name)
            for name in ("ann", "bob", "cat", "dan")
        },
    }
