"""``evalplatform.prepared``: a query built and compiled once, run again with new values,
gives what the ORM gives for those values (instances, their ``select_related`` objects,
annotations, converted values), and refuses shapes it cannot run safely."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from evalplatform.accounts.models import Membership
from evalplatform.accounts.roles import Role
from evalplatform.prepared import Prepared

pytestmark = pytest.mark.django_db


def memberships(user, role):
    """A membership query with a join, a subquery and an annotation: the ORM's answer."""
    others = Membership.objects.filter(team_id=OuterRef("team_id")).exclude(user_id=user)
    return (
        Membership.objects.select_related("team", "user")
        .filter(user_id=user, role=role)
        .annotate(shared=Exists(others), teams=Count("user__memberships"))
        .order_by("team__slug")
    )


def described(rows):
    return [
        (m.pk, m.team.slug, m.user.username, m.role, m.shared, m.teams, m.created_at) for m in rows
    ]


def test_a_prepared_query_answers_as_the_orm_for_every_value(team_a, team_b, member):
    builds = []

    def build(user, role):
        builds.append((user, role))
        return memberships(user, role)

    prepared = Prepared(build, user=int, role=str)
    ann = member(team_a, Role.MANAGER, username="ann")
    Membership.objects.create(user=ann, team=team_b, role=Role.MANAGER)
    bob = member(team_a, Role.EVALUATOR, username="bob")
    cases = [(ann.pk, Role.MANAGER), (bob.pk, Role.EVALUATOR), (bob.pk, Role.MANAGER)]
    for user, role in cases:
        expected = described(memberships(user, role))
        with CaptureQueriesContext(connection) as queries:
            got = prepared.objects(user=user, role=role)
        assert described(got) == expected
        assert len(queries) == 1  # the related objects came with the rows
    assert described(prepared.objects(user=ann.pk, role=Role.MANAGER))[0][1:5] == (
        "team-a",
        "ann",
        Role.MANAGER,
        True,
    )
    # Built twice (two sets of markers) the first time, never again.
    assert len(builds) == 2
    assert prepared.first(user=bob.pk, role=Role.VIEWER) is None


def test_values_list_rows_come_back_as_tuples(team_a, member):
    ann = member(team_a, Role.MANAGER, username="ann")
    prepared = Prepared(
        lambda user: Membership.objects.filter(user_id=user).values_list("team__slug", "role"),
        user=int,
    )
    assert prepared.objects(user=ann.pk) == [("team-a", Role.MANAGER)]


def test_an_id_beyond_64_bits_matches_nothing_without_a_query(team_a, member):
    prepared = Prepared(lambda pk: Membership.objects.filter(pk=pk), pk=int)
    prepared.objects(pk=1)  # compiled
    with CaptureQueriesContext(connection) as queries:
        assert prepared.objects(pk=2**63) == []
        assert prepared.objects(pk=-(2**63) - 1) == []
    assert len(queries) == 0


def test_wrong_parameters_are_refused():
    prepared = Prepared(lambda pk: Membership.objects.filter(pk=pk), pk=int)
    with pytest.raises(TypeError):
        prepared.objects(pk="1")
    with pytest.raises(TypeError):
        prepared.objects(pk=True)
    with pytest.raises(TypeError):
        prepared.objects(id=1)
    with pytest.raises(TypeError):
        Prepared(lambda ids: Membership.objects.filter(pk__in=ids), ids=list)


def test_shapes_other_than_instances_or_tuples_are_refused():
    for build in (
        lambda user: Membership.objects.filter(user_id=user).values("role"),
        lambda user: Membership.objects.filter(user_id=user).values_list("role", flat=True),
        lambda user: Membership.objects.filter(user_id=user).values_list("role", named=True),
        lambda user: Membership.objects.filter(user_id=user).prefetch_related("team"),
    ):
        with pytest.raises(ValueError, match="prepared query"):
            Prepared(build, user=int).objects(user=1)


def test_shapes_that_depend_on_the_values_are_refused():
    unused = Prepared(lambda pk, user: Membership.objects.filter(pk=pk), pk=int, user=int)
    with pytest.raises(ValueError, match="did not reach"):
        unused.objects(pk=1, user=1)
    # The SQL changes with the value (a list as long as the value): not a prepared shape.
    grows = Prepared(lambda n: Membership.objects.filter(pk__in=range(n % 3 + 1)), n=int)
    with pytest.raises(ValueError, match="depends on"):
        grows.objects(n=1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not connection.features.has_select_for_update, reason="SQLite has no row locks")
def test_a_locking_query_needs_a_transaction(team_a, member):
    ann = member(team_a, Role.MANAGER, username="ann")
    prepared = Prepared(
        lambda user: Membership.objects.select_for_update().filter(user_id=user), user=int
    )
    with transaction.atomic():
        assert [m.user_id for m in prepared.objects(user=ann.pk)] == [ann.pk]
    with pytest.raises(TransactionManagementError):
        prepared.objects(user=ann.pk)


def prepared_statements():
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="prepared statements: PostgreSQL"
)


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_postgresql_plans_a_prepared_query_once_per_connection(settings, team_a, member):
    settings.DB_PREPARE = True
    connection.close()  # a connection of the test's own, prepared statements and all
    ann = member(team_a, Role.MANAGER, username="ann")
    bob = member(team_a, Role.EVALUATOR, username="bob")
    prepared = Prepared(lambda user, role: memberships(user, role), user=int, role=str)
    for _ in range(3):
        for user, role in ((ann.pk, Role.MANAGER), (bob.pk, Role.EVALUATOR)):
            assert described(prepared.objects(user=user, role=role)) == described(
                memberships(user, role)
            )
    statements = [s for s in prepared_statements() if '"accounts_membership"' in s]
    # One statement, its parameters bound on the server ($1, $2), run six times.
    assert len(statements) == 1 and "$1" in statements[0] and "$2" in statements[0]
    # A rollback on the connection (psycopg then forgets what it prepared): the query
    # runs again, prepared anew.
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        prepared.objects(user=ann.pk, role=Role.MANAGER)
        1 / 0  # noqa: B018
    assert described(prepared.objects(user=ann.pk, role=Role.MANAGER)) == described(
        memberships(ann.pk, Role.MANAGER)
    )
    with transaction.atomic():
        assert prepared.first(user=bob.pk, role=Role.EVALUATOR).user_id == bob.pk


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_without_db_prepare_nothing_is_prepared(settings, team_a, member):
    settings.DB_PREPARE = False
    connection.close()
    ann = member(team_a, Role.MANAGER, username="ann")
    prepared = Prepared(lambda user: Membership.objects.filter(user_id=user), user=int)
    for _ in range(6):
        assert [m.user_id for m in prepared.objects(user=ann.pk)] == [ann.pk]
    assert prepared_statements() == []
