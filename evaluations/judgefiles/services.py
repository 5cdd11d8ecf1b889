"""Judge files: one JSONL of Chat Completions requests in, a JSONL of replies and one of
errors out, through the OpenAI Files + Batches API the platform serves (``openai_api``).

- ``file_create``: an upload, read as it streams (never whole in memory) into its lines.
- ``batch_create``: a batch of a file, ``validating``; a task (``validate``) reads the file
  line by line: a line that cannot run becomes a ``JudgeRowError`` (its line number, its
  ``custom_id`` when it has one, why), the others the cells of one generation job
  (``generation.services.RowsJob``: each row its own messages, to the team's model its
  ``body.model`` names), started at once: ``in_progress``. The job runs like any other
  (live, or through the providers' batch APIs when every model has one; retries, budget,
  crash recovery, events, its page).
- ``sync``: on every read, the batch follows its job; once the job is over, ``finalizing``,
  and a task (``finalize``) writes the output file (one line per reply, OpenAI's batch
  output shape, ``custom_id`` echoed) and the error file (refused rows and model errors),
  then ``completed`` (or ``cancelled``, ``expired``, ``failed``).
- Each reply is read into a ``JudgeVerdict`` as it is recorded (``JudgeFileResults``).
- ``resubmit``: a new batch of exactly the rows that failed; ``compare``: two batches row
  by row, by ``custom_id``.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from evalplatform import bulk, inputs, validation
from evalplatform.accounts import audit, policy
from evalplatform.accounts.roles import EVALUATIONS_JUDGE, EVALUATIONS_JUDGE_FILES
from evalplatform.api import uploads
from evalplatform.errors import Conflict, FieldErrors, Forbidden
from evalplatform.providers.estimate import estimate_cost
from evalplatform.providers.llm import kinds
from evalplatform.providers.models import LLMModel
from evalplatform.runs import fairshare, tasks
from evalplatform.runs.models import TeamTask
from evaluations.judgefiles import batch_lifecycle
from evaluations.judgefiles.inputs import ENDPOINT, WINDOWS, BatchInput
from evaluations.judgefiles.models import (
    BatchStatus,
    FilePurpose,
    JudgeBatch,
    JudgeFile,
    JudgeFileLine,
    JudgeRowError,
    JudgeVerdict,
)
from evaluations.judgefiles.verdicts import read_reply
from evaluations.judges.services import record_judgments
from evaluations.judgments.models import LLMJudge
from generation import lifecycle
from generation.models import GenerationJob, GenerationOutput, JobStatus, OutputStatus
from generation.requests import (
    BadRow,
    RowRequest,
    chat_request,
    messages_body,
    storable,
    unstorable,
)
from generation.services import RowsJob, discard
from scenarios.models import GoldKind, Task
from scenarios.types import registry

logger = logging.getLogger(__name__)

CHUNK = 2000
# Lines validated per transaction: each holds the database (on SQLite, all of it) for a
# small fraction of a second.
VALIDATED_CHUNK = 1000
# A validating or finalizing batch whose task has not finished this long after it was
# queued is taken as lost (a worker died) and queued again.
# A step (validate, finalize) queued this long ago that no worker holds (no running task of
# its key with a live lease, which a worker renews every third of TEAM_TASK_LEASE_S, and none
# waiting in the team's queue) was lost with its worker: the sweep, every minute, queues it
# again. A step runs at most once at a time (each checks its batch's state under its lock),
# so a step queued twice (still in the broker) costs a no-op.
LOST_AFTER = timedelta(seconds=60)
# A file whose lines are still not all written this long after it was begun lost its writer.
ABANDONED_AFTER = timedelta(hours=1)
FINISHED_JOB = {JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED}
OPEN = batch_lifecycle.OPEN
# The most batches one sweep looks at (the oldest first; the next sweep takes the rest).
SWEEP_BATCHES = 200
# HTTP status of a model error, for the error file (OpenAI's shape carries one).
ERROR_STATUS = {
    "rate_limit": 429,
    "quota": 429,
    "auth": 401,
    "permission": 403,
    "not_found": 404,
    "bad_request": 400,
    "too_large": 413,
    "content_filter": 400,
    "timeout": 504,
    "connection": 502,
    "malformed": 502,
    "overloaded": 503,
    "server": 500,
    "conflict": 409,
}


def _may(user: Any, team: Any) -> None:
    if not policy.has_feature(user, EVALUATIONS_JUDGE_FILES, team):
        raise Forbidden()


# --- files --------------------------------------------------------------------------------------
def _lines(chunks: Iterator[bytes]) -> Iterator[tuple[int, bytes, bool]]:
    """(number from 1, text, cut) of each line that is not blank, as the chunks arrive; a
    line over ``JUDGE_FILE_MAX_LINE_BYTES`` is cut there (and refused when validated)."""
    cap = settings.JUDGE_FILE_MAX_LINE_BYTES
    number, rest, cut = 0, b"", False
    for chunk in chunks:
        rest += chunk
        while (end := rest.find(b"\n")) != -1:
            number += 1
            line, rest = rest[:end], rest[end + 1 :]
            too_long = cut or len(line) > cap
            yield number, b"" if too_long else line, too_long
            cut = False
        if len(rest) > cap:
            rest, cut = rest[:cap], True
    if rest or cut:
        too_long = cut or len(rest) > cap
        yield number + 1, b"" if too_long else rest, too_long


def _clean(raw: bytes) -> str:
    """Text every database stores: invalid UTF-8 and NUL characters become U+FFFD."""
    return raw.decode("utf-8", errors="replace").rstrip("\r").replace("\x00", "\ufffd")


CUT = "\ufffd[cut: over the line limit]"


def file_create(*, user: Any, team: Any, upload: Any, purpose: Any) -> JudgeFile:
    """Store an uploaded batch input file, line by line (every line or none)."""
    _may(user, team)
    errors: dict[str, str] = {}
    if purpose != FilePurpose.BATCH:
        errors["purpose"] = 'Only "batch" files are accepted here.'
    if upload is None:
        errors["file"] = "Upload the JSONL file as the multipart field file."
    elif (upload.size or 0) > settings.JUDGE_FILE_MAX_BYTES:
        errors["file"] = (
            f"The file has {upload.size:,} bytes; the limit is {settings.JUDGE_FILE_MAX_BYTES:,}."
        )
    if errors:
        raise FieldErrors(errors)
    head = upload.read(4096)
    upload.seek(0)
    if kind := uploads.binary_kind(head):
        raise FieldErrors({"file": f"This is {kind}, not JSON lines (one request per line)."})
    name = (upload.name or "batch.jsonl").replace("\x00", "")[:255] or "batch.jsonl"
    limit = settings.JUDGE_FILE_MAX_LINES
    writer = _Writer(team=team, purpose=FilePurpose.BATCH, filename=name, created_by=user)
    try:
        count = 0
        for number, raw, cut in _lines(upload.chunks()):
            text = CUT if cut else _clean(raw)
            if number > 2 * limit:  # blank lines too: 200 MB of newlines is no file
                raise FieldErrors({"file": f"The file has over {2 * limit:,} lines."})
            if not text.strip():
                continue
            count += 1
            if count > limit:
                raise FieldErrors({"file": f"The file has over {limit:,} requests (lines)."})
            writer.add(number, text)
        if not count:
            raise FieldErrors({"file": "The file has no lines."})
        with transaction.atomic():
            stored = writer.close(size=upload.size or 0)
            audit.record(
                user=user, team=team.pk, action="judge_files.file.create", target=stored,
                lines=count,
            )  # fmt: skip
    except BaseException:
        writer.discard()
        raise
    return stored


class _Writer:
    """A new file's lines, a chunk per transaction (none holds the database long). The file
    is hidden (``lines`` 0: ``written``) until ``close``, inside the caller's transaction,
    shows it; ``discard`` deletes what was written (a file a dead writer left is the
    sweep's to delete)."""

    def __init__(self, **fields: Any) -> None:
        with transaction.atomic():
            self.file = JudgeFile.objects.create(lines=0, **fields)
        self.buffer: list[JudgeFileLine] = []
        self.count = self.size = 0

    def add(self, number: int, text: str) -> None:
        self.buffer.append(JudgeFileLine(file=self.file, number=number, text=text))
        self.count += 1
        self.size += len(text.encode()) + 1
        if len(self.buffer) >= CHUNK:
            with transaction.atomic():
                self._flush()
            bulk.between_chunks()

    def _flush(self) -> None:
        JudgeFileLine.objects.bulk_create(self.buffer)
        self.buffer = []

    def close(self, size: int | None = None) -> JudgeFile:
        self._flush()
        self.file.lines = self.count
        self.file.bytes = self.size if size is None else size
        self.file.save(update_fields=["lines", "bytes"])
        return self.file

    def discard(self) -> None:
        discard_file(self.file.pk)


def discard_file(file_id: int) -> None:
    """Delete a file no one sees yet (``lines`` 0), a chunk of lines per transaction."""
    if not JudgeFile.objects.filter(pk=file_id, lines=0).exists():
        return
    bulk.delete_in_chunks(JudgeFileLine.objects.filter(file_id=file_id), CHUNK)
    with transaction.atomic():
        JudgeFile.objects.filter(pk=file_id, lines=0).delete()


def file_lines(file: JudgeFile) -> Iterator[str]:
    """The file's content, a line at a time (each ending with a newline)."""
    for _, text in _numbered(file):
        yield text + "\n"


# --- batches ------------------------------------------------------------------------------------
def batch_create(*, user: Any, team: Any, data: Mapping[str, Any]) -> JudgeBatch:
    """A batch of an uploaded file (or of another batch's error file: its failed rows),
    ``validating`` until its task has read every line. The request is read as
    ``BatchInput`` declares it; then the team's file and judge are looked up."""
    _may(user, team)
    errors: dict[str, str] = {}
    given = BatchInput.read(data, errors)
    file_id = given["input_file_id"]
    source = (
        JudgeFile.objects.written().filter(team=team, public_id=file_id).first()
        if is_public_id(file_id)
        else None
    )
    parent = None
    if source is None:
        errors["input_file_id"] = "The id of one of the team's files."
    elif source.purpose != FilePurpose.BATCH:
        parent = JudgeBatch.objects.filter(team=team, error_file=source).first()
        if parent is None:
            errors["input_file_id"] = "A batch input file, or a batch's error file."
    judge = None
    if given["judge"] is not None:
        judge = (
            LLMJudge.objects.select_related("scenario__team")
            .filter(pk=given["judge"], scenario__team=team)
            .first()
        )
        if judge is None:
            errors["judge"] = "The id of an LLM judge of one of the team's scenarios."
        elif not policy.may(user, EVALUATIONS_JUDGE, judge.scenario):
            raise Forbidden()
    if errors:
        raise FieldErrors(inputs.in_order(errors, BatchInput))
    assert source is not None
    metadata, budget, live = given["metadata"], given["budget_usd"], given["live"]
    if parent is not None:
        return resubmit(user=user, batch=parent, metadata=metadata, budget_usd=budget, live=live)
    return _new_batch(
        user, team, source, metadata, budget, live, given["completion_window"], judge=judge
    )


def _new_batch(
    user: Any,
    team: Any,
    source: JudgeFile,
    metadata: dict[str, str],
    budget: Any,
    live: bool,
    window: str = "24h",
    parent: JudgeBatch | None = None,
    judge: LLMJudge | None = None,
) -> JudgeBatch:
    now = timezone.now()
    with transaction.atomic():
        batch = JudgeBatch.objects.create(
            team=team,
            created_by=user,
            input_file=source,
            completion_window=window,
            metadata=metadata,
            budget_usd=budget,
            live=live,
            parent=parent,
            judge=judge if parent is None else parent.judge,
            total=len(failed_lines(parent)) if parent is not None else source.lines,
            created_at=now,
            expires_at=now + WINDOWS[window],
        )
        audit.record(
            user=user, team=team.pk, action="judge_files.batch.create", target=batch,
            file=source.public_id,
        )  # fmt: skip
        transaction.on_commit(lambda: _queue(validate, batch.pk))
    return batch


def _step_key(task: Callable[[int], None], batch_id: int) -> str:
    return f"judge-batch-{task.__name__}-{batch_id}"


def _queue(task: Callable[[int], None], batch_id: int) -> None:
    """Queue a step of the batch (``validate`` or ``finalize``) as work of its team (within
    the team's share of the task workers, ``evalplatform.runs.fairshare``)."""
    team_id = JudgeBatch.objects.filter(pk=batch_id).values_list("team_id", flat=True).first()
    if team_id is None:
        return  # deleted
    fairshare.submit(
        team_id=team_id,
        func=tasks.path(task),
        args=[batch_id],
        key=_step_key(task, batch_id),
        name=f"{_step_key(task, batch_id)}-{timezone.now().timestamp()}",
    )


def _models(team: Any) -> dict[str, list[LLMModel]]:
    """The team's active models by every name a row may use: the model id, the display
    name, and "<connection name>/<model id>"."""
    names: dict[str, list[LLMModel]] = {}
    for model in LLMModel.objects.filter(connection__team=team, active=True).select_related(
        "connection"
    ):
        qualified = f"{model.connection.name}/{model.model_id}"
        for name in {model.model_id, model.display_name, qualified}:
            names.setdefault(name, []).append(model)
    return names


def _tasks(judge: LLMJudge | None) -> dict[int, list[int]] | None:
    """The judge's scenario's tasks and the variants each shows, in order (None: no judge).
    Attention checks are for people: a judge's rows cannot name them."""
    if judge is None:
        return None
    tasks = Task.objects.filter(scenario=judge.scenario_id).exclude(gold__kind=GoldKind.ATTENTION)
    return {
        pk: order or [v for v in (a, b) if v]
        for pk, order, a, b in tasks.values_list("pk", "order", "variant_a_id", "variant_b_id")
    }


class _Refused(Exception):
    """A line that cannot run: the code and message of its ``JudgeRowError``, and the
    ``custom_id`` it is reported under when not the row's own (None)."""

    def __init__(self, code: str, message: str, custom_id: str | None = None):
        super().__init__(message)
        self.code, self.message, self.custom_id = code, message, custom_id


def _row(
    number: int,
    text: str,
    models: Mapping[str, list[LLMModel]],
    seen: set[str],
    tasks: Mapping[int, list[int]] | None = None,
    swappable: bool = False,
) -> tuple[str, dict[str, Any], LLMModel] | JudgeRowError:
    """A line as a row to run, or the error it goes to the error file with."""
    custom_id = ""
    try:
        row = _object(text)
        custom_id = _new_custom_id(row, seen)
        anthropic = "params" in row and not {"method", "url", "body"} & set(row)
        body: Any
        if anthropic:  # a Message Batches line: {custom_id, params}
            try:
                body = messages_body(row["params"])
            except BadRow as exc:
                raise _Refused("invalid_request", str(exc)) from exc
        else:
            if row.get("method") != "POST":
                raise _Refused("invalid_method", 'method: only "POST" (or {custom_id, params}).')
            if row.get("url") != ENDPOINT:
                raise _Refused("invalid_url", f"url: only {ENDPOINT}.")
            body = row.get("body")
        name = body.get("model") if isinstance(body, dict) else None
        model = _model(name, models, "params" if anthropic else "body")
        request = _request(body, model, "params" if anthropic else "body")
        assert model is not None  # a body that names no model is no request
        data = {"custom_id": custom_id, "line": number, "model": name, "request": request.as_data()}
        if tasks is not None:  # the batch is a scenario judge's: the row names its task
            data |= _task_fields(row.get("metadata"), tasks, swappable)
    except _Refused as exc:
        named = custom_id if exc.custom_id is None else exc.custom_id
        return JudgeRowError(line=number, custom_id=named[:200], code=exc.code, message=exc.message)
    return custom_id, data, model


def _object(text: str) -> dict[str, Any]:
    """The line's JSON object, which every database can store."""
    if text == CUT:
        limit = settings.JUDGE_FILE_MAX_LINE_BYTES
        raise _Refused("line_too_long", f"The line is over the limit of {limit:,} bytes.")
    try:
        row = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise _Refused("invalid_json", "The line is not valid JSON.") from exc
    if not isinstance(row, dict):
        raise _Refused("invalid_json", "The line is JSON but not an object.")
    if problem := unstorable(row):
        # Named by its custom_id when that much of it can be stored.
        custom_id = row.get("custom_id")
        named = custom_id if isinstance(custom_id, str) and not unstorable(custom_id) else ""
        raise _Refused("invalid_request", f"The line {problem}.", named)
    return row


def _new_custom_id(row: Mapping[str, Any], seen: set[str]) -> str:
    """The row's ``custom_id``, once in the batch (added to ``seen``)."""
    custom_id = row.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id.strip():
        raise _Refused("missing_custom_id", "The line has no custom_id (a non-empty string).")
    if len(custom_id) > 200 or "\x00" in custom_id:
        raise _Refused("invalid_custom_id", "custom_id: at most 200 characters, no NUL.")
    if custom_id in seen:
        raise _Refused("duplicate_custom_id", f"custom_id {custom_id!r} is used twice.", custom_id)
    seen.add(custom_id)
    return custom_id


def _model(name: Any, models: Mapping[str, list[LLMModel]], where: str = "body") -> LLMModel | None:
    """The team's one active model ``body.model`` (``params.model``) names (None when it
    names none)."""
    found = models.get(name.strip(), []) if isinstance(name, str) else []
    if isinstance(name, str) and not found:
        raise _Refused(
            "model_not_found",
            f"{where}.model: the team has no active model {name.strip()[:200]!r}.",
        )
    if len(found) > 1:
        raise _Refused(
            "model_ambiguous",
            f"{where}.model: {len(found)} of the team's models are called {name!r}; "
            "write <connection name>/<model id>.",
        )
    return found[0] if found else None


def _request(body: Any, model: LLMModel | None, where: str = "body") -> RowRequest:
    """The body as a Chat Completions request, in the dialect of the model's provider
    (``where``: "params" for a Message Batches line, whose fields the errors name)."""
    try:
        openai = model is None or kinds.speaks_chat_completions(model.connection.kind)
        return chat_request(body, openai_compatible=openai)
    except BadRow as exc:
        message = str(exc)
        if where != "body":
            message = message.replace("body.", f"{where}.").replace("body:", f"{where}:")
            message = message.replace(f"{where}.stop:", f"{where}.stop_sequences:")
        raise _Refused("invalid_request", message) from exc


def _task_fields(metadata: Any, tasks: Mapping[int, list[int]], swappable: bool) -> dict[str, Any]:
    """The task of the judge's scenario a row's ``metadata`` names, in the order shown."""
    if not isinstance(metadata, dict):
        metadata = {}
    task, swapped = metadata.get("task"), metadata.get("swapped", False)
    if not validation.is_integer(task) or task not in tasks:
        raise _Refused("unknown_task", "metadata.task: the id of a task of the judge's scenario.")
    if not isinstance(swapped, bool) or (swapped and not swappable):
        raise _Refused(
            "invalid_metadata",
            "metadata.swapped: true or false (true only for comparisons and rankings).",
        )
    shown = list(tasks[task])
    return {"task": task, "swapped": swapped, "presented": shown[::-1] if swapped else shown}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def is_public_id(value: Any) -> bool:
    """A string that can be a file's or a batch's id (looked up: anything else is none)."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= 40
        and value.isascii()
        and value.replace("-", "").replace("_", "").isalnum()
    )


def validate(batch_id: int) -> None:
    """The task: read the batch's input, make and start its job (or fail the batch: a
    failure of the platform is the batch's ``errors``, never a batch left validating)."""
    try:
        _validate(batch_id)
    except Exception as exc:
        logger.exception("judge batch %s: validation failed", batch_id)
        failure = {"code": "validation_failed", "message": type(exc).__name__, "param": None}
        with transaction.atomic():
            batch = JudgeBatch.objects.select_for_update().filter(pk=batch_id).first()
            if batch is None or not batch_lifecycle.may(batch, "refused"):
                return
            batch_lifecycle.move(batch, "refused", timezone.now())
            batch.errors = {"object": "list", "data": [failure | {"line": None}]}
            batch.save(update_fields=["status", "failed_at", "errors"])
        _discard_draft(batch_id)


def _validate(batch_id: int) -> None:
    """Validation a chunk of lines per transaction, each under the batch's lock, saving how
    far it read: a validation stopped mid-way (its worker died) takes up from there, and a
    batch cancelled meanwhile stops it."""
    with transaction.atomic():
        batch = (
            JudgeBatch.objects.select_for_update(of=("self",))
            .select_related("team", "input_file", "created_by", "judge__scenario", "draft")
            .filter(pk=batch_id)
            .first()
        )
        if batch is None or batch.status != BatchStatus.VALIDATING or batch.job_id:
            return
        if batch.draft is None:
            rows = RowsJob.create(
                user=batch.created_by,
                team=batch.team,
                name=f"Judge file {batch.input_file.filename} ({batch.public_id})",
                budget_usd=batch.budget_usd,
                live=batch.live,
                source_meta={
                    "judge_batch": batch.public_id,
                    "input_file": batch.input_file.public_id,
                },
            )
            batch.draft = rows.job
            batch.save(update_fields=["draft"])
        else:
            rows = RowsJob.resume(batch.draft)
    models = _models(batch.team)
    # A re-submission's rows may not repeat a custom_id its earlier batches answered, nor
    # may a row repeat one of an earlier line's (those read before a restart too).
    seen = _answered(batch.parent) if batch.parent_id else set()
    through = last = batch.validated_through
    for _, text in _source_lines(batch, upto=through) if through else ():
        with contextlib.suppress(_Refused):
            _new_custom_id(_object(text), seen)
    refused: list[JudgeRowError] = []
    judge = batch.judge
    tasks = _tasks(judge)
    swappable = judge is not None and registry.of(judge.scenario).swappable
    for number, text in _source_lines(batch, after=through):
        made = _row(number, text, models, seen, tasks, swappable)
        if isinstance(made, JudgeRowError):
            made.batch = batch
            refused.append(made)
        else:
            rows.add(*made)
        last = number
        if len(rows.pending) + len(refused) >= VALIDATED_CHUNK:
            rows.price()
            with transaction.atomic():
                if not _checkpoint(batch, rows, refused, number):
                    return  # cancelled, or another worker took it up
            refused = []
            bulk.between_chunks()
    rows.price()
    if not rows.position and not rows.pending:  # no line can run
        with transaction.atomic():
            if not _checkpoint(batch, rows, refused, last):
                return
        _refused_whole(batch.pk)
        return
    with transaction.atomic():
        if not _checkpoint(batch, rows, refused, last):
            return
        _started(batch, rows.finish())


def _checkpoint(
    batch: JudgeBatch, rows: RowsJob, refused: list[JudgeRowError], through: int
) -> bool:
    """Write a chunk of validated lines and how far validation read, under the batch's lock
    (False, writing nothing: the batch is no longer this validation's)."""
    locked = (
        JudgeBatch.objects.select_for_update(of=("self",))
        .filter(
            pk=batch.pk,
            status=BatchStatus.VALIDATING,
            draft=rows.job,
            validated_through=batch.validated_through,
        )
        .first()
    )
    if locked is None:
        return False
    rows.flush()
    JudgeRowError.objects.bulk_create(refused)
    batch.invalid += len(refused)
    batch.validated_through = through
    JudgeBatch.objects.filter(pk=batch.pk).update(invalid=batch.invalid, validated_through=through)
    return True


def _started(batch: JudgeBatch, job: GenerationJob) -> None:
    """Validation ended with lines that can run: the batch starts its job."""
    batch.failed = batch.invalid
    batch.draft = None
    batch.job = job
    batch_lifecycle.move(batch, "started", timezone.now())
    batch.save()
    lifecycle.start(job)


def _refused_whole(batch_id: int) -> None:
    """No line can run: the error file is written (a chunk per transaction, not shown
    yet), then the batch fails with it attached, so a failed batch always has its error
    file; its empty job goes."""
    batch = JudgeBatch.objects.select_related("team").get(pk=batch_id)
    error = _write(batch, f"{batch.public_id}_error.jsonl", _refusal_lines(batch))
    try:
        with transaction.atomic():
            locked = (
                JudgeBatch.objects.select_for_update(of=("self",))
                .select_related("draft")
                .filter(pk=batch_id, status=BatchStatus.VALIDATING)
                .first()
            )
            if locked is None:
                raise _Superseded
            draft = locked.draft
            locked.draft = None
            locked.failed = locked.invalid
            batch_lifecycle.move(locked, "refused", timezone.now())
            locked.errors = {
                "object": "list",
                "data": [
                    {
                        "code": "no_valid_rows",
                        "message": "No line of the file can run: see the error file.",
                        "param": None,
                        "line": None,
                    }
                ],
            }
            locked.error_file = error.close() if error else None
            locked.save()
            if draft is not None:
                draft.delete()  # no cell: nothing to delete in chunks
    except BaseException as exc:
        if error is not None:
            error.discard()
        if not isinstance(exc, _Superseded):
            raise


def _refusal_lines(batch: JudgeBatch) -> Iterator[dict[str, Any]]:
    """The error file's lines of the rows validation refused, by line."""
    refusals = JudgeRowError.objects.filter(batch=batch).values(
        "pk", "line", "custom_id", "code", "message"
    )
    for refused in _pages(refusals, "pk"):
        yield {
            "id": f"batch_req_line_{refused['line']}",
            "custom_id": refused["custom_id"] or None,
            "line": refused["line"],
            "response": None,
            "error": {"code": refused["code"], "message": refused["message"]},
        }


def _discard_draft(batch_id: int) -> None:
    """Delete the job a validation was writing when it will not finish (its batch was
    cancelled or failed)."""
    draft = (
        JudgeBatch.objects.filter(pk=batch_id)
        .exclude(status=BatchStatus.VALIDATING)
        .values_list("draft_id", flat=True)
        .first()
    )
    if draft is not None:
        discard(draft)


def _source_lines(
    batch: JudgeBatch, *, after: int = 0, upto: int | None = None
) -> Iterator[tuple[int, str]]:
    """The lines the batch runs, numbered after ``after`` (and up to ``upto``): its input
    file's; for a re-submission, the lines of its parent's input that failed."""
    wanted = failed_lines(batch.parent) if batch.parent is not None else None
    for n, text in _numbered(batch.input_file, after):
        if upto is not None and n > upto:
            return
        if wanted is None or n in wanted:
            yield n, text


def _numbered(file: JudgeFile, after: int = 0) -> Iterator[tuple[int, str]]:
    last = after
    while True:
        rows = list(
            JudgeFileLine.objects.filter(file=file, number__gt=last)
            .order_by("number")
            .values_list("number", "text")[:CHUNK]
        )
        if not rows:
            return
        yield from rows
        last = rows[-1][0]


def _answered(batch: JudgeBatch | None) -> set[str]:
    """The custom_ids a batch and the batches it re-submits answered."""
    found: set[str] = set()
    while batch is not None:
        if batch.job_id:
            found.update(
                GenerationOutput.objects.filter(
                    job_id=batch.job_id, status=OutputStatus.COMPLETED
                ).values_list("item__item_id", flat=True)
            )
        batch = batch.parent
    return found


# Refusals a line's own content causes: running it again is refused again, so a
# re-submission leaves such lines out (``left_out``: fix them and upload them anew). A line
# refused for what the team can change (a model not found, or named ambiguously; a task
# not found) runs again.
LINE_FAULTS = frozenset(
    {
        "invalid_json",
        "missing_custom_id",
        "invalid_custom_id",
        "duplicate_custom_id",
        "line_too_long",
        "invalid_request",
        "invalid_method",
        "invalid_url",
        "invalid_metadata",
    }
)


def left_out(batch: JudgeBatch) -> list[dict[str, Any]]:
    """The refused lines of ``batch`` a re-submission leaves out (``LINE_FAULTS``)."""
    return [
        {"line": line, "custom_id": custom_id, "code": code, "message": message}
        for line, custom_id, code, message in JudgeRowError.objects.filter(
            batch=batch, code__in=LINE_FAULTS
        )
        .order_by("line")
        .values_list("line", "custom_id", "code", "message")
    ]


def failed_lines(batch: JudgeBatch) -> set[int]:
    """The input line numbers of a batch's rows that did not end with a reply and may get
    one when run again (refusals of ``LINE_FAULTS`` are not)."""
    lines = set(
        JudgeRowError.objects.filter(batch=batch)
        .exclude(code__in=LINE_FAULTS)
        .values_list("line", flat=True)
    )
    if batch.job_id:
        for data in (
            GenerationOutput.objects.filter(job_id=batch.job_id)
            .exclude(status=OutputStatus.COMPLETED)
            .values_list("item__data", flat=True)
            .iterator(CHUNK)
        ):
            lines.add(int(data["line"]))
    return lines


# --- following the job ---------------------------------------------------------------------------
def sync(batch: JudgeBatch) -> JudgeBatch:
    """A batch as it is now, for a read: its job's counts while it runs (never a write: the
    batch moves on through its job's end and ``sweep``)."""
    return batch_lifecycle.current(batch)


def job_ended(job_id: int) -> None:
    """A batch's job ended (its result handler heard it): the batch finalizes."""
    with transaction.atomic():
        batch = (
            JudgeBatch.objects.select_for_update(of=("self",), skip_locked=False)
            .filter(job_id=job_id)
            .first()
        )
        if batch is not None and batch_lifecycle.may(batch, "finalizing"):
            _finalizing(batch, timezone.now())
            batch.save()


def sweep() -> dict[str, list[int]]:
    """The scheduled task (every minute): batches past their window are marked expired and
    their jobs cancelled (they finalize as ``expired`` once the job stops); a batch whose job
    ended unheard (a worker killed between the two) finalizes; a validation or finalization
    lost with its worker is queued again. Takes the ``SWEEP_BATCHES`` oldest open batches
    whose state calls for one of these, each under its own lock (a batch a task holds is
    left to the next sweep). The batches each step took."""
    now = timezone.now()
    open_batches = JudgeBatch.objects.filter(status__in=OPEN).order_by("created_at", "pk")
    due = open_batches.filter(
        Q(status=BatchStatus.VALIDATING, created_at__lt=now - LOST_AFTER, job__isnull=True)
        | Q(status=BatchStatus.FINALIZING, finalizing_at__lt=now - LOST_AFTER)
        | Q(
            status__in=[BatchStatus.IN_PROGRESS, BatchStatus.CANCELLING],
            expires_at__lt=now,
            expired_at__isnull=True,
        )
        | Q(status__in=[BatchStatus.IN_PROGRESS, BatchStatus.CANCELLING], job__isnull=True)
        | Q(
            status__in=[BatchStatus.IN_PROGRESS, BatchStatus.CANCELLING],
            job__status__in=list(FINISHED_JOB),
        )
    )
    done: dict[str, list[int]] = {"requeued": [], "expired": [], "finalizing": []}
    _discard_abandoned(now)
    for pk in list(due.values_list("pk", flat=True)[:SWEEP_BATCHES]):
        try:
            step = _sweep_one(pk, now)
        except Exception:  # a race (its job ended meanwhile), a deadlock: the next sweep
            logger.exception("judge batch %s: the sweep failed", pk)
            continue
        if step:
            done[step].append(pk)
    return done


def _discard_abandoned(now: Any) -> None:
    """What a dead writer left: files never shown an hour after they were begun, and the
    jobs of validations that will not finish."""
    for file_id in JudgeFile.objects.filter(
        lines=0, created_at__lt=now - ABANDONED_AFTER
    ).values_list("pk", flat=True)[:SWEEP_BATCHES]:
        discard_file(file_id)
    for pk in (
        JudgeBatch.objects.filter(draft__isnull=False)
        .exclude(status=BatchStatus.VALIDATING)
        .values_list("pk", flat=True)[:SWEEP_BATCHES]
    ):
        _discard_draft(pk)


def _sweep_one(pk: int, now: Any) -> str | None:
    """One batch's step of the sweep, under its lock (a batch a task holds is skipped)."""
    with transaction.atomic():
        batch = (
            JudgeBatch.objects.select_for_update(of=("self",), skip_locked=True)
            .select_related("job")
            .filter(pk=pk, status__in=OPEN)
            .first()
        )
        if batch is None:
            return None
        step = _swept(batch, now)
        if step:
            batch.save()
        return step


def _held(batch_id: int, step: Callable[[int], None], now: Any) -> bool:
    """Whether a worker runs the batch's step (its lease alive) or it waits in its team's
    queue: ``fairshare``'s rows of the step's key."""
    return (
        TeamTask.objects.filter(key=_step_key(step, batch_id))
        .filter(Q(running=False) | Q(lease_until__gt=now))
        .exists()
    )


def _lost_step(batch: JudgeBatch) -> Callable[[int], None] | None:
    """The step a validating or finalizing batch waits for, if it has one."""
    if batch.status == BatchStatus.VALIDATING and not batch.job_id:
        return validate
    if batch.status == BatchStatus.FINALIZING:
        return finalize
    return None


def _requeue(batch: JudgeBatch, step: Callable[[int], None], now: Any) -> None:
    """Queue the step again (its clock restarts: it is lost again only so long after)."""
    if step is validate:
        batch.created_at = now
    else:
        batch.finalizing_at = now
    transaction.on_commit(lambda: _queue(step, batch.pk))


def _swept(batch: JudgeBatch, now: Any) -> str | None:
    """One batch's step of the sweep (the batch locked; the caller saves it)."""
    job = batch.job
    if batch.status in (BatchStatus.VALIDATING, BatchStatus.FINALIZING):
        step = _lost_step(batch)
        since = batch.created_at if step is validate else batch.finalizing_at
        if step is None or since is None or since >= now - LOST_AFTER:
            return None
        if _held(batch.pk, step, now):
            return None
        _requeue(batch, step, now)
        return "requeued"
    if job is None or job.status in FINISHED_JOB:
        _finalizing(batch, now)
        return "finalizing"
    if batch.expires_at is not None and now > batch.expires_at and batch.expired_at is None:
        batch.expired_at = now  # marked: finalized as expired once the job stops
        lifecycle.cancel(job)
        return "expired"
    return None


def _finalizing(batch: JudgeBatch, now: Any) -> None:
    """Finalize: the counts its job left, and the task that writes its files."""
    if batch.job is not None:
        batch.completed = batch.job.completed_cells
        batch.failed = batch.job.failed_cells + batch.invalid
    batch_lifecycle.move(batch, "finalizing", now)
    transaction.on_commit(lambda: _queue(finalize, batch.pk))


def resumable(batch: JudgeBatch) -> bool:
    """Whether the batch waits for a step no worker holds (its page offers to resume it)."""
    step = _lost_step(batch)
    return step is not None and not _held(batch.pk, step, timezone.now())


def batch_resume(*, user: Any, batch: JudgeBatch) -> JudgeBatch:
    """Queue a validating or finalizing batch's step again now, when no worker holds it (a
    worker stopped mid-way): what the sweep does a minute after, at once."""
    _may(user, batch.team)
    now = timezone.now()
    with transaction.atomic():
        batch = JudgeBatch.objects.select_for_update(of=("self",)).get(pk=batch.pk)
        step = _lost_step(batch)
        if step is None:
            raise Conflict(f"A batch that is {batch.status} has no step to resume.")
        if _held(batch.pk, step, now):
            raise Conflict("A worker runs this batch's step, or it waits in your team's queue.")
        _requeue(batch, step, now)
        batch.save()
        audit.record(user=user, team=batch.team_id, action="judge_files.batch.resume", target=batch)
    return sync(JudgeBatch.objects.select_related("job").get(pk=batch.pk))


def batch_cancel(*, user: Any, batch: JudgeBatch) -> JudgeBatch:
    """Cancel: ``cancelling`` until the job has stopped (what finished is kept and delivered),
    then ``cancelled``."""
    _may(user, batch.team)
    with transaction.atomic():
        batch = (
            JudgeBatch.objects.select_for_update(of=("self",))
            .select_related("job")
            .get(pk=batch.pk)
        )
        if batch.status not in (BatchStatus.VALIDATING, BatchStatus.IN_PROGRESS):
            raise Conflict(f"A batch that is {batch.status} cannot be cancelled.")
        now = timezone.now()
        batch.cancelling_at = now
        if batch.status == BatchStatus.VALIDATING:
            batch_lifecycle.move(batch, "cancelled", now)
            pk = batch.pk
            transaction.on_commit(lambda: _discard_draft(pk))
        else:
            batch_lifecycle.move(batch, "cancelling", now)
            if batch.job is not None and batch.job.status not in FINISHED_JOB:
                lifecycle.cancel(batch.job)  # its end finalizes the batch
            elif batch_lifecycle.may(batch, "finalizing"):
                _finalizing(batch, now)  # its job ended already: nothing to hear
        batch.save()
        audit.record(user=user, team=batch.team_id, action="judge_files.batch.cancel", target=batch)
    return sync(JudgeBatch.objects.select_related("job").get(pk=batch.pk))


def _output_line(row: Mapping[str, Any]) -> dict[str, Any]:
    data = row["item__data"]
    created = int((row["completed_at"] or timezone.now()).timestamp())
    prompt, completion = row["input_tokens"], row["output_tokens"]
    return {
        "id": f"batch_req_{row['pk']}",
        "custom_id": data["custom_id"],
        "response": {
            "status_code": 200,
            "request_id": f"req_{row['pk']}",
            "body": {
                "id": f"chatcmpl-{row['pk']}",
                "object": "chat.completion",
                "created": created,
                "model": row["model_config__llm_model__model_id"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": row["content"]},
                        "finish_reason": row["finish_reason"] or "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            },
        },
        "error": None,
    }


def _model_error_line(row: Mapping[str, Any], why: str | None) -> dict[str, Any]:
    data = row["item__data"]
    kind = row["error_kind"] or ("not_run" if why else "error")
    message = row["error_message"] or why or "The call failed."
    if row["status"] != OutputStatus.FAILED:  # never run: the batch stopped first
        return {
            "id": f"batch_req_{row['pk']}",
            "custom_id": data["custom_id"],
            "line": data["line"],
            "response": None,
            "error": {"code": kind, "message": message},
        }
    return {
        "id": f"batch_req_{row['pk']}",
        "custom_id": data["custom_id"],
        "line": data["line"],
        "response": {
            "status_code": ERROR_STATUS.get(kind, 500),
            "request_id": f"req_{row['pk']}",
            "body": {"error": {"message": message[:2000], "type": kind, "code": kind}},
        },
        "error": None,
    }


def _write(batch: JudgeBatch, name: str, lines: Iterator[dict[str, Any]]) -> _Writer | None:
    """A file of JSON lines, written but not shown (None when there are none)."""
    writer: _Writer | None = None
    try:
        for line in lines:
            if writer is None:
                writer = _Writer(team=batch.team, purpose=FilePurpose.BATCH_OUTPUT, filename=name)
            writer.add(
                writer.count + 1, json.dumps(line, ensure_ascii=False).replace("\x00", "\ufffd")
            )
    except BaseException:
        if writer is not None:
            writer.discard()
        raise
    return writer


OUTPUT_FIELDS = [
    "pk",
    "status",
    "content",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "completed_at",
    "error_kind",
    "error_message",
    "item__data",
    "model_config__llm_model__model_id",
]


def _outputs(job_id: int | None, completed: bool) -> Iterator[dict[str, Any]]:
    if job_id is None:
        return
    rows = GenerationOutput.objects.filter(job_id=job_id)
    rows = (
        rows.filter(status=OutputStatus.COMPLETED)
        if completed
        else rows.exclude(status=OutputStatus.COMPLETED)
    )
    yield from _pages(rows.values(*OUTPUT_FIELDS, "item__position"), "item__position")


def _pages(rows: Any, key: str) -> Iterator[dict[str, Any]]:
    """``rows`` (a ``values()`` query) in ``key`` order, unique among them, a page per
    query read whole: no cursor stays open while the caller writes (SQLite lets no
    connection that holds an older read snapshot write)."""
    last = None
    while True:
        page = list(
            (rows if last is None else rows.filter(**{f"{key}__gt": last})).order_by(key)[:CHUNK]
        )
        if not page:
            return
        yield from page
        last = page[-1][key]


def _finalizable(batch: JudgeBatch | None) -> bool:
    return (
        batch is not None
        and not batch.output_file_id
        and not batch.error_file_id
        and batch.status in (BatchStatus.FINALIZING, BatchStatus.FAILED)
    )


def finalize(batch_id: int) -> None:
    """The task: write the batch's output and error files (a chunk per transaction, not
    shown yet), then, in one short transaction, attach them and end the batch."""
    batch = JudgeBatch.objects.select_related("team").filter(pk=batch_id).first()
    if batch is None or not _finalizable(batch):
        return
    stopped = (
        "The batch expired first."
        if batch.expired_at
        else "The batch was cancelled first."
        if batch.cancelling_at
        else "The job stopped first."
    )

    def errors() -> Iterator[dict[str, Any]]:
        yield from _refusal_lines(batch)
        for row in _outputs(batch.job_id, False):
            yield _model_error_line(row, stopped)

    written: list[_Writer] = []
    try:
        output = _write(
            batch,
            f"{batch.public_id}_output.jsonl",
            (_output_line(row) for row in _outputs(batch.job_id, True)),
        )
        written += [output] if output else []
        error = _write(batch, f"{batch.public_id}_error.jsonl", errors())
        written += [error] if error else []
        with transaction.atomic():
            if not _end(batch_id, output, error):
                raise _Superseded
    except BaseException as exc:
        for writer in written:
            writer.discard()  # none shown: the batch ended meanwhile, or writing failed
        if not isinstance(exc, _Superseded):
            raise


class _Superseded(Exception):
    """Another step ended the batch while its files were written."""


def _end(batch_id: int, output: _Writer | None, error: _Writer | None) -> bool:
    """Attach the batch's files and end it (under its lock); False if it ended already."""
    batch = (
        JudgeBatch.objects.select_for_update(of=("self",))
        .select_related("team", "job")
        .filter(pk=batch_id)
        .first()
    )
    if batch is None or not _finalizable(batch):
        return False
    job = batch.job
    batch.output_file = output.close() if output else None
    batch.error_file = error.close() if error else None
    now = timezone.now()
    if job is not None:
        job.refresh_from_db()
        batch.completed = job.completed_cells
        batch.failed = batch.total - batch.completed
    if batch.status == BatchStatus.FINALIZING:
        if batch.expired_at:
            batch_lifecycle.move(batch, "ended", now, to=BatchStatus.EXPIRED)
        elif batch.cancelling_at:
            batch_lifecycle.move(batch, "ended", now, to=BatchStatus.CANCELLED)
        elif job is not None and job.status == JobStatus.FAILED:
            batch_lifecycle.move(batch, "ended", now, to=BatchStatus.FAILED)
            batch.errors = {
                "object": "list",
                "data": [
                    {
                        "code": "job_failed",
                        "message": job.status_message,
                        "param": None,
                        "line": None,
                    }
                ],
            }
        else:
            batch_lifecycle.move(batch, "ended", now, to=BatchStatus.COMPLETED)
    batch.save()
    return True


# --- verdicts ------------------------------------------------------------------------------------
class JudgeFileResults:
    """The result handler of judge-file jobs (``generation.results``): every reply is
    recorded as it came (an unreadable one is flagged in its verdict, not failed), and read
    into its ``JudgeVerdict``."""

    def check(self, job_id: int, replies: Mapping[int, str]) -> dict[int, str]:
        return {}

    def finished(self, job_id: int, status: str) -> None:
        """The batch's job ended: the batch finalizes."""
        job_ended(job_id)

    def recorded(self, job_id: int, output_ids: Any) -> None:
        batch = (
            JudgeBatch.objects.filter(job_id=job_id)
            .select_related("judge__scenario")
            .only("pk", "status", "judge")
            .first()
        )
        if batch is None:
            return
        batch_id = batch.pk
        rows = GenerationOutput.objects.filter(
            pk__in=list(output_ids), status=OutputStatus.COMPLETED
        ).values_list("pk", "content", "item__data")
        made = []
        for pk, content, data in rows:
            found = read_reply(content)
            made.append(
                JudgeVerdict(
                    batch_id=batch_id,
                    output_id=pk,
                    custom_id=data["custom_id"],
                    line=data["line"],
                    score=found.score,
                    verdict=storable(found.verdict),
                    rationale=storable(found.rationale),
                    fields=storable(found.fields),
                    parsed=found.parsed,
                    problem=storable(found.problem)[:300],
                )
            )
        JudgeVerdict.objects.filter(output_id__in=list(output_ids)).delete()
        JudgeVerdict.objects.bulk_create(made)
        if not made:
            return
        if batch.status not in OPEN:
            _reopen(batch_id)
        if batch.judge is not None:  # the rows' verdicts are also the judge's judgments
            record_judgments(batch.judge, [v.output_id for v in made], replace=True)


def _reopen(batch_id: int) -> None:
    """A finished batch whose job runs again (resumed, or its failures retried from the job
    page) is in progress again: its files are written anew when the job is over."""
    with transaction.atomic():  # within the recording transaction, as a savepoint
        batch = JudgeBatch.objects.select_for_update(of=("self",)).filter(pk=batch_id).first()
        if batch is None or batch.status in OPEN:
            return
        stale = [f for f in (batch.output_file_id, batch.error_file_id) if f]
        batch.output_file = batch.error_file = None
        batch.errors = None
        batch.finalizing_at = batch.completed_at = batch.failed_at = None
        batch.cancelling_at = batch.cancelled_at = None
        batch_lifecycle.move(batch, "reopened", timezone.now(), stamp=False)
        batch.save()
        JudgeFile.objects.filter(pk__in=stale).delete()


# --- re-submitting the failures ------------------------------------------------------------------
def resubmit(
    *,
    user: Any,
    batch: JudgeBatch,
    metadata: dict[str, str] | None = None,
    budget_usd: Any = None,
    live: bool | None = None,
) -> JudgeBatch:
    """A new batch of exactly the rows of ``batch`` that failed and may succeed when run
    again (no reply, or refused for what the team can change: ``failed_lines``), linked to
    it (``parent``); the lines refused for their own content are left out (``left_out``)."""
    _may(user, batch.team)
    if batch.status in OPEN:
        raise Conflict("The batch is not finished: re-submit its failures once it is.")
    if not failed_lines(batch):
        if left_out(batch):
            raise Conflict(
                "Only lines refused for their own content failed: fix them and upload them "
                "anew (the error file lists them)."
            )
        raise Conflict("No row of this batch failed.")
    return _new_batch(
        user,
        batch.team,
        batch.input_file,
        metadata if metadata is not None else dict(batch.metadata),
        budget_usd if budget_usd is not None else batch.budget_usd,
        batch.live if live is None else live,
        batch.completion_window,
        parent=batch,
    )


def lineage(batch: JudgeBatch) -> list[JudgeBatch]:
    """The batch and its re-submissions, oldest first (each of the last one's failures)."""
    found = [batch]
    while True:
        nxt = JudgeBatch.objects.filter(parent=found[-1]).order_by("created_at", "pk").first()
        if nxt is None or nxt in found:
            return found
        found.append(nxt)


def combined(batch: JudgeBatch) -> dict[str, JudgeVerdict]:
    """The verdicts of a batch and its re-submissions merged by ``custom_id`` (a later one's
    reply wins)."""
    merged: dict[str, JudgeVerdict] = {}
    for one in lineage(batch):
        rows = JudgeVerdict.objects.filter(batch=one).only(
            "custom_id", "score", "verdict", "parsed", "line"
        )
        for verdict in rows.iterator(CHUNK):
            merged[verdict.custom_id] = verdict
    return merged


def merged_verdicts(batch: JudgeBatch) -> tuple[Iterator[JudgeVerdict], int, int]:
    """The verdicts of ``batch`` with its re-submissions' replies in place of the rows they
    answered again (by ``custom_id``, the latest re-submission's winning), in line order,
    streamed (each batch's verdicts read a chunk at a time, merged by line); how many, and
    how many of them parsed."""
    batches = lineage(batch)
    winner: dict[str, tuple[int, bool]] = {}
    for one in batches:
        for custom_id, parsed in (
            JudgeVerdict.objects.filter(batch=one)
            .values_list("custom_id", "parsed")
            .iterator(CHUNK)
        ):
            winner[custom_id] = (one.pk, parsed)

    def kept(one: JudgeBatch) -> Iterator[JudgeVerdict]:
        rows = JudgeVerdict.objects.filter(batch=one).select_related("output", "batch")
        for verdict in rows.order_by("line").iterator(CHUNK):
            if winner.get(verdict.custom_id, (None,))[0] == one.pk:
                yield verdict

    merged = heapq.merge(*(kept(one) for one in batches), key=lambda v: v.line)
    return merged, len(winner), sum(1 for _, parsed in winner.values() if parsed)


# --- the estimate of a file, before a batch -----------------------------------------------------
ESTIMATE_EXAMPLES = 20  # refused lines named in an estimate


def estimate(*, user: Any, file: JudgeFile) -> dict[str, Any]:
    """What a batch of ``file`` would cost (``feature:evaluations:judge_files``): its lines
    read as a batch reads them (a refused line is counted by its error code, the first
    ``ESTIMATE_EXAMPLES`` named), and per model the rows, the estimated input tokens (one
    per four characters), the assumed output tokens (``max_tokens`` where a row sets one,
    else the typical reply; and the most it may cost, at ``max_tokens`` or a multiple of
    the typical), the live cost, and the batch cost where the model has a batch API. Lines
    read a chunk at a time; the work is bounded by the upload limits."""
    if not policy.may(user, EVALUATIONS_JUDGE_FILES, file):
        raise Forbidden()
    models = _models(file.team)
    seen: set[str] = set()
    # Priced a chunk at a time, so no more than a chunk of prompts is held.
    prompts: dict[tuple[int, int | None], list[tuple[str, str]]] = {}
    found: dict[int, LLMModel] = {}
    per_model: dict[int, dict[str, Any]] = {}
    refused: dict[str, int] = {}
    examples: list[dict[str, Any]] = []
    rows = 0

    def price() -> None:
        for (model_pk, max_tokens), asked in prompts.items():
            model = found[model_pk]
            cost = estimate_cost(model=model, prompts=asked, max_tokens=max_tokens)
            sums = per_model.setdefault(
                model_pk,
                {"model": f"{model.connection.name}/{model.model_id}", "name": model.display_name,
                 "batch_api": model.batch_capable, "rows": 0, "input_tokens": 0,
                 "output_tokens_assumed": 0, "output_tokens_high": 0, "live_usd": Decimal(0),
                 "batch_usd": Decimal(0), "live_usd_high": Decimal(0),
                 "batch_usd_high": Decimal(0)},
            )  # fmt: skip
            sums["rows"] += cost.requests
            sums["input_tokens"] += cost.input_tokens
            sums["output_tokens_assumed"] += cost.output_tokens_typical
            sums["output_tokens_high"] += cost.output_tokens_high
            for figure in ("live_usd", "batch_usd", "live_usd_high", "batch_usd_high"):
                sums[figure] += Decimal(getattr(cost, figure))
        prompts.clear()

    for number, text in _numbered(file):
        made = _row(number, text, models, seen)
        if isinstance(made, JudgeRowError):
            refused[made.code] = refused.get(made.code, 0) + 1
            if len(examples) < ESTIMATE_EXAMPLES:
                examples.append(
                    {"line": number, "custom_id": made.custom_id, "code": made.code,
                     "message": made.message}
                )  # fmt: skip
            continue
        rows += 1
        _, data, model = made
        request = data["request"]
        earlier = "\n".join(text for _, text in request.get("turns") or [])
        key = (model.pk, request.get("max_tokens"))
        prompts.setdefault(key, []).append(
            (f"{request.get('system', '')}\n{earlier}", request["user"])
        )
        found[model.pk] = model
        if rows % CHUNK == 0:
            price()
    price()
    listed = []
    for sums in sorted(per_model.values(), key=lambda s: s["model"]):
        if not sums["batch_api"]:
            sums["batch_usd"] = sums["batch_usd_high"] = None
        listed.append(
            {k: str(v.quantize(Decimal("0.000001"))) if isinstance(v, Decimal) else v
             for k, v in sums.items()}
        )  # fmt: skip
    return {
        "file": file.public_id,
        "lines": file.lines,
        "rows": rows,
        "refused": sum(refused.values()),
        "refusals": dict(sorted(refused.items())),
        "examples": examples,
        "models": listed,
        "live_usd": str(sum((Decimal(m["live_usd"]) for m in listed), Decimal(0))),
        "batch_usd": None
        if any(m["batch_usd"] is None for m in listed)
        else str(sum((Decimal(m["batch_usd"]) for m in listed), Decimal(0))),
    }
