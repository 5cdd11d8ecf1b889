"""The three HTTP adapters against the fake provider server, over real loopback HTTP."""

from __future__ import annotations

import asyncio
import json

import pytest

from evalplatform.providers.llm.client import ProviderClient
from evalplatform.providers.llm.mock import tokens_for
from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.providers.llm.types import LLMRequest, LLMResponse, ProviderError

PROTOCOLS = ["openai", "anthropic", "gemini"]
FINISH = {"openai": "stop", "anthropic": "end_turn", "gemini": "STOP"}


class FakeSleep:
    """The injected clock: records waits instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def run(coro):
    return asyncio.run(coro)


async def _complete(
    url, kind, request, *, sleep=None, max_retries=3, api_key_override=None, **client_kw
):
    policy = RetryPolicy(max_retries=max_retries, sleep=sleep or FakeSleep())
    key = api_key_override or "k"
    async with ProviderClient(kind=kind, base_url=url, api_key=key, retry=policy, **client_kw) as c:
        return await c.complete(request)


async def _stream(url, kind, request, **client_kw):
    policy = RetryPolicy(sleep=FakeSleep())
    async with ProviderClient(kind=kind, base_url=url, api_key="k", retry=policy, **client_kw) as c:
        return [item async for item in c.stream(request)]


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_complete_returns_text_usage_finish_and_raw(fake_provider, kind):
    request = LLMRequest(model="m-1", system="Be terse.", user="Describe a cat.", temperature=0.0)
    result = run(_complete(fake_provider.url, kind, request))
    response = result.response
    assert response.text and result.attempts == 1
    assert response.input_tokens == tokens_for("Be terse.") + tokens_for("Describe a cat.")
    assert response.output_tokens == tokens_for(response.text)
    assert response.finish_reason == FINISH[kind]
    assert response.raw and response.latency_s > 0
    again = run(_complete(fake_provider.url, kind, request)).response
    assert again.text == response.text  # the fake answers deterministically at temperature 0


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_stream_yields_deltas_then_the_same_reply(fake_provider, kind):
    request = LLMRequest(model="m-1", system="S", user="Tell me about dogs.", temperature=0.0)
    items = run(_stream(fake_provider.url, kind, request))
    *deltas, final = items
    assert len(deltas) > 2 and all(isinstance(d, str) for d in deltas)
    assert isinstance(final, LLMResponse) and final.text == "".join(deltas)
    whole = run(_complete(fake_provider.url, kind, request)).response
    assert final.text == whole.text
    assert (final.input_tokens, final.output_tokens) == (whole.input_tokens, whole.output_tokens)
    assert final.finish_reason == whole.finish_reason


@pytest.mark.parametrize("kind", PROTOCOLS)
@pytest.mark.parametrize(
    ("marker", "error_kind", "retryable"),
    [
        ("429", "rate_limit", True),
        ("quota", "quota", False),
        ("500", "server", True),
        ("529", "overloaded", True),
        ("400", "bad_request", False),
        ("401", "auth", False),
        ("404", "not_found", False),
        ("malformed", "malformed", False),
        ("truncated", "malformed", False),
        ("content_filter", "content_filter", False),
    ],
)
def test_every_fault_class_is_classified(fake_provider, kind, marker, error_kind, retryable):
    request = LLMRequest(model="m", user=f"Hello [[fault:{marker}]]")
    with pytest.raises(ProviderError) as err:
        run(_complete(fake_provider.url, kind, request, max_retries=0))
    error = err.value
    assert (error.kind, error.retryable) == (error_kind, retryable), error.message
    if marker in ("malformed", "truncated"):
        # A body that is not JSON is never kept raw: the reason says what was wrong.
        assert error.message.startswith("Unreadable reply") and error.raw_text == ""
    if marker == "429":
        assert error.retry_after == pytest.approx(1.0)


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_timeouts_are_retryable(fake_provider, kind):
    fake_provider.config.timeout_s = 2.0
    request = LLMRequest(model="m", user="Slow [[fault:timeout]]")
    with pytest.raises(ProviderError) as err:
        run(_complete(fake_provider.url, kind, request, max_retries=0, timeout_s=0.3))
    assert err.value.kind == "timeout" and err.value.retryable


def test_connection_refused_is_a_retryable_connection_error(fake_provider):
    from evalplatform.providers.fake.server import free_port

    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ProviderError) as err:
        run(_complete(url, "openai", LLMRequest(model="m", user="x"), max_retries=0))
    assert err.value.kind == "connection" and err.value.retryable


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_retries_follow_the_schedule(fake_provider, kind):
    sleep = FakeSleep()
    request = LLMRequest(model="m", user="Flaky [[fault:500*2]]")
    result = run(_complete(fake_provider.url, kind, request, sleep=sleep))
    assert result.attempts == 3 and sleep.waits == [1.0, 5.0]
    assert [e.kind for e in result.errors] == ["server", "server"]

    sleep = FakeSleep()
    with pytest.raises(ProviderError) as err:
        run(
            _complete(
                fake_provider.url,
                kind,
                LLMRequest(model="m", user="Down [[fault:503]]"),
                sleep=sleep,
            )
        )
    assert sleep.waits == [1.0, 5.0, 15.0] and err.value.kind == "server"

    sleep = FakeSleep()
    with pytest.raises(ProviderError):
        run(
            _complete(
                fake_provider.url, kind, LLMRequest(model="m", user="No [[fault:401]]"), sleep=sleep
            )
        )
    assert sleep.waits == []


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_provider_retry_hint_takes_precedence(fake_provider, kind):
    sleep = FakeSleep()
    request = LLMRequest(model="m", user="Busy [[fault:429*2@0.25]]")
    result = run(_complete(fake_provider.url, kind, request, sleep=sleep))
    assert result.attempts == 3 and sleep.waits == [0.25, 0.25]


def test_gemini_retry_info_in_the_body_is_read():
    import httpx

    from evalplatform.providers.llm import errors
    from evalplatform.providers.llm.gemini import GeminiAdapter

    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "40s"}],
        }
    }
    response = httpx.Response(429, json=body)
    error = errors.from_response(response, quota_exhausted=GeminiAdapter.quota_exhausted)
    assert error.kind == "rate_limit" and error.retry_after == 40.0
    # Header hints: milliseconds first, then seconds; absurd values fall back to the schedule.
    assert errors.retry_after_s({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert errors.retry_after_s({"retry-after": "3"}) == 3.0
    assert errors.retry_after_s({"retry-after": "86400"}) is None


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_stream_faults(fake_provider, kind):
    with pytest.raises(ProviderError) as err:
        run(_stream(fake_provider.url, kind, LLMRequest(model="m", user="Cut [[fault:truncated]]")))
    assert err.value.kind == "malformed"
    # A failure before the first delta is retried like a whole call.
    items = run(
        _stream(fake_provider.url, kind, LLMRequest(model="m", user="Once [[fault:500*1]]"))
    )
    assert isinstance(items[-1], LLMResponse) and items[-1].text


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_params_merge_into_the_body_and_max_tokens_lands(fake_provider, kind):
    params = {
        "openai": {"reasoning_effort": "low"},
        "anthropic": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
        "gemini": {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}},
    }[kind]
    request = LLMRequest(model="m", user="x", temperature=0.5, max_tokens=77, params=params)
    run(_complete(fake_provider.url, kind, request))
    _, raw = fake_provider.app.bodies[-1]
    body = json.loads(raw)
    if kind == "openai":
        assert body["max_completion_tokens"] == 77 and body["reasoning_effort"] == "low"
    elif kind == "anthropic":
        assert body["max_tokens"] == 77 and body["thinking"]["budget_tokens"] == 1024
    else:
        config = body["generationConfig"]
        assert config["maxOutputTokens"] == 77 and config["temperature"] == 0.5
        assert config["thinkingConfig"] == {"thinkingBudget": 0}


def test_max_tokens_param_is_a_connection_setting(fake_provider):
    request = LLMRequest(model="m", user="x", max_tokens=12)
    run(_complete(fake_provider.url, "openai", request, options={"max_tokens_param": "max_tokens"}))
    body = json.loads(fake_provider.app.bodies[-1][1])
    assert body["max_tokens"] == 12 and "max_completion_tokens" not in body


def test_base_url_with_or_without_v1(fake_provider):
    for base in (fake_provider.url, fake_provider.url + "/v1", fake_provider.url + "/v1/"):
        assert run(_complete(base, "openai", LLMRequest(model="m", user="x"))).response.text


def test_concurrency_cap_holds(fake_provider):
    fake_provider.config.latency_s = 0.05

    async def many():
        policy = RetryPolicy(sleep=FakeSleep())
        async with ProviderClient(
            kind="openai", base_url=fake_provider.url, max_concurrency=3, retry=policy
        ) as client:
            return await asyncio.gather(
                *(client.complete(LLMRequest(model="m", user=f"q{i}")) for i in range(12))
            )

    results = run(many())
    assert len(results) == 12 and fake_provider.app.max_in_flight == 3


def test_rate_limits_with_billing_words_are_still_rate_limits():
    import httpx

    from evalplatform.providers.llm import errors
    from evalplatform.providers.llm.gemini import GeminiAdapter
    from evalplatform.providers.llm.openai import OpenAIAdapter

    openai_429 = httpx.Response(
        429,
        headers={"retry-after": "2"},
        json={
            "error": {
                "message": "Rate limit reached. Visit https://platform.openai.com/account/billing.",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
    )
    openai_error = errors.from_response(openai_429, quota_exhausted=OpenAIAdapter.quota_exhausted)
    assert openai_error.kind == "rate_limit"
    gemini_rate = httpx.Response(
        429,
        json={
            "error": {
                "code": 429,
                "status": "RESOURCE_EXHAUSTED",
                "message": "You exceeded your current quota, please check your plan and "
                "billing details.",
                "details": [
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}
                ],
            }
        },
    )
    error = errors.from_response(gemini_rate, quota_exhausted=GeminiAdapter.quota_exhausted)
    assert (error.kind, error.retry_after) == ("rate_limit", 7.0)


@pytest.mark.parametrize("status", [400, 429, 500])
@pytest.mark.parametrize("body", [{"error": "overloaded"}, {"error": ["x"]}, {"error": None}, []])
def test_an_error_body_of_any_shape_is_classified(status, body):
    """A server (an OpenAI-compatible proxy, say) whose error is no object: still a
    ProviderError of the status's kind, never a crash in the classifier."""
    import httpx

    from evalplatform.providers.llm import errors
    from evalplatform.providers.llm.openai import OpenAIAdapter

    response = httpx.Response(status, json=body)
    error = errors.from_response(response, quota_exhausted=OpenAIAdapter.quota_exhausted)
    assert isinstance(error, ProviderError) and error.retry_after is None
    assert error.kind == {400: "bad_request", 429: "rate_limit", 500: "server"}[status]


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_streams_must_finish_and_filters_are_reported(fake_provider, kind):
    with pytest.raises(ProviderError) as err:
        run(_stream(fake_provider.url, kind, LLMRequest(model="m", user="x [[fault:unfinished]]")))
    assert err.value.kind == "malformed"
    with pytest.raises(ProviderError) as err:
        run(
            _stream(
                fake_provider.url, kind, LLMRequest(model="m", user="x [[fault:content_filter]]")
            )
        )
    assert err.value.kind == "content_filter" and not err.value.retryable


