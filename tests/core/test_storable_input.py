# ruff: noqa: E501 -- the table of cases reads best one case a line
"""Issue 19's bad inputs, each a 400 naming the field with nothing written, on SQLite and
PostgreSQL alike: numbers past what a column holds, text PostgreSQL refuses (NUL), and JSON
nested past ``JSON_MAX_DEPTH``, in bodies, uploads and pages' forms."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from evaluations.models import Judgment, LLMJudge
from generation.models import GenerationJob
from scenarios.models import Scenario
from tests.helpers.fuzz import World

# The fuzz test's seeded team: ``fuzz_world`` (tests/core/conftest.py).

ROWS = "\n".join(json.dumps({"item_id": "q", "variant_id": v, "content": v}) for v in "ab")


def _job(w: World, **changes):
    rows = [{"id": "a", "content": "x"}]
    return {
        "team": "fuzz",
        "name": "J",
        "source": {"type": "manual", "format": "json", "content": json.dumps(rows)},
        "prompt_versions": [w.ids["version"][0]],
        "models": [w.ids["model"][0]],
        "temperatures": [0.0],
        **changes,
    }


def _upload_job(w: World, name: str, raw: bytes):
    config = {k: v for k, v in _job(w).items() if k != "source"}
    return {"config": json.dumps(config), "file": SimpleUploadedFile(name, raw)}


def _upload_scenario(name: str, raw: bytes):
    config = {"team": "fuzz", "name": "S", "type": "comparison"}
    return {"config": json.dumps(config), "file": SimpleUploadedFile(name, raw)}


def _scenario(**changes):
    return {"team": "fuzz", "name": "S", "type": "comparison", "format": "jsonl"} | {
        "content": ROWS,
        **changes,
    }


def _rating(anchors):
    dims = [{"name": "q", "min": 1, "max": 5, "anchors": anchors}]
    one = json.dumps({"item_id": "q", "variant_id": "a", "content": "x"})
    return _scenario(type="rating", config={"dimensions": dims}, content=one)


J = "/api/scenarios/{scenario}/judges"
SUBMIT = "/api/evaluations/assignments/{assignment}/submit"
# (case, URL, body (a function of the world), format, the field the 400 names)
CASES = [
    ("judge budget 1e20", J, lambda w: {"name": "J", "model": w.ids["model"][0], "budget_usd": "1e20"}, "json", "budget_usd"),
    ("judge max_tokens 10**20", J, lambda w: {"name": "J", "model": w.ids["model"][0], "max_tokens": 10**20}, "json", "max_tokens"),
    ("judge max_tokens 5e9", J, lambda w: {"name": "J", "model": w.ids["model"][0], "max_tokens": 5e9}, "json", "max_tokens"),
    ("job max_tokens 5e9", "/api/generation/jobs", lambda w: _job(w, max_tokens=5e9), "json", "max_tokens"),
    ("judge name NUL", J, lambda w: {"name": "J\x00", "model": w.ids["model"][0]}, "json", "name"),
    ("judge params NUL", J, lambda w: {"name": "J", "model": w.ids["model"][0], "params": {"stop": "\x00"}}, "json", "params.stop"),
    ("job content NUL", "/api/generation/jobs", lambda w: _job(w, source={"type": "manual", "format": "json", "content": '[{"content": "x\\u0000"}]'}), "json", "items[0].content"),
    ("job JSON upload NUL", "/api/generation/jobs", lambda w: _upload_job(w, "x.json", b'[{"id": "a", "content": "x\\u0000"}]'), "multipart", "items[0].content"),
    ("job CSV upload NUL", "/api/generation/jobs", lambda w: _upload_job(w, "x.csv", b"id,content\na,x\x00y\n"), "multipart", "line 2.content"),
    ("scenario JSONL upload NUL", "/api/scenarios", lambda w: _upload_scenario("x.jsonl", ROWS.replace('"a"}', '"a\\u0000"}').encode()), "multipart", "line 1.content"),
    ("scenario CSV upload NUL", "/api/scenarios", lambda w: _upload_scenario("x.csv", b"item_id,variant_id,content\nq,a,x\x00\nq,b,y\n"), "multipart", "line 2.content"),
    ("scenario content NUL", "/api/scenarios", lambda w: _scenario(content=ROWS.replace('"a"}', '"a\\u0000"}')), "json", "line 1.content"),
    ("scenario name NUL", "/api/scenarios", lambda w: _scenario(name="S\x00"), "json", "name"),
    ("scenario instructions NUL", "/api/scenarios", lambda w: _scenario(instructions="\x00"), "json", "instructions"),
    ("scenario config lone surrogate", "/api/scenarios", lambda w: _rating({"1": "\ud800"}), "json", "config.dimensions[0].anchors.1"),
    ("rubric anchor key ²", "/api/scenarios", lambda w: _rating({"²": "two"}), "json", "config.dimensions[0].anchors"),
    ("scenario seed 10**20", "/api/scenarios", lambda w: _scenario(seed=10**20), "json", "seed"),
    ("rationale NUL", SUBMIT, lambda w: {"answer": {"winner": "A"}, "rationale": "r\x00"}, "json", "rationale"),
    ("comment NUL", SUBMIT, lambda w: {"answer": {"winner": "A"}, "comment": "c\x00"}, "json", "comment"),
    ("time_spent_ms 10**20", SUBMIT, lambda w: {"answer": {"winner": "A"}, "time_spent_ms": 10**20}, "json", "time_spent_ms"),
    ("model context_window 5e9", "/api/providers/models", lambda w: {"connection": w.ids["connection"][0], "model_id": "m2", "context_window": 5_000_000_000}, "json", "context_window"),
    ("connection rpm 5e9", "/api/providers/connections", lambda w: {"team": "fuzz", "name": "c", "kind": "mock", "requests_per_minute": 5_000_000_000}, "json", "requests_per_minute"),
    ("invitation email NUL", "/api/scenarios/{scenario}/invitations", lambda w: {"emails": ["a\x00@example.org"]}, "json", "emails[0]"),
    ("template name NUL form", "/api/prompts/templates", lambda w: {"team": "fuzz", "name": "T\x00"}, "multipart", "name"),
]  # fmt: skip


def _counts():
    return (
        GenerationJob.objects.count(),
        Scenario.objects.count(),
        LLMJudge.objects.count(),
        Judgment.objects.count(),
    )


@pytest.fixture
def client(fuzz_world):
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Token {fuzz_world.key}")
    return client


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "make", "fmt", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_bad_value_is_a_400_naming_it_and_writes_nothing(
    fuzz_world, client, url, make, fmt, field
):
    ids = fuzz_world.ids
    url = url.format(scenario=ids["scenario"][0], assignment=ids["assignment"][1])
    before = _counts()
    body = make(fuzz_world)
    if fmt == "json":  # as Python's json writes it: "\ud800" escaped
        response = client.post(url, json.dumps(body), content_type="application/json")
    else:
        response = client.post(url, body, format=fmt)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"], response.json()
    assert _counts() == before


@pytest.mark.django_db
@pytest.mark.parametrize("body", ["[" * 100_000, '{"a":' * 50_000, "[" * 65 + "]" * 65])
def test_a_body_nested_too_deeply_is_a_400(fuzz_world, client, body):
    url = f"/api/scenarios/{fuzz_world.ids['scenario'][0]}/judges"
    response = client.post(url, body, content_type="application/json")
    assert response.status_code == 400
    [messages] = response.json()["errors"].values()
    assert messages == ["Nested more than 64 levels deep."]
    # 64 levels are fine (and then the service judges the body).
    fine = client.post(url, "[" * 64 + "]" * 64, content_type="application/json")
    assert fine.status_code == 400 and "body" not in fine.json().get("errors", {})


@pytest.mark.django_db
@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_numbers_json_cannot_hold_are_named(fuzz_world, client, token):
    url = f"/api/judges/{fuzz_world.ids['judge'][1]}/run"
    response = client.post(url, f'{{"budget_usd": {token}}}', content_type="application/json")
    assert response.status_code == 400
    assert response.json()["errors"] == {"budget_usd": ["A finite number (not NaN or Infinity)."]}


@pytest.mark.django_db
def test_an_uploaded_row_nested_too_deeply_is_a_400(fuzz_world, client):
    deep = json.dumps([{"id": "a", "content": "x", "extra": [[[[0]]]] * 1}])
    deep = '[{"id": "a", "content": "x", "extra": ' + "[" * 70 + "]" * 70 + "}]"
    response = client.post(
        "/api/generation/jobs", _upload_job(fuzz_world, "x.json", deep.encode()), format="multipart"
    )
    assert response.status_code == 400
    assert "Nested more than 64" in response.json()["errors"]["items[0].extra" + "[0]" * 63][0]


@pytest.mark.django_db
def test_a_page_form_with_nul_is_a_400_naming_the_field(fuzz_world):
    from django.contrib.auth import get_user_model

    page = Client(raise_request_exception=False)
    page.force_login(get_user_model().objects.get(username="fuzz-admin"))
    scenario = fuzz_world.ids["scenario"][0]
    assignment = fuzz_world.ids["assignment"][1]
    before = _counts()
    response = page.post(
        f"/evaluate/tasks/{assignment}", {"winner": "A", "rationale": "r\x00", "scenario": scenario}
    )
    assert response.status_code == 400
    assert "rationale" in response.content.decode() and "NUL" in response.content.decode()
    assert _counts() == before
