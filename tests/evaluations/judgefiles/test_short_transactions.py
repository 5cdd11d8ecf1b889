"""Long writes hold the database a chunk at a time (issue 35): a judge file's upload and
validation, a batch's files and a job's cells commit in chunks, so another team writes
between them (SQLite has one writer: one long transaction kept every other team out); what
is half-written is no one's to see or start; a validation stopped mid-way takes up where it
left off, and what a dead writer left is deleted."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from django_q.conf import Conf
from rest_framework.test import APIClient

from evalplatform import bulk
from evaluations.judgefiles import services
from evaluations.models import JudgeBatch, JudgeFile, JudgeRowError
from generation import planning, tasks
from generation import services as generation
from generation.models import GenerationItem, GenerationJob, GenerationOutput
from tests.helpers.evaluations import row
from tests.helpers.writes import other_team_writes

pytestmark = pytest.mark.django_db(transaction=True)


class Killed(BaseException):
    """The worker's process ends here (not an error the task could catch and record)."""


def _upload(client, lines) -> str:
    return client.files.create(file=("b.jsonl", "\n".join(lines).encode()), purpose="batch").id


def _batch(client, lines) -> JudgeBatch:
    made = client.batches.create(
        input_file_id=_upload(client, lines),
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    return JudgeBatch.objects.get(public_id=made.id)


def test_another_team_writes_while_a_file_is_validated(world, team_b, member, monkeypatch):
    """Each line is read outside any transaction: another team's write, made while the
    batch's lines are read, does not wait for the validation to end."""
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(services, "VALIDATED_CHUNK", 3)
    other = member(team_b, "creator")
    batch = _batch(world["client"], [row(f"r{n}") for n in range(8)])
    heard: list[bool] = []
    read = services._row

    def reading(number, *args, **kwargs):
        if number == 5:
            heard.append(other_team_writes(other))
        return read(number, *args, **kwargs)

    monkeypatch.setattr(services, "_row", reading)
    services.validate(batch.pk)
    assert heard == [True]
    batch.refresh_from_db()
    assert batch.status == "in_progress" and batch.job.total_cells == 8


def test_a_validation_killed_mid_way_takes_up_where_it_stopped(world, monkeypatch):
    """Killed after its first chunk: the batch keeps what was validated (its job hidden and
    not startable meanwhile); run again, it reads on from there: each line once, a
    custom_id repeated across the stop still refused, the errors once each."""
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(services, "VALIDATED_CHUNK", 3)
    lines = [row("a"), "{not json", row("b"), row("c"), row("d"), row("a"), row("e"), row("f")]
    batch = _batch(world["client"], lines)
    chunks = {"n": 0}

    def dying() -> None:
        chunks["n"] += 1
        if chunks["n"] == 1:
            raise Killed

    monkeypatch.setattr(bulk, "between_chunks", dying)
    with pytest.raises(Killed):
        services.validate(batch.pk)
    batch.refresh_from_db()
    assert batch.status == "validating" and batch.job_id is None
    assert batch.validated_through == 3 and batch.invalid == 1
    draft = batch.draft
    assert draft.writing and draft.items.count() == 2
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {world['key']}")
    assert api.get(f"/api/generation/jobs/{draft.pk}").status_code == 404
    assert draft.pk not in [j["id"] for j in api.get("/api/generation/jobs").json()["results"]]
    assert api.post(f"/api/generation/jobs/{draft.pk}/start").status_code == 404

    monkeypatch.setattr(bulk, "between_chunks", lambda: None)
    services.validate(batch.pk)  # the sweep (or Resume) queues it again
    batch.refresh_from_db()
    assert batch.status == "in_progress" and batch.job_id == draft.pk and batch.draft is None
    assert batch.total == 8 and batch.invalid == 2
    items = list(GenerationItem.objects.filter(job=batch.job).order_by("position"))
    assert [i.item_id for i in items] == ["a", "b", "c", "d", "e", "f"]
    assert [i.position for i in items] == list(range(6))
    assert GenerationOutput.objects.filter(job=batch.job).count() == 6
    refused = JudgeRowError.objects.filter(batch=batch).order_by("line")
    assert [(e.line, e.code) for e in refused] == [(2, "invalid_json"), (6, "duplicate_custom_id")]
    job = GenerationJob.objects.get(pk=batch.job_id)
    assert not job.writing and job.total_cells == 6
    assert job.estimate["per_model"][0]["requests"] == 6
    assert api.get(f"/api/generation/jobs/{job.pk}").status_code == 200


def test_a_batch_cancelled_while_validating_leaves_no_job(world, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(services, "VALIDATED_CHUNK", 2)
    batch = _batch(world["client"], [row(f"r{n}") for n in range(6)])

    def dying() -> None:
        raise Killed

    monkeypatch.setattr(bulk, "between_chunks", dying)
    with pytest.raises(Killed):
        services.validate(batch.pk)
    draft = JudgeBatch.objects.get(pk=batch.pk).draft_id
    assert GenerationJob.objects.filter(pk=draft).exists()
    monkeypatch.setattr(bulk, "between_chunks", lambda: None)
    assert world["client"].batches.cancel(batch.public_id).status == "cancelled"
    assert not GenerationJob.objects.filter(pk=draft).exists()
    services.validate(batch.pk)  # a copy of the task still queued: nothing to do
    assert JudgeBatch.objects.get(pk=batch.pk).status == "cancelled"
    assert not GenerationJob.objects.exists()


def test_a_file_is_seen_only_once_every_line_is_written(world, monkeypatch, settings):
    """An upload refused mid-way (over the line limit, after chunks were written) leaves
    nothing; one whose writer died is hidden, and deleted by the sweep an hour on."""
    monkeypatch.setattr(services, "CHUNK", 2)
    settings.JUDGE_FILE_MAX_LINES = 5
    client = world["client"]
    with pytest.raises(Exception, match="over 5 requests"):
        _upload(client, [row(f"r{n}") for n in range(7)])
    assert not JudgeFile.objects.exists()
    assert not services.JudgeFileLine.objects.exists()

    def dying() -> None:
        raise Killed

    monkeypatch.setattr(bulk, "between_chunks", dying)
    monkeypatch.setattr(services, "discard_file", lambda file_id: None)  # the process is gone
    upload = SimpleUploadedFile("half.jsonl", "\n".join(row(f"r{n}") for n in range(4)).encode())
    with pytest.raises(Killed):
        services.file_create(
            user=world["user"], team=world["user"].memberships.get().team, upload=upload,
            purpose="batch",
        )  # fmt: skip
    monkeypatch.undo()
    stored = JudgeFile.objects.get()
    assert stored.lines == 0
    assert [f.id for f in client.files.list()] == []
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {world['key']}")
    assert api.get(f"/v1/files/{stored.public_id}").status_code == 404
    services.sweep()
    assert JudgeFile.objects.filter(pk=stored.pk).exists()  # its writer may still be at it
    JudgeFile.objects.filter(pk=stored.pk).update(
        created_at=timezone.now() - services.ABANDONED_AFTER - timedelta(minutes=1)
    )
    services.sweep()
    assert not JudgeFile.objects.exists()


def test_a_job_is_written_in_chunks_and_seen_whole_or_not_at_all(
    world, team_b, member, monkeypatch
):
    """A job's cells commit a chunk at a time: between chunks another team writes, and the
    job is hidden; a failure mid-way leaves no job; a job whose writer died is deleted an
    hour on by the scheduled recovery."""
    from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion
    from evalplatform.providers.models import LLMModel

    user, team = world["user"], world["user"].memberships.get().team
    model = LLMModel.objects.get(model_id="openrelay/gemma-4-31b")
    template = PromptTemplate.objects.create(team=team, name="Echo")
    version = PromptVersion.objects.create(template=template, number=1)
    PromptBlock.objects.create(version=version, position=0, body="Say {{content}}")
    items = [{"id": n, "content": f"item {n}"} for n in range(7)]
    import json

    data = {
        "team": team.slug,
        "name": "chunked",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.0, 1.0],
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
    }
    monkeypatch.setattr(generation, "WRITE_CHUNK", 4)  # two items' cells a chunk
    other = member(team_b, "creator")
    seen: list[tuple[bool, int]] = []
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {world['key']}")

    def between() -> None:
        job = GenerationJob.objects.get(name="chunked")
        hidden = api.get(f"/api/generation/jobs/{job.pk}").status_code == 404
        seen.append((hidden and other_team_writes(other), job.outputs.count()))

    monkeypatch.setattr(bulk, "between_chunks", between)
    job = generation.job_create(user=user, plan=planning.job_plan(user=user, data=data))
    assert seen == [(True, 4), (True, 8), (True, 12), (True, 14)]
    assert not job.writing and job.outputs.count() == 14 and job.items.count() == 7
    assert sorted(job.outputs.values_list("custom_id", flat=True)) == sorted(
        generation.custom_id(job.pk, i, 0, 0, 0, t) for i in range(7) for t in (0, 1)
    )
    assert api.get(f"/api/generation/jobs/{job.pk}").status_code == 200

    calls = {"n": 0}

    def failing() -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("the disk is full")

    monkeypatch.setattr(bulk, "between_chunks", failing)
    with pytest.raises(RuntimeError):
        generation.job_create(user=user, plan=planning.job_plan(user=user, data=data))
    assert list(GenerationJob.objects.values_list("pk", flat=True)) == [job.pk]

    def dying() -> None:
        raise Killed

    monkeypatch.setattr(bulk, "between_chunks", dying)
    monkeypatch.setattr(generation, "discard", lambda job_id: None)  # the process is gone
    with pytest.raises(Killed):
        generation.job_create(user=user, plan=planning.job_plan(user=user, data=data))
    monkeypatch.undo()
    left = GenerationJob.objects.get(writing=True)
    tasks.recover_jobs()
    assert GenerationJob.objects.filter(pk=left.pk).exists()  # its writer may be at it
    GenerationJob.objects.filter(pk=left.pk).update(
        created_at=timezone.now() - generation.ABANDONED_AFTER - timedelta(minutes=1)
    )
    tasks.recover_jobs()
    assert list(GenerationJob.objects.values_list("pk", flat=True)) == [job.pk]
    assert not GenerationOutput.objects.exclude(job=job).exists()


def test_a_batch_that_no_line_can_run_fails_with_its_error_file(world, monkeypatch):
    """Issue 37, item 7: the error file is attached in the same step that fails the batch
    (it was written by a later task, so a failed batch showed ``error_file_id: null``)."""
    monkeypatch.setattr(Conf, "SYNC", False)  # no other task runs: what validation left
    monkeypatch.setattr(services, "VALIDATED_CHUNK", 2)
    batch = _batch(world["client"], ["{not json", row("a", model="nowhere"), "[]"])
    services.validate(batch.pk)
    shown = world["client"].batches.retrieve(batch.public_id)
    assert shown.status == "failed" and shown.errors.data[0].code == "no_valid_rows"
    assert shown.error_file_id and shown.request_counts.failed == 3
    lines = world["client"].files.content(shown.error_file_id).text.splitlines()
    assert [json.loads(line)["error"]["code"] for line in lines] == [
        "invalid_json", "model_not_found", "invalid_json",
    ]  # fmt: skip
    assert not GenerationJob.objects.exists()
    services.finalize(batch.pk)  # a copy of the step still queued: nothing more to do
    assert JudgeBatch.objects.get(pk=batch.pk).error_file.public_id == shown.error_file_id
