"""API fuzzing: schemathesis drives every operation of ``/api/schema/`` against the app,
in-process over WSGI with a real API token (``Authorization: Token <key>``), and checks that
no answer is a server error and every answer is what the schema promises (a documented
status code, its content type, its body schema, its headers).

The schema is generated in-process when pytest collects the module (schemathesis needs the
operations then; its lazy ``from_fixture`` loader fails on pytest 9.2), and
``test_the_fuzzed_schema_is_the_served_one`` checks it is what ``/api/schema/`` serves.

A team is seeded with objects of each kind (a provider connection to the fake provider
server on loopback, a model, a prompt template, a generation job with outputs, an open and
a draft scenario with tasks, an assignment, a judgment, an LLM judge with a run, an
invitation, a notification, a spare token, and unused connection, model, template, version
and judge that edits and deletes may change); half the generated numeric path parameters
are turned into those ids, so fuzzed requests reach real objects and not only 404s. Every
request runs in a savepoint that is rolled back, so each example sees the same seeded team
(seeded once for the module): a fuzzed DELETE cannot starve the examples after it, and
nothing queued on commit (tasks, broadcasts) ever runs. Nothing but loopback can be
resolved or reached.

``API_FUZZ_EXAMPLES`` (default 12) bounds the fuzzing phase per operation and
``API_FUZZ_SEED`` the seed (generation is derandomized: every run sends the same requests);
the schema's examples and schemathesis's coverage phase (boundary and wrong-type values)
run in addition: about 5,000 requests in all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.helpers.fuzz import World, generated_schema, rolled_back

schemathesis = pytest.importorskip("schemathesis")

from django.core import signals  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.db import close_old_connections  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

MAX_EXAMPLES = int(os.environ.get("API_FUZZ_EXAMPLES", "12"))
SEED = int(os.environ.get("API_FUZZ_SEED", "20240805"))

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


# Which seeded ids a path's ``{id}`` (or other parameter) stands for, by path prefix.
_ID_KINDS = [
    ("/api/generation/jobs/", "job"),
    ("/api/generation/outputs/", "output"),
    ("/api/judges/", "judge"),
    ("/api/evaluations/assignments/", "assignment"),
    ("/api/evaluations/scenarios/", "scenario"),
    ("/api/scenarios/", "scenario"),
    ("/api/notifications/", "notification"),
    ("/api/prompts/templates/", "template"),
    ("/api/prompts/versions/", "version"),
    ("/api/providers/connections/", "connection"),
    ("/api/providers/models/", "model"),
    ("/api/tokens/", "token"),
]


@contextmanager
def _connections_kept_open() -> Iterator[None]:
    """Django's WSGI handler closes "old" database connections around each request, which
    inside the test's transaction would drop it; Django's own test client detaches the same
    receivers for the same reason."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


CONFIG = schemathesis.Config.from_dict(
    {
        "seed": SEED,
        "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
    }
)
schema = schemathesis.openapi.from_dict(generated_schema(), config=CONFIG)
schema.app = get_wsgi_application()


def _use_real_ids(case: Any, world: World) -> None:
    """Point half the generated integer path parameters at seeded objects of the right
    kind, chosen by the generated value itself (so a run stays deterministic)."""
    path = case.operation.path
    kinds = {}
    kind = next((k for prefix, k in _ID_KINDS if path.startswith(prefix)), None)
    if kind is not None:
        kinds["id"] = kind
    if "{invitation_id}" in path:
        kinds["invitation_id"] = "invitation"
    for name, kind in kinds.items():
        value = (case.path_parameters or {}).get(name)
        # The coverage phase sends numbers as text ("0").
        if isinstance(value, str) and value.isascii() and value.isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value % 2 == 0:
            real = world.ids[kind]
            case.path_parameters[name] = real[(value // 2) % len(real)]


def test_every_operation_documents_its_error_answers():
    """``evalplatform.api.schema.AutoSchema`` (the DRF default schema class) adds them."""
    for path, item in schema.raw_schema["paths"].items():
        for method, operation in item.items():
            codes = set(operation["responses"])
            assert {"401", "403"} <= codes, (method, path, codes)
            if "{" in path:
                assert "404" in codes, (method, path, codes)
            if method in ("post", "put", "patch"):
                assert "400" in codes, (method, path, codes)


@pytest.mark.django_db
def test_an_unrouted_api_url_answers_json_and_a_page_stays_html(client):
    response = client.get("/api/scenarios/not-a-number/judges")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found."}
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_the_fuzzed_schema_is_the_served_one(fuzz_world):
    from werkzeug.test import Client

    with _connections_kept_open():
        response = Client(schema.app).get(
            "/api/schema/?format=json", headers={"Authorization": f"Token {fuzz_world.key}"}
        )
    assert response.status_code == 200
    assert json.loads(response.get_data()) == schema.raw_schema


@schema.parametrize()
@settings(
    # The fixture is the seeded team; each example runs in a savepoint rolled back after it,
    # so every example sees the same team.
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ]
)
def test_every_operation_answers_as_documented(case, fuzz_world):
    _use_real_ids(case, fuzz_world)
    with _connections_kept_open(), rolled_back():
        response = case.call(headers={"Authorization": f"Token {fuzz_world.key}"})
    case.validate_response(response, checks=CHECKS)
