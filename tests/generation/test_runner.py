"""The live runner through the engine: mock and fake provider, retries and failure isolation,
budget pause and resume, crash recovery, pause within one window, export and statistics."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import threading
import time
from decimal import Decimal

import pytest
from django.db import connections
from django.db.models import Sum
from django.test import Client

from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.runs.engine import run_live
from generation.models import GenerationJob, GenerationOutput, JobStatus
from generation.runners.live import GenerationWork
from generation.selectors import CSV_COLUMNS
from tests.factories import ConnectionFactory, LLMModelFactory
from tests.helpers.generation import JOBS, FakeSleep, job_body, run, run_in_background, started_job


def totals_agree(job):
    job.refresh_from_db()
    spent = job.outputs.aggregate(s=Sum("cost_usd"))["s"] or Decimal(0)
    assert job.cost_usd == spent  # cost counted exactly once
    return job


@pytest.mark.django_db(transaction=True)
def test_a_job_runs_to_completion_on_the_mock(api, creator, setup):
    job_id = started_job(api, creator, setup)
    summary = run(job_id)
    job = totals_agree(GenerationJob.objects.get(pk=job_id))
    assert summary.succeeded == 48 and summary.failed == 0
    assert job.status == JobStatus.COMPLETED and job.completed_cells == 48
    assert job.finished_at and job.reserved_usd == 0 and job.runner_token == ""
    outputs = job.outputs.all()
    assert all(o.content and o.output_tokens and o.cost_usd > 0 for o in outputs)
    # Repetitions are seeded, so repeated calls differ the way a model's do.
    reps = outputs.filter(
        item__item_id="s0", prompt__position=0, model_config__position=0, temperature=1.0
    )
    assert len({o.content for o in reps}) == 2


@pytest.mark.django_db(transaction=True)
def test_faults_are_retried_and_failures_isolated(api, creator, team_a, fake_provider):
    from tests.factories import PromptTemplateFactory, make_version

    connection = ConnectionFactory(team=team_a, kind="openai", base_url=fake_provider.url)
    model = LLMModelFactory(connection=connection, model_id="gpt-fake")
    version = make_version(PromptTemplateFactory(team=team_a), [("", "Say: {{content}}")])
    items = [
        {"id": "ok", "content": "fine"},
        {"id": "flaky", "content": "x [[fault:500*1]]"},
        {"id": "bad", "content": "x [[fault:400]]"},
    ]
    body = {
        "team": "team-a",
        "name": "Faults",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.0],
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
    }
    job_id = api(creator).post(JOBS, body, format="json").json()["id"]
    api(creator).post(f"{JOBS}/{job_id}/start")
    sleep = FakeSleep()
    run(job_id, sleep=sleep)
    job = totals_agree(GenerationJob.objects.get(pk=job_id))
    by_item = {o.item.item_id: o for o in job.outputs.select_related("item")}
    assert job.status == JobStatus.COMPLETED
    assert (job.completed_cells, job.failed_cells) == (2, 1)
    assert by_item["flaky"].status == "completed" and by_item["flaky"].attempts == 2
    assert sleep.waits == [1.0]
    bad = by_item["bad"]
    assert bad.status == "failed" and bad.error_kind == "bad_request" and bad.attempts == 1
    assert "Injected fault 400" in bad.error_message and bad.cost_usd == 0


@pytest.mark.django_db(transaction=True)
def test_processing_time_counts_every_attempt_and_the_waits(api, creator, team_a, fake_provider):
    from tests.factories import PromptTemplateFactory, make_version

    connection = ConnectionFactory(team=team_a, kind="openai", base_url=fake_provider.url)
    model = LLMModelFactory(connection=connection, model_id="gpt-fake")
    version = make_version(PromptTemplateFactory(team=team_a), [("", "Say: {{content}}")])
    items = [{"id": "ok", "content": "fine"}, {"id": "flaky", "content": "x [[fault:503*2]]"}]
    body = {
        "team": "team-a",
        "name": "Slow retries",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.0],
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
    }
    client = api(creator)
    job_id = client.post(JOBS, body, format="json").json()["id"]
    client.post(f"{JOBS}/{job_id}/start")
    sleep = FakeSleep()
    run(job_id, sleep=sleep)
    assert sleep.waits == [1.0, 5.0]
    listed = client.get(f"{JOBS}/{job_id}/outputs").json()["results"]
    by_item = {o["source_item_id"]: o for o in listed}
    flaky, ok = by_item["flaky"], by_item["ok"]
    assert flaky["attempts"] == 3 and flaky["status"] == "completed"
    # In all: two failed attempts, 6 s of waits, then the answering call.
    assert flaky["processing_time_ms"] >= 6000 + flaky["last_attempt_ms"]
    assert flaky["last_attempt_ms"] < 6000
    assert ok["attempts"] == 1 and ok["processing_time_ms"] == ok["last_attempt_ms"]
    single = client.get(f"/api/generation/outputs/{flaky['id']}").json()
    assert single["last_attempt_ms"] == flaky["last_attempt_ms"]
    exported = json.loads(b"".join(client.post(f"{JOBS}/{job_id}/export/json").streaming_content))
    records = {r["source_item_id"]: r for r in exported["outputs"]}
    assert records["flaky"]["processing_time_ms"] == flaky["processing_time_ms"]
    assert records["flaky"]["last_attempt_ms"] == flaky["last_attempt_ms"]
    # The spec's CSV keeps exactly its columns: processing_time_ms is the time in all.
    response = client.post(f"{JOBS}/{job_id}/export/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert list(rows[0]) == CSV_COLUMNS
    csv_flaky = next(r for r in rows if r["source_item_id"] == "flaky")
    assert int(csv_flaky["processing_time_ms"]) == flaky["processing_time_ms"]
    browser = Client()
    browser.force_login(creator)
    page = browser.get(f"/generation/jobs/{job_id}/outputs")
    assert page.status_code == 200
    assert f"(last attempt {flaky['last_attempt_ms']} ms)" in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_budget_pauses_and_raising_it_resumes(api, creator, setup):
    job_id = started_job(api, creator, setup, budget_usd="0.004")
    summary = run(job_id)
    job = totals_agree(GenerationJob.objects.get(pk=job_id))
    assert summary.stopped_by == "budget" and job.status == JobStatus.PAUSED
    assert "Budget reached" in job.status_message
    assert 0 < job.cost_usd <= Decimal("0.004") and job.reserved_usd == 0
    assert 0 < job.completed_cells < 48
    assert job.outputs.filter(status="running").count() == 0

    client = api(creator)
    assert client.patch(f"{JOBS}/{job_id}", {"budget_usd": "10"}, format="json").status_code == 200
    assert client.post(f"{JOBS}/{job_id}/start").json()["status"] == "running"
    run(job_id)
    job = totals_agree(GenerationJob.objects.get(pk=job_id))
    assert job.status == JobStatus.COMPLETED and job.completed_cells == 48


@pytest.mark.django_db(transaction=True)
def test_resuming_without_more_budget_does_not_notify_again(api, creator, setup):
    client = api(creator)
    job_id = started_job(api, creator, setup, budget_usd="0.004")

    def budget_notices():
        listed = client.get("/api/notifications").json()["results"]
        return [n for n in listed if n["kind"] == "generation.budget_exceeded"]

    def resume_and_run():
        assert client.post(f"{JOBS}/{job_id}/start").json()["status"] == "running"
        run(job_id)
        assert GenerationJob.objects.get(pk=job_id).status == JobStatus.PAUSED

    run(job_id)
    (first,) = budget_notices()
    resume_and_run()  # the budget is still spent: paused again, the notice refreshed
    (again,) = budget_notices()
    assert again["id"] == first["id"] and again["message"] == first["message"]
    assert again["read_at"] is None
    assert client.post(f"/api/notifications/{first['id']}/read").status_code == 204
    resume_and_run()  # read, and nothing new to say: still the one notice, still read
    (read,) = budget_notices()
    assert read["id"] == first["id"] and read["read_at"] is not None
    # A raised budget, reached again, is news.
    raised = client.patch(f"{JOBS}/{job_id}", {"budget_usd": "0.008"}, format="json")
    assert raised.status_code == 200
    resume_and_run()
    newest, old = budget_notices()
    assert old["id"] == first["id"] and newest["read_at"] is None
    assert "of $0.008" in newest["message"]


@pytest.mark.django_db(transaction=True)
def test_a_restarted_runner_finishes_only_what_is_left(api, creator, setup):
    from django.utils import timezone

    job_id = started_job(api, creator, setup)
    done = list(GenerationOutput.objects.filter(job_id=job_id).order_by("pk")[:5])
    for output in done:  # recorded by the runner that died
        output.status, output.content, output.cost_usd = "completed", "kept", Decimal("0.01")
        output.save()
    GenerationJob.objects.filter(pk=job_id).update(
        completed_cells=5,
        cost_usd=Decimal("0.05"),
        reserved_usd=Decimal("0.03"),
        runner_token="dead-runner",
        lease_until=timezone.now() - timezone.timedelta(seconds=5),
    )
    in_flight = GenerationOutput.objects.filter(job_id=job_id, status="pending").order_by("pk")[:3]
    GenerationOutput.objects.filter(pk__in=[o.pk for o in in_flight]).update(
        status="running", reserved_usd=Decimal("0.01")
    )

    summary = run(job_id)
    job = totals_agree(GenerationJob.objects.get(pk=job_id))
    assert summary.succeeded == 43 and job.status == JobStatus.COMPLETED
    assert job.completed_cells == 48 and job.reserved_usd == 0
    assert GenerationOutput.objects.filter(pk__in=[o.pk for o in done], content="kept").count() == 5


@pytest.mark.django_db(transaction=True)
def test_a_live_lease_keeps_a_second_runner_out(api, creator, setup):
    from django.utils import timezone

    job_id = started_job(api, creator, setup)
    GenerationJob.objects.filter(pk=job_id).update(
        runner_token="other", lease_until=timezone.now() + timezone.timedelta(seconds=60)
    )
    assert run(job_id).stopped_by == "held"
    assert GenerationOutput.objects.filter(job_id=job_id, status="pending").count() == 48


def in_thread(target, *args):
    """Run ``target(*args)`` in a thread of its own (with its own connection); returns (the
    thread, a dict that holds the result as ``value``)."""
    result = {}

    def body():
        try:
            result["value"] = target(*args)
        finally:
            connections.close_all()

    thread = threading.Thread(target=body)
    thread.start()
    return thread, result


def held_at(call, reached, go):
    """``call``, first waiting (on its first call) until ``go`` is set, after setting
    ``reached``: a step made to stop part-way, inside its transaction."""

    def wrapper(*args):
        reached.set()
        go.wait(timeout=10)
        return call(*args)

    return wrapper


@pytest.mark.django_db(transaction=True)
def test_steps_that_claim_at_once_never_take_the_same_cell(api, creator, setup):
    job_id = started_job(api, creator, setup, concurrency=4)
    first = GenerationWork(job_id)
    assert first.begin()
    # The same runner again (its token), stepping while the first step is part-way through
    # its claim: the job's lock makes it wait, and it then claims other cells.
    second = GenerationWork(job_id, token=first.token)
    claiming, go = threading.Event(), threading.Event()
    first.cells.request_for = held_at(first.cells.request_for, claiming, go)
    a, first_claim = in_thread(first.step, [], 4)
    assert claiming.wait(timeout=10)
    b, second_claim = in_thread(second.step, [], 4)
    b.join(timeout=0.5)
    assert b.is_alive()  # waiting for the first step's transaction
    go.set()
    a.join(timeout=10)
    b.join(timeout=10)
    firsts = {c.id for c in first_claim["value"][1]}
    seconds = {c.id for c in second_claim["value"][1]}
    assert len(firsts) == len(seconds) == 4 and not firsts & seconds
    job = GenerationJob.objects.get(pk=job_id)
    running = job.outputs.filter(status="running")
    assert set(running.values_list("pk", flat=True)) == firsts | seconds
    assert job.reserved_usd == running.aggregate(s=Sum("reserved_usd"))["s"] > 0


@pytest.mark.django_db(transaction=True)
def test_a_takeover_waits_for_a_step_that_is_recording(api, creator, setup):
    from django.utils import timezone

    from evalplatform.providers.llm.types import LLMResponse
    from evalplatform.runs.engine import Outcome
    from generation import lifecycle

    job_id = started_job(api, creator, setup, concurrency=4)
    work = GenerationWork(job_id)
    assert work.begin()
    _, cells, _ = work.step([], 4)
    done = [Outcome(c, 1, response=LLMResponse("A reply.", 10, 5, "stop", 0.1)) for c in cells]
    # The lease has run out, as a dead runner's would: another runner may take the job over,
    # once the step that records these replies (and renews the lease) has committed.
    GenerationJob.objects.filter(pk=job_id).update(
        lease_until=timezone.now() - timezone.timedelta(seconds=1)
    )
    recording, go = threading.Event(), threading.Event()
    work.failures.observe = held_at(work.failures.observe, recording, go)
    a, step = in_thread(work.step, done, 0)
    assert recording.wait(timeout=10)
    b, takeover = in_thread(lifecycle.take_lease, job_id, "another-runner")
    b.join(timeout=0.5)
    assert b.is_alive()  # waiting for the step's transaction
    go.set()
    a.join(timeout=10)
    b.join(timeout=10)
    assert step["value"][0] == "run" and takeover["value"] is None  # the lease was renewed
    job = totals_agree(GenerationJob.objects.get(pk=job_id))
    assert job.runner_token == work.token and job.reserved_usd == 0
    recorded = job.outputs.filter(pk__in=[c.id for c in cells], status="completed")
    assert recorded.count() == job.completed_cells == 4
    assert not job.outputs.filter(status="running").exists()


@pytest.mark.django_db(transaction=True)
def test_pause_takes_effect_within_one_window(api, creator, setup):
    setup["connection"].options = {"latency_s": 0.05}
    setup["connection"].save()
    job_id = started_job(api, creator, setup, concurrency=4)
    thread, result = run_in_background(job_id)
    deadline = time.monotonic() + 20
    while GenerationJob.objects.get(pk=job_id).completed_cells < 8:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert api(creator).post(f"{JOBS}/{job_id}/pause").json()["status"] == "paused"
    paused_at = GenerationJob.objects.get(pk=job_id).completed_cells
    thread.join(timeout=20)
    job = totals_agree(GenerationJob.objects.get(pk=job_id))
    assert result["summary"].stopped_by == "paused" and job.status == JobStatus.PAUSED
    assert job.completed_cells <= paused_at + 4  # at most the window in flight
    assert job.outputs.filter(status="running").count() == 0 and job.reserved_usd == 0
    assert job.outputs.filter(status="pending").count() == 48 - job.completed_cells


@pytest.mark.django_db(transaction=True)
def test_the_next_queued_job_starts_when_one_completes(api, creator, setup):
    first = started_job(api, creator, setup)
    second = api(creator).post(JOBS, job_body(setup, name="Next"), format="json").json()["id"]
    assert api(creator).post(f"{JOBS}/{second}/start").json()["status"] == "queued"
    run(first)
    assert GenerationJob.objects.get(pk=second).status == JobStatus.RUNNING


@pytest.mark.django_db(transaction=True)
def test_exports_and_statistics(api, creator, setup):
    job_id = started_job(api, creator, setup)
    run(job_id)
    client = api(creator)
    response = client.post(f"{JOBS}/{job_id}/export/csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert (
        rows[0]
        == CSV_COLUMNS
        == [
            "output_id",
            "source_item_id",
            "prompt_variant",
            "model_name",
            "generated_content",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "processing_time_ms",
            "status",
            "error_message",
            "created_at",
            "completed_at",
        ]
    )
    assert len(rows) == 49 and {r[9] for r in rows[1:]} == {"completed"}
    exported = json.loads(b"".join(client.post(f"{JOBS}/{job_id}/export/json").streaming_content))
    assert exported["job"]["config"]["temperatures"] == [0.0, 1.0]
    assert len(exported["outputs"]) == 48
    assert set(exported["outputs"][0]) == {*CSV_COLUMNS, "last_attempt_ms"}
    stats = client.get(f"{JOBS}/{job_id}/statistics").json()
    assert stats["by_status"] == {"completed": 48}
    assert set(stats["by_model"]) == {"Small", "Large"}
    assert stats["by_model"]["Small"]["outputs"] == 24
    assert set(stats["by_prompt"]) == {"Summary v1", "Short v1"}
    outputs = client.get(f"{JOBS}/{job_id}/outputs", {"status": "completed", "page_size": 5}).json()
    assert outputs["count"] == 48 and len(outputs["results"]) == 5
    model_id = GenerationJob.objects.get(pk=job_id).models.get(position=1).pk
    filtered = client.get(f"{JOBS}/{job_id}/outputs", {"model": model_id}).json()
    assert filtered["count"] == 24 and {o["model_name"] for o in filtered["results"]} == {"Large"}


@pytest.mark.django_db(transaction=True)
def test_recovery_redispatches_jobs_whose_runner_died(api, creator, setup):
    # The migration schedules it (idempotently; transactional tests flush migration data).
    from importlib import import_module

    from django.apps import apps
    from django.utils import timezone
    from django_q.brokers import get_broker
    from django_q.models import Schedule

    from generation.tasks import recover_jobs

    migration = import_module("generation.migrations.0002_recover_jobs_schedule")
    migration.schedule(apps, None)
    migration.schedule(apps, None)
    assert Schedule.objects.filter(func="generation.tasks.recover_jobs", minutes=1).count() == 1
    job_id = started_job(api, creator, setup)
    broker = get_broker()
    broker.purge_queue()
    GenerationJob.objects.filter(pk=job_id).update(
        runner_token="alive", lease_until=timezone.now() + timezone.timedelta(seconds=30)
    )
    assert recover_jobs() == [] and broker.queue_size() == 0
    GenerationJob.objects.filter(pk=job_id).update(
        lease_until=timezone.now() - timezone.timedelta(seconds=1)
    )
    assert recover_jobs() == [job_id] and broker.queue_size() == 1


@pytest.mark.django_db(transaction=True)
def test_one_client_per_connection_however_many_cells_start_together(api, creator, setup):
    from evalplatform.providers.llm.client import ProviderClient

    job_id = started_job(api, creator, setup, concurrency=16)
    made = []

    def factory(connection):
        made.append(connection.pk)
        return ProviderClient.for_connection(connection, retry=RetryPolicy(sleep=FakeSleep()))

    work = GenerationWork(job_id, retry=RetryPolicy(sleep=FakeSleep()))
    summary = asyncio.run(run_live(work, client_factory=factory))
    assert summary.succeeded == 48 and made == [setup["connection"].pk]


@pytest.mark.django_db(transaction=True)
def test_a_platform_error_in_one_cell_fails_that_cell_only(api, creator, setup):
    from evalplatform.providers.llm.client import ProviderClient

    class Broken(ProviderClient):
        async def complete(self, request, *, retry=None):
            if "number 1 " in request.user:
                raise ValueError("boom")
            return await super().complete(request, retry=retry)

        async def complete_streaming(self, request, on_text, **kwargs):
            if "number 1 " in request.user:
                raise ValueError("boom")
            return await super().complete_streaming(request, on_text, **kwargs)

    job_id = started_job(api, creator, setup)
    work = GenerationWork(job_id, retry=RetryPolicy(sleep=FakeSleep()))
    asyncio.run(run_live(work, client_factory=lambda c: Broken(kind="mock")))
    job = totals_agree(GenerationJob.objects.get(pk=job_id))
    assert job.status == JobStatus.COMPLETED and job.failed_cells == 16
    failed = job.outputs.filter(status="failed")
    assert {o.error_kind for o in failed} == {"internal"}
    assert {o.item.item_id for o in failed.select_related("item")} == {"s1"}


@pytest.mark.django_db(transaction=True)
def test_a_crashing_runner_fails_the_job_and_starts_the_next(api, creator, setup, monkeypatch):
    from generation import tasks

    first = started_job(api, creator, setup)
    second = api(creator).post(JOBS, job_body(setup, name="Next"), format="json").json()["id"]
    api(creator).post(f"{JOBS}/{second}/start")

    def explode(self, outcomes, limit):
        raise RuntimeError("database went away")

    monkeypatch.setattr(GenerationWork, "step", explode)
    assert tasks.run_job(first) == "failed"
    job = GenerationJob.objects.get(pk=first)
    assert job.status == JobStatus.FAILED and "database went away" in job.status_message
    assert job.reserved_usd == 0 and job.outputs.filter(status="running").count() == 0
    assert GenerationJob.objects.get(pk=second).status == JobStatus.RUNNING


@pytest.mark.django_db(transaction=True)
def test_a_runner_that_loses_its_lease_stops_and_records_nothing_more(
    api, creator, setup, settings
):
    settings.GENERATION_LEASE_S = 1  # heartbeat every third of a second
    setup["connection"].options = {"latency_s": 0.4}
    setup["connection"].save()
    job_id = started_job(api, creator, setup, concurrency=4)
    thread, result = run_in_background(job_id)
    deadline = time.monotonic() + 10
    while not GenerationOutput.objects.filter(job_id=job_id, status="running").exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    GenerationJob.objects.filter(pk=job_id).update(runner_token="someone-else")  # a takeover
    before = GenerationJob.objects.get(pk=job_id).completed_cells
    thread.join(timeout=10)
    assert result["summary"].stopped_by == "lost"
    time.sleep(0.5)  # anything still in flight would have landed by now
    assert GenerationJob.objects.get(pk=job_id).completed_cells == before


@pytest.mark.django_db(transaction=True)
def test_a_heartbeat_that_meets_a_database_error_keeps_the_run_going(
    api, creator, setup, settings, monkeypatch
):
    from django.db import OperationalError

    settings.GENERATION_LEASE_S = 1  # heartbeat every third of a second
    setup["connection"].options = {"latency_s": 0.2}
    setup["connection"].save()
    job_id = started_job(api, creator, setup, concurrency=4)
    renew = GenerationWork.heartbeat
    beats = []

    def flaky(self):
        beats.append(len(beats))
        if len(beats) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return renew(self)

    monkeypatch.setattr(GenerationWork, "heartbeat", flaky)
    summary = run(job_id, sleep=asyncio.sleep)  # real latency: the run outlasts some beats
    job = totals_agree(GenerationJob.objects.get(pk=job_id))
    assert len(beats) >= 2  # it beat again after the error
    assert summary.stopped_by == "" and job.status == JobStatus.COMPLETED
    assert job.completed_cells == 48


class Counted(GenerationWork):
    """The runner, counting what each step recorded and claimed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps = []  # (replies recorded, cells claimed)

    def step(self, outcomes, limit):
        control, cells, blocked = super().step(outcomes, limit)
        self.steps.append((len(outcomes), len(cells)))
        return control, cells, blocked


