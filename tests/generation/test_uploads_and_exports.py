"""Uploads at real sizes (read as streams from Django's temporary files) and exports streamed
by the ASGI server a block at a time."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import random
import threading
import warnings
from decimal import Decimal
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.signals import request_finished
from django.test import override_settings
from django.utils import timezone

from evalplatform.accounts.services import token_create
from evalplatform.api.uploads import csv_line, csv_lines, formula_safe
from generation import planning, services
from generation.models import GenerationJob, GenerationOutput
from generation.selectors import CSV_COLUMNS
from tests.helpers.generation import job_body

JOBS = "/api/generation/jobs"


def _config(setup) -> dict[str, Any]:
    """One prompt, one model, one call per item: a job of as many cells as items."""
    body = job_body(setup, repetitions=1, temperatures=[0.0])
    body["prompt_versions"] = body["prompt_versions"][:1]
    body["models"] = body["models"][:1]
    del body["source"]
    return body


def _post(client, setup, name: str, content: bytes):
    upload = SimpleUploadedFile(name, content)
    return client.post(
        JOBS, {"config": json.dumps(_config(setup)), "file": upload}, format="multipart"
    )


@pytest.mark.django_db
def test_a_multi_megabyte_jsonl_upload_makes_a_job_and_bad_lines_are_named(api, creator, setup):
    """A file over Django's in-memory size goes to a temporary file and is read from it."""
    client = api(creator)
    lines = [json.dumps({"id": f"r{n}", "content": "río " * 800}) for n in range(1, 1001)]
    good = "\n".join(lines).encode()
    assert len(good) > 2_621_440  # FILE_UPLOAD_MAX_MEMORY_SIZE: on disk

    bad = list(lines)
    bad[6] = '{"id": "r7", "content": '
    bad[499] = "[1, 2]"
    bad[999] = json.dumps({"id": "r5", "content": "again"})
    response = _post(client, setup, "items.jsonl", "\n".join(bad).encode())
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert set(errors) == {"line 7", "line 500", "items[997].id"}, errors
    assert "Invalid JSON" in errors["line 7"][0]
    assert "must be an object" in errors["line 500"][0]
    assert "Duplicate id 'r5'" in errors["items[997].id"][0]
    assert GenerationJob.objects.count() == 0

    response = _post(client, setup, "items.jsonl", good)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["total_cells"] == 1000
    assert body["source_meta"] == {"format": "jsonl", "filename": "items.jsonl", "bytes": len(good)}
    job = GenerationJob.objects.get(pk=body["id"])
    assert list(job.items.order_by("position").values_list("item_id", flat=True)[:2]) == [
        "r1",
        "r2",
    ]
    assert job.items.get(item_id="r1000").data == {"id": "r1000", "content": "río " * 800}


@pytest.mark.django_db
def test_csv_and_json_array_uploads_name_the_bad_line_and_index(api, creator, setup):
    client = api(creator)
    rows = [["id", "content"]] + [[f"c{n}", "agua " * 200] for n in range(1, 3001)]
    rows[2500] = ["c2500", "agua", "extra"]
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    response = _post(client, setup, "items.csv", buffer.getvalue().encode())
    assert response.status_code == 400
    assert response.json()["errors"] == {"line 2501": ["3 fields; the header has 2."]}

    items: list[Any] = [{"id": f"j{n}", "content": "agua " * 200} for n in range(3000)]
    items[2222] = 42
    response = _post(client, setup, "items.json", json.dumps(items).encode())
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "items[2222]": ["An item must be an object of fields (or a string)."]
    }
    assert GenerationJob.objects.count() == 0


@pytest.mark.django_db
@override_settings(REQUEST_MAX_BYTES=2000, UPLOAD_MAX_BYTES=50_000)
def test_an_upload_has_its_own_wall_above_other_bodies(api, creator, setup):
    client = api(creator)
    content = "\n".join(json.dumps({"id": n, "content": "x" * 50}) for n in range(100)).encode()
    assert 2000 < len(content) < 50_000
    assert _post(client, setup, "items.jsonl", content).status_code == 201
    as_json = _config(setup) | {"source": {"type": "manual", "content": content.decode()}}
    response = client.post(JOBS, as_json, format="json")
    assert response.status_code == 413 and "the limit is 2,000" in response.json()["detail"]
    response = _post(client, setup, "items.jsonl", content + b"\n" + b" " * 50_000)
    assert response.status_code == 400  # under the wall, over the file's own limit
    assert "the limit is 50,000" in response.json()["errors"]["source.file"][0]


