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


def drive_timed(job_id: int, passes: int = 12) -> tuple[list[tuple[float, Any]], float, float]:
    """Drive a batch job until it stops running: each pass's (seconds, summary), the total
    seconds, and the seconds spent recording results in the database (apart from waiting for
    the provider)."""
    import asyncio
    import time

    from generation import batch_runner
    from generation.models import GenerationJob

    recording = {"s": 0.0}
    record = batch_runner._record

    def timed_record(*a: Any, **kw: Any) -> Any:
        began = time.perf_counter()
        try:
            return record(*a, **kw)
        finally:
            recording["s"] += time.perf_counter() - began

    batch_runner._record = timed_record  # type: ignore[assignment]
    done: list[tuple[float, Any]] = []
    started = time.perf_counter()
    try:
        for _ in range(passes):
            wall = time.perf_counter()
            summary = asyncio.run(batch_runner.drive(job_id))
            done.append((time.perf_counter() - wall, summary))
            if GenerationJob.objects.get(pk=job_id).status != "running":
                break
    finally:
        batch_runner._record = record  # type: ignore[assignment]
    return done, time.perf_counter() - started, recording["s"]
