"""Judge files through the OpenAI Files + Batches API the platform serves, with the official
``openai`` SDK as the client over real HTTP (the live server), the project's fake provider
behind it, and the tasks run as they are queued (django-q's sync mode): the seed's own
lines, malformed lines and provider failures, the output and error files, verdicts,
re-submitting the failures, the regression report, permissions and another team."""

from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest
from django.test import Client
from django_q.conf import Conf
from openai import BadRequestError, NotFoundError, OpenAI, PermissionDeniedError

from evalplatform.accounts.roles import Role
from evalplatform.accounts.services import token_create
from evalplatform.providers.models import LLMModel, ProviderConnection
from evaluations.models import JudgeBatch, JudgeFile, JudgeFileLine, JudgeVerdict
from generation.models import GenerationJob, GenerationOutput
from tests.helpers.evaluations import row

pytestmark = pytest.mark.django_db(transaction=True)

SEED = (
    '{"custom_id":"eval-001","method":"POST","url":"/v1/chat/completions","body":{"model":'
    '"openrelay/gemma-4-31b","messages":[{"role":"system","content":"You are an evaluation '
    'judge. Score the answer 1-5 against the rubric and reply as JSON: {\\"score\\", '
    '\\"rationale\\"}."},{"role":"user","content":"Rubric: factual accuracy.\\nQuestion: When '
    'did the Apollo 11 mission land?\\nAnswer to grade: July 20, 1969."}]}}',
    '{"custom_id":"eval-002","method":"POST","url":"/v1/chat/completions","body":{"model":'
    '"openrelay/gemma-4-31b","messages":[{"role":"system","content":"You are an evaluation '
    "judge. Given two answers, reply with the better one: A or B, plus one sentence of "
    'rationale."},{"role":"user","content":"Question: Summarize the refund policy.\\nA: ...'
    '\\nB: ..."}]}}',
)


def wait(client, batch_id, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in ("completed", "failed", "cancelled", "expired"):
            return batch
        assert time.monotonic() < deadline, batch.status
        time.sleep(0.1)


def run_file(client, file_id, **extra):
    """A batch of the file, waited for to its end."""
    made = client.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h", **extra
    )
    return wait(client, made.id)


def lines(client, file_id):
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()]