def _finished_job(user, setup, items: int) -> GenerationJob:
    data = job_body(setup, repetitions=1, temperatures=[0.0])
    data["prompt_versions"] = data["prompt_versions"][:1]
    data["source"]["content"] = json.dumps(
        [{"id": f"s{n}", "content": "x"} for n in range(items // 2)]
    )
    job = services.job_create(user=user, plan=planning.job_plan(user=user, data=data))
    GenerationOutput.objects.filter(job=job).update(
        status="completed",
        content="Rivers carry rain to the sea. " * 10,
        input_tokens=12,
        output_tokens=60,
        cost_usd="0.000100",
        processing_time_ms=850,
        completed_at=timezone.now(),
    )
    first = GenerationOutput.objects.filter(job=job).order_by("pk").first()
    assert first is not None
    first.content = '=HYPERLINK("http://example.invalid","click")'
    first.save(update_fields=["content"])
    return job


def _asgi_post(
    path: str, key: str, *, leave_after: int | None = None
) -> tuple[dict[str, Any], list[bytes], list[str]]:
    """POST through the platform's ASGI application (as uvicorn would call it): the response
    start, the body messages as they were sent, and the warnings raised meanwhile. With
    ``leave_after``, the client goes away once that many body messages have come."""
    from evalplatform.asgi import application

    messages: list[dict[str, Any]] = []

    async def drive() -> None:
        sent = False
        gone = asyncio.Event()

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await gone.wait()  # the client stays connected until then
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            messages.append(message)
            if leave_after is not None and len(messages) > leave_after:
                gone.set()
                await asyncio.sleep(0.05)  # as a socket write would wait

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"127.0.0.1"),
                (b"authorization", f"Token {key}".encode()),
                (b"content-length", b"0"),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }
        await application(scope, receive, send)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(drive())
    start, *body = messages
    chunks = [m["body"] for m in body if m.get("body")]
    if leave_after is None:
        assert body[-1] == {"type": "http.response.body"}  # the closing message
    return start, chunks, [str(w.message) for w in caught]


@pytest.mark.django_db(transaction=True)
def test_exports_stream_under_asgi_in_blocks(creator, setup):
    job = _finished_job(creator, setup, 3000)
    key = token_create(user=creator, name="export")[1]

    start, chunks, caught = _asgi_post(f"{JOBS}/{job.pk}/export/csv", key)
    assert start["status"] == 200
    assert not [w for w in caught if "must consume" in w], caught
    assert len(chunks) > 5  # ~1 MB in blocks, sent as they are made
    rows = list(csv.reader(io.StringIO(b"".join(chunks).decode())))
    assert rows[0] == CSV_COLUMNS and len(rows) == 3001
    assert rows[1][4] == '\'=HYPERLINK("http://example.invalid","click")'  # formula-safe
    assert {r[9] for r in rows[1:]} == {"completed"}

    start, chunks, caught = _asgi_post(f"{JOBS}/{job.pk}/export/json", key)
    assert start["status"] == 200
    assert not [w for w in caught if "must consume" in w], caught
    assert len(chunks) > 5
    exported = json.loads(b"".join(chunks))
    assert exported["job"]["id"] == job.pk and len(exported["outputs"]) == 3000
    # The spec's columns, then the last attempt's time (JSON only).
    assert list(exported["outputs"][0]) == [*CSV_COLUMNS, "last_attempt_ms"]


@pytest.mark.django_db(transaction=True)
def test_an_export_stops_when_its_client_goes_away(creator, setup):
    job = _finished_job(creator, setup, 3000)
    key = token_create(user=creator, name="export")[1]
    finished: list[str] = []

    def on_finished(**kwargs: Any) -> None:
        finished.append(threading.current_thread().name)

    request_finished.connect(on_finished, weak=False)
    try:
        start, chunks, _ = _asgi_post(f"{JOBS}/{job.pk}/export/csv", key, leave_after=2)
    finally:
        request_finished.disconnect(on_finished)
    assert start["status"] == 200
    # The stream stopped soon after the client left, far short of the whole file (dozens of
    # blocks), and the response was closed once, on the request's thread.
    whole = _asgi_post(f"{JOBS}/{job.pk}/export/csv", key)[1]
    assert 1 <= len(chunks) <= 4 < len(whole)
    assert len(finished) == 1 and finished[0].startswith("request")


