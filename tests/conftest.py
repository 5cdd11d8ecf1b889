from __future__ import annotations

import os

import pytest
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers
from django.db import connections, transaction
from django.test import TransactionTestCase, override_settings

from evalplatform.accounts.roles import Role
from generation.models import GenerationJob, GenerationOutput
from tests.factories import (
    TeamFactory,
    UserFactory,
)
from tests.helpers.accounts import (
    add_member,
    api_client,
    four_evaluators_people,
    people_of,
    team_people,
)
from tests.helpers.generation import JOBS, generation_setup, job_body


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashing():
    """Test users' passwords hashed with MD5: the production hasher (PBKDF2, a million
    rounds) takes about 0.5 s per hash here, paid at every user made and every sign-in.
    Processes that tests start (``tests/e2e``) keep the production hashers and make their
    own users."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


# The fake provider and the servers tests start listen on loopback, which connections may
# not call unless allowed (evalplatform/providers/netguard.py): allowed here, and for the
# processes tests start (tests/e2e), which read it from the environment.
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1"]
os.environ.setdefault("PROVIDER_HOSTS_ALLOWED", ",".join(LOOPBACK_HOSTS))


@pytest.fixture(autouse=True, scope="session")
def _loopback_providers_allowed():
    with override_settings(PROVIDER_HOSTS_ALLOWED=LOOPBACK_HOSTS):
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


@pytest.fixture
def member(db):
    """``member(team, role)`` → a user holding ``role`` in ``team`` (``add_member``)."""
    return add_member


@pytest.fixture
def api():
    """``api(user)`` → an APIClient authenticated as ``user`` (``None``: anonymous)."""
    return api_client


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


@pytest.fixture
def creator(team_a, member):
    return member(team_a, Role.CREATOR, username="cora")


@pytest.fixture
def setup(team_a):
    """Two prompt versions and two mock models in team A."""
    return generation_setup(team_a)


@pytest.fixture
def finished_job(api, creator, setup):
    """A generation job of 3 items x 2 prompts x 2 models x 2 repetitions x 2 temperatures,
    every output completed with a text of its own."""
    response = api(creator).post(JOBS, job_body(setup), format="json")
    assert response.status_code == 201, response.json()
    job = GenerationJob.objects.get(pk=response.json()["id"])
    for output in job.outputs.all():
        GenerationOutput.objects.filter(pk=output.pk).update(
            status="completed", content=f"Answer number {output.pk}"
        )
    return job


# People: ``people`` is the usual cast; the other casts are named for who is in them. Each
# is a dict of name -> user, the users made in the order listed (``people_of``); "outsider"
# is always of team B. A username is given only where a cast lists ``named``.

A, B = "a", "b"


@pytest.fixture
def people(team_a, team_b):
    """A manager, a viewer and an evaluator of team A, and an admin of team B
    (``team_people``)."""
    return team_people(team_a, team_b)


@pytest.fixture
def people_named(team_a, team_b):
    """manager, eve, ed (evaluators), viewer of team A and outsider (admin of team B), each
    with their name as username."""
    return people_of(
        team_a,
        team_b,
        named=True,
        manager=(A, Role.MANAGER),
        eve=(A, Role.EVALUATOR),
        ed=(A, Role.EVALUATOR),
        viewer=(A, Role.VIEWER),
        outsider=(B, Role.ADMIN),
    )


@pytest.fixture
def people_named_and_stranger(team_a, team_b):
    """``people_named`` and stranger, an evaluator of team B (usernames: their names)."""
    return people_of(
        team_a,
        team_b,
        named=True,
        manager=(A, Role.MANAGER),
        eve=(A, Role.EVALUATOR),
        ed=(A, Role.EVALUATOR),
        viewer=(A, Role.VIEWER),
        outsider=(B, Role.ADMIN),
        stranger=(B, Role.EVALUATOR),
    )


@pytest.fixture
def people_two_admins(team_a):
    """ann and bob, admins of team A (usernames: their names)."""
    return people_of(team_a, None, named=True, ann=(A, Role.ADMIN), bob=(A, Role.ADMIN))


@pytest.fixture
def people_crew(team_a):
    """A manager, two evaluators (eve, ed) and a viewer of team A."""
    return people_of(
        team_a,
        None,
        manager=(A, Role.MANAGER),
        eve=(A, Role.EVALUATOR),
        ed=(A, Role.EVALUATOR),
        viewer=(A, Role.VIEWER),
    )


@pytest.fixture
def people_crew_and_outsider(team_a, team_b):
    """A manager, a viewer, two evaluators (eve, ed) of team A and an admin of team B."""
    return people_of(
        team_a,
        team_b,
        manager=(A, Role.MANAGER),
        viewer=(A, Role.VIEWER),
        eve=(A, Role.EVALUATOR),
        ed=(A, Role.EVALUATOR),
        outsider=(B, Role.ADMIN),
    )


@pytest.fixture
def people_authors(team_a, team_b):
    """A manager, a creator and an evaluator of team A, and a manager of team B."""
    return people_of(
        team_a,
        team_b,
        manager=(A, Role.MANAGER),
        creator=(A, Role.CREATOR),
        evaluator=(A, Role.EVALUATOR),
        outsider=(B, Role.MANAGER),
    )


@pytest.fixture
def people_inviters(team_a, team_b):
    """A manager and a creator of team A, and a manager of team B."""
    return people_of(
        team_a,
        team_b,
        manager=(A, Role.MANAGER),
        creator=(A, Role.CREATOR),
        outsider=(B, Role.MANAGER),
    )


@pytest.fixture
def people_with_ann_and_bob(team_a, team_b):
    """manager, viewer, outsider (admin of team B) and ann and bob, evaluators of team A
    (usernames: their names)."""
    return people_of(
        team_a,
        team_b,
        named=True,
        manager=(A, Role.MANAGER),
        viewer=(A, Role.VIEWER),
        outsider=(B, Role.ADMIN),
        ann=(A, Role.EVALUATOR),
        bob=(A, Role.EVALUATOR),
    )


@pytest.fixture
def people_with_four_evaluators(team_a, team_b):
    """manager, viewer, outsider (admin of team B) and ann, bob, cat and dan, evaluators of
    team A (usernames: their names; ``four_evaluators_people``)."""
    return four_evaluators_people(team_a, team_b)


@pytest.fixture
def people_manager_only(team_a):
    """A manager of team A."""
    return people_of(team_a, None, manager=(A, Role.MANAGER))


@pytest.fixture
def people_manager_and_eve(team_a):
    """A manager and an evaluator (eve) of team A."""
    return people_of(team_a, None, manager=(A, Role.MANAGER), eve=(A, Role.EVALUATOR))
