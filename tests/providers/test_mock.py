"""The offline ``mock`` kind: deterministic, realistic usage, judge JSON for every scenario type,
and the position-bias and temperature-noise knobs the analyses need."""

from __future__ import annotations

import asyncio
import json

import pytest

from evalplatform.providers.llm.client import ProviderClient
from evalplatform.providers.llm.mock import MockAdapter, MockSettings, tokens_for
from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.providers.llm.types import LLMRequest, ProviderError

COMPARE = (
    'Which response is better? Reply as JSON {{"winner": "A" | "B" | "tie", "rationale": "..."}}.'
    "\nResponse A:\n{a}\nResponse B:\n{b}"
)


def ask(adapter: MockAdapter, user: str, *, temperature=0.0, seed=0, system="") -> str:
    request = LLMRequest(
        model="mock-judge", system=system, user=user, temperature=temperature, params={"seed": seed}
    )
    return asyncio.run(adapter.complete(request)).text


def test_same_request_same_answer_and_usage_from_text():
    adapter = MockAdapter()
    request = LLMRequest(
        model="mock-small",
        system="Be helpful.",
        user="Write about rivers.",
        temperature=0.7,
        params={"seed": 3},
    )
    first, second = (asyncio.run(adapter.complete(request)) for _ in range(2))
    assert first.text == second.text and len(first.text.split()) > 10
    assert first.input_tokens == tokens_for("Be helpful.") + tokens_for("Write about rivers.")
    assert first.output_tokens == tokens_for(first.text)
    other_seed = MockAdapter(MockSettings(seed=1))
    assert asyncio.run(other_seed.complete(request)).text != first.text


def test_max_tokens_cuts_with_length_finish():
    adapter = MockAdapter()
    response = asyncio.run(adapter.complete(LLMRequest(model="m", user="Essay", max_tokens=8)))
    assert response.finish_reason == "length" and response.output_tokens <= 9


def test_comparison_json():
    answer = json.loads(ask(MockAdapter(), COMPARE.format(a="The sky is blue.", b="Sky? Green.")))
    assert answer["winner"] in {"A", "B", "tie"} and answer["rationale"]


def test_rating_json_respects_dimensions_and_scales():
    prompt = (
        'Rate the text. Reply as JSON {"scores": {...}, "rationale": "..."}.\nDimensions:\n'
        "- factual accuracy (1-5): is it right\n- tone (0-3): is it polite\n- depth (1-10)\n"
        "Text: Water boils at 100 degrees Celsius at sea level."
    )
    for seed in range(20):
        answer = json.loads(ask(MockAdapter(), prompt, temperature=1.0, seed=seed))
        scores = answer["scores"]
        assert set(scores) == {"factual accuracy", "tone", "depth"}
        assert 1 <= scores["factual accuracy"] <= 5 and 0 <= scores["tone"] <= 3
        assert 1 <= scores["depth"] <= 10


def test_ranking_and_labeling_json():
    ranking = json.loads(
        ask(
            MockAdapter(),
            (
                'Order them best first as JSON {"ranking": [...]}.\n'
                "Response 1: alpha\nResponse 2: beta gamma\nResponse 3: delta"
            ),
        )
    )
    assert sorted(ranking["ranking"]) == ["1", "2", "3"]
    labels = json.loads(
        ask(
            MockAdapter(),
            'Label it. Reply {"labels": [...]}\nLabels: spam, ham, eggs\nText: buy now',
        )
    )
    assert len(labels["labels"]) == 1 and labels["labels"][0] in {"spam", "ham", "eggs"}
    several = json.loads(
        ask(MockAdapter(), 'Choose multiple. Reply {"labels": [...]}\nLabels: a, b, c\nText: x')
    )
    assert len(several["labels"]) == 2 and set(several["labels"]) <= {"a", "b", "c"}


def _first_position_share(settings: MockSettings, temperature: float) -> float:
    adapter = MockAdapter(settings)
    wins = 0
    for i in range(200):
        answer = json.loads(
            ask(
                adapter,
                COMPARE.format(a=f"answer {i} one", b=f"answer {i} two"),
                temperature=temperature,
                seed=i,
            )
        )
        wins += answer["winner"] == "A"
    return wins / 200


def test_position_bias_knob_moves_first_position_wins():
    neutral = _first_position_share(MockSettings(), temperature=1.0)
    biased = _first_position_share(MockSettings(position_bias=0.3), temperature=1.0)
    assert 0.38 < neutral < 0.62
    assert biased > neutral + 0.15


def test_temperature_sets_the_noise_between_repetitions():
    prompt = (
        'Score it as JSON {"scores": {...}}.\nDimensions:\n- quality (1-10)\n'
        "Text: A short answer that is mostly right."
    )
    cold = {ask(MockAdapter(), prompt, temperature=0.0, seed=s) for s in range(10)}
    hot = {ask(MockAdapter(), prompt, temperature=1.0, seed=s) for s in range(10)}
    assert len(cold) == 1 and len(hot) > 1


def test_fenced_json_knob_wraps_replies():
    text = ask(MockAdapter(MockSettings(fenced_json_rate=1.0)), COMPARE.format(a="x", b="y"))
    assert text.startswith("Here is my verdict:\n```json\n") and text.endswith("```")


def test_failure_rate_is_retried_through_the_client():
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def go():
        client = ProviderClient(
            kind="mock",
            options={"failure_rate": 0.5},
            retry=RetryPolicy(max_retries=10, sleep=sleep),
        )
        results = [await client.complete(LLMRequest(model="m", user=f"q{i}")) for i in range(20)]
        await client.aclose()
        return results

    results = asyncio.run(go())
    assert all(r.response.text for r in results)
    assert sum(r.attempts for r in results) > 20 and len(waits) == sum(
        r.attempts - 1 for r in results
    )
    with pytest.raises(ProviderError):
        asyncio.run(
            MockAdapter(MockSettings(failure_rate=1.0)).complete(LLMRequest(model="m", user="x"))
        )


def test_mock_options_are_validated_on_the_connection(team_a):
    from django.core.exceptions import ValidationError

    from tests.factories import ConnectionFactory

    connection = ConnectionFactory.build(team=team_a, kind="mock", options={"latency_s": "slow"})
    with pytest.raises(ValidationError) as err:
        connection.full_clean()
    assert "options" in err.value.message_dict


def test_sampled_requests_differ_between_calls_unless_cold_or_seeded():
    def texts(adapter, temperature, calls=4, **params):
        request = LLMRequest(
            model="mock-small", user="Write about rivers.", temperature=temperature, params=params
        )
        return [asyncio.run(adapter.complete(request)).text for _ in range(calls)]

    adapter = MockAdapter()
    assert len(set(texts(adapter, 0.0))) == 1
    unset = texts(adapter, None)  # none sent: the providers' default, 1, samples anew
    assert len(set(unset)) > 1 and texts(MockAdapter(), None) == unset
    warm = texts(adapter, 0.9)
    assert len(set(warm)) > 1
    assert texts(MockAdapter(), 0.9) == warm  # reproducible: the n-th call draws the same
    assert len(set(texts(adapter, 0.9, seed=5))) == 1  # a given seed pins the answer
    assert texts(adapter, 0.9, calls=1, seed=5) != texts(adapter, 0.9, calls=1, seed=6)
