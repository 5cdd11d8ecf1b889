"""Provider URLs that cannot point inside (evalplatform/providers/netguard.py): a connection's
base URL on the platform's own network is refused when saved, a job on one is refused before
any request leaves, the check runs again at every connection (a name that moves inside, an
allowance withdrawn), and what comes back from a provider is kept only as a parsed, bounded
message, never as the raw body."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import override_settings

from evalplatform.accounts.roles import Role
from evalplatform.providers.models import ProviderConnection
from generation.models import GenerationJob, OutputStatus
from tests.factories import ConnectionFactory, LLMModelFactory, PromptTemplateFactory, make_version
from tests.helpers.generation import run

CONNECTIONS = "/api/providers/connections"
JOBS = "/api/generation/jobs"
NOTHING_ALLOWED = override_settings(PROVIDER_HOSTS_ALLOWED=[])


@pytest.fixture
def manager(team_a, member):
    return member(team_a, Role.MANAGER)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:6379", "internal network (127.0.0.1)"),
        ("http://localhost:5432/", "internal network"),
        ("http://169.254.169.254/latest/", "internal network (169.254.169.254)"),
        ("http://10.0.0.1", "internal network"),
        ("http://192.168.1.1:8080", "internal network"),
        ("http://100.64.0.1", "internal network"),
        ("http://[::1]:8000", "internal network (::1)"),
        ("http://[::ffff:127.0.0.1]/", "internal network"),
        ("http://0.0.0.0:8000", "internal network"),
        ("http://224.0.0.1", "internal network"),
        ("ftp://files.example.com/", "Only http:// and https://"),
        ("https://user:secret@api.example.com/", "No credentials"),
        ("https://api.example.com/v1?", "No query or fragment"),
        ("https://api.example.com/v1?target=/admin", "No query or fragment"),
        ("https://api.example.com/v1#x", "No query or fragment"),
    ],
)
def test_a_base_url_inside_is_refused_when_saved(api, team_a, manager, url, says):
    with NOTHING_ALLOWED:
        response = api(manager).post(
            CONNECTIONS,
            {"team": team_a.slug, "name": "inside", "kind": "openai", "base_url": url},
            format="json",
        )
    assert response.status_code == 400, response.json()
    [message] = response.json()["errors"]["base_url"]
    assert says in message
    if "internal network" in says:  # the way out is named
        assert "PROVIDER_HOSTS_ALLOWED" in message
    assert not ProviderConnection.objects.exists()


@pytest.mark.django_db
def test_an_allowed_host_may_be_saved_and_a_public_one_always(api, team_a, manager):
    with override_settings(PROVIDER_HOSTS_ALLOWED=["127.0.0.1"]):
        allowed = api(manager).post(
            CONNECTIONS,
            {
                "team": team_a.slug,
                "name": "local",
                "kind": "openai",
                "base_url": "http://127.0.0.1:8000/v1",
            },
            format="json",
        )
    assert allowed.status_code == 201, allowed.json()
    with NOTHING_ALLOWED:
        public = api(manager).post(
            CONNECTIONS,
            {
                "team": team_a.slug,
                "name": "public",
                "kind": "openai",
                "base_url": "https://203.0.113.7/v1",
            },
            format="json",
        )
        moved = api(manager).patch(
            f"{CONNECTIONS}/{allowed.json()['id']}",
            {"base_url": "http://127.0.0.1:9000/v1", "api_key": "sk-new"},
            format="json",
        )
    # 203.0.113.0/24 is documentation space: not global, so refused as well.
    assert public.status_code == 400
    assert moved.status_code == 400 and "base_url" in moved.json()["errors"]


def _job(api, user, team, url):
    connection = ConnectionFactory(team=team, kind="openai", base_url=url, timeout_s=5)
    model = LLMModelFactory(connection=connection, model_id="gpt-inside")
    version = make_version(PromptTemplateFactory(team=team), [("", "Say {{content}}")])
    return {
        "team": team.slug,
        "name": "Inside",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.0],
        "concurrency": 1,
        "max_retries": 0,
        "source": {"type": "manual", "format": "json", "content": '[{"id": "a", "content": "hi"}]'},
    }


@pytest.mark.django_db(transaction=True)
def test_a_job_on_a_loopback_connection_is_refused_before_any_request(
    api, creator, team_a, fake_provider
):
    body = _job(api, creator, team_a, fake_provider.url)  # saved while loopback was allowed
    with NOTHING_ALLOWED:
        response = api(creator).post(JOBS, body, format="json")
    assert response.status_code == 400
    assert "internal network (127.0.0.1)" in response.json()["errors"]["models[0]"][0]
    assert not GenerationJob.objects.exists() and len(fake_provider.app.bodies) == 0


@pytest.mark.django_db(transaction=True)
def test_every_connection_is_checked_again_when_it_is_made(api, creator, team_a, fake_provider):
    """A job made while the host was allowed, run after the allowance is withdrawn (or a name
    that resolved outside, resolving inside now): no request leaves, and the job stops."""
    response = api(creator).post(JOBS, _job(api, creator, team_a, fake_provider.url), format="json")
    assert response.status_code == 201
    job = GenerationJob.objects.get(pk=response.json()["id"])
    api(creator).post(f"{JOBS}/{job.pk}/start")
    with NOTHING_ALLOWED:
        run(job.pk, max_retries=0)
    # Stopped as a systematic failure (like a refused key): the cell waits, pending, for the
    # connection to be fixed and the job resumed.
    output = job.outputs.get()
    assert output.status == OutputStatus.PENDING and output.error_kind == "internal_address"
    assert "internal network (127.0.0.1)" in output.error_message
    assert len(fake_provider.app.bodies) == 0
    job.refresh_from_db()
    assert job.status == "failed" and "platform's own network" in job.status_message


SECRET_PAGE = b"<html><body>Redis admin: requirepass hunter2</body></html>"


class _HtmlErrors(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(500)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(SECRET_PAGE)))
        self.end_headers()
        self.wfile.write(SECRET_PAGE)

    def log_message(self, *args):
        pass


@pytest.mark.django_db(transaction=True)
def test_an_error_body_that_is_not_json_is_never_stored(api, creator, team_a):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HtmlErrors)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        body = _job(api, creator, team_a, url)
        job_id = api(creator).post(JOBS, body, format="json").json()["id"]
        api(creator).post(f"{JOBS}/{job_id}/start")
        run(job_id, max_retries=0)
    finally:
        server.shutdown()
    output = GenerationJob.objects.get(pk=job_id).outputs.get()
    assert output.status == OutputStatus.FAILED
    assert output.error_message.startswith("HTTP 500")
    assert "hunter2" not in output.error_message and "<html" not in output.error_message
    shown = api(creator).get(f"{JOBS}/{job_id}/outputs").json()["results"][0]
    assert "hunter2" not in str(shown)


@pytest.mark.django_db(transaction=True)
def test_the_connection_test_is_refused_inside_too(api, team_a, manager, fake_provider):
    connection = ConnectionFactory(team=team_a, kind="openai", base_url=fake_provider.url)
    LLMModelFactory(connection=connection, model_id="m-test")
    with NOTHING_ALLOWED:
        response = api(manager).post(f"{CONNECTIONS}/{connection.pk}/test", {}, format="json")
    body = response.json()
    assert response.status_code == 200 and body["ok"] is False, body
    assert body["error_kind"] == "internal_address" and "internal network" in body["message"]
    assert len(fake_provider.app.bodies) == 0
