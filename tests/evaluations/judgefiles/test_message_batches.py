"""Anthropic's Message Batches API as the platform serves it, with the official ``anthropic``
SDK over real HTTP (the live server) and the project's fake provider behind it: the
essay-scoring activity's own requests and reading of the results, bad requests, another
team, a viewer, and Anthropic-shaped lines uploaded as a judge file."""

from __future__ import annotations

import json
import re
import statistics
import time

import anthropic
import pytest
from django.test import Client
from scipy import stats as sps

from evalplatform.accounts.roles import Role
from evalplatform.accounts.services import token_create
from evalplatform.providers.models import LLMModel, ProviderConnection
from evaluations.models import JudgeBatch

pytestmark = pytest.mark.django_db(transaction=True)

RUBRIC = (
    "You are scoring a student essay. Score content, organization and language, each 1-4, "
    "with a one-sentence justification each, and their total. Return only JSON with the "
    "fields content_score, content_justification, organization_score, "
    "organization_justification, language_score, language_justification, total_score."
)
ESSAYS = [
    f"Essay {i}. " + "Libraries matter because they lend books and teach. " * (1 + 2 * i)
    for i in range(10)
]


@pytest.fixture
def claude(world, fake_provider):
    """An Anthropic connection (to the fake provider) and its model, in the world's team."""
    team = world["user"].memberships.first().team
    connection = ProviderConnection.objects.create(
        team=team, name="anthropic", kind="anthropic", base_url=fake_provider.url
    )
    LLMModel.objects.create(
        connection=connection,
        model_id="claude-sonnet-4-5",
        display_name="Claude Sonnet 4.5",
        input_price_per_mtok=3,
        output_price_per_mtok=15,
    )
    return anthropic.Anthropic(base_url=world["url"], api_key=world["key"], max_retries=0)


def requests(n_reps, temperature=None):
    """The activity's ``create_multi_rep_requests``: n_reps calls per essay."""
    made = []
    for i, essay in enumerate(ESSAYS):
        for rep in range(1, n_reps + 1):
            params = {
                "model": "claude-sonnet-4-5",
                "max_tokens": 1024,
                "system": RUBRIC,
                "messages": [{"role": "user", "content": essay}],
            }
            if temperature is not None:
                params["temperature"] = temperature
            made.append({"custom_id": f"essay_{i}_rep_{rep}", "params": params})
    return made


