"""The official SDKs work against the fake provider unmodified: it speaks the real protocols."""

from __future__ import annotations

import anthropic
import openai
import pytest


def test_openai_sdk_chat_and_stream(fake_provider):
    client = openai.OpenAI(base_url=f"{fake_provider.url}/v1", api_key="sk-fake", max_retries=0)
    completion = client.chat.completions.create(
        model="gpt-4.1-mini",
        messages=[{"role": "system", "content": "Be terse."}, {"role": "user", "content": "2+2?"}],
        temperature=0,
        max_completion_tokens=64,
    )
    assert completion.choices[0].message.content
    assert completion.choices[0].finish_reason in ("stop", "length")
    assert completion.usage is not None and completion.usage.prompt_tokens > 0

    stream = client.chat.completions.create(
        model="gpt-4.1-mini",
        messages=[{"role": "user", "content": "2+2?"}],
        temperature=0,  # the same answer as ``completion_for`` (none sent would sample)
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == completion_for(client, "2+2?")
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def completion_for(client, prompt: str) -> str:
    reply = client.chat.completions.create(
        model="gpt-4.1-mini", messages=[{"role": "user", "content": prompt}], temperature=0
    )
    return reply.choices[0].message.content


def test_openai_sdk_sees_provider_errors(fake_provider):
    client = openai.OpenAI(base_url=f"{fake_provider.url}/v1", api_key="sk-fake", max_retries=0)
    with pytest.raises(openai.RateLimitError) as err:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x [[fault:429]]"}]
        )
    assert err.value.response.headers["retry-after"] == "1"
    with pytest.raises(openai.RateLimitError) as err:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x [[fault:quota]]"}]
        )
    assert err.value.code == "insufficient_quota"
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x [[fault:500]]"}]
        )


def test_anthropic_sdk_messages_and_stream(fake_provider):
    client = anthropic.Anthropic(base_url=fake_provider.url, api_key="sk-ant-fake", max_retries=0)
    message = client.messages.create(
        model="claude-haiku-4-5",
        max_tokens=128,
        # The same answer from the call and the stream (none sent would sample); this SDK
        # names no temperature, so it goes in the body as the API takes it.
        extra_body={"temperature": 0},
        system="Be terse.",
        messages=[{"role": "user", "content": "Name a colour."}],
    )
    assert message.content[0].type == "text" and message.content[0].text
    assert message.stop_reason in ("end_turn", "max_tokens") and message.usage.input_tokens > 0

    with client.messages.stream(
        model="claude-haiku-4-5",
        max_tokens=128,
        # The same answer from the call and the stream (none sent would sample); this SDK
        # names no temperature, so it goes in the body as the API takes it.
        extra_body={"temperature": 0},
        system="Be terse.",
        messages=[{"role": "user", "content": "Name a colour."}],
    ) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(pieces) == message.content[0].text == final.content[0].text
    assert final.usage.output_tokens == message.usage.output_tokens


def test_anthropic_sdk_sees_provider_errors(fake_provider):
    client = anthropic.Anthropic(base_url=fake_provider.url, api_key="sk-ant-fake", max_retries=0)
    with pytest.raises(anthropic.RateLimitError):
        client.messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "x [[fault:429]]"}]
        )
    with pytest.raises(anthropic.APIStatusError) as err:
        client.messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "x [[fault:529]]"}]
        )
    assert err.value.status_code == 529
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "x [[fault:400]]"}]
        )
    assert bad.value.body["error"]["type"] == "invalid_request_error"