@pytest.mark.parametrize("key", ["sk-line\nbreak-secret", "sk-ümlaut-secret"])
def test_keys_http_cannot_carry_fail_permanently_without_quoting_the_key(fake_provider, key):
    with pytest.raises(ProviderError) as err:
        run(
            _complete(
                fake_provider.url, "openai", LLMRequest(model="m", user="x"), api_key_override=key
            )
        )
    assert err.value.kind == "bad_request" and not err.value.retryable
    assert "secret" not in err.value.message


def test_a_429_slows_the_rate_limiter(fake_provider):
    async def go():
        policy = RetryPolicy(sleep=FakeSleep())
        async with ProviderClient(
            kind="openai", base_url=fake_provider.url, requests_per_minute=6000, retry=policy
        ) as client:
            before = client.limiter.interval
            await client.complete(LLMRequest(model="m", user="x [[fault:429*1@0]]"))
            return before, client.limiter.interval

    before, after = run(go())
    assert after > before


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_sampling_varies_between_calls_unless_cold_or_seeded(fake_provider, kind):
    def texts(request, calls=4):
        return [
            run(_complete(fake_provider.url, kind, request)).response.text for _ in range(calls)
        ]

    def ask(temperature, **params):
        return LLMRequest(
            model="m", user="Describe a river.", temperature=temperature, params=params
        )

    cold = texts(ask(0.0))
    assert len(set(cold)) == 1
    unset = texts(LLMRequest(model="m", user="Describe a river."))
    assert len(set(unset)) > 1  # none sent: the provider's default (1) samples
    warm = texts(ask(0.8))
    assert len(set(warm)) > 1  # sampled anew on each call, as a real model is
    if kind == "anthropic":
        return  # Anthropic's API takes no seed
    seed = {"openai": {"seed": 7}, "gemini": {"generationConfig": {"seed": 7}}}[kind]
    seeded = texts(ask(0.8, **seed), calls=3)
    assert len(set(seeded)) == 1  # a given seed reproduces
    other = {"openai": {"seed": 8}, "gemini": {"generationConfig": {"seed": 8}}}[kind]
    assert texts(ask(0.8, **other), calls=1)[0] != seeded[0]