def ended(client, batch_id, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        batch = client.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended":
            return batch
        assert time.monotonic() < deadline, batch.processing_status
        time.sleep(0.1)


def parse_scores(text):
    """The activity's ``parse_scores``: the fences stripped, the JSON read."""
    clean = re.sub(r"```json|```", "", text).strip()
    start = clean.find("{")
    return json.loads(clean[start : clean.rfind("}") + 1])


def scores_by_essay(client, batch_id):
    found = {}
    for line in client.messages.batches.results(batch_id):
        assert line.result.type == "succeeded", line
        scores = parse_scores(line.result.message.content[0].text)
        essay = line.custom_id.split("_")[1]
        found.setdefault(essay, []).append(scores)
    return found


def test_the_essay_activity_runs_through_the_anthropic_sdk(world, claude):
    default = claude.messages.batches.create(requests=requests(20))
    assert default.type == "message_batch" and default.processing_status == "in_progress"
    assert default.request_counts.processing + default.request_counts.succeeded == 200
    low = claude.messages.batches.create(requests=requests(20, temperature=0))
    finished = ended(claude, default.id)
    assert finished.request_counts.succeeded == 200 and finished.request_counts.errored == 0
    assert finished.results_url.endswith(f"/v1/messages/batches/{default.id}/results")
    ended(claude, low.id)
    default_scores = scores_by_essay(claude, default.id)
    low_scores = scores_by_essay(claude, low.id)
    assert len(default_scores) == len(low_scores) == 10
    fields = {"content", "organization", "language"}
    for essay, replies in default_scores.items():
        assert len(replies) == 20
        for reply in replies:
            assert sum(reply[f"{f}_score"] for f in fields) == reply["total_score"]
            assert all(reply[f"{f}_justification"] for f in fields)
        # At temperature 0 every call gives the same scores: SD 0 on every field.
        for field in (*(f"{f}_score" for f in fields), "total_score"):
            assert statistics.pstdev(r[field] for r in low_scores[essay]) == 0
    spread = [statistics.stdev(r["total_score"] for r in v) for v in default_scores.values()]
    assert max(spread) > 0  # the default temperature samples
    means = {
        name: {e: statistics.fmean(r["total_score"] for r in v) for e, v in found.items()}
        for name, found in (("default", default_scores), ("low", low_scores))
    }
    keys = sorted(means["default"])
    rho = sps.spearmanr([means["default"][k] for k in keys], [means["low"][k] for k in keys])
    assert rho.statistic > 0.5  # the same essays lead in both conditions
    # The same batch is a judge file's: its job ran at the batch price.
    batch = JudgeBatch.objects.get(public_id=default.id)
    assert batch.status == "completed" and batch.job.outputs.count() == 200
    listed = claude.messages.batches.list(limit=1)
    assert [b.id for b in listed.data] == [low.id] and listed.has_more
    after = claude.messages.batches.list(limit=5, after_id=low.id)
    assert [b.id for b in after.data] == [default.id]


def test_requests_that_cannot_run_are_errored_results(world, claude):
    made = claude.messages.batches.create(
        requests=[
            {
                "custom_id": "ok",
                "params": {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 50,
                    "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                },
            },
            {
                "custom_id": "image",
                "params": {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 50,
                    "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}],
                },
            },
            {
                "custom_id": "nobody",
                "params": {
                    "model": "claude-nowhere",
                    "max_tokens": 50,
                    "messages": [{"role": "user", "content": "Hi"}],
                },
            },
            {
                "custom_id": "hot",
                "params": {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 50,
                    "temperature": 7,
                    "messages": [{"role": "user", "content": "Hi"}],
                },
            },
        ]
    )
    batch = ended(claude, made.id)
    assert (batch.request_counts.succeeded, batch.request_counts.errored) == (1, 3)
    results = {r.custom_id: r.result for r in claude.messages.batches.results(made.id)}
    assert results["ok"].type == "succeeded"
    errors = {k: v.error.error for k, v in results.items() if v.type == "errored"}
    assert errors["image"].type == "invalid_request_error"
    assert errors["image"].message == (
        "params.messages[0].content[0]: only text parts are supported."
    )
    assert "params.model: the team has no active model 'claude-nowhere'" in errors["nobody"].message
    assert errors["hot"].message == "params.temperature: a number from 0 to 2."


def test_bad_bodies_other_teams_and_viewers(world, claude, member, team_b, live_server):
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.batches.create(requests=[])
    assert refused.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.BadRequestError):
        claude.messages.batches.create(requests=[{"custom_id": "x"}])
    assert not JudgeBatch.objects.exists()  # nothing was written
    made = claude.messages.batches.create(requests=requests(1)[:2])
    ended(claude, made.id)
    JudgeBatch.objects.filter(public_id=made.id).update(status="in_progress")
    with pytest.raises(anthropic.AnthropicError, match="results_url"):
        list(claude.messages.batches.results(made.id))  # the SDK asks only once it ended
    raw = Client(HTTP_X_API_KEY=world["key"]).get(f"/v1/messages/batches/{made.id}/results")
    assert raw.status_code == 400 and raw.json()["error"]["type"] == "invalid_request_error"
    JudgeBatch.objects.filter(public_id=made.id).update(status="completed")
    stranger = anthropic.Anthropic(
        base_url=live_server.url,
        api_key=token_create(user=member(team_b, Role.MANAGER), name="x")[1],
        max_retries=0,
    )
    with pytest.raises(anthropic.NotFoundError):
        stranger.messages.batches.retrieve(made.id)
    assert stranger.messages.batches.list().data == []
    team_a = world["user"].memberships.first().team
    viewer = anthropic.Anthropic(
        base_url=live_server.url,
        api_key=token_create(user=member(team_a, Role.VIEWER), name="v")[1],
        max_retries=0,
    )
    assert viewer.messages.batches.retrieve(made.id).processing_status == "ended"
    with pytest.raises(anthropic.PermissionDeniedError):
        viewer.messages.batches.create(requests=requests(1)[:1])
    with pytest.raises(anthropic.PermissionDeniedError):
        viewer.messages.batches.cancel(made.id)
    wrong = anthropic.Anthropic(base_url=live_server.url, api_key="nope", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        wrong.messages.batches.list()
    workspace = anthropic.Anthropic(
        base_url=live_server.url,
        api_key=world["key"],
        max_retries=0,
        default_headers={"anthropic-workspace-id": "team-b"},
    )
    with pytest.raises(anthropic.BadRequestError):  # not one of the user's teams
        workspace.messages.batches.create(requests=requests(1)[:1])


def test_anthropic_lines_uploaded_as_a_judge_file(world, claude):
    lines = "\n".join(json.dumps(r) for r in requests(1)[:3]).encode()
    client = world["client"]
    uploaded = client.files.create(file=("messages.jsonl", lines), purpose="batch")
    made = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 60
    while (batch := client.batches.retrieve(made.id)).status not in ("completed", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert batch.status == "completed" and batch.request_counts.completed == 3
    # The same batch read in Anthropic's shape.
    results = list(claude.messages.batches.results(made.id))
    assert {r.custom_id for r in results} == {"essay_0_rep_1", "essay_1_rep_1", "essay_2_rep_1"}
    assert all(parse_scores(r.result.message.content[0].text)["total_score"] for r in results)
