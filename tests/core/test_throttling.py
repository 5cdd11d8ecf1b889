"""API throttling (evalplatform/throttling.py): a user's writes and their expensive
requests are counted per window in the ``throttle`` cache all processes share; over the
rate, 429 with ``Retry-After``, in the API's error shape (and OpenAI's under ``/v1``).

The root conftest turns throttling off for every other test; here each test sets rates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from rest_framework.test import APIClient

from evalplatform import throttling
from evalplatform.accounts.services import token_create
from evalplatform.env import parse_rate

pytestmark = pytest.mark.django_db(transaction=True)

WRITE = "/api/notifications/read"  # a write that changes nothing here, as often as you like
READ = "/api/me"
EXPENSIVE_CSV = "/api/judge-files/batch_none/verdicts.csv"  # 404 after the count
CHEAP_JSON = "/api/judge-files/batch_none/verdicts"  # the same view's JSON: not expensive


@pytest.fixture
def rates(settings):
    """``rates(write=..., expensive=...)`` sets the rates ("off" by default) on an empty
    store."""

    def set_rates(write: str = "off", expensive: str = "off") -> None:
        settings.API_THROTTLE_RATES = {"write": write, "expensive": expensive}
        caches[throttling.CACHE_ALIAS].clear()

    yield set_rates
    caches[throttling.CACHE_ALIAS].clear()


@pytest.fixture
def one_window(monkeypatch):
    """The clock stopped 15 s into a minute: a test's requests all fall in one window of a
    per-minute rate (a real clock crossing a minute mid-test would reset the count)."""
    monkeypatch.setattr(throttling.time, "time", lambda: 1_800_000_015.0)


def with_token(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user, name='t')[1]}")
    return client


def assert_throttled(response, *, openai: bool = False) -> int:
    assert response.status_code == 429, response.content
    wait = int(response["Retry-After"])
    assert 1 <= wait <= 86400
    body = response.json()
    if openai:
        assert body["error"]["code"] == "rate_limit_exceeded"
        assert body["error"]["type"] == "requests"
    else:
        assert body["retry_after"] == wait
        assert body["detail"] == f"Too many requests: try again in {wait} second" + (
            "s." if wait != 1 else "."
        )
    return wait


def test_the_store_is_shared_never_a_process_own():
    store = caches[throttling.CACHE_ALIAS]
    assert not isinstance(store, LocMemCache)
    expected = "RedisCache" if os.environ.get("REDIS_URL") else "DatabaseCache"
    assert type(store).__name__ == expected


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="the Redis store (scale mode)")
def test_requests_through_the_asgi_server_share_the_processs_redis_connections(
    rates, people_two_admins, platform_server, monkeypatch
):
    """Under ASGI each request has a cache object of its own: they must share one
    connection pool, not open a Redis connection per request (as they did)."""
    import httpx
    import redis

    rates(write="1000/hour")
    server = redis.Redis.from_url(os.environ["REDIS_URL"])
    # Connections made by this process (the server runs in a thread of it); the Redis
    # server's own count would include the other CI lanes' processes.
    made = []
    make_connection = redis.ConnectionPool.make_connection

    def counted(pool, *args, **kwargs):
        made.append(pool)
        return make_connection(pool, *args, **kwargs)

    monkeypatch.setattr(redis.ConnectionPool, "make_connection", counted)
    headers = {"Authorization": f"Token {token_create(user=people_two_admins['ann'], name='t')[1]}"}
    with httpx.Client(base_url=f"http://{platform_server}", headers=headers, timeout=10) as http:
        assert http.post(WRITE).status_code == 204  # the pool's first connection
        before = len(made)
        for _ in range(30):
            assert http.post(WRITE).status_code == 204
        after = len(made)
    assert after - before <= 2, f"{after - before} Redis connections for 30 requests"
    # ...and every request was counted there (the hour may have turned meanwhile).
    key = caches[throttling.CACHE_ALIAS].make_and_validate_key
    hour = int(time.time() // 3600)
    counts = [
        server.get(key(f"write:user:{people_two_admins['ann'].pk}:3600:{w}"))
        for w in (hour - 1, hour)
    ]
    assert sum(int(c or 0) for c in counts) == 31


def test_over_the_write_rate_a_429_with_retry_after_and_reads_go_on(
    rates, people_two_admins, one_window
):
    rates(write="3/min")
    ann = with_token(people_two_admins["ann"])
    for _ in range(3):
        assert ann.post(WRITE).status_code == 204
    assert_throttled(ann.post(WRITE))
    assert_throttled(ann.delete("/api/tokens/999999"))  # every unsafe method counts
    for _ in range(5):  # reads are not writes
        assert ann.get(READ).status_code == 200
    assert ann.get(CHEAP_JSON).status_code == 404


def test_counted_per_user_across_their_tokens_and_session(rates, people_two_admins, one_window):
    rates(write="2/min")
    ann = with_token(people_two_admins["ann"])
    assert ann.post(WRITE).status_code == 204
    assert ann.post(WRITE).status_code == 204
    assert_throttled(ann.post(WRITE))
    # Ann's other token and her browser session share her count...
    assert_throttled(with_token(people_two_admins["ann"]).post(WRITE))
    session = APIClient()
    session.force_login(people_two_admins["ann"])
    assert session.post(WRITE).status_code == 429
    # ...and Bob's is his own.
    bob = with_token(people_two_admins["bob"])
    assert bob.post(WRITE).status_code == 204
    assert bob.post(WRITE).status_code == 204
    assert_throttled(bob.post(WRITE))


def test_the_next_window_lets_requests_through_again(rates, people_two_admins, monkeypatch):
    rates(write="1/min")
    ann = with_token(people_two_admins["ann"])
    now = 1_800_000_000.0  # the start of a minute
    monkeypatch.setattr(throttling.time, "time", lambda: now + 15)
    assert ann.post(WRITE).status_code == 204
    assert assert_throttled(ann.post(WRITE)) == 45
    monkeypatch.setattr(throttling.time, "time", lambda: now + 61)
    assert ann.post(WRITE).status_code == 204


def test_expensive_requests_have_their_own_lower_rate(rates, people_two_admins, one_window):
    rates(write="100/min", expensive="2/min")
    ann = with_token(people_two_admins["ann"])
    assert ann.get(EXPENSIVE_CSV).status_code == 404
    assert ann.post("/api/scenarios/preview", {}, format="json").status_code == 400
    assert_throttled(ann.get(EXPENSIVE_CSV))
    assert_throttled(ann.post("/api/generation/estimate", {}, format="json"))
    # Ordinary writes and the view's JSON answer are not expensive.
    assert ann.post(WRITE).status_code == 204
    for _ in range(3):
        assert ann.get(CHEAP_JSON).status_code == 404
    assert with_token(people_two_admins["bob"]).get(EXPENSIVE_CSV).status_code == 404


def test_the_openai_api_answers_in_openais_shape(rates, people_two_admins, one_window):
    rates(expensive="1/min")
    ann = with_token(people_two_admins["ann"])
    assert ann.get("/v1/files/file-none/content").status_code == 404
    assert_throttled(ann.get("/v1/files/file-none/content"), openai=True)


@pytest.mark.slow
def test_another_process_sees_the_same_count(rates, people_two_admins):
    """A second Python process, on the same database and cache settings, answers 429 to the
    user whose count this one used up, and counts on for the others."""
    rates(write="2/day")  # a window the seconds the other process takes to start never end
    ann = with_token(people_two_admins["ann"])
    assert ann.post(WRITE).status_code == 204
    assert ann.post(WRITE).status_code == 204
    keys = {
        name: token_create(user=people_two_admins[name], name="other process")[1]
        for name in ("ann", "bob")
    }
    script = """