def test_the_seeds_client_code_runs_and_bad_rows_go_to_the_error_file(world):
    client = world["client"]
    content = "\n".join(
        [
            *SEED,
            "this is not json",  # line 3
            json.dumps({"method": "POST", "url": "/v1/chat/completions", "body": {}}),  # 4
            row("eval-001"),  # 5: repeats a custom_id
            row("eval-003", model="judge-b"),  # 6: no such model (yet)
            row("eval-004", url="/v1/embeddings"),  # 7
            "",  # a blank line is skipped
            row("eval-005", model="broken-judge"),  # 9: the provider refuses it
            row("eval-006"),  # 10
        ]
    ).encode()
    uploaded = client.files.create(file=("batch.jsonl", content), purpose="batch")
    assert uploaded.id.startswith("file-") and uploaded.bytes == len(content)
    assert client.files.retrieve(uploaded.id).filename == "batch.jsonl"
    assert client.files.content(uploaded.id).text.splitlines()[0] == SEED[0]

    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"eval": "accuracy-v1"},
    )
    assert batch.status == "validating" and batch.metadata == {"eval": "accuracy-v1"}
    batch = wait(client, batch.id)
    assert batch.status == "completed"
    assert batch.request_counts.total == 9
    assert (batch.request_counts.completed, batch.request_counts.failed) == (3, 6)
    assert batch.completed_at and batch.in_progress_at and batch.finalizing_at

    output = lines(client, batch.output_file_id)
    assert [o["custom_id"] for o in output] == ["eval-001", "eval-002", "eval-006"]
    reply = output[0]["response"]
    assert reply["status_code"] == 200
    assert reply["body"]["object"] == "chat.completion"
    assert reply["body"]["model"] == "openrelay/gemma-4-31b"
    assert json.loads(reply["body"]["choices"][0]["message"]["content"])["score"] in range(1, 6)
    errors = {(e["line"], e["custom_id"]): e for e in lines(client, batch.error_file_id)}
    assert set(errors) == {
        (3, None),
        (4, None),
        (5, "eval-001"),
        (6, "eval-003"),
        (7, "eval-004"),
        (9, "eval-005"),
    }
    assert errors[(3, None)]["error"]["code"] == "invalid_json"
    assert errors[(4, None)]["error"]["code"] == "missing_custom_id"
    assert errors[(5, "eval-001")]["error"]["code"] == "duplicate_custom_id"
    assert errors[(6, "eval-003")]["error"]["code"] == "model_not_found"
    assert errors[(7, "eval-004")]["error"]["code"] == "invalid_url"
    refused = errors[(9, "eval-005")]["response"]
    assert refused["status_code"] == 404 and refused["body"]["error"]["type"] == "not_found"

    # The system message was sent as such, and the job is an ordinary generation job.
    job = GenerationJob.objects.get(judge_batch__public_id=batch.id)
    assert job.source_kind == "judge_file" and job.total_cells == 4
    first = GenerationOutput.objects.get(job=job, item__item_id="eval-001")
    assert first.temperature is None  # the row set none, and none was sent

    # The verdicts: the rubric row's score, the pairwise row's A/B choice.
    api = Client(HTTP_AUTHORIZATION=f"Bearer {world['key']}")
    verdicts = api.get(f"/api/judge-files/{batch.id}/verdicts").json()
    found = {v["custom_id"]: v for v in verdicts["verdicts"]}
    assert found["eval-001"]["score"] in range(1, 6) and found["eval-001"]["parsed"]
    assert found["eval-002"]["verdict"] in ("A", "B") and found["eval-002"]["rationale"]
    table = api.get(f"/api/judge-files/{batch.id}/verdicts.csv")
    text = b"".join(table.streaming_content).decode()
    assert text.splitlines()[0].startswith("custom_id,line,score,verdict")

    # Re-submit only the failures, once the missing model exists: the error file as input.
    LLMModel.objects.create(connection=world["fake"], model_id="judge-b", display_name="B")
    again = run_file(client, batch.error_file_id)
    # Only the rows that may succeed run again: eval-003 (its model now exists) and eval-005
    # (the provider refused it); lines refused for their own content are left out.
    assert again.request_counts.total == 2 and again.request_counts.completed == 1
    assert again.parent_batch_id == batch.id
    assert [o["custom_id"] for o in lines(client, again.output_file_id)] == ["eval-003"]
    assert JudgeBatch.objects.get(public_id=again.id).parent.public_id == batch.id
    # The first batch's verdicts with its re-submission's in place: eval-003 answered there.
    merged = api.get(f"/api/judge-files/{batch.id}/verdicts?merged=true").json()
    assert merged["merged"] == [batch.id, again.id]
    rows = {v["custom_id"]: v for v in merged["verdicts"]}
    assert rows["eval-003"]["batch"] == again.id and rows["eval-001"]["batch"] == batch.id
    assert merged["count"] == len(rows) == len(found) + 1
    assert [v["line"] for v in merged["verdicts"]] == sorted(v["line"] for v in rows.values())
    table = api.get(f"/api/judge-files/{batch.id}/verdicts.csv?merged=true")
    text = b"".join(table.streaming_content).decode().splitlines()
    assert text[0].endswith(",batch") and len(text) == 1 + len(rows)
    assert api.get(f"/api/judge-files/{batch.id}/verdicts?merged=x").status_code == 400

    # The same file again: the regression report of the two runs (re-submission merged).
    rerun = run_file(client, uploaded.id)
    report = api.get(f"/api/judge-files/{batch.id}/compare/{rerun.id}").json()["summary"]
    # eval-003 is in the first run's combined result through its re-submission.
    assert report["rows_a"] == report["rows_b"] == report["rows_both"] == 4
    assert report["only_in_a"] == report["only_in_b"] == []
    # The rows send no temperature: the provider's default samples each call anew, so the
    # report counts the rows whose score or verdict the two runs' verdicts differ in.
    before = api.get(f"/api/judge-files/{batch.id}/verdicts?merged=true").json()["verdicts"]
    after = api.get(f"/api/judge-files/{rerun.id}/verdicts").json()["verdicts"]
    before = {v["custom_id"]: (v["score"], v["verdict"]) for v in before}
    after = {v["custom_id"]: (v["score"], v["verdict"]) for v in after}
    assert report["changed"] == sum(before[k] != after[k] for k in before)
    shifts = [after[k][0] - before[k][0] for k in before if before[k][0] is not None]
    assert report["score_shift"]["mean"] == pytest.approx(sum(shifts) / len(shifts))
    assert report["verdict_kappa"]["rows"] == 1

    listed = client.batches.list(limit=2)
    assert [b.id for b in listed.data] == [rerun.id, again.id] and listed.has_more
    assert [b.id for b in client.batches.list(limit=2, after=again.id).data] == [batch.id]


