"""Batch mode against the fake provider's batch APIs (OpenAI, Anthropic, Gemini): batch price,
failed rows re-submitted alone, missing rows, idempotent recording, a submission the worker
never recorded adopted instead of repeated, cancel, budget, finishing live."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from django_q.brokers import get_broker

from evalplatform.providers.llm.batch import BatchResult
from evalplatform.providers.llm.types import LLMResponse
from evalplatform.runs.models import BatchState, ProviderBatch
from generation.cells import JobCells
from generation.models import GenerationJob, GenerationOutput, JobStatus
from generation.runners import batch as batch_runner
from generation.tasks import recover_jobs, run_job
from tests.factories import ConnectionFactory, LLMModelFactory, PromptTemplateFactory, make_version
from tests.helpers.generation import (
    batch_job,
    cost_counted_once,
    drive,
    drive_until_done,
    model_for,
)

pytestmark = pytest.mark.django_db(transaction=True)
JOBS = "/api/generation/jobs"


@pytest.fixture
def fast_batches(fake_provider):
    fake_provider.config.batch_duration_s = 0
    return fake_provider


@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
def test_a_batch_job_completes_at_the_batch_price(api, creator, team_a, fast_batches, kind):
    model = model_for(team_a, fast_batches, kind)
    job_id = batch_job(api, creator, team_a, model, ["one", "two", "three"])
    first = drive(job_id)
    assert (first.submitted_batches, first.submitted_cells) == (1, 6)
    job = drive_until_done(job_id)
    assert job.status == JobStatus.COMPLETED and job.completed_cells == 6
    cost_counted_once(job)
    for output in job.outputs.all():
        assert output.content and output.attempts == 1
        live = model.cost_usd(output.input_tokens, output.output_tokens)
        assert output.cost_usd == (live / 2).quantize(Decimal("0.000001"))
    (row,) = ProviderBatch.objects.filter(work_id=job_id)
    assert row.state == BatchState.COMPLETED and row.closed_at and row.remote_id
    assert row.protocol == kind and row.request_count == 6
    assert len(fast_batches.app.batches.batches) == 1  # one provider batch, no repeats


def test_failed_rows_are_resubmitted_alone(api, creator, team_a, fast_batches):
    model = model_for(team_a, fast_batches)
    job_id = batch_job(
        api, creator, team_a, model, ["fine", "flaky [[fault:500*1]]", "bad [[fault:400]]"]
    )
    job = drive_until_done(job_id)
    assert job.status == JobStatus.COMPLETED
    assert (job.completed_cells, job.failed_cells) == (4, 2)
    by_item = {}
    for output in job.outputs.select_related("item"):
        by_item.setdefault(output.item.item_id, []).append(output)
    assert {(o.status, o.attempts) for o in by_item["i1"]} == {("completed", 2)}
    assert {(o.status, o.error_kind) for o in by_item["i2"]} == {("failed", "bad_request")}
    rounds = sorted(
        ProviderBatch.objects.filter(work_id=job_id).values_list("round", "request_count")
    )
    assert rounds == [(1, 6), (2, 2)]  # the second batch holds the two retried rows only
    cost_counted_once(job)


def test_missing_results_are_retried_up_to_the_limit(api, creator, team_a, fast_batches):
    model = model_for(team_a, fast_batches)
    job_id = batch_job(api, creator, team_a, model, ["ok", "gone [[batch:drop]]"], max_retries=1)
    job = drive_until_done(job_id)
    assert (job.status, job.completed_cells, job.failed_cells) == (JobStatus.COMPLETED, 2, 2)
    lost = job.outputs.filter(status="failed")
    assert {(o.error_kind, o.attempts) for o in lost} == {("missing", 2)}


def test_recording_the_same_results_twice_changes_nothing(api, creator, team_a, fast_batches):
    model = model_for(team_a, fast_batches)
    job_id = batch_job(api, creator, team_a, model, ["a", "b"])
    job = drive_until_done(job_id)
    row = ProviderBatch.objects.get(work_id=job_id)
    before = (job.completed_cells, job.cost_usd)
    again = [
        BatchResult(o.custom_id, response=LLMResponse("other text", 999, 999, "stop", 0.0))
        for o in job.outputs.all()
    ]
    assert batch_runner._record(row.pk, again) == 0
    job.refresh_from_db()
    assert (job.completed_cells, job.cost_usd) == before
    assert not job.outputs.filter(content="other text").exists()


@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
def test_a_submission_the_worker_never_recorded_is_adopted_not_repeated(
    api, creator, team_a, fast_batches, kind, monkeypatch
):
    model = model_for(team_a, fast_batches, kind)
    job_id = batch_job(api, creator, team_a, model, ["x", "y"])

    class WorkerDied(BaseException):  # like SIGKILL: nothing of the worker handles it
        pass

    def die(row_id, handle):
        raise WorkerDied  # the provider accepted the batch; nothing was written here

    monkeypatch.setattr(batch_runner, "_record_handle", die)
    with pytest.raises(WorkerDied):
        drive(job_id)
    monkeypatch.undo()
    row = ProviderBatch.objects.get(work_id=job_id)
    assert row.state == BatchState.SUBMITTING and row.remote_id == ""
    assert len(fast_batches.app.batches.batches) == 1

    drive(job_id)  # within the grace period: it may still be being sent; left alone
    assert ProviderBatch.objects.get(pk=row.pk).state == BatchState.SUBMITTING
    ProviderBatch.objects.filter(pk=row.pk).update(
        created_at=timezone.now() - batch_runner.SUBMIT_GRACE - timedelta(seconds=1)
    )
    summary = drive(job_id)
    assert summary.adopted == 1 and summary.submitted_batches == 0
    job = drive_until_done(job_id)
    assert job.status == JobStatus.COMPLETED and job.completed_cells == 4
    assert len(fast_batches.app.batches.batches) == 1  # never sent twice
    row.refresh_from_db()
    assert row.remote_id in fast_batches.app.batches.batches
    cost_counted_once(job)


def test_a_submission_the_provider_never_got_is_sent_again(api, creator, team_a, fast_batches):
    model = model_for(team_a, fast_batches)
    job_id = batch_job(api, creator, team_a, model, ["x"])
    work = JobCells.for_job(job_id)
    row, requests, _ = batch_runner._prepare(work, model.pk, 100)  # ... then the worker died
    assert row is not None and len(requests) == 2
    ProviderBatch.objects.filter(pk=row.pk).update(
        created_at=timezone.now() - batch_runner.SUBMIT_GRACE - timedelta(seconds=1)
    )
    summary = drive(job_id)
    assert summary.given_up == 1 and summary.submitted_cells == 2
    assert ProviderBatch.objects.get(pk=row.pk).state == BatchState.LOST
    job = drive_until_done(job_id)
    assert job.status == JobStatus.COMPLETED and job.completed_cells == 2
    # The lost try counts: a provider that always loses a submission ends in failure.
    assert {o.attempts for o in job.outputs.all()} == {2}
    assert {o.error_kind for o in job.outputs.all()} == {""}


def test_cancelling_a_job_cancels_its_provider_batches(api, creator, team_a, fake_provider):
    fake_provider.config.batch_duration_s = 60
    model = model_for(team_a, fake_provider)
    job_id = batch_job(api, creator, team_a, model, ["a", "b", "c"])
    drive(job_id)
    assert api(creator).post(f"{JOBS}/{job_id}/cancel").json()["status"] == "cancelled"
    drive(job_id)
    (remote,) = fake_provider.app.batches.batches.values()
    assert remote.cancelled_at is not None
    drive(job_id)  # the provider now reports it cancelled: results are recorded
    row = ProviderBatch.objects.get(work_id=job_id)
    assert row.state == BatchState.CANCELLED and row.closed_at is not None
    job = GenerationJob.objects.get(pk=job_id)
    assert job.status == JobStatus.CANCELLED
    assert not job.outputs.filter(status="running").exists()
    cost_counted_once(job)


def test_the_budget_holds_at_the_batch_price(api, creator, team_a, fast_batches):
    model = model_for(team_a, fast_batches)
    job_id = batch_job(
        api, creator, team_a, model, [f"text {n}" for n in range(10)], budget_usd="0.0004"
    )
    job = drive_until_done(job_id)
    assert job.status == JobStatus.PAUSED and "Budget reached" in job.status_message
    assert 0 < job.completed_cells < 20 and job.cost_usd <= Decimal("0.0004")
    cost_counted_once(job)
    assert api(creator).get("/api/notifications").json()["results"][0]["kind"] == (
        "generation.budget_exceeded"
    )


def test_failed_rows_can_finish_live(api, creator, team_a, fast_batches):
    model = model_for(team_a, fast_batches)
    job_id = batch_job(
        api, creator, team_a, model, ["fine", "flaky [[fault:500*1]]"], finish_live=True
    )
    drive(job_id)
    drive(job_id)  # results in: the flaky rows wait for a second try
    retry = GenerationOutput.objects.filter(job_id=job_id, status="pending")
    assert retry.count() == 2 and {o.attempts for o in retry} == {1}
    broker = get_broker()
    queued = broker.queue_size()
    drive(job_id)
    assert broker.queue_size() == queued + 1  # the live runner was asked to finish them
    assert len(fast_batches.app.batches.batches) == 1  # ... not a new batch
    assert run_job(job_id) == "completed"
    job = GenerationJob.objects.get(pk=job_id)
    assert job.status == JobStatus.COMPLETED and job.completed_cells == 4
    cost_counted_once(job)


def test_batch_mode_needs_models_with_a_batch_api(api, creator, team_a, fast_batches):
    mock = LLMModelFactory(
        connection=ConnectionFactory(team=team_a, kind="mock"), supports_batch=True
    )
    without = model_for(team_a, fast_batches, "anthropic", supports_batch=False)
    version = make_version(PromptTemplateFactory(team=team_a), [("", "Hi")])
    body = {
        "team": "team-a",
        "name": "No batch",
        "mode": "batch",
        "prompt_versions": [version.pk],
        "models": [mock.pk, without.pk],
        "source": {"type": "prompt_only"},
        "finish_live": "yes",
    }
    response = api(creator).post(JOBS, body, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert "no batch API" in errors["models[0]"][0] and "no batch API" in errors["models[1]"][0]
    assert errors["finish_live"] == ["true or false."]
    assert not GenerationJob.objects.exists()


def test_waiting_batch_jobs_are_not_recovered_as_stale_live_runs(
    api, creator, team_a, fast_batches
):
    model = model_for(team_a, fast_batches)
    job_id = batch_job(api, creator, team_a, model, ["x"])
    drive(job_id)
    assert recover_jobs() == []


def test_the_batches_show_in_the_api_and_on_the_job_page(
    api, creator, team_a, team_b, member, fast_batches
):
    from django.test import Client

    from evalplatform.accounts.roles import Role

    model = model_for(team_a, fast_batches)
    job_id = batch_job(api, creator, team_a, model, ["a"])
    drive_until_done(job_id)
    (listed,) = api(creator).get(f"{JOBS}/{job_id}/batches").json()["results"]
    assert listed["state"] == "completed" and listed["request_count"] == 2
    assert api(member(team_b, Role.ADMIN)).get(f"{JOBS}/{job_id}/batches").status_code == 404
    browser = Client()
    browser.force_login(creator)
    page = browser.get(f"/generation/jobs/{job_id}").content.decode()
    assert "Provider batches" in page and listed["remote_id"] in page


def test_the_wizard_creates_a_batch_job(creator, team_a, fast_batches):
    from django.test import Client

    model = model_for(team_a, fast_batches)
    version = make_version(PromptTemplateFactory(team=team_a), [("", "Answer: {{content}}")])
    browser = Client()
    browser.force_login(creator)
    form = {
        "team": "team-a",
        "source_type": "manual",
        "content": "first line\nsecond line",
        "prompt_versions": [str(version.pk)],
        "models": [str(model.pk)],
        "name": "Wizard batch",
        "temperatures": "0",
        "mode": "batch",
        "finish_live": "1",
    }
    assert browser.post("/generation/new", form).status_code == 302
    job = GenerationJob.objects.get(name="Wizard batch")
    assert (job.mode, job.finish_live, job.total_cells) == ("batch", True, 2)


def test_a_submission_that_may_have_reached_the_provider_is_not_resent(
    api, creator, team_a, fast_batches
):
    model = model_for(team_a, fast_batches)
    job_id = batch_job(api, creator, team_a, model, ["x [[fault:reject]]"], max_retries=0)
    drive(job_id)  # the provider answers 500: it may or may not have created the batch
    row = ProviderBatch.objects.get(work_id=job_id)
    assert row.state == BatchState.SUBMITTING and "Batch submission failed" in row.error_message
    assert GenerationOutput.objects.filter(job_id=job_id, status="running").count() == 2
    assert drive(job_id).submitted_batches == 0  # not sent again while it may exist
    ProviderBatch.objects.filter(pk=row.pk).update(
        created_at=timezone.now() - batch_runner.SUBMIT_GRACE - timedelta(seconds=1)
    )
    summary = drive(job_id)  # the provider has no such batch: given up, and that try counts
    assert summary.given_up == 1
    job = GenerationJob.objects.get(pk=job_id)
    assert (job.status, job.failed_cells) == (JobStatus.COMPLETED, 2)
    assert {(o.error_kind, o.attempts) for o in job.outputs.all()} == {("lost", 1)}
    cost_counted_once(job)


def test_a_job_with_open_provider_batches_cannot_be_deleted(api, creator, team_a, fake_provider):
    fake_provider.config.batch_duration_s = 60
    model = model_for(team_a, fake_provider)
    job_id = batch_job(api, creator, team_a, model, ["a"])
    drive(job_id)
    api(creator).post(f"{JOBS}/{job_id}/cancel")
    response = api(creator).delete(f"{JOBS}/{job_id}")
    assert response.status_code == 409 and "provider batches open" in response.json()["detail"]
    drive(job_id)  # the cancel reaches the provider
    drive(job_id)  # ... which reports the batch cancelled: recorded and closed
    assert not ProviderBatch.objects.filter(work_id=job_id, closed_at__isnull=True).exists()
    assert api(creator).delete(f"{JOBS}/{job_id}").status_code == 204


@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
def test_finding_a_submission_pages_through_the_providers_list(
    api, creator, team_a, member, fast_batches, kind, monkeypatch
):
    from evalplatform.accounts.roles import Role
    from evalplatform.providers.llm import batch as provider_batch

    model = model_for(team_a, fast_batches, kind)
    # Two other batches of the same size, sent after ours: ours is on page three.
    owners = [creator, member(team_a, Role.CREATOR), member(team_a, Role.CREATOR)]
    job_ids = [batch_job(api, owner, team_a, model, ["x"]) for owner in owners]
    monkeypatch.setattr(
        batch_runner, "_record_handle", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt)
    )
    with pytest.raises(KeyboardInterrupt):
        drive(job_ids[0])
    monkeypatch.undo()
    for job_id in job_ids[1:]:
        drive(job_id)
    monkeypatch.setattr(provider_batch, "FIND_PAGE_SIZE", 1)
    row = ProviderBatch.objects.get(work_id=job_ids[0])
    ProviderBatch.objects.filter(pk=row.pk).update(
        created_at=timezone.now() - batch_runner.SUBMIT_GRACE - timedelta(seconds=1)
    )
    assert drive(job_ids[0]).adopted == 1
    job = drive_until_done(job_ids[0])
    assert job.status == JobStatus.COMPLETED and len(fast_batches.app.batches.batches) == 3


def test_the_batches_of_a_deleted_job_are_cancelled_and_closed(api, creator, team_a, fake_provider):
    fake_provider.config.batch_duration_s = 60
    model = model_for(team_a, fake_provider)
    job_id = batch_job(api, creator, team_a, model, ["a"])
    drive(job_id)
    GenerationJob.objects.filter(pk=job_id).delete()  # as the admin's delete action does
    drive()
    row = ProviderBatch.objects.get(work_id=job_id)
    assert row.closed_at is not None and row.error_message == "The job was deleted."
    (remote,) = fake_provider.app.batches.batches.values()
    assert remote.cancelled_at is not None


def test_batch_jobs_of_one_user_run_side_by_side(api, creator, team_a, fast_batches):
    """A batch job waits at the provider: it holds no slot, so six of one user are all in
    flight at once, while live jobs still take turns."""
    model = model_for(team_a, fast_batches)
    jobs = [batch_job(api, creator, team_a, model, [f"text {n}"]) for n in range(6)]  # all running
    first = drive()
    assert first.submitted_batches == 6
    assert ProviderBatch.objects.filter(work_id__in=jobs).exclude(remote_id="").count() == 6
    # A live job of the same user starts beside them, and the next live one queues behind it.
    live_model = LLMModelFactory(connection=ConnectionFactory(team=team_a, kind="mock"))
    version = make_version(PromptTemplateFactory(team=team_a), [("", "Say {{content}}")])
    body = {
        "team": team_a.slug,
        "name": "Live",
        "prompt_versions": [version.pk],
        "models": [live_model.pk],
        "source": {"type": "manual", "format": "text", "content": "a\nb\n"},
        "start": True,
    }
    assert api(creator).post(JOBS, body, format="json").json()["status"] == "running"
    assert api(creator).post(JOBS, body, format="json").json()["status"] == "queued"
    for job_id in jobs:
        assert drive_until_done(job_id).status == JobStatus.COMPLETED
