"""Fixtures of the judge files' tests: the OpenAI SDK against the platform's live server."""

from __future__ import annotations

import pytest
from django_q.conf import Conf
from openai import OpenAI

from evalplatform.accounts.roles import Role
from evalplatform.accounts.services import token_create
from evalplatform.providers.models import LLMModel, ProviderConnection


@pytest.fixture
def sync_tasks(monkeypatch):
    """Queued tasks run at once, where they are queued (as a worker would run them)."""
    monkeypatch.setattr(Conf, "SYNC", True)


@pytest.fixture
def world(team_a, member, fake_provider, live_server, sync_tasks):
    user = member(team_a, Role.CREATOR)
    fake = ProviderConnection.objects.create(
        team=team_a, name="fake", kind="openai", base_url=fake_provider.url, max_concurrency=8
    )
    LLMModel.objects.create(
        connection=fake,
        model_id="openrelay/gemma-4-31b",
        display_name="Gemma 4 31B",
        input_price_per_mtok=1,
        output_price_per_mtok=2,
    )
    # A server that answers 404 to every call: a permanent provider error, not retried.
    broken = ProviderConnection.objects.create(
        team=team_a, name="broken", kind="openai", base_url=f"{live_server.url}/nowhere"
    )
    LLMModel.objects.create(connection=broken, model_id="broken-judge", display_name="Broken")
    key = token_create(user=user, name="sdk")[1]
    client = OpenAI(base_url=f"{live_server.url}/v1", api_key=key, max_retries=0)
    return {"user": user, "key": key, "client": client, "fake": fake, "url": live_server.url}