def test_cancel_a_batch_and_the_statuses_are_openais(world, monkeypatch):
    client = world["client"]
    # Tasks wait in the queue this time: the batch stays validating until cancelled.
    monkeypatch.setattr(Conf, "SYNC", False)
    uploaded = client.files.create(file=("b.jsonl", row("x").encode()), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    cancelled = client.batches.cancel(batch.id)
    assert cancelled.status == "cancelled" and cancelled.cancelled_at
    assert client.batches.retrieve(batch.id).status == "cancelled"
    with pytest.raises(Exception, match="cannot be cancelled"):
        client.batches.cancel(batch.id)


def test_bad_requests_are_openai_errors_and_change_nothing(world):
    client = world["client"]
    with pytest.raises(BadRequestError, match="purpose"):
        client.files.create(file=("b.jsonl", b"{}"), purpose="fine-tune")
    with pytest.raises(BadRequestError, match="no lines"):
        client.files.create(file=("b.jsonl", b"\n\n"), purpose="batch")
    uploaded = client.files.create(file=("b.jsonl", row("x").encode()), purpose="batch")
    with pytest.raises(BadRequestError, match="endpoint"):
        client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h"
        )
    with pytest.raises(BadRequestError, match="input_file_id"):
        client.batches.create(
            input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h"
        )
    with pytest.raises(BadRequestError, match="completion_window"):
        client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="1h"
        )
    assert not JudgeBatch.objects.exists()
    with pytest.raises(NotFoundError):
        client.batches.retrieve("batch_nope")


def test_another_team_sees_nothing_and_a_viewer_cannot_run(world, team_b, member, live_server):
    client = world["client"]
    uploaded = client.files.create(file=("b.jsonl", row("x").encode()), purpose="batch")
    batch = run_file(client, uploaded.id)
    outsider = OpenAI(
        base_url=f"{live_server.url}/v1",
        api_key=token_create(user=member(team_b, Role.MANAGER), name="x")[1],
        max_retries=0,
    )
    with pytest.raises(NotFoundError):
        outsider.batches.retrieve(batch.id)
    with pytest.raises(NotFoundError):
        outsider.files.content(uploaded.id)
    assert outsider.batches.list().data == []
    stranger = Client(HTTP_AUTHORIZATION=f"Bearer {outsider.api_key}")
    assert stranger.get(f"/api/judge-files/{batch.id}/verdicts").status_code == 404
    team_a = world["user"].memberships.first().team
    viewer = OpenAI(
        base_url=f"{live_server.url}/v1",
        api_key=token_create(user=member(team_a, Role.VIEWER), name="v")[1],
        max_retries=0,
    )
    assert viewer.batches.retrieve(batch.id).status == "completed"
    with pytest.raises(PermissionDeniedError):
        viewer.files.create(file=("b.jsonl", row("y").encode()), purpose="batch")
    with pytest.raises(PermissionDeniedError):
        viewer.batches.cancel(batch.id)