def test_csv_lines_are_exactly_what_the_csv_writer_makes_of_formula_safe_cells():
    rng = random.Random(3)
    alphabet = ['"', ",", "\n", "\r", "\t", "=", "+", "-", "@", " ", "a", "é", "'", ";"]
    values: list[Any] = [None, 0, -1.5, Decimal("0.000512"), True, "", "plain"]
    for _ in range(2000):
        width = rng.randint(1, 5)
        row = [
            rng.choice(values)
            if rng.random() < 0.3
            else "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
            for _ in range(width)
        ]
        buffer = io.StringIO()
        csv.writer(buffer).writerow([formula_safe(v) for v in row])
        assert csv_line(row) == buffer.getvalue(), row


def test_csv_lines_written_a_column_at_a_time_are_the_lines_of_each_row():
    # The exports write a batch of rows a column at a time, passing a column of ints or of
    # strings that need no quotes nor formula guard as it is: the text must be csv_line's.
    rng = random.Random(5)
    alphabet = ['"', ",", "\n", "\r", "\t", "=", "+", "-", "@", " ", "a", "é", "'", "%"]
    kinds: list[Any] = [
        lambda: rng.randint(-5, 10**6),
        lambda: "".join(rng.choice("abc 12é") for _ in range(rng.randint(0, 6))),
        lambda: "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))),
        lambda: rng.choice([None, 0, -1.5, Decimal("-0.000512"), True, "", "=x", "a,b"]),
        lambda: Decimal(rng.randint(-(10**6), 10**6)) / 1000,
        # NULs before formula characters inside a cell: the bulk check's separator.
        lambda: "".join(rng.choice("ab\x00=-") for _ in range(rng.randint(0, 6))),
    ]
    for _ in range(300):
        width = rng.randint(1, 5)
        makers = [rng.choice(kinds) for _ in range(width)]
        rows = [[make() for make in makers] for _ in range(rng.randint(0, 20))]
        assert csv_lines(rows) == "".join(csv_line(row) for row in rows), rows


@pytest.mark.django_db
@override_settings(GENERATION_MAX_CELLS=1000)
def test_an_upload_past_the_jobs_cells_is_refused_while_it_is_read(api, creator, setup):
    """The bound is the cells per item (prompts x configurations x temperatures x
    repetitions) into the job's cap: reading stops at the first item past it, so memory
    never holds the rest of a file of many tiny items."""
    content = "\n".join(json.dumps({"id": n, "content": "x"}) for n in range(100_000)).encode()
    response = _post(api(creator), setup, "items.jsonl", content)
    assert response.status_code == 400
    [message] = response.json()["errors"]["source.file"]
    assert message.startswith("More than 1,000 items: each makes 1 cells")
    assert "a job holds at most 1,000" in message
    body = _config(setup) | {"repetitions": 4, "temperatures": [0.0, 1.0]}
    upload = SimpleUploadedFile("items.jsonl", content)
    refused = api(creator).post(
        JOBS, {"config": json.dumps(body), "file": upload}, format="multipart"
    )
    assert refused.json()["errors"]["source.file"][0].startswith("More than 125 items")
    fits = "\n".join(json.dumps({"id": n, "content": "x"}) for n in range(1000)).encode()
    assert _post(api(creator), setup, "items.jsonl", fits).status_code == 201
    assert GenerationJob.objects.count() == 1


@pytest.mark.django_db
def test_an_upload_that_is_no_text_is_refused_by_name(api, creator, setup):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from generation.models import GenerationJob
    from tests.helpers.generation import JOBS, job_body

    body = job_body(setup)
    del body["source"]
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
    response = api(creator).post(
        JOBS,
        {"config": json.dumps(body), "file": SimpleUploadedFile("items.json", png)},
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json()["errors"]["source.file"] == [
        "This is a PNG image, not JSON, JSON lines, CSV or text."
    ]
    assert not GenerationJob.objects.exists()
