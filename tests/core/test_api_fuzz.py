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

import ipaddress
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

from django.core import signals  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.db import close_old_connections, transaction  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from evalplatform.accounts.roles import Role  # noqa: E402
from evalplatform.accounts.services import notify, token_create  # noqa: E402
from tests.factories import (  # noqa: E402
    ConnectionFactory,
    LLMModelFactory,
    MembershipFactory,
    PromptTemplateFactory,
    TeamFactory,
    UserFactory,
    make_version,
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


@dataclass
class World:
    """The seeded team: the token's key, and the ids each path parameter may take."""

    key: str
    ids: dict[str, list[Any]] = field(default_factory=dict)


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
def _rolled_back() -> Iterator[None]:
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


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


def _is_loopback(host: Any) -> bool:
    if host in ("localhost", "localhost.", None):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture
def loopback_only(monkeypatch):
    """Fuzzed bodies may name any base URL: refuse to resolve or reach anything but loopback."""
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def getaddrinfo(host, *args, **kwargs):
        if not _is_loopback(host.decode() if isinstance(host, bytes) else host):
            raise socket.gaierror(socket.EAI_NONAME, f"fuzz test: no network ({host!r})")
        return real_getaddrinfo(host, *args, **kwargs)

    def guard(address: Any) -> None:
        if isinstance(address, tuple) and not _is_loopback(address[0]):
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


def _seed(fake_url: str) -> World:
    from evaluations.invitations import services as invitations
    from evaluations.judges import services as judges
    from evaluations.workspace import services as evaluation_services
    from generation import planning
    from generation import services as generation_services
    from generation.models import GenerationOutput
    from scenarios import services as scenario_services

    team = TeamFactory(name="Fuzz", slug="fuzz")
    admin = UserFactory(username="fuzz-admin")
    MembershipFactory(user=admin, team=team, role=Role.ADMIN)
    # Another team's objects: fuzzed ids may land on them, and must answer 404 alike.
    TeamFactory(name="Other", slug="other")

    connection = ConnectionFactory(
        team=team, kind="openai", name="fake", base_url=fake_url, timeout_s=5
    )
    connection.set_api_key("sk-fuzz-0123456789abcdef")
    connection.save()
    model = LLMModelFactory(connection=connection, model_id="fuzz-model", display_name="Fuzz")
    template = PromptTemplateFactory(team=team, name="Summary")
    version = make_version(template, [("System", "You summarize."), ("", "{{content}}")])
    # Unused objects beside the used ones (which refuse edits and deletes with 409), so
    # fuzzed edits and deletes can succeed too.
    spare_connection = ConnectionFactory(
        team=team, kind="openai", name="spare", base_url=fake_url, timeout_s=5
    )
    spare_model = LLMModelFactory(connection=connection, model_id="spare-model")
    spare_template = PromptTemplateFactory(team=team, name="Spare")
    spare_version = make_version(
        spare_template, [("", "Say {{thing}}.")], sample_item={"thing": "hello"}
    )
    draft_version = make_version(template, [("", "Summarize: {{content}}")])

    rows = [{"id": f"s{n}", "content": f"Text number {n} about rivers."} for n in range(3)]
    plan = planning.job_plan(
        user=admin,
        data={
            "team": "fuzz",
            "name": "Study",
            "source": {"type": "manual", "format": "json", "content": json.dumps(rows)},
            "prompt_versions": [version.pk],
            "models": [model.pk],
            "repetitions": 1,
            "temperatures": [0.0],
            "max_tokens": 50,
        },
    )
    job = generation_services.job_create(user=admin, plan=plan)
    outputs = list(job.outputs.order_by("pk"))
    GenerationOutput.objects.filter(pk__in=[o.pk for o in outputs]).update(
        status="completed", content="An answer."
    )

    answers = {"good": "A careful, complete answer.", "bad": "No."}
    upload = "\n".join(
        json.dumps({"item_id": f"q{n}", "variant_id": name, "content": f"{text} ({n})"})
        for n in range(3)
        for name, text in answers.items()
    ).encode()
    draft = scenario_services.scenario_from_upload(
        user=admin,
        team=team,
        data={"name": "Draft", "type": "comparison", "config": {}, "format": "jsonl"},
        raw=upload,
    )
    scenario = scenario_services.scenario_from_upload(
        user=admin,
        team=team,
        data={"name": "Open", "type": "comparison", "config": {}, "format": "jsonl"},
        raw=upload,
    )
    scenario = scenario_services.scenario_open(user=admin, scenario=scenario)
    answered = evaluation_services.next_task(user=admin, scenario=scenario)
    assert answered is not None
    evaluation_services.submit(user=admin, assignment=answered, data={"answer": {"winner": "A"}})
    pending = evaluation_services.next_task(user=admin, scenario=scenario)
    assert pending is not None
    judge = judges.judge_create(
        user=admin, scenario=scenario, data={"name": "Fuzz judge", "model": model.pk}
    )
    judges.judge_run(user=admin, judge=judge, data={})  # queued on commit: never runs
    idle_judge = judges.judge_create(
        user=admin, scenario=scenario, data={"name": "Idle judge", "model": model.pk}
    )
    [(invitation, _)] = invitations.invite(
        user=admin, scenario=scenario, emails=["guest@example.org"], link_for=lambda t: t
    )
    notification = notify(user=admin, team=team, kind="info", message="Hello")
    spare, _ = token_create(user=admin, name="spare")
    _, key = token_create(user=admin, name="fuzz")
    return World(
        key=key,
        ids={
            "job": [job.pk],
            "output": [o.pk for o in outputs[:2]],
            "judge": [judge.pk, idle_judge.pk],
            "assignment": [answered.pk, pending.pk],
            "scenario": [scenario.pk, draft.pk],
            "invitation": [invitation.pk],
            "notification": [notification.pk],
            "template": [template.pk, spare_template.pk],
            "version": [version.pk, draft_version.pk, spare_version.pk],
            "connection": [connection.pk, spare_connection.pk],
            "model": [model.pk, spare_model.pk],
            "token": [spare.pk],
        },
    )


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
        yield _seed(fake_server.url)
        transaction.set_rollback(True)


@pytest.fixture
def fuzz_world(db, seeded_world, loopback_only) -> World:
    return seeded_world


def _generated_schema() -> dict[str, Any]:
    """The schema ``/api/schema/`` serves (``test_the_fuzzed_schema_is_the_served_one``),
    generated in-process: schemathesis needs it when pytest collects the tests, before any
    database exists."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(document, renderer_context={}))


CONFIG = schemathesis.Config.from_dict(
    {
        "seed": SEED,
        "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
    }
)
schema = schemathesis.openapi.from_dict(_generated_schema(), config=CONFIG)
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
    with _connections_kept_open(), _rolled_back():
        response = case.call(headers={"Authorization": f"Token {fuzz_world.key}"})
    case.validate_response(response, checks=CHECKS)
