from __future__ import annotations

import pytest
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers
from django.test import override_settings
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


@pytest.fixture
def team_a(db):
    return TeamFactory(name="Team A", slug="team-a")


@pytest.fixture
def team_b(db):
    return TeamFactory(name="Team B", slug="team-b")


@pytest.fixture
def member(db):
    """``member(team, role)`` → a user holding ``role`` in ``team``."""

    def make(team, role=Role.VIEWER, **user_fields):
        user = UserFactory(**user_fields)
        MembershipFactory(user=user, team=team, role=role)
        return user

    return make


@pytest.fixture
def api():
    """``api(user)`` → an APIClient authenticated as ``user`` (``None``: anonymous)."""

    def make(user=None):
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return make


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
