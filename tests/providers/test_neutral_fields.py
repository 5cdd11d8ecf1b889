"""The neutral request fields (a response schema, reasoning, the repetition) in each
provider's words, live and batch, against the fake provider server over loopback HTTP; and
each adapter reading a configuration's reasoning back from its own words."""

from __future__ import annotations

import asyncio
import json

import pytest

from evalplatform.providers.llm import kinds
from evalplatform.providers.llm.mock import MockAdapter
from evalplatform.providers.llm.types import ImagePart, LLMRequest, Reasoning, ResponseSchema
from tests.providers.test_llm_batch import lifecycle
from tests.providers.test_llm_live import PROTOCOLS, _complete, run

SCHEMA = ResponseSchema(
    schema={
        "type": "object",
        "properties": {"winner": {"type": "string", "enum": ["A", "B"]}},
        "required": ["winner"],
        "additionalProperties": False,
    },
    name="verdict",
)
# What each provider's body carries for reasoning on with a budget of 2,048 tokens, on with
# an effort of "low", and off.
WIRE = {
    "openai": (
        {"reasoning_effort": "medium"},
        {"reasoning_effort": "low"},
        {"reasoning_effort": "none"},
    ),
    "anthropic": (
        {"thinking": {"type": "enabled", "budget_tokens": 2048}},
        {"thinking": {"type": "enabled", "budget_tokens": 2048}},
        {"thinking": {"type": "disabled"}},
    ),
    "gemini": (
        {"generationConfig": {"thinkingConfig": {"thinkingBudget": 2048}}},
        {"generationConfig": {"thinkingConfig": {"thinkingLevel": "low"}}},
        {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}},
    ),
}
ASKED = (
    Reasoning(enabled=True, budget_tokens=2048),
    Reasoning(enabled=True, effort="low"),
    Reasoning(enabled=False),
)


