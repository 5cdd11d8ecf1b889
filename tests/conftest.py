from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers
from django.db import connections, transaction
from django.test import TransactionTestCase, override_settings
from rest_framework.test import APIClient

from evalplatform.accounts.roles import Role
from tests.factories import MembershipFactory, TeamFactory, UserFactory


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashing():
    """Test users' passwords hashed with MD5: the production hasher (PBKDF2, a million
    rounds) takes about 0.5 s per hash here, paid at every user made and every sign-in.
    Processes that tests start (``tests/e2e``) keep the production hashers and make their
    own users."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(autouse=True, scope="session")
def _no_api_throttling():
    """API throttling off: tests send requests as fast as the machine goes, and many from
    one user. ``tests/core/test_throttling.py`` turns it on with rates of its own; processes
    that tests start (``tests/e2e``) keep the production rates."""
    with override_settings(API_THROTTLE_RATES={"write": "off", "expensive": "off"}):
        yield


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """PostgreSQL test connections commit without waiting for the write-ahead log to reach
    the disk (``synchronous_commit=off``: a crash could lose the last commits, nothing
    else): the suite commits tens of thousands of times."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.postgresql":
        options = database.setdefault("OPTIONS", {})
        options["options"] = f"{options.get('options', '')} -c synchronous_commit=off".strip()


# The rows ``migrate`` makes through ``post_migrate`` (content types, permissions): kept when
# a transactional test's database is emptied, as long as they are as the first such test
# found them.
_REFERENCE_ROWS = (
    "SELECT id, app_label, model FROM django_content_type ORDER BY id",
    "SELECT id, content_type_id, codename FROM auth_permission ORDER BY id",
)
_REFERENCE_TABLES = ("django_content_type", "auth_permission")


def _reference_rows(connection) -> tuple:
    with connection.cursor() as cursor:
        found = []
        for sql in _REFERENCE_ROWS:
            cursor.execute(sql)
            found.append(tuple(map(tuple, cursor.fetchall())))
    return tuple(found)


@pytest.fixture(autouse=True, scope="session")
def _quick_transactional_flush():
    """After a transactional test (``transaction=True``), Django flushes every table and
    sends ``post_migrate`` to make the content types and permissions again (about 200
    queries). On PostgreSQL the flush is a ``TRUNCATE`` of every table, which makes new files
    for each table and index: 1 to 5 s a test on this machine under CI's load, a large part
    of the PostgreSQL lane. Here the tables that have rows are emptied with ``DELETE`` (foreign keys
    are deferred to the commit) and the reference rows stay, when they are as they were
    before the first transactional test ran; a test that changed them gets Django's own
    flush. The database ends as Django's flush leaves it."""
    original_setup = TransactionTestCase.__dict__["_fixture_setup"]  # a classmethod
    original_teardown = TransactionTestCase._fixture_teardown
    tables: dict[str, list[str]] = {}
    reference: dict[str, tuple] = {}

    def fixture_setup(cls):
        for alias in cls._databases_names(include_mirrors=False):
            if alias not in reference:
                reference[alias] = _reference_rows(connections[alias])
        return original_setup.__func__(cls)

    def fixture_teardown(self):
        if self.available_apps is not None or self.serialized_rollback:
            return original_teardown(self)
        for alias in self._databases_names(include_mirrors=False):
            connection = connections[alias]
            if alias not in reference or _reference_rows(connection) != reference[alias]:
                break
            if alias not in tables:
                names = connection.introspection.django_table_names(
                    only_existing=True, include_views=False
                )
                tables[alias] = sorted(set(names) - set(_REFERENCE_TABLES))
            quote = connection.ops.quote_name
            filled = " UNION ALL ".join(
                f"SELECT {n} WHERE EXISTS (SELECT 1 FROM {quote(t)})"
                for n, t in enumerate(tables[alias])
            )
            with transaction.atomic(using=alias), connection.cursor() as cursor:
                cursor.execute(filled)
                for (n,) in cursor.fetchall():
                    cursor.execute(f"DELETE FROM {quote(tables[alias][n])}")
        else:
            return None
        return original_teardown(self)

    TransactionTestCase._fixture_setup = classmethod(fixture_setup)
    TransactionTestCase._fixture_teardown = fixture_teardown
    yield
    TransactionTestCase._fixture_setup = original_setup
    TransactionTestCase._fixture_teardown = original_teardown


@pytest.fixture
def team_a(db):
    return TeamFactory(name="Team A", slug="team-a")


@pytest.fixture
def team_b(db):
    return TeamFactory(name="Team B", slug="team-b")


def add_member(team, role=Role.VIEWER, **user_fields):
    """A new user holding ``role`` in ``team``."""
    user = UserFactory(**user_fields)
    MembershipFactory(user=user, team=team, role=role)
    return user


@pytest.fixture
def member(db):
    """``member(team, role)`` → a user holding ``role`` in ``team`` (``add_member``)."""
    return add_member


def api_client(user=None) -> APIClient:
    """An APIClient authenticated as ``user`` (``None``: anonymous)."""
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def api():
    """``api(user)`` → an APIClient authenticated as ``user`` (``None``: anonymous)."""
    return api_client


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


@pytest.fixture
def superuser(db):
    return UserFactory(username="root", is_superuser=True, is_staff=True)


@pytest.fixture
def fake_provider():
    """A fresh fake provider server on a loopback port (``.url``, ``.app``, ``.config``)."""
    from evalplatform.providers.fake import run_in_thread

    with run_in_thread() as running:
        yield running


@pytest.fixture
def platform_server(transactional_db):
    """The platform's own ASGI application (HTTP and WebSockets) served by uvicorn on a
    loopback port; yields ``host:port``."""
    from evalplatform.asgi import application
    from evalplatform.providers.fake.server import serve_in_thread

    with serve_in_thread(application) as port:
        yield f"127.0.0.1:{port}"
    # Each server runs an event loop of its own, the process's channel layer outlives it: a
    # fresh layer for the next one, so no loop-bound state carries over (channels-redis holds
    # a channel's receive lock until a cleanup task ends, which a stopped loop never runs).
    channel_layers.backends.pop(DEFAULT_CHANNEL_LAYER, None)