@pytest.mark.parametrize("kind", PROTOCOLS)
@pytest.mark.parametrize("streamed", [False, True])
def test_calls_one_after_another_reuse_one_connection(fake_provider, kind, streamed):
    """A reply read to its end gives its connection back to the pool: an OpenAI stream's
    body goes on after its ``[DONE]`` event, and a client that stopped reading there opened
    a new connection for every streamed call."""
    request = LLMRequest(model="m-1", user="Describe a cat.", temperature=0.0)

    async def calls() -> list[str]:
        policy = RetryPolicy(sleep=FakeSleep())
        texts = []
        async with ProviderClient(
            kind=kind, base_url=fake_provider.url, api_key="k", retry=policy
        ) as client:
            for _ in range(4):
                if streamed:
                    result = await client.complete_streaming(request, lambda delta: None)
                else:
                    result = await client.complete(request)
                texts.append(result.response.text)
        return texts

    before = set(fake_provider.app.peers)
    texts = run(calls())
    assert len(set(texts)) == 1 and texts[0]
    assert len(fake_provider.app.peers - before) == 1


def test_connections_are_split_over_small_pools_and_capped(fake_provider):
    """At a concurrency of 20, calls go over pools of at most eight connections, and no
    more than 20 calls are ever in flight at the provider."""
    fake_provider.config.latency_s = 0.05
    request = LLMRequest(model="m-1", user="Describe a cat.", temperature=0.0)

    async def calls() -> tuple[int, int]:
        policy = RetryPolicy(sleep=FakeSleep())
        async with ProviderClient(
            kind="openai",
            base_url=fake_provider.url,
            api_key="k",
            retry=policy,
            max_concurrency=20,
        ) as client:
            results = await asyncio.gather(*(client.complete(request) for _ in range(60)))
            assert client.http is not None
            return len(results), len(client.http.clients)

    before_peers = set(fake_provider.app.peers)
    fake_provider.app.max_in_flight = 0
    try:
        done, pools = run(calls())
    finally:
        fake_provider.config.latency_s = 0.0
    assert done == 60 and pools == 3
    assert fake_provider.app.max_in_flight == 20
    assert len(fake_provider.app.peers - before_peers) == 20


@pytest.mark.parametrize("kind", PROTOCOLS)
@pytest.mark.parametrize("chunk_delay", [0.0, 0.01])
def test_streamed_text_arrives_one_delta_per_chunk_and_rebuilds_the_reply(
    fake_provider, kind, chunk_delay
):
    """``complete_streaming`` hands on the text of each chunk of the body at once: several
    events that arrive together are one delta (the fake writes a stream whose events are all
    ready in one chunk), events that arrive apart are several; joined, they are the reply."""
    fake_provider.config.stream_chunk_delay_s = chunk_delay
    request = LLMRequest(model="m-1", user="Describe a cat in many words.", temperature=0.0)
    deltas: list[str] = []

    async def call():
        async with ProviderClient(
            kind=kind, base_url=fake_provider.url, api_key="k", retry=RetryPolicy()
        ) as client:
            return await client.complete_streaming(request, deltas.append)

    result = run(call())
    assert "".join(deltas) == result.response.text and len(result.response.text.split()) > 3
    assert result.response.finish_reason == FINISH[kind]
    if chunk_delay:
        assert len(deltas) > 1
    else:
        assert len(deltas) == 1
