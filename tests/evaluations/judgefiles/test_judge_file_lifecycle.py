"""A judge-file batch moves by its transition table, hears its job's end through the
generation result handler, and is never written by a read: its window's expiry and the steps
lost with a worker are the scheduled sweep's. Also: every task path resolves (the system
check), and a listener hears every job's end once it commits."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.utils import timezone
from django_q.conf import Conf
from django_q.models import Schedule
from rest_framework.test import APIClient

from evalplatform.runs import tasks
from evalplatform.runs.models import TeamTask
from evaluations.judgefiles import batch_lifecycle, services
from evaluations.models import BatchStatus, JudgeBatch
from generation import lifecycle, results
from generation.models import GenerationJob
from tests.helpers.evaluations import row

pytestmark = pytest.mark.django_db(transaction=True)


def _batch(client, lines=("a", "b")) -> JudgeBatch:
    uploaded = client.files.create(
        file=("b.jsonl", "\n".join(row(c) for c in lines).encode()), purpose="batch"
    )
    made = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    return JudgeBatch.objects.get(public_id=made.id)


def test_reads_never_write_and_a_lost_validation_is_the_sweeps(world, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)  # queued tasks wait: the validation is "lost"
    client = world["client"]
    batch = _batch(client)
    long_ago = timezone.now() - services.LOST_AFTER - timedelta(minutes=1)
    JudgeBatch.objects.filter(pk=batch.pk).update(created_at=long_ago)
    before = JudgeBatch.objects.values().get(pk=batch.pk)
    for _ in range(3):  # the API, the list, the page: reads
        assert client.batches.retrieve(batch.public_id).status == "validating"
    assert [b.id for b in client.batches.list()] == [batch.public_id]
    assert JudgeBatch.objects.values().get(pk=batch.pk) == before
    assert services.sweep() == {"requeued": [batch.pk], "expired": [], "finalizing": []}
    assert JudgeBatch.objects.get(pk=batch.pk).created_at > long_ago
    assert services.sweep() == {"requeued": [], "expired": [], "finalizing": []}  # not again


def _worker_task(batch: JudgeBatch, *, lease_s: float) -> TeamTask:
    """The validation's row in its team's share of the workers, as a running worker keeps
    it (its lease renewed every third of TEAM_TASK_LEASE_S); a past lease: the worker died."""
    return TeamTask.objects.create(
        team_id=batch.team_id,
        key=f"judge-batch-validate-{batch.pk}",
        func=tasks.path(services.validate),
        args=[batch.pk],
        running=True,
        queued_at=timezone.now() - timedelta(minutes=5),
        lease_until=timezone.now() + timedelta(seconds=lease_s),
    )


def test_a_validation_whose_worker_died_resumes_within_a_minute(world, monkeypatch):
    """Not after the task timeout: a step queued over a minute ago that no worker holds (no
    live lease, nothing waiting in the team's queue) is queued again by the sweep, which
    runs every minute; a step a live worker holds is left to it."""
    monkeypatch.setattr(Conf, "SYNC", False)
    client = world["client"]
    batch = _batch(client)
    JudgeBatch.objects.filter(pk=batch.pk).update(
        created_at=timezone.now() - services.LOST_AFTER - timedelta(seconds=5)
    )
    running = _worker_task(batch, lease_s=40)
    assert services.sweep()["requeued"] == []  # a worker validates it now
    TeamTask.objects.filter(pk=running.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert services.sweep()["requeued"] == [batch.pk]  # its worker died: queued again
    assert services.sweep()["requeued"] == []  # and not again at once
    services.validate(batch.pk)  # the worker back: the step runs to its end
    assert JudgeBatch.objects.get(pk=batch.pk).status == "in_progress"


def test_a_stopped_validation_is_resumed_from_the_api_and_the_page(world, monkeypatch):
    from django.test import Client

    monkeypatch.setattr(Conf, "SYNC", False)
    batch = _batch(world["client"])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {world['key']}")
    running = _worker_task(batch, lease_s=40)
    held = api.post(f"/api/judge-files/{batch.public_id}/resume")
    assert held.status_code == 409 and "A worker runs" in held.json()["detail"]
    TeamTask.objects.filter(pk=running.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    page = Client()
    page.force_login(world["user"])
    shown = page.get(f"/judge-files/{batch.public_id}").content.decode()
    assert ">Resume</button>" in shown
    resumed = api.post(f"/api/judge-files/{batch.public_id}/resume")
    assert resumed.status_code == 200 and resumed.json()["status"] == "validating"
    done = page.post(f"/judge-files/{batch.public_id}/resume", follow=True)
    assert "Resumed" in done.content.decode()
    services.validate(batch.pk)
    assert JudgeBatch.objects.get(pk=batch.pk).status == "in_progress"
    again = api.post(f"/api/judge-files/{batch.public_id}/resume")
    assert again.status_code == 409  # in progress: no step to resume


def test_a_batch_past_its_window_expires_through_its_jobs_end(world, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)
    client = world["client"]
    batch = _batch(client)
    services.validate(batch.pk)  # its job is made and started; its runner waits in the queue
    batch.refresh_from_db()
    assert batch.status == "in_progress" and batch.job.status == "running"
    assert services.sweep() == {"requeued": [], "expired": [], "finalizing": []}  # in time
    JudgeBatch.objects.filter(pk=batch.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert services.sweep()["expired"] == [batch.pk]
    batch.refresh_from_db()
    # The job was cancelled; its end, heard on commit, moved the batch on.
    assert batch.job.status == "cancelled" and batch.status == "finalizing" and batch.expired_at
    services.finalize(batch.pk)
    done = client.batches.retrieve(batch.public_id)
    assert done.status == "expired" and done.error_file_id and done.output_file_id is None
    assert done.request_counts.failed == 2  # never run: the window passed first


def test_a_job_ended_unheard_is_finalized_by_the_sweep(world, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)
    client = world["client"]
    batch = _batch(client)
    services.validate(batch.pk)
    batch.refresh_from_db()
    # The job ends without its listeners (as if the worker died between the two).
    monkeypatch.setattr(results, "job_finished", lambda *args: None)
    lifecycle.cancel(batch.job)
    assert JudgeBatch.objects.get(pk=batch.pk).status == "in_progress"
    assert services.sweep()["finalizing"] == [batch.pk]
    assert JudgeBatch.objects.get(pk=batch.pk).status == "finalizing"


def test_the_transition_table_refuses_a_move_it_does_not_hold(world, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)
    batch = _batch(world["client"])
    now = timezone.now()
    for transition in ("cancelling", "finalizing", "ended", "reopened"):
        assert not batch_lifecycle.may(batch, transition)
        with pytest.raises(batch_lifecycle.Refused):
            batch_lifecycle.move(batch, transition, now)
    with pytest.raises(batch_lifecycle.Refused):  # a transition to a status it cannot reach
        batch_lifecycle.move(batch, "refused", now, to="completed")
    batch_lifecycle.move(batch, "refused", now)
    assert batch.status == "failed" and batch.failed_at == now
    # Every status is left or reached by some transition, and every end can reopen.
    held = {s for leaves, reaches in batch_lifecycle.TRANSITIONS.values() for s in leaves | reaches}
    assert held == set(BatchStatus.values)


def test_a_listener_hears_every_jobs_end_once_it_commits(team_a, member):
    from evalplatform.accounts.roles import Role
    from generation.models import JobStatus

    heard: list[tuple[int, str]] = []
    results.when_finished("manual", lambda job_id, status: heard.append((job_id, status)))
    try:
        job = GenerationJob.objects.create(
            team=team_a,
            owner=member(team_a, Role.CREATOR),
            name="j",
            source_kind="manual",
            status=JobStatus.CREATED,
        )
        lifecycle.cancel(job)
        assert heard == [(job.pk, "cancelled")]
    finally:
        results.LISTENERS["manual"].clear()


def test_every_task_path_resolves_and_a_broken_one_fails_the_check(db):
    # The sweep's schedule (its migration's row; an earlier test's flush may have removed it).
    importlib.import_module("evaluations.migrations.0021_judge_file_sweep_schedule").schedule(
        apps, None
    )
    assert Schedule.objects.filter(func=tasks.path(services.sweep), minutes=1).exists()
    call_command("check", "--database", "default")  # every stored schedule resolves
    Schedule.objects.create(name="gone", func="evaluations.nowhere.gone", schedule_type="I")
    with pytest.raises(SystemCheckError, match=r"runs\.E002.*evaluations\.nowhere\.gone"):
        call_command("check", "--database", "default")
    Schedule.objects.filter(name="gone").delete()
    tasks.declared("generation.tasks.renamed_away")
    try:
        with pytest.raises(SystemCheckError, match=r"runs\.E001"):
            call_command("check")
    finally:
        tasks.DECLARED.discard("generation.tasks.renamed_away")
    assert tasks.path(services.validate) == "evaluations.judgefiles.services.validate"
    with pytest.raises(ValueError, match="module-level"):
        tasks.path(lambda: None)