def test_the_pages_upload_show_verdicts_and_resubmit(world):
    browser = Client()
    browser.force_login(world["user"])
    from django.core.files.uploadedfile import SimpleUploadedFile

    content = "\n".join([row("p-1"), row("p-2", model="nope"), "<a href=x>not json</a>"])
    answer = browser.post(
        "/judge-files/",
        {"team": world["user"].memberships.first().team.slug,
         "file": SimpleUploadedFile("mine.jsonl", content.encode())},
    )  # fmt: skip
    assert answer.status_code == 302
    batch = JudgeBatch.objects.get()
    page = browser.get(f"/judge-files/{batch.public_id}").content.decode()
    assert 'data-status="completed"' in page
    assert "Output file (1 lines)" in page and "Error file (2 lines)" in page
    # The unknown model may exist by then; the line that is not JSON cannot succeed.
    assert "Re-submit the 1 failed row that may succeed" in page
    assert "1 line refused for its own content is left out" in page
    assert JudgeVerdict.objects.filter(batch=batch).count() == 1
    listing = browser.get("/judge-files/").content.decode()
    assert batch.public_id in listing and "mine.jsonl" in listing
    made = browser.post(f"/judge-files/{batch.public_id}/resubmit")
    assert made.status_code == 302
    second = JudgeBatch.objects.exclude(pk=batch.pk).get()
    assert second.parent == batch and second.total == 1
    report = browser.get(f"/judge-files/{batch.public_id}/compare/{second.public_id}")
    assert report.status_code == 200 and "Regression report" in report.content.decode()
    # The API's re-submission lists what it leaves out, for fixing.
    api = Client(HTTP_AUTHORIZATION=f"Bearer {world['key']}")
    again = api.post(f"/api/judge-files/{batch.public_id}/resubmit")
    assert again.status_code == 201, again.json()
    assert [(e["line"], e["code"]) for e in again.json()["left_out"]] == [(3, "invalid_json")]


