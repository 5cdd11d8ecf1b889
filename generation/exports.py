"""Streamed exports (memory stays flat whatever the job's size), shared by the API and admin."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse

from evalplatform.api.uploads import download
from generation import selectors
from generation.models import GenerationJob

FLUSH_BYTES = 64 * 1024


def csv_chunks(job: GenerationJob) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(selectors.CSV_COLUMNS)
    for row in selectors.export_rows(job):
        writer.writerow(row)
        if buffer.tell() > FLUSH_BYTES:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def json_chunks(job: GenerationJob, head: dict[str, Any]) -> Iterator[str]:
    yield '{"job": ' + json.dumps(head | {"config": job.config}, default=str) + ', "outputs": ['
    first = True
    for record in selectors.export_records(job):
        yield ("" if first else ",") + json.dumps(record, default=str)
        first = False
    yield "]}"


def csv_response(job: GenerationJob) -> StreamingHttpResponse:
    return download(csv_chunks(job), "text/csv; charset=utf-8", f"generation-job-{job.pk}.csv")


def json_response(job: GenerationJob, head: dict[str, Any]) -> StreamingHttpResponse:
    return download(json_chunks(job, head), "application/json", f"generation-job-{job.pk}.json")
