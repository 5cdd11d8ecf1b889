"""``POST /api/judge-files/estimate``: what a batch of an uploaded file would cost, before it
is submitted (issue 37, item 7: the seed's "about $23 for 50,000 rows"): rows and refusals
as a batch would read them, per model the tokens and the live and batch cost; nothing runs;
another team's file is a 404, a bad id a 400."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from evalplatform.accounts.roles import Role
from evalplatform.providers.models import LLMModel
from evaluations.models import JudgeBatch
from generation.models import GenerationJob
from tests.evaluations.judgefiles.test_judge_files import SEED
from tests.helpers.evaluations import row

pytestmark = pytest.mark.django_db(transaction=True)

ESTIMATE = "/api/judge-files/estimate"


def test_a_files_cost_before_it_is_submitted(world, team_b, member):
    client = world["client"]
    gemma = LLMModel.objects.get(model_id="openrelay/gemma-4-31b")
    gemma.supports_batch, gemma.batch_discount = True, Decimal("0.5")
    gemma.save()
    content = "\n".join(
        [*SEED, "not json", row("eval-001"), row("eval-009", model="nobody"),
         row("eval-010", body_extra={"max_tokens": 5})]
    ).encode()  # fmt: skip
    uploaded = client.files.create(file=("batch.jsonl", content), purpose="batch")
    web = Client()
    web.force_login(world["user"])
    found = web.post(ESTIMATE, {"file_id": uploaded.id}, content_type="application/json")
    assert found.status_code == 200, found.content
    body = found.json()
    assert (body["file"], body["lines"], body["rows"], body["refused"]) == (uploaded.id, 6, 3, 3)
    assert body["refusals"] == {
        "duplicate_custom_id": 1,
        "invalid_json": 1,
        "model_not_found": 1,
    }
    assert [e["line"] for e in body["examples"]] == [3, 4, 5]
    (model,) = body["models"]
    assert model["model"] == "fake/openrelay/gemma-4-31b" and model["rows"] == 3
    assert model["input_tokens"] > 0 and model["output_tokens_assumed"] > 0
    # Two rows at the typical reply, one capped at its max_tokens of 5.
    typical = (model["output_tokens_assumed"] - 5) // 2
    assert model["output_tokens_assumed"] == 2 * typical + 5 and typical > 5
    live, batch = Decimal(model["live_usd"]), Decimal(model["batch_usd"])
    assert live > 0 and batch == live / 2  # the batch discount
    assert Decimal(body["live_usd"]) == live and Decimal(body["batch_usd"]) == batch
    # Nothing ran: no batch, no job.
    assert not JudgeBatch.objects.exists() and not GenerationJob.objects.exists()
    # A bad id is a 400; another team's file a 404; a viewer may not estimate (403).
    bad = web.post(ESTIMATE, {"file_id": "../x"}, content_type="application/json")
    assert bad.status_code == 400 and "file_id" in bad.json()["errors"]
    outsider = Client()
    outsider.force_login(member(team_b, Role.CREATOR, username="other-creator"))
    other = outsider.post(ESTIMATE, {"file_id": uploaded.id}, content_type="application/json")
    assert other.status_code == 404
    viewer = Client()
    viewer.force_login(member(world["user"].memberships.first().team, Role.VIEWER, username="v"))
    seen = viewer.post(ESTIMATE, {"file_id": uploaded.id}, content_type="application/json")
    assert seen.status_code == 403


def test_the_upload_page_estimates_then_runs_the_same_file(world):
    """ "Estimate the cost first" uploads the file and shows its estimate, no batch made;
    "Run this file" then submits that file; a forged file id changes nothing."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from evaluations.models import JudgeFile

    web = Client()
    web.force_login(world["user"])
    team = world["user"].memberships.first().team
    upload = SimpleUploadedFile("seed.jsonl", "\n".join([*SEED, "not json"]).encode())
    page = web.post("/judge-files/", {"file": upload, "team": team.slug, "action": "estimate"})
    assert page.status_code == 200
    text = page.content.decode()
    assert "Estimate of file-" in text and "2 rows would run" in text and "invalid_json 1" in text
    assert not JudgeBatch.objects.exists()
    (stored,) = JudgeFile.objects.all()
    for forged in ("file-nope", "x\x00y"):
        web.post("/judge-files/", {"file_id": forged, "team": team.slug})
        assert not JudgeBatch.objects.exists()
    ran = web.post("/judge-files/", {"file_id": stored.public_id, "team": team.slug})
    assert ran.status_code == 302
    assert JudgeBatch.objects.get().input_file_id == stored.pk
