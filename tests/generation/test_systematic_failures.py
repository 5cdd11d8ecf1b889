"""Jobs that fail when they should and calls that cannot hang (issue 17, points 2 and 3):
a refused key or an unreachable provider fails the job with its reason, having spent
nothing more; a reply that trickles past the connection's timeout is cut at that deadline;
replies larger than the platform accepts are refused."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time

import pytest

from evalplatform.accounts.models import Notification
from evalplatform.providers.llm.client import ProviderClient
from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.providers.llm.types import LLMRequest, ProviderError
from evalplatform.runs.engine import run_live
from evalplatform.runs.models import ProviderBatch
from generation.models import GenerationJob, JobStatus
from generation.runners.live import GenerationWork
from tests.factories import ConnectionFactory
from tests.helpers.generation import job_on

pytestmark = pytest.mark.django_db(transaction=True)
JOBS = "/api/generation/jobs"


async def _no_sleep(_seconds):
    return None


def run(job_id):
    work = GenerationWork(job_id, retry=RetryPolicy(sleep=_no_sleep))
    return asyncio.run(run_live(work))


def test_a_refused_key_fails_the_job_with_its_reason(api, creator, team_a, fake_provider):
    fake_provider.app.config.fault_rate = 1.0
    fake_provider.app.config.fault_kinds = ("401",)
    job_id = job_on(api, creator, team_a, fake_provider.url)
    run(job_id)
    job = GenerationJob.objects.get(pk=job_id)
    assert job.status == JobStatus.FAILED
    assert "refused the API key" in job.status_message and "HTTP 401" in job.status_message
    # Spent nothing more: one call was made, and every cell waits for a resume.
    assert job.outputs.filter(status="pending").count() == 6 and job.cost_usd == 0
    assert job.reserved_usd == 0 and job.failed_cells == 0
    assert job.outputs.filter(error_kind="auth").count() == 1
    assert Notification.objects.filter(user=creator, kind="generation.failed").exists()
    # The job page and the API show the reason.
    shown = api(creator).get(f"{JOBS}/{job_id}").json()
    assert shown["status"] == "failed" and "API key" in shown["status_message"]


def test_an_unreachable_provider_fails_the_job(api, creator, team_a):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there
    job_id = job_on(api, creator, team_a, f"http://127.0.0.1:{port}")
    run(job_id)
    job = GenerationJob.objects.get(pk=job_id)
    assert job.status == JobStatus.FAILED and "cannot be reached" in job.status_message
    assert job.outputs.filter(status="pending").count() == 6


def test_repeated_failures_of_one_configuration_fail_the_job(
    api, creator, team_a, fake_provider, settings
):
    settings.GENERATION_FAIL_AFTER = 3
    fake_provider.app.config.fault_rate = 1.0
    fake_provider.app.config.fault_kinds = ("400",)
    job_id = job_on(api, creator, team_a, fake_provider.url)
    run(job_id)
    job = GenerationJob.objects.get(pk=job_id)
    assert job.status == JobStatus.FAILED and "3 cells of" in job.status_message
    assert job.failed_cells == 3 and job.outputs.filter(status="pending").count() == 3


def test_transient_failures_still_retry_per_cell(api, creator, team_a, fake_provider):
    fake_provider.app.config.fault_rate = 0.5
    fake_provider.app.config.fault_kinds = ("500",)
    job_id = job_on(api, creator, team_a, fake_provider.url)
    run(job_id)
    job = GenerationJob.objects.get(pk=job_id)
    assert job.status == JobStatus.COMPLETED


def test_a_trickling_reply_is_cut_at_the_total_deadline(api, creator, team_a, fake_provider):
    # Each chunk arrives well within the idle timeout, but the reply as a whole does not.
    fake_provider.app.config.stream_chunk_words = 1
    fake_provider.app.config.stream_chunk_delay_s = 0.3
    conn = ConnectionFactory(team=team_a, kind="openai", base_url=fake_provider.url, timeout_s=1)

    async def call():
        async with ProviderClient.for_connection(conn, retry=RetryPolicy(max_retries=0)) as c:
            return await c.complete_streaming(
                LLMRequest(model="gpt-fake", user="Write at length", max_tokens=400),
                lambda delta: None,
            )

    with pytest.raises(ProviderError) as caught:
        asyncio.run(call())
    assert caught.value.kind == "timeout" and "within 1 s" in caught.value.message


@pytest.mark.parametrize(("marker", "reason"), [("401", "API key"), ("404", "does not know")])
def test_a_refused_batch_submission_fails_the_job(
    api, creator, team_a, fake_provider, marker, reason
):
    from tests.helpers.generation import batch_job, drive, model_for

    fake_provider.config.batch_duration_s = 0
    model = model_for(team_a, fake_provider)
    job_id = batch_job(api, creator, team_a, model, ["fine", f"x [[fault:reject-{marker}]]"])
    drive(job_id)
    job = GenerationJob.objects.get(pk=job_id)
    assert job.status == JobStatus.FAILED and reason in job.status_message
    # Nothing more is submitted: every cell waits, pending, for a resume, and none failed.
    assert job.outputs.filter(status="pending").count() == 4 and job.failed_cells == 0
    assert job.reserved_usd == 0 and job.cost_usd == 0
    assert Notification.objects.filter(user=creator, kind="generation.failed").exists()
    drive(job_id)  # a later pass submits nothing for a failed job
    assert ProviderBatch.objects.filter(work_id=job_id).count() == 1


class RawServer:
    """A one-purpose HTTP server over loopback: every connection gets ``reply`` (a function
    writing to the socket until it returns or the client goes away)."""

    def __init__(self, reply):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.reply = reply
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        with conn:
            conn.recv(65536)  # the request (small: headers and a short JSON body)
            with contextlib.suppress(OSError):  # the client hung up: what the test wants
                self.reply(conn)

    def close(self):
        self.sock.close()


def _huge_declared(conn):
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2147483648\r\n\r\n" + b" " * 1024
    )
    time.sleep(5)


def _endless_stream(conn):
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    event = "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": "word " * 50}}]})
    chunk = (event + "\n\n").encode()
    framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    for _ in range(100_000):  # 25 MB of text if nobody stops reading
        conn.sendall(framed)


def _endless_body(conn):
    conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{"choices": [')
    for _ in range(100_000):
        conn.sendall(b" " * 4096)


@pytest.mark.parametrize(
    ("reply", "streaming", "kind"),
    [
        (_huge_declared, False, "reply_too_large"),
        (_endless_body, False, "reply_too_large"),
        (_endless_stream, True, "reply_too_long"),
    ],
)
def test_replies_are_capped_client_side(settings, reply, streaming, kind):
    settings.PROVIDER_MAX_REPLY_BYTES = 1024 * 1024
    server = RawServer(reply)
    conn = ConnectionFactory.build(kind="openai", base_url=server.url, timeout_s=30)
    request = LLMRequest(model="gpt-fake", user="Write", max_tokens=50)

    async def call():
        async with ProviderClient.for_connection(conn, retry=RetryPolicy(max_retries=0)) as c:
            if streaming:
                return await c.complete_streaming(request, lambda delta: None)
            return await c.complete(request)

    try:
        with pytest.raises(ProviderError) as caught:
            asyncio.run(call())
    finally:
        server.close()
    assert caught.value.kind == kind
    assert len(caught.value.message) < 500  # the reply itself is not kept


def test_cancelling_aborts_the_calls_in_flight(api, creator, team_a, fake_provider, settings):
    settings.GENERATION_CONTROL_S = 0.2
    fake_provider.app.config.latency_s = 60  # every call would take a minute
    job_id = job_on(api, creator, team_a, fake_provider.url, items=4)
    GenerationJob.objects.filter(pk=job_id).update(concurrency=4)
    summary = {}
    runner = threading.Thread(target=lambda: summary.update(done=run(job_id)), daemon=True)
    runner.start()
    deadline = time.monotonic() + 20
    while not GenerationJob.objects.get(pk=job_id).outputs.filter(status="running").exists():
        assert time.monotonic() < deadline, "the runner never sent a call"
        time.sleep(0.05)
    cancelled = api(creator).post(f"{JOBS}/{job_id}/cancel")
    assert cancelled.status_code == 200
    runner.join(timeout=15)  # far less than the calls' minute: they were aborted
    assert not runner.is_alive() and summary["done"].stopped_by == "cancelled"
    job = GenerationJob.objects.get(pk=job_id)
    assert job.status == JobStatus.CANCELLED and job.reserved_usd == 0
    assert not job.outputs.filter(status="running").exists()
    assert job.runner_token == "" or job.lease_until is None