def paced_client(delays):
    """A mock client whose calls take ``delays(n)`` seconds (n: the call's number), counting
    the calls in flight at once."""
    from evalplatform.providers.llm.client import ProviderClient

    state = {"calls": 0, "in_flight": 0, "most": 0, "started": {}}

    class Paced(ProviderClient):
        async def complete(self, request, *, retry=None):
            state["calls"] += 1
            state["in_flight"] += 1
            state["most"] = max(state["most"], state["in_flight"])
            try:
                await asyncio.sleep(delays(state["calls"]))
                return await super().complete(request, retry=retry)
            finally:
                state["in_flight"] -= 1

    return (lambda connection: Paced(kind="mock")), state


@pytest.mark.django_db(transaction=True)
def test_a_step_records_several_replies_and_claims_ahead(api, creator, setup):
    from evalplatform.runs import engine

    job_id = started_job(api, creator, setup, concurrency=8)
    # Replies come one by one, 5-40 ms apart: each used to take a step of its own.
    factory, calls = paced_client(lambda n: 0.005 * (1 + n % 8))
    work = Counted(job_id, retry=RetryPolicy(sleep=FakeSleep()))
    summary = asyncio.run(run_live(work, client_factory=factory))
    job = totals_agree(GenerationJob.objects.get(pk=job_id))
    assert summary.succeeded == 48 and job.status == JobStatus.COMPLETED
    assert calls["calls"] == 48 and calls["most"] <= 8  # never more calls than the concurrency
    ahead = int(8 * engine.CLAIM_AHEAD)
    assert work.steps[0] == (0, 8 + ahead)  # the first step claims ahead too
    held = most_held = 0
    for recorded, claimed in work.steps:
        held += claimed - recorded
        most_held = max(most_held, held)
    assert most_held == 8 + ahead and held == 0
    # A reply waits for others (up to RECORD_WAIT_S): far fewer steps than replies (25 at
    # best; one a reply or two took 43 to 49).
    assert len(work.steps) <= 34, work.steps


