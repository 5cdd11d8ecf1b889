from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from evalplatform.providers.models import LLMModel
from evalplatform.providers.services import DEFAULT_CATALOG, catalog_read
from tests.factories import ConnectionFactory

# The providers' published list prices (USD per 1M tokens, checked 2026-11-29).
PUBLISHED = {
    "gpt-4o": ("2.50", "10.00"),
    "gpt-4o-mini": ("0.15", "0.60"),
    "gpt-4.1": ("2.00", "8.00"),
    "gpt-4.1-mini": ("0.40", "1.60"),
    "claude-opus-5": ("5.00", "25.00"),
    "claude-sonnet-5": ("2.00", "10.00"),
    "claude-haiku-4-5": ("1.00", "5.00"),
    "gemini-2.5-flash-lite": ("0.10", "0.40"),
    "gemini-3-flash-preview": ("0.50", "3.00"),
    "gemma-4-31b": ("0.99", "1.49"),
}


def test_default_catalog_is_dated_and_holds_the_published_prices():
    catalog = catalog_read()
    assert catalog.as_of.isoformat() == "2026-11-29"
    by_id = {e.model_id: e for e in catalog.entries}
    for model_id, (inp, out) in PUBLISHED.items():
        entry = by_id[model_id]
        assert (entry.input_price_per_mtok, entry.output_price_per_mtok) == (
            Decimal(inp),
            Decimal(out),
        )
        assert entry.batch_discount == Decimal("0.5") and entry.supports_batch
    assert {e.model_id for e in catalog.for_kind("mock")} >= {"mock-small", "mock-large"}


@pytest.mark.django_db
def test_command_loads_matching_kinds_and_refreshes_prices(team_a):
    openai = ConnectionFactory(team=team_a, name="oa", kind="openai")
    mock = ConnectionFactory(team=team_a, name="mock", kind="mock")
    out = io.StringIO()
    call_command("load_model_catalog", "--team", "team-a", stdout=out)
    assert set(openai.models.values_list("model_id", flat=True)) == {
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4.1",
        "gpt-4.1-mini",
        "gemma-4-31b",
    }
    assert set(mock.models.values_list("model_id", flat=True)) >= {"mock-small"}
    first = out.getvalue()
    assert "created" in first

    edited = openai.models.get(model_id="gpt-4o")
    edited.input_price_per_mtok = Decimal("99")
    edited.display_name = "Our GPT-4o"
    edited.active = False
    edited.save()
    call_command("load_model_catalog", "--team", "team-a", "--connection", "oa", stdout=out)
    edited.refresh_from_db()
    assert edited.input_price_per_mtok == Decimal("2.5")
    assert edited.display_name == "Our GPT-4o" and edited.active is False
    assert edited.catalog_date.isoformat() == "2026-11-29"


@pytest.mark.django_db
def test_bad_catalog_and_unknown_team_fail_without_writing(team_a, tmp_path):
    ConnectionFactory(team=team_a, kind="openai")
    bad = tmp_path / "bad.json"
    data = json.loads(DEFAULT_CATALOG.read_text())
    data["models"][1]["input"] = "cheap"
    bad.write_text(json.dumps(data))
    with pytest.raises(CommandError, match=r"models\[1\]"):
        call_command("load_model_catalog", "--team", "team-a", "--file", str(bad))
    # Values the database would refuse are refused before any write.
    for field, value in (("batch_discount", "1.5"), ("output", "-2"), ("context_window", 0)):
        data = json.loads(DEFAULT_CATALOG.read_text())
        data["models"][3][field] = value
        bad.write_text(json.dumps(data))
        with pytest.raises(CommandError, match=r"models\[3\]"):
            call_command("load_model_catalog", "--team", "team-a", "--file", str(bad))
    with pytest.raises(CommandError, match="No team"):
        call_command("load_model_catalog", "--team", "nope")
    assert LLMModel.objects.count() == 0
