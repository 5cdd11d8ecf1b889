"""Streamed exports (memory stays flat whatever the job's size, under WSGI and ASGI servers
alike: ``evalplatform.api.uploads.StreamedResponse``), shared by the API and admin."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from evalplatform import exporting
from evalplatform.api import uploads
from generation import selectors
from generation.models import GenerationJob


def csv_chunks(job: GenerationJob) -> Iterator[str]:
    """The spec's CSV columns (and a reply format's after them: ``selectors.csv_columns``),
    formula-safe (``uploads.csv_lines``), a batch of rows a block."""
    yield uploads.csv_line(selectors.csv_columns(job))
    for columns in selectors.export_column_batches(job):
        yield uploads.csv_column_lines(columns)


def json_chunks(job: GenerationJob, head: dict[str, Any]) -> Iterator[str]:
    """``{"job": {... "config": ...}, "outputs": [{column: value}, ...]}``, a batch of
    outputs a block: each record the text ``json.dumps(record, default=str)`` gives (a
    decimal is its string), made from the batch's values a column at a time."""
    yield '{"job": ' + json.dumps(head | {"config": job.config}, default=str) + ', "outputs": ['
    keys = selectors.json_columns(job)
    record = "{" + ", ".join(f"{json.dumps(c)}: %s" for c in keys) + "}"
    separator = ""
    for columns in selectors.export_record_column_batches(job):
        texts = [exporting.json_column(column) for column in columns]
        yield separator + ",".join([record % values for values in zip(*texts, strict=True)])
        separator = ","
    yield "]}"


def csv_response(job: GenerationJob) -> uploads.StreamedResponse:
    return uploads.download(
        csv_chunks(job), "text/csv; charset=utf-8", f"generation-job-{job.pk}.csv"
    )


def json_response(job: GenerationJob, head: dict[str, Any]) -> uploads.StreamedResponse:
    return uploads.download(
        json_chunks(job, head), "application/json", f"generation-job-{job.pk}.json"
    )