def contains(body: dict, expected: dict) -> bool:
    """Whether ``expected``'s keys and values are all in ``body`` (nested)."""
    for key, value in expected.items():
        if isinstance(value, dict):
            if not isinstance(body.get(key), dict) or not contains(body[key], value):
                return False
        elif body.get(key) != value:
            return False
    return True


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_reasoning_goes_out_in_each_providers_words_live(fake_provider, kind):
    for asked, wire in zip(ASKED, WIRE[kind], strict=True):
        request = LLMRequest(model="m", user="x", max_tokens=4000, reasoning=asked)
        assert run(_complete(fake_provider.url, kind, request)).response.text
        body = json.loads(fake_provider.app.bodies[-1][1])
        assert contains(body, wire), (asked, body)
        # And the adapter reads it back from those words (a budget has no OpenAI word, an
        # effort no Anthropic one: it asks for a budget).
        back = kinds.reasoning_in(kind, body)
        assert back is not None and back.enabled == asked.enabled
        if kind == "gemini" or (kind == "anthropic" and asked.budget_tokens):
            assert (back.budget_tokens, back.effort) == (asked.budget_tokens, asked.effort)


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_the_response_schema_goes_out_in_each_providers_words_live(fake_provider, kind):
    request = LLMRequest(model="m", user="x", response_schema=SCHEMA)
    run(_complete(fake_provider.url, kind, request))
    body = json.loads(fake_provider.app.bodies[-1][1])
    if kind == "openai":
        assert body["response_format"]["json_schema"]["name"] == "verdict"
        assert body["response_format"]["json_schema"]["schema"] == dict(SCHEMA.schema)
    elif kind == "anthropic":
        assert body["tool_choice"] == {"type": "tool", "name": "verdict"}
        assert body["tools"][0]["input_schema"] == dict(SCHEMA.schema)
    else:
        config = body["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        assert "additionalProperties" not in config["responseSchema"]


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_params_still_win_over_the_neutral_fields(fake_provider, kind):
    """``params`` is merged last: a configuration's own words override the neutral field."""
    own = WIRE[kind][2]
    request = LLMRequest(model="m", user="x", reasoning=ASKED[0], params=own)
    run(_complete(fake_provider.url, kind, request))
    assert contains(json.loads(fake_provider.app.bodies[-1][1]), own)


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_neutral_fields_go_out_in_each_providers_words_in_batches(fake_provider, kind):
    fake_provider.config.batch_duration_s = 0.1
    requests = [
        (f"r{i}", LLMRequest(model="m", user=f"q {i}", reasoning=ASKED[0], response_schema=SCHEMA))
        for i in range(3)
    ]
    [(_, status, results)] = asyncio.run(lifecycle(fake_provider.url, kind, requests))
    assert status.state == "completed" and len(results) == 3
    sent = b"".join(raw for path, raw in fake_provider.app.bodies if raw).decode()
    thinking = json.dumps(WIRE[kind][0], separators=(",", ":"))[1:-1]
    assert thinking.split(":", 1)[0] in sent.replace(" ", "")
    assert '"verdict"' in sent or "responseSchema" in sent


PNG = ImagePart(media_type="image/png", data="iVBORw0KGgo=")
LINKED = ImagePart(media_type="image/jpeg", url="https://example.org/cat.jpg")


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_images_go_out_as_content_parts_of_the_last_user_message(fake_provider, kind):
    request = LLMRequest(model="m", user="What is shown?", images=(PNG, LINKED))
    assert run(_complete(fake_provider.url, kind, request)).response.text
    body = json.loads(fake_provider.app.bodies[-1][1])
    if kind == "openai":
        content = body["messages"][-1]["content"]
        assert content[0] == {"type": "text", "text": "What is shown?"}
        assert [p["image_url"]["url"] for p in content[1:]] == [
            "data:image/png;base64,iVBORw0KGgo=",
            "https://example.org/cat.jpg",
        ]
    elif kind == "anthropic":
        content = body["messages"][-1]["content"]
        assert content[0]["source"] == {
            "type": "base64",
            "media_type": "image/png",
            "data": "iVBORw0KGgo=",
        }
        assert content[1]["source"] == {"type": "url", "url": "https://example.org/cat.jpg"}
        assert content[2] == {"type": "text", "text": "What is shown?"}
    else:
        parts = body["contents"][-1]["parts"]
        assert parts[0] == {"text": "What is shown?"}
        assert parts[1] == {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}}
        assert parts[2]["file_data"]["file_uri"] == "https://example.org/cat.jpg"
    # Without images the message is its text, as before.
    run(_complete(fake_provider.url, kind, LLMRequest(model="m", user="x")))
    plain = json.loads(fake_provider.app.bodies[-1][1])
    if kind == "gemini":
        assert plain["contents"][-1]["parts"] == [{"text": "x"}]
    else:
        assert plain["messages"][-1]["content"] == "x"


def test_the_mock_reads_every_providers_words_and_seeds_repeated_calls():
    assert MockAdapter.reasoning_in({"thinking": {"type": "enabled", "budget_tokens": 1500}}) == (
        Reasoning(enabled=True, budget_tokens=1500)
    )
    assert MockAdapter.reasoning_in({"thinkingConfig": {"thinkingLevel": "high"}}) == (
        Reasoning(enabled=True, effort="high")
    )
    assert MockAdapter.reasoning_in({"reasoning": {"effort": "none"}}) == Reasoning(enabled=False)
    assert MockAdapter.reasoning_in({"top_p": 0.5}) is None
    adapter = MockAdapter()

    async def texts(repetition, params=None):
        request = LLMRequest(
            model="m", user="Write.", temperature=1.0, repetition=repetition, params=params or {}
        )
        return (await adapter.complete(request)).text

    first, again, second = (asyncio.run(texts(r)) for r in (0, 0, 1))
    assert first == again != second  # a repetition's answer is pinned, repetitions differ
    assert asyncio.run(texts(1, {"seed": 0})) == first  # a seed of its own wins


def test_a_model_has_a_batch_api_where_its_provider_speaks_one(db):
    from tests.factories import ConnectionFactory, LLMModelFactory

    for kind, expected in (
        ("openai", True),
        ("anthropic", True),
        ("gemini", True),
        ("mock", False),
    ):
        model = LLMModelFactory(connection=ConnectionFactory(kind=kind), supports_batch=True)
        assert model.batch_capable is expected
        model.supports_batch = False
        assert model.batch_capable is False
