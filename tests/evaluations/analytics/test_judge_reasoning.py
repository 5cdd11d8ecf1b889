"""A judge card says whether reasoning was asked for, whatever the provider's words: an
Anthropic judge with ``thinking``, a Gemini judge with ``thinkingConfig`` and an OpenAI one
with ``reasoning_effort``, run end to end against the fake provider server."""

from __future__ import annotations

import json

import pytest

from evalplatform.providers.models import LLMModel, ProviderConnection
from tests.helpers.evaluations import card_of, create_judge, make_scenario, run_judge

pytestmark = pytest.mark.django_db(transaction=True)

# (kind, parameters that ask for reasoning, parameters that turn it off)
SETTINGS = [
    (
        "anthropic",
        {"thinking": {"type": "enabled", "budget_tokens": 2048}},
        {"thinking": {"type": "disabled"}},
    ),
    (
        "gemini",
        {"generationConfig": {"thinkingConfig": {"thinkingBudget": 1024}}},
        {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}},
    ),
    (
        "gemini",
        {"thinkingConfig": {"thinkingLevel": "high"}},
        {"thinkingConfig": {"thinkingBudget": 0}},
    ),
    ("openai", {"reasoning_effort": "high"}, {"reasoning_effort": "none"}),
]


@pytest.mark.parametrize(("kind", "on", "off"), SETTINGS)
def test_the_card_says_reasoning_was_asked_for_in_each_providers_words(
    api, people, team_a, fake_provider, kind, on, off
):
    connection = ProviderConnection.objects.create(
        team=team_a, name=kind, kind=kind, base_url=fake_provider.url
    )
    model = LLMModel.objects.create(connection=connection, model_id=f"{kind}-j", display_name=kind)
    scenario = make_scenario(people, team_a, "comparison", {"ties": False})
    thinking = create_judge(api, people["manager"], scenario, name="On", model=model.pk, params=on)
    run_judge(api, people["manager"], thinking)
    sent = json.loads(fake_provider.app.bodies[-1][1])
    # The setting went out as written.
    assert all(sent[key] == value for key, value in on.items() if key != "generationConfig")
    _, card = card_of(api, people["viewer"], thinking)
    assert card["reasoning"]["thinking_requested"] is True
    assert card["reasoning"]["requested"] is not None
    plain = create_judge(api, people["manager"], scenario, name="Off", model=model.pk, params=off)
    run_judge(api, people["manager"], plain)
    _, card = card_of(api, people["viewer"], plain)
    assert card["reasoning"]["thinking_requested"] is False


def test_another_providers_words_ask_nothing_of_this_one(api, people, team_a, fake_provider):
    """An Anthropic judge given OpenAI's ``reasoning_effort`` asked Anthropic for nothing: its
    card shows the setting as written but does not say reasoning was asked for."""
    connection = ProviderConnection.objects.create(
        team=team_a, name="a", kind="anthropic", base_url=fake_provider.url
    )
    model = LLMModel.objects.create(connection=connection, model_id="claude-j", display_name="C")
    scenario = make_scenario(people, team_a, "comparison", {"ties": False})
    judge = create_judge(
        api, people["manager"], scenario, name="X", model=model.pk,
        params={"reasoning_effort": "high"},
    )  # fmt: skip
    run_judge(api, people["manager"], judge)
    _, card = card_of(api, people["viewer"], judge)
    assert card["thinking"] == {"reasoning_effort": "high"}
    assert card["reasoning"]["thinking_requested"] is False
    # The setting reads as its run recorded it: the card is not stale.
    assert card["stale"] is False