@pytest.mark.django_db(transaction=True)
def test_a_cell_claimed_ahead_starts_when_a_call_ends_and_keeps_its_own_start(api, creator, setup):
    body = {"prompt_versions": [setup["prompts"][0].pk], "models": [setup["models"][0].pk]}
    job_id = started_job(
        api, creator, setup, concurrency=2, repetitions=1, temperatures=[0.0], **body
    )
    factory, calls = paced_client(lambda n: 0.3)
    work = Counted(job_id, retry=RetryPolicy(sleep=FakeSleep()))
    asyncio.run(run_live(work, client_factory=factory))
    assert work.steps[0] == (0, 3) and calls["most"] == 2  # three claimed, two called
    job = totals_agree(GenerationJob.objects.get(pk=job_id))
    outputs = sorted(job.outputs.all(), key=lambda o: o.started_at)
    assert [o.status for o in outputs] == ["completed"] * 3
    # The third began when a call ended, not when it was claimed: its start says so.
    assert (outputs[2].started_at - outputs[0].started_at).total_seconds() >= 0.25
    for output in outputs:
        assert output.started_at < output.completed_at


@pytest.mark.django_db(transaction=True)
def test_cells_a_runner_still_holds_at_its_end_run_again(api, creator, setup):
    job_id = started_job(api, creator, setup, concurrency=4)
    work = GenerationWork(job_id)
    assert work.begin()
    _, cells, _ = work.step([], 6)  # claimed (ahead), never called: the job was paused
    assert len(cells) == 6
    api(creator).post(f"{JOBS}/{job_id}/pause")
    assert api(creator).post(f"{JOBS}/{job_id}/start").json()["status"] == "running"
    # Resumed before the runner ended: it keeps going, and the cells it held run again.
    assert work.end() is True
    job = GenerationJob.objects.get(pk=job_id)
    assert job.runner_token == work.token and job.reserved_usd == 0
    assert not job.outputs.filter(status="running").exists()
    assert job.outputs.filter(status="pending").count() == 48
    summary = asyncio.run(run_live(GenerationWork(job_id, token=work.token)))
    job = totals_agree(GenerationJob.objects.get(pk=job_id))
    assert summary.succeeded == 48 and job.status == JobStatus.COMPLETED
