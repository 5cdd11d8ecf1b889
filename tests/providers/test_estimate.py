"""The estimate against what the fake provider bills (the error the docs state)."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from evalplatform.providers.estimate import estimate_cost, estimate_tokens
from evalplatform.providers.llm.client import ProviderClient
from evalplatform.providers.llm.types import LLMRequest
from tests.factories import ConnectionFactory, LLMModelFactory


def test_token_heuristic():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abc") == 1
    assert estimate_tokens("a" * 400) == 100


@pytest.mark.django_db
def test_estimate_matches_the_fake_on_input_and_bounds_the_output(fake_provider, team_a):
    model = LLMModelFactory(
        connection=ConnectionFactory(team=team_a),
        input_price_per_mtok=Decimal("2.50"),
        output_price_per_mtok=Decimal("10"),
    )
    prompts = [("You grade essays.", f"Essay {i}: " + "words " * (i * 7 + 3)) for i in range(40)]
    estimate = estimate_cost(model=model, prompts=prompts, max_tokens=250)

    async def actual():
        async with ProviderClient(kind="openai", base_url=fake_provider.url) as client:
            return [
                (
                    await client.complete(LLMRequest(model="m", system=s, user=u, max_tokens=250))
                ).response
                for s, u in prompts
            ]

    responses = asyncio.run(actual())
    assert estimate.requests == 40
    assert estimate.input_tokens == sum(r.input_tokens for r in responses)  # exact
    assert all(r.output_tokens <= 250 for r in responses)
    assert estimate.output_tokens_high == 250 * 40 >= sum(r.output_tokens for r in responses)
    assert estimate.output_tokens_typical == 250 * 40  # the default typical (300) is capped
    live = model.cost_usd(estimate.input_tokens, estimate.output_tokens_typical)
    assert estimate.live_usd == live and estimate.batch_usd == live / 2


def test_uncapped_high_case_and_pilot_typical():
    class Flat:
        def cost_usd(self, i, o, *, batch=False):
            return Decimal(i + o) / (2 if batch else 1)

    e = estimate_cost(model=Flat(), prompts=[("", "x" * 40)], typical_output_tokens=120)
    assert (e.input_tokens, e.output_tokens_typical, e.output_tokens_high) == (10, 120, 480)
    assert e.live_usd == 130 and e.batch_usd == 65 and e.live_usd_high == 490
