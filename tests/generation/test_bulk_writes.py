"""The set-based writes behind a job's cells and a batch's results (``evalplatform.bulk``):
what they write reads back exactly as the ORM would have written it, on both databases."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import JSONField, Value
from django.utils import timezone

from evalplatform import bulk
from generation import planning, services
from generation.models import GenerationItem, GenerationOutput
from tests.helpers.generation import job_body


def _job(creator, setup, **extra):
    body = job_body(setup, **extra)
    return services.job_create(user=creator, plan=planning.job_plan(user=creator, data=body))


@pytest.mark.django_db
def test_a_new_jobs_cells_hold_the_models_defaults(creator, setup):
    before = timezone.now()
    job = _job(creator, setup, temperatures=[0.5, None])
    cells = list(job.outputs.order_by("pk"))
    assert len(cells) == job.total_cells == 3 * 2 * 2 * 2 * 2
    for cell in cells:
        assert (cell.status, cell.content, cell.attempts, cell.batch_id) == ("pending", "", 0, None)
        assert cell.cost_usd == cell.reserved_usd == Decimal(0)
        assert cell.processing_time_ms is None and cell.completed_at is None
        assert before - timedelta(seconds=1) <= cell.created_at <= timezone.now()
    assert {c.temperature for c in cells} == {0.5, None}
    items = list(job.items.order_by("position").values_list("position", "item_id", "data"))
    assert items[0] == (0, "s0", {"id": "s0", "content": "Text number 0 about rivers."})
    assert [c.item_id for c in cells[:8]] == [job.items.get(position=0).pk] * 8


@pytest.mark.django_db
def test_insert_and_update_write_every_kind_of_value(creator, setup):
    job = _job(creator, setup)
    data = {"text": 'río — "quoted", a, b\nnext', "nested": [1, 2.5, None, {"k": True}]}
    bulk.insert(
        GenerationItem,
        ["job_id", "position", "item_id", "data"],
        [(job.pk, 100, "extra-1", data), (job.pk, 101, "extra-2", {})],
    )
    assert GenerationItem.objects.get(job=job, item_id="extra-1").data == data
    assert GenerationItem.objects.get(job=job, item_id="extra-2").position == 101

    first, second, third = job.outputs.order_by("pk")[:3]
    when = datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=UTC)
    text = 'a "quoted", multi\nline — text'
    # Given out of order, as a batch's results are.
    bulk.update(
        GenerationOutput,
        ["status", "content", "cost_usd", "completed_at", "processing_time_ms", "batch_id"],
        [
            (third.pk, "completed", text, Decimal("0.000123"), when, 850, None),
            (first.pk, "failed", "", Decimal(0), None, None, None),
        ],
    )
    third.refresh_from_db()
    assert (third.status, third.content, third.cost_usd) == ("completed", text, Decimal("0.000123"))
    assert (third.completed_at, third.processing_time_ms) == (when, 850)
    first.refresh_from_db()
    assert (first.status, first.completed_at, first.processing_time_ms) == ("failed", None, None)
    untouched = GenerationOutput.objects.get(pk=second.pk)
    assert (untouched.status, untouched.content) == ("pending", "")


@pytest.mark.django_db
def test_updates_of_more_rows_than_a_chunk_all_land(creator, setup, monkeypatch):
    monkeypatch.setattr(bulk, "CHUNK", 7)
    job = _job(creator, setup)
    pks = list(job.outputs.values_list("pk", flat=True))
    assert len(pks) > 3 * bulk.CHUNK
    bulk.update(
        GenerationOutput, ["attempts", "error_kind"], [(pk, n, f"k{n}") for n, pk in enumerate(pks)]
    )
    got = dict(job.outputs.values_list("pk", "attempts"))
    assert got == {pk: n for n, pk in enumerate(pks)}
    assert set(job.outputs.values_list("error_kind", flat=True)) == {
        f"k{n}" for n in range(len(pks))
    }


@pytest.mark.django_db
def test_long_values_and_equal_json_scalars_are_written_as_given(creator, setup):
    job = _job(creator, setup)
    cells = list(job.outputs.order_by("pk"))
    # Forty replies of 400,000 characters: more than one statement's worth of text on
    # PostgreSQL (bulk.STATEMENT_BYTES), each written whole.
    texts = {c.pk: f"{c.pk}:" + "x" * 400_000 for c in cells[:40]}
    assert sum(map(len, texts.values())) > bulk.STATEMENT_BYTES
    bulk.update(GenerationOutput, ["content"], [(pk, text) for pk, text in texts.items()])
    stored = dict(GenerationOutput.objects.filter(pk__in=texts).values_list("pk", "content"))
    assert stored == texts
    # True, 1 and 1.0 are equal as keys but distinct JSON values.
    values = [True, 1, 1.0, False, 0]
    bulk.insert(
        GenerationItem,
        ["job_id", "position", "item_id", "data"],
        [(job.pk, 200 + n, f"scalar-{n}", v) for n, v in enumerate(values)],
    )
    read = [GenerationItem.objects.get(job=job, item_id=f"scalar-{n}").data for n in range(5)]
    assert [(type(v), v) for v in read] == [(type(v), v) for v in values]


@pytest.mark.django_db
def test_updates_write_awkward_text_nulls_and_json_as_given(creator, setup):
    job = _job(creator, setup)
    cells = list(job.outputs.order_by("pk")[:6])
    # Text an array literal would mistake for its own syntax, and a column of NULLs only.
    texts = ["NULL", "null", '{a,"b"}', 'back\\slash \\" quote', "", "tab\tand 'single'"]
    bulk.update(
        GenerationOutput,
        ["content", "completed_at", "reasoning_tokens", "temperature"],
        [
            (c.pk, text, None, None, 0.1 * n)
            for n, (c, text) in enumerate(zip(cells, texts, strict=True))
        ],
    )
    stored = dict(
        GenerationOutput.objects.filter(pk__in=[c.pk for c in cells]).values_list("pk", "content")
    )
    assert stored == {c.pk: text for c, text in zip(cells, texts, strict=True)}
    assert not job.outputs.filter(pk__in=stored, completed_at__isnull=False).exists()
    temperatures = dict(job.outputs.filter(pk__in=stored).values_list("pk", "temperature"))
    assert temperatures == {c.pk: 0.1 * n for n, c in enumerate(cells)}
    items = list(job.items.order_by("pk")[:3])
    data = [{"a": [1, None, "x"]}, [True, "NULL"], "plain"]
    bulk.update(GenerationItem, ["data"], [(i.pk, d) for i, d in zip(items, data, strict=True)])
    assert [GenerationItem.objects.get(pk=i.pk).data for i in items] == data
    # JSON's own null stays JSON (not SQL NULL); floats JSON has no number for still go.
    bulk.update(GenerationItem, ["data"], [(items[0].pk, Value(None, JSONField()))])
    assert GenerationItem.objects.filter(pk=items[0].pk, data__isnull=False, data=None).exists()
    odd = [math.nan, math.inf, -math.inf]
    bulk.update(
        GenerationOutput, ["temperature"], [(c.pk, t) for c, t in zip(cells, odd, strict=False)]
    )
    stored = [GenerationOutput.objects.get(pk=c.pk).temperature for c in cells[:3]]
    assert stored[1:] == [math.inf, -math.inf]
    if connection.vendor == "postgresql":  # SQLite keeps no NaN: any write stores NULL
        assert math.isnan(stored[0])
