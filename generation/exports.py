"""Streamed exports (memory stays flat whatever the job's size, under WSGI and ASGI servers
alike: ``evalplatform.api.uploads.StreamedResponse``), shared by the API and admin."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from evalplatform.api import uploads
from generation import selectors
from generation.models import GenerationJob


def csv_chunks(job: GenerationJob) -> Iterator[str]:
    """The spec's CSV columns, formula-safe, in blocks."""
    return uploads.csv_chunks(selectors.CSV_COLUMNS, selectors.export_rows(job))


def json_chunks(job: GenerationJob, head: dict[str, Any]) -> Iterator[str]:
    """``{"job": {... "config": ...}, "outputs": [{column: value}, ...]}``, in blocks."""
    block = ['{"job": ' + json.dumps(head | {"config": job.config}, default=str) + ', "outputs": [']
    size = 0
    first = True
    for row in selectors.export_records(job):
        record = json.dumps(row, default=str)
        block.append(record if first else "," + record)
        size += len(record) + 1
        first = False
        if size >= uploads.BLOCK_BYTES:
            yield "".join(block)
            block, size = [], 0
    block.append("]}")
    yield "".join(block)


def csv_response(job: GenerationJob) -> uploads.StreamedResponse:
    return uploads.download(
        csv_chunks(job), "text/csv; charset=utf-8", f"generation-job-{job.pk}.csv"
    )


def json_response(job: GenerationJob, head: dict[str, Any]) -> uploads.StreamedResponse:
    return uploads.download(
        json_chunks(job, head), "application/json", f"generation-job-{job.pk}.json"
    )