import json, sys
import django
django.setup()
from django.db import connections
from django.test import Client
from django.test.utils import setup_test_environment
connections["default"].settings_dict["NAME"] = sys.argv[1]
setup_test_environment()
statuses = {}
for name, key in json.loads(sys.argv[2]).items():
    client = Client(HTTP_AUTHORIZATION=f"Token {key}")
    statuses[name] = [client.post("/api/notifications/read").status_code for _ in range(3)]
print(json.dumps(statuses))
"""
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "evalplatform.settings",
        "API_THROTTLE_WRITE": "2/day",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    done = subprocess.run(
        [sys.executable, "-c", script, connection.settings_dict["NAME"], json.dumps(keys)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    statuses = json.loads(done.stdout.strip().splitlines()[-1])
    assert statuses == {"ann": [429, 429, 429], "bob": [204, 204, 429]}
    # And back here, Bob's count is the one the other process left.
    assert_throttled(with_token(people_two_admins["bob"]).post(WRITE))


def test_rates_are_checked_when_the_settings_load():
    assert parse_rate("1200/min") == (1200, 60)
    assert parse_rate("5/s") == (5, 1) and parse_rate("100/hour") == (100, 3600)
    assert parse_rate("off") is None and parse_rate("") is None
    for bad in ("lots", "10/fortnight", "0/min", "-1/s", "1.5/min"):
        with pytest.raises(ImproperlyConfigured):
            parse_rate(bad)
