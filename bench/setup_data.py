"""What the generation benchmarks share: a team with a user, one model on a connection, a
summary prompt, and the job body for N items. Call after ``django.setup()``."""

from __future__ import annotations

import json
from typing import Any


def bench_fixture(**connection: Any) -> tuple[Any, Any, Any]:
    """(user, model, prompt version) in a fresh team ``bench``; ``connection`` are the
    ProviderConnection's fields (``kind``, ``base_url``, ...)."""
    from django.contrib.auth import get_user_model

    from evalplatform.accounts.models import Membership, Team
    from evalplatform.accounts.roles import Role
    from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion
    from evalplatform.providers.models import LLMModel, ProviderConnection

    user = get_user_model().objects.create_user("bench")
    team = Team.objects.create(name="Bench", slug="bench")
    Membership.objects.create(user=user, team=team, role=Role.CREATOR)
    link = ProviderConnection.objects.create(team=team, name="bench", **connection)
    model = LLMModel.objects.create(
        connection=link,
        model_id="mock-1" if link.kind == "mock" else "gpt-fake",
        display_name="Bench model",
        input_price_per_mtok=1,
        output_price_per_mtok=2,
        supports_batch=link.kind != "mock",
    )
    template = PromptTemplate.objects.create(team=team, name="Summary")
    version = PromptVersion.objects.create(template=template, number=1)
    PromptBlock.objects.create(version=version, position=0, title="System", body="Be brief.")
    PromptBlock.objects.create(version=version, position=1, body="Summarize: {{content}}")
    return user, model, version


def job_body(model: Any, version: Any, cells: int, **extra: Any) -> dict[str, Any]:
    """A job of ``cells`` items x this prompt x this model at one temperature."""
    items = [
        {"id": i, "content": f"Item {i}: a paragraph about rivers and rain."} for i in range(cells)
    ]
    return {
        "team": "bench",
        "name": f"bench {cells}",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.7],
        "max_tokens": 200,
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
    } | extra