def test_models_with_a_batch_api_run_through_it_at_the_batch_price(world, fake_provider):
    from generation.tasks import drive_batches

    fake_provider.config.batch_duration_s = 0.0
    LLMModel.objects.filter(model_id="openrelay/gemma-4-31b").update(supports_batch=True)
    client = world["client"]
    content = "\n".join([row("b-1"), row("b-2"), "not json"]).encode()
    uploaded = client.files.create(file=("b.jsonl", content), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 30
    while (batch := client.batches.retrieve(batch.id)).status not in ("completed", "failed"):
        assert time.monotonic() < deadline, batch.status
        drive_batches()  # the worker's schedule: submit, poll, record
        time.sleep(0.05)
    assert batch.status == "completed" and batch.request_counts.completed == 2
    job = GenerationJob.objects.get(pk=batch.job_id)
    assert job.mode == "batch"
    assert all(o.batch_id for o in GenerationOutput.objects.filter(job=job))
    live_price = sum(
        LLMModel.objects.get(model_id="openrelay/gemma-4-31b").cost_usd(
            o.input_tokens, o.output_tokens
        )
        for o in GenerationOutput.objects.filter(job=job)
    )
    assert abs(job.cost_usd - live_price / 2) <= Decimal("0.000004")  # micro-USD per call
    assert [o["custom_id"] for o in lines(client, batch.output_file_id)] == ["b-1", "b-2"]


def test_the_job_underneath_shows_on_the_generation_pages(world):
    client = world["client"]
    content = "\n".join(
        [row("g-1"), row("g-2", body_extra={"temperature": 0.3, "max_tokens": 50})]
    ).encode()
    uploaded = client.files.create(file=("g.jsonl", content), purpose="batch")
    batch = run_file(client, uploaded.id, extra_body={"budget_usd": "5", "live": True})
    assert batch.to_dict()["budget_usd"] == "5.0000"
    job = GenerationJob.objects.get(pk=batch.job_id)
    assert job.mode == "live" and str(job.budget_usd) == "5.0000"
    temperatures = dict(
        GenerationOutput.objects.filter(job=job).values_list("item__item_id", "temperature")
    )
    assert temperatures == {"g-1": None, "g-2": 0.3}
    browser = Client()
    browser.force_login(world["user"])
    for path in (
        f"/generation/jobs/{job.pk}",
        f"/generation/jobs/{job.pk}/outputs",
        f"/generation/jobs/{job.pk}/statistics",
        "/generation/",
    ):
        page = browser.get(path)
        assert page.status_code == 200, path
    assert (
        "Each row&#x27;s own messages" in browser.get(f"/generation/jobs/{job.pk}").content.decode()
    )
    api = Client(HTTP_AUTHORIZATION=f"Bearer {world['key']}")
    for path in (
        f"/api/generation/jobs/{job.pk}",
        f"/api/generation/jobs/{job.pk}/outputs",
        f"/api/generation/jobs/{job.pk}/statistics",
    ):
        assert api.get(path).status_code == 200, path
    exported = api.post(f"/api/generation/jobs/{job.pk}/export/csv")
    assert exported.status_code == 200
    assert b"g-2" in b"".join(exported.streaming_content)


def test_rows_go_to_each_providers_wire_format(world, fake_provider, team_a):
    for kind, model_id in (("anthropic", "claude-fake"), ("gemini", "gemini-fake")):
        connection = ProviderConnection.objects.create(
            team=team_a, name=kind, kind=kind, base_url=fake_provider.url
        )
        LLMModel.objects.create(connection=connection, model_id=model_id, display_name=kind)
    turns = [
        {"role": "system", "content": "You judge answers."},
        {"role": "user", "content": "Here is the first answer."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": [{"type": "text", "text": 'Score it 1-5 as {"score"}.'}]},
    ]

    def line(custom_id, model, **body):
        return json.dumps(
            {
                "custom_id": custom_id,
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": model, "messages": turns, **body},
            }
        )

    content = "\n".join(
        [
            line("to-anthropic", "claude-fake"),
            line("to-gemini", "gemini-fake", temperature=0),
            line("to-openai", "openrelay/gemma-4-31b", top_p=0.5),
            line("anthropic-top-p", "claude-fake", top_p=0.5),  # OpenAI's parameter: refused
            line("a-tool", "claude-fake", tools=[{"type": "function"}]),
            json.dumps(
                {
                    "custom_id": "image",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {
                        "model": "claude-fake",
                        "messages": [{"role": "user", "content": [{"type": "image_url"}]}],
                    },
                }
            ),
            line("nan", "claude-fake", temperature=float("nan")),  # json.dumps writes NaN
        ]
    ).encode()
    client = world["client"]
    uploaded = client.files.create(file=("w.jsonl", content), purpose="batch")
    batch = run_file(client, uploaded.id)
    done = {o["custom_id"] for o in lines(client, batch.output_file_id)}
    assert done == {"to-anthropic", "to-gemini", "to-openai"}
    calls = fake_provider.app.calls
    assert any("messages" in route for route in calls) and any("gemini" in r for r in calls)
    errors = {e["custom_id"]: e["error"] for e in lines(client, batch.error_file_id)}
    assert errors["anthropic-top-p"]["code"] == "invalid_request"
    assert "top_p" in errors["anthropic-top-p"]["message"]
    assert "tools" in errors["a-tool"]["message"]
    assert "only text parts" in errors["image"]["message"]
    assert errors[None]["code"] == "invalid_json"  # NaN is not JSON: no custom_id read


def test_the_upload_limits(world):
    from django.test import override_settings

    client = world["client"]
    many = "\n".join(row(f"r{n}") for n in range(4)).encode()
    with (
        override_settings(JUDGE_FILE_MAX_LINES=3),
        pytest.raises(BadRequestError, match="over 3 requests"),
    ):
        client.files.create(file=("m.jsonl", many), purpose="batch")
    with (
        override_settings(JUDGE_FILE_MAX_BYTES=100),
        pytest.raises(BadRequestError, match="the limit is 100"),
    ):
        client.files.create(file=("m.jsonl", many), purpose="batch")
    assert not JudgeFile.objects.exists() and not JudgeFileLine.objects.exists()
    # The judge files upload has its own wall, above the other requests' (the same server).
    with override_settings(REQUEST_MAX_BYTES=1000, JUDGE_FILE_MAX_BYTES=10**6):
        assert client.files.create(file=("m.jsonl", many), purpose="batch").bytes == len(many)
        api = Client(HTTP_AUTHORIZATION=f"Bearer {world['key']}")
        body = {"name": "x" * 2000}  # JSON: a multipart body has the uploads' wall
        assert api.post("/api/tokens", body, content_type="application/json").status_code == 413
    # A line over the line limit is kept cut, and refused with its line number.
    with override_settings(JUDGE_FILE_MAX_LINE_BYTES=600):
        long = row("long", body_extra={"stop": ["x" * 1000]})
        content = "\n".join([row("short"), long, row("after")]).encode()
        uploaded = client.files.create(file=("l.jsonl", content), purpose="batch")
    batch = run_file(client, uploaded.id)
    assert [o["custom_id"] for o in lines(client, batch.output_file_id)] == ["short", "after"]
    [error] = lines(client, batch.error_file_id)
    assert error["line"] == 2 and error["error"]["code"] == "line_too_long"


def test_hostile_lines_replies_and_ids_are_refused_not_500s(world, fake_provider):
    """NUL characters, unpaired surrogates, numbers no database stores and deep nesting:
    in a line they refuse that line; in a reply they are read as a flagged verdict; in an id
    or a query they are a 404 or a 400. Nothing is a 500, on SQLite and PostgreSQL."""
    client = world["client"]
    content = "\n".join(
        [
            row("nul-in-stop", body_extra={"stop": "\\u0000"}).replace("\\\\u0000", "\\u0000"),
            row("huge-seed", body_extra={"seed": 10**30}),
            row("bad-key", body_extra={"\u0000": 1}),
            '{"custom_id": "\\ud800", "method": "POST"}',
            "[" * 5000 + "]" * 5000,
            row("fine"),
        ]
    ).encode()
    uploaded = client.files.create(file=("h.jsonl", content), purpose="batch")
    batch = run_file(client, uploaded.id)
    assert batch.status == "completed" and batch.request_counts.completed == 1
    errors = lines(client, batch.error_file_id)
    assert [e["line"] for e in errors] == [1, 2, 3, 4, 5]
    assert all(e["error"]["code"] in ("invalid_request", "invalid_json") for e in errors)
    # A reply no database could store as it is still makes a verdict (flagged or cleaned).
    from evaluations.judgefiles.services import JudgeFileResults

    job = GenerationJob.objects.get(pk=batch.job_id)
    output = GenerationOutput.objects.get(job=job)
    for reply in ('{"score": 4, "rationale": "a \\u0000 b", "x": "\\ud800"}',
                  '{"score": 1' + "0" * 400 + "}", "[" * 3000 + "]" * 3000):  # fmt: skip
        GenerationOutput.objects.filter(pk=output.pk).update(content=reply)
        JudgeFileResults().recorded(job.pk, [output.pk])
        verdict = JudgeVerdict.objects.get(output=output)
        assert "\x00" not in verdict.rationale and verdict.score in (None, 4.0)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {world['key']}")
    assert api.get("/v1/batches/%00").status_code == 404
    assert api.get("/v1/files/%00/content").status_code == 404
    assert api.get("/api/judge-files/%00/verdicts").status_code == 404
    assert api.get("/v1/batches?after=%00").status_code == 400
    named = api.post(
        "/v1/batches", "{}", content_type="application/json", HTTP_OPENAI_ORGANIZATION="\x00"
    )
    assert named.status_code == 400 and "organization" in named.json()["error"]["message"]
    deep = "[" * 5000 + "]" * 5000
    assert api.post("/v1/batches", deep, content_type="application/json").status_code == 400
    odd = api.post(
        "/v1/batches",
        {"input_file_id": "\x00", "endpoint": "/v1/chat/completions", "completion_window": []},
        content_type="application/json",
    )
    assert odd.status_code == 400 and odd.json()["error"]["type"] == "invalid_request_error"
    browser = Client()
    browser.force_login(world["user"])
    assert browser.get(f"/judge-files/{batch.id}?q=%00").status_code == 200
    assert browser.get(f"/judge-files/{batch.id}/compare?other=a/b").status_code == 404


def test_a_rows_earlier_turns_count_in_its_budget_reservation(world):
    from evalplatform.providers.llm.types import LLMRequest
    from generation.cells import reservation

    model = LLMModel.objects.get(model_id="openrelay/gemma-4-31b")
    alone = LLMRequest(model="m", user="Score it.", max_tokens=10)
    history = LLMRequest(
        model="m", user="Score it.", max_tokens=10, turns=(("user", "word " * 50_000),)
    )
    assert reservation(history, model) > reservation(alone, model) * 100


def test_a_batch_for_a_scenario_judge_records_its_judgments(world, fake_provider, team_a):
    from evaluations.judges import services as judges
    from evaluations.models import Judgment
    from scenarios.models import Task
    from tests.helpers.evaluations import make_scenario

    fake_provider.config.reply = lambda request: '{"winner": "A", "rationale": "First."}'
    user = world["user"]
    scenario = make_scenario({"manager": user}, team_a, "comparison", {"ties": False})
    model = LLMModel.objects.get(model_id="openrelay/gemma-4-31b")
    judge = judges.judge_create(user=user, scenario=scenario, data={"name": "F", "model": model.pk})
    tasks = list(Task.objects.filter(scenario=scenario).order_by("position"))

    def judged(custom_id, **metadata):
        return json.dumps(json.loads(row(custom_id)) | {"metadata": metadata})

    content = "\n".join(
        [
            *(judged(f"t{t.pk}", task=t.pk) for t in tasks),
            judged("swapped", task=tasks[0].pk, swapped=True),
            judged("elsewhere", task=10**6),
            row("no-task"),
        ]
    ).encode()
    client = world["client"]
    uploaded = client.files.create(file=("j.jsonl", content), purpose="batch")

    batch = run_file(client, uploaded.id, extra_body={"judge": judge.pk})
    assert batch.to_dict()["judge"] == judge.pk
    assert batch.request_counts.completed == len(tasks) + 1
    codes = {e["custom_id"]: e["error"]["code"] for e in lines(client, batch.error_file_id)}
    assert codes == {"elsewhere": "unknown_task", "no-task": "unknown_task"}
    made = Judgment.objects.filter(judge=judge)
    assert made.count() == len(tasks) + 1
    first = made.get(task=tasks[0], swapped=False)
    assert first.payload == {"winner": "A"} and first.rationale == "First."
    assert first.presented == [tasks[0].variant_a_id, tasks[0].variant_b_id]
    assert made.get(task=tasks[0], swapped=True).presented == first.presented[::-1]
    # The analytics count the judge's judgments like any judge's.
    analytics = Client(HTTP_AUTHORIZATION=f"Bearer {world['key']}").get(
        f"/api/scenarios/{scenario.pk}/analytics?resamples=0&raters=all"
    )
    assert analytics.json()["judges"][0]["judgments"] == len(tasks) + 1
    # The same file again replaces the judge's judgments of those calls, not adds to them.
    run_file(client, uploaded.id, extra_body={"judge": judge.pk})
    assert Judgment.objects.filter(judge=judge).count() == len(tasks) + 1
    # Another team's judge, or one the user may not run, cannot be named.
    other = client.files.create(file=("o.jsonl", row("x").encode()), purpose="batch")
    with pytest.raises(BadRequestError, match="judge"):
        client.batches.create(
            input_file_id=other.id, endpoint="/v1/chat/completions", completion_window="24h",
            extra_body={"judge": 10**6},
        )  # fmt: skip


def test_a_finished_batch_whose_job_runs_again_delivers_its_new_replies(world, fake_provider):
    from generation import services as generation

    client = world["client"]
    content = "\n".join([row("ok"), row("retry-me", model="broken-judge")]).encode()
    uploaded = client.files.create(file=("r.jsonl", content), purpose="batch")
    batch = run_file(client, uploaded.id)
    assert (batch.request_counts.completed, batch.request_counts.failed) == (1, 1)
    old_error_file = batch.error_file_id
    # The broken connection is mended, and the job's failed cell retried from the job's side.
    ProviderConnection.objects.filter(name="broken").update(base_url=fake_provider.url)
    job = GenerationJob.objects.get(pk=batch.job_id)
    generation.job_retry_failed(user=world["user"], job=job)
    batch = wait(client, batch.id)
    assert batch.status == "completed"
    assert (batch.request_counts.completed, batch.request_counts.failed) == (2, 0)
    assert {o["custom_id"] for o in lines(client, batch.output_file_id)} == {"ok", "retry-me"}
    assert batch.error_file_id is None
    with pytest.raises(NotFoundError):
        client.files.retrieve(old_error_file)


def test_the_regression_report_leaves_out_an_untrusted_judges_batches(
    world, fake_provider, team_a, member
):
    """A judge-file batch run for a scenario judge that always answers "A" (each task in
    both orders: every pair flips) falls below a gate on the flip rate: its batches' verdicts
    leave the regression report until a manager opts the judge in."""
    from evaluations.judges import services as judges
    from scenarios.models import Task
    from tests.helpers.evaluations import make_scenario

    fake_provider.config.reply = lambda request: '{"winner": "A", "rationale": "First."}'
    user = world["user"]
    scenario = make_scenario({"manager": user}, team_a, "comparison", {"ties": False})
    model = LLMModel.objects.get(model_id="openrelay/gemma-4-31b")
    judge = judges.judge_create(user=user, scenario=scenario, data={"name": "F", "model": model.pk})
    tasks = list(Task.objects.filter(scenario=scenario).order_by("position"))

    def judged(custom_id, **metadata):
        return json.dumps(json.loads(row(custom_id)) | {"metadata": metadata})

    content = "\n".join(
        line
        for t in tasks
        for line in (judged(f"t{t.pk}", task=t.pk), judged(f"s{t.pk}", task=t.pk, swapped=True))
    ).encode()
    client = world["client"]
    uploaded = client.files.create(file=("j.jsonl", content), purpose="batch")
    first = run_file(client, uploaded.id, extra_body={"judge": judge.pk})
    second = run_file(client, uploaded.id, extra_body={"judge": judge.pk})
    manager = token_create(user=member(team_a, Role.MANAGER), name="m")[1]
    api = Client(HTTP_AUTHORIZATION=f"Bearer {manager}")
    url = f"/api/judge-files/{first.id}/compare/{second.id}"
    assert api.get(url).json()["summary"]["rows_both"] == 2 * len(tasks)
    gate = api.put(
        f"/api/scenarios/{scenario.pk}/trust-gate",
        {"max_flip_rate": 0.1},
        content_type="application/json",
    )
    assert gate.status_code == 200, gate.json()
    analytics = api.get(f"/api/scenarios/{scenario.pk}/analytics?resamples=0").json()
    card = analytics["judge_cards"][0]
    assert card["flip_rate"]["rate"] == 1.0 and card["trust"]["state"] == "untrusted"
    summary = api.get(url).json()["summary"]
    assert summary["excluded"] == ["a", "b"] and summary["rows_both"] == 0
    assert summary["trust"]["a"]["state"] == "untrusted"
    api.post(
        f"/api/judges/{judge.pk}/trust-opt-in",
        {"include_untrusted": True, "reason": "checked"},
        content_type="application/json",
    )
    summary = api.get(url).json()["summary"]
    assert summary["excluded"] == [] and summary["rows_both"] == 2 * len(tasks)


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "a PNG image"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "a PDF document"),
        (b"PK\x03\x04\x14\x00\x06\x00", "a ZIP archive (or an Office document)"),
        ('{"custom_id": "a"}\n'.encode("utf-16"), "text in UTF-16 (save it as UTF-8)"),
        (bytes(200) + b'{"custom_id": "a"}', "a binary file"),
    ],
)
def test_a_file_that_is_no_text_is_refused_by_name(world, content, kind):
    client = world["client"]
    with pytest.raises(BadRequestError) as refused:
        client.files.create(file=("upload.jsonl", content), purpose="batch")
    assert f"This is {kind}, not JSON lines" in refused.value.message
    assert not JudgeFile.objects.exists()
