"""Every number the API takes is bounded alike on SQLite and PostgreSQL (issue 19).

``test_every_numeric_field_refuses_extreme_values`` walks the request bodies of every POST,
PUT and PATCH operation of ``/api/schema/`` (nested objects and arrays too), finds each
integer and number field, and sends it each extreme value (0, -1, 1e20, 10**20, NaN,
Infinity, 5e9; NaN and Infinity as the raw JSON tokens Python's ``json`` writes) in an
otherwise valid body for the operation, against the seeded team of the fuzz test: never a
5xx; a value outside the documented bounds is never accepted; an accepted one reads back
(the object's list answers 200). Each request runs in a savepoint rolled back after it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from evaluations.models import Judgment
from tests.helpers.fuzz import World, generated_schema, rolled_back

# The fuzz test's seeded team: ``fuzz_world`` (tests/core/conftest.py).

SCHEMA = generated_schema()
COMPONENTS = SCHEMA["components"]["schemas"]

# (raw JSON token, the number it stands for)
EXTREMES = [
    ("0", 0),
    ("-1", -1),
    ("1e20", 1e20),
    (str(10**20), 10**20),
    ("NaN", math.nan),
    ("Infinity", math.inf),
    ("5e9", 5e9),
]

# Integer fields that name an object (a primary key), not an amount: no bounds documented.
REFERENCES = {"connection"}

Path = tuple[str, ...]  # keys; "[]" is an array's first element


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        return COMPONENTS[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _numbers(schema: dict[str, Any], path: Path = ()) -> Iterator[tuple[Path, dict[str, Any]]]:
    schema = _resolve(schema)
    for key in ("oneOf", "anyOf", "allOf"):
        for alternative in schema.get(key, []):
            yield from _numbers(alternative, path)
    if schema.get("readOnly"):
        return
    if schema.get("type") in ("integer", "number"):
        yield path, schema
    for name, inner in (schema.get("properties") or {}).items():
        yield from _numbers(inner, (*path, name))
    if "items" in schema:
        yield from _numbers(schema["items"], (*path, "[]"))


def _operations() -> list[tuple[str, str, Path, dict[str, Any]]]:
    found = []
    for path, item in SCHEMA["paths"].items():
        for method, operation in item.items():
            content = (operation.get("requestBody") or {}).get("content", {})
            if method in ("post", "put", "patch") and "application/json" in content:
                for field, schema in _numbers(content["application/json"]["schema"]):
                    found.append((method, path, field, schema))
    return found


OPERATIONS = _operations()


def _other_ids(world: World) -> dict[str, int]:
    return {"judgment": Judgment.objects.order_by("pk").values_list("pk", flat=True)[0]}


# Each operation with numeric fields: (URL, a valid body, a URL that lists what it wrote).
Base = Callable[[World, APIClient], tuple[str, dict[str, Any], str]]


def _job(world: World) -> dict[str, Any]:
    rows = [{"id": "a", "content": "Rivers."}]
    return {
        "team": "fuzz",
        "name": "Walked",
        "source": {"type": "manual", "format": "json", "content": json.dumps(rows)},
        "prompt_versions": [world.ids["version"][0]],
        "models": [world.ids["model"][0]],
        "temperatures": [0.0],
    }


def _detail(client: APIClient, url: str) -> dict[str, Any]:
    return {k: v for k, v in client.get(url).json().items() if v is not None}


BASES: dict[tuple[str, str], Base] = {
    ("post", "/api/providers/connections"): lambda w, c: (
        "/api/providers/connections",
        {"team": "fuzz", "name": "walked", "kind": "mock"},
        "/api/providers/connections",
    ),
    ("put", "/api/providers/connections/{id}"): lambda w, c: (
        url := f"/api/providers/connections/{w.ids['connection'][1]}",
        _detail(c, url),
        url,
    ),
    ("patch", "/api/providers/connections/{id}"): lambda w, c: (
        url := f"/api/providers/connections/{w.ids['connection'][1]}",
        {},
        url,
    ),
    ("post", "/api/providers/models"): lambda w, c: (
        "/api/providers/models",
        {"connection": w.ids["connection"][0], "model_id": "walked"},
        "/api/providers/models",
    ),
    ("put", "/api/providers/models/{id}"): lambda w, c: (
        url := f"/api/providers/models/{w.ids['model'][1]}",
        _detail(c, url),
        url,
    ),
    ("patch", "/api/providers/models/{id}"): lambda w, c: (
        url := f"/api/providers/models/{w.ids['model'][1]}",
        {},
        url,
    ),
    ("post", "/api/generation/jobs"): lambda w, c: (
        "/api/generation/jobs",
        _job(w),
        "/api/generation/jobs",
    ),
    ("post", "/api/generation/estimate"): lambda w, c: (
        "/api/generation/estimate",
        _job(w),
        "/api/generation/jobs",
    ),
    ("post", "/api/scenarios/{id}/judges"): lambda w, c: (
        f"/api/scenarios/{w.ids['scenario'][0]}/judges",
        {"name": "Walked", "model": w.ids["model"][0]},
        f"/api/scenarios/{w.ids['scenario'][0]}/judges",
    ),
    ("patch", "/api/judges/{id}"): lambda w, c: (
        url := f"/api/judges/{w.ids['judge'][1]}",
        {},
        url,
    ),
    ("post", "/api/judges/{id}/run"): lambda w, c: (
        f"/api/judges/{w.ids['judge'][1]}/run",
        {},
        f"/api/judges/{w.ids['judge'][1]}/runs",
    ),
    ("post", "/api/judges/{id}/estimate"): lambda w, c: (
        f"/api/judges/{w.ids['judge'][1]}/estimate",
        {},
        f"/api/judges/{w.ids['judge'][1]}",
    ),
    ("post", "/api/evaluations/assignments/{id}/submit"): lambda w, c: (
        f"/api/evaluations/assignments/{w.ids['assignment'][1]}/submit",
        {"answer": {"winner": "A"}},
        f"/api/evaluations/judgments?scenario={w.ids['scenario'][0]}",
    ),
    ("post", "/api/evaluations/judgments/{id}/revise"): lambda w, c: (
        f"/api/evaluations/judgments/{_other_ids(w)['judgment']}/revise",
        {"answer": {"winner": "B"}},
        f"/api/evaluations/judgments?scenario={w.ids['scenario'][0]}",
    ),
    ("post", "/api/scenarios"): lambda w, c: (
        "/api/scenarios",
        {
            "team": "fuzz",
            "name": "Walked",
            "type": "comparison",
            "format": "jsonl",
            "content": "\n".join(
                json.dumps({"item_id": "q", "variant_id": v, "content": v}) for v in "ab"
            ),
        },
        "/api/scenarios",
    ),
    ("post", "/api/generation/jobs/{id}/to-scenario"): lambda w, c: (
        f"/api/generation/jobs/{w.ids['job'][0]}/to-scenario",
        {"name": "Walked", "type": "labeling", "config": {"labels": ["good", "bad"]}},
        "/api/scenarios",
    ),
    ("post", "/v1/batches"): lambda w, c: (
        "/v1/batches",
        {"input_file_id": _batch_file(c), "endpoint": "/v1/chat/completions"},
        "/v1/batches",
    ),
    ("patch", "/api/scenarios/{id}"): lambda w, c: (
        url := f"/api/scenarios/{w.ids['scenario'][1]}",
        {},
        url,
    ),
    ("post", "/api/scenarios/{id}/regenerate"): lambda w, c: (
        f"/api/scenarios/{w.ids['scenario'][1]}/regenerate",
        {},
        f"/api/scenarios/{w.ids['scenario'][1]}",
    ),
    ("put", "/api/scenarios/{id}/assignees"): lambda w, c: (
        url := f"/api/scenarios/{w.ids['scenario'][0]}/assignees",
        {"assignees": [{"user": "fuzz-admin"}]},
        url,
    ),
    ("post", "/api/scenarios/{id}/plan"): lambda w, c: (
        f"/api/scenarios/{w.ids['scenario'][0]}/plan",
        {"question": "ranking", "budget_usd": 1, "max_tasks": 5},
        f"/api/scenarios/{w.ids['scenario'][0]}/plan",
    ),
    ("put", "/api/scenarios/{id}/gold"): lambda w, c: (
        url := f"/api/scenarios/{w.ids['scenario'][0]}/gold",
        {},
        url,
    ),
    ("put", "/api/scenarios/{id}/trust-gate"): lambda w, c: (
        url := f"/api/scenarios/{w.ids['scenario'][0]}/trust-gate",
        {"min_kappa": 0.6, "min_shared_items": 100},
        url,
    ),
    ("put", "/api/teams/{slug}/trust-gate"): lambda w, c: (
        "/api/teams/fuzz/trust-gate",
        {"min_kappa": 0.6, "min_shared_items": 100, "max_flip_rate": 0.1},
        "/api/teams/fuzz/trust-gate",
    ),
}


def _batch_file(client: APIClient) -> str:
    """A judge file of the fuzz team, uploaded for the batch to name."""
    line = {
        "custom_id": "r1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "fuzz-model", "messages": [{"role": "user", "content": "Hi"}]},
    }
    upload = SimpleUploadedFile("rows.jsonl", json.dumps(line).encode() + b"\n")
    response = client.post("/v1/files", {"purpose": "batch", "file": upload}, format="multipart")
    assert response.status_code == 200, response.content
    return response.json()["id"]


PLACEHOLDER = "__walked_value__"


def _with(body: Any, path: Path) -> Any:
    """``body`` with the placeholder at ``path`` (an array gets a first element)."""
    if not path:
        return PLACEHOLDER
    key, rest = path[0], path[1:]
    if key == "[]":
        items = list(body) if isinstance(body, list) else []
        first = items[0] if items else {}
        return [_with(first, rest), *items[1:]]
    body = dict(body) if isinstance(body, dict) else {}
    body[key] = _with(body.get(key), rest)
    return body


def _within(value: float, schema: dict[str, Any]) -> bool:
    return (
        math.isfinite(value)
        and schema.get("minimum", -math.inf) <= value <= schema.get("maximum", math.inf)
        and (schema["type"] == "number" or float(value).is_integer())
    )


def test_every_operation_with_numbers_has_a_walked_body():
    missing = {(m, p) for m, p, _, _ in OPERATIONS} - set(BASES)
    assert not missing, f"add a valid body to BASES for {sorted(missing)}"
    assert len({(m, p) for m, p, _, _ in OPERATIONS}) >= 15


def test_the_schema_documents_bounds_of_every_number():
    for method, path, field, schema in OPERATIONS:
        if field[-1] in REFERENCES:
            continue
        assert "minimum" in schema and "maximum" in schema, (method, path, field)


@pytest.mark.slow  # about 450 requests: 20 s on SQLite
@pytest.mark.django_db
def test_every_numeric_field_refuses_extreme_values(fuzz_world):
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Token {fuzz_world.key}")
    accepted = 0
    for method, path, field, schema in OPERATIONS:
        for token, value in EXTREMES:
            where = f"{method.upper()} {path} {'.'.join(field)}={token}"
            with rolled_back():
                url, base, read = BASES[(method, path)](fuzz_world, client)
                raw = json.dumps(_with(base, field)).replace(f'"{PLACEHOLDER}"', token)
                response = getattr(client, method)(url, raw, content_type="application/json")
                assert response.status_code < 500, where
                if 200 <= response.status_code < 300:
                    accepted += 1
                    assert field[-1] in REFERENCES or _within(value, schema), where
                    assert client.get(read).status_code == 200, where
                else:
                    assert response.status_code in (400, 404, 409), (where, response.content)
                    if response.status_code == 400 and field[-1] not in REFERENCES:
                        body = response.json()
                        # The API's errors by field, or OpenAI's shape on /v1 (``param``).
                        named = " ".join(
                            [*body.get("errors", {}), str(body.get("error", {}).get("param"))]
                        )
                        assert field[0] in named, (where, response.content)
    assert accepted > 0  # the bodies are valid: in-range values are taken
