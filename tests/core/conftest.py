"""Fixtures of the core's tests: the seeded team of the API fuzz (``test_api_fuzz.py``),
which ``test_numeric_bounds.py`` and ``test_storable_input.py`` use too."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from tests.helpers.fuzz import World, is_loopback, seed_world


@pytest.fixture
def loopback_only(monkeypatch):
    """Fuzzed bodies may name any base URL: refuse to resolve or reach anything but loopback."""
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def getaddrinfo(host, *args, **kwargs):
        if not is_loopback(host.decode() if isinstance(host, bytes) else host):
            raise socket.gaierror(socket.EAI_NONAME, f"fuzz test: no network ({host!r})")
        return real_getaddrinfo(host, *args, **kwargs)

    def guard(address: Any) -> None:
        if isinstance(address, tuple) and not is_loopback(address[0]):
            raise ConnectionRefusedError(f"fuzz test: no network ({address!r})")

    def connect(self, address):
        guard(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        guard(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture(scope="module")
def fake_server():
    """One fake provider server for the module (the seeded connection points at it)."""
    from evalplatform.providers.fake import run_in_thread

    with run_in_thread() as running:
        yield running


@pytest.fixture(scope="module")
def seeded_world(django_db_setup, django_db_blocker, fake_server) -> Iterator[World]:
    """The team seeded once for the module, in a transaction rolled back after it: each test
    runs in a savepoint of it (pytest-django's ``db``), each example in one of its own."""
    with django_db_blocker.unblock(), transaction.atomic():
        yield seed_world(fake_server.url)
        transaction.set_rollback(True)


@pytest.fixture
def fuzz_world(db, seeded_world, loopback_only) -> World:
    return seeded_world
