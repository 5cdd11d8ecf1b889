"""A pilot: a few real cells of a planned job, run before it exists, to calibrate its
estimate with measured reply lengths (median and p90) and prompt tokens.

The cells are a seeded sample, spread over the model configurations (each gets at least
one). They are real provider calls at the live price; what they cost is reported, and they
are not part of any job.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import defaultdict
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from evalplatform.errors import FieldErrors
from evalplatform.prompts import services as prompt_services
from evalplatform.providers.estimate import estimate_tokens
from evalplatform.providers.llm.client import ProviderClient
from evalplatform.providers.llm.types import LLMRequest, ProviderError
from generation.cells import MICRO_USD, UNCAPPED_RESERVE_TOKENS
from generation.planning import JobPlan, job_estimate
from generation.selectors import percentile

MAX_PILOT_CELLS = 20
PARALLEL = 8


def _sample(plan: JobPlan, cells: int, seed: int) -> list[tuple[Any, LLMRequest]]:
    rendered = [
        prompt_services.version_render(version=version, items=plan.items)
        for version in plan.prompts
    ]
    # (prompt, item, temperature slot); a configuration that sends no temperature has one.
    combos = [
        (prompt, item, slot)
        for prompt in range(len(plan.prompts))
        for item in range(len(plan.items))
        for slot in range(len(plan.temperatures))
    ]
    rng = random.Random(seed)  # noqa: S311 (a reproducible sample, not a secret)
    per_model = max(1, math.ceil(cells / len(plan.models)))
    chosen = []
    for spec in plan.models:
        temperatures = plan.temperatures_for(spec)
        params = {k: v for k, v in spec.params.items() if k != "temperature"}
        for prompt, item, slot in rng.sample(combos, min(per_model, len(combos))):
            text = rendered[prompt][item]
            chosen.append(
                (
                    spec,
                    LLMRequest(
                        model=spec.llm_model.model_id,
                        system=text.system,
                        user=text.user,
                        temperature=temperatures[slot % len(temperatures)],
                        max_tokens=plan.max_tokens or UNCAPPED_RESERVE_TOKENS,
                        params=params,
                    ),
                )
            )
    return chosen[: max(cells, len(plan.models))]


async def _run(chosen: list[tuple[Any, LLMRequest]]) -> list[tuple[Any, LLMRequest, Any]]:
    clients: dict[int, ProviderClient] = {}
    gate = asyncio.Semaphore(PARALLEL)

    async def one(spec: Any, request: LLMRequest) -> tuple[Any, LLMRequest, Any]:
        connection = spec.llm_model.connection
        if connection.pk not in clients:
            clients[connection.pk] = ProviderClient.for_connection(connection)
        async with gate:
            try:
                result = await clients[connection.pk].complete(request)
            except ProviderError as error:
                return spec, request, error
        return spec, request, result.response

    # No database work happens here: under an ASGI server this runs inside a sync view,
    # where handing work back to the request's own database thread would deadlock.
    try:
        return await asyncio.gather(*(one(spec, request) for spec, request in chosen))
    finally:
        for client in clients.values():
            await client.aclose()


def run_pilot(plan: JobPlan, cells: int, *, seed: int = 0) -> dict[str, Any]:
    """Run ``cells`` sampled cells live; per model configuration: samples, failures, reply
    tokens (p50, p90) and the ratio of real to estimated prompt tokens."""
    chosen = _sample(plan, cells, seed)
    outcomes = asyncio.run(_run(chosen))
    per_label: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"samples": 0, "failed": 0, "out": [], "in_real": 0, "in_estimated": 0}
    )
    total = Decimal(0)
    errors: list[str] = []
    for spec, request, outcome in outcomes:
        entry = per_label[spec.label]
        entry["samples"] += 1
        if isinstance(outcome, ProviderError):
            entry["failed"] += 1
            errors.append(f"{spec.label}: {outcome.message}"[:300])
            continue
        entry["out"].append(outcome.output_tokens)
        entry["in_real"] += outcome.input_tokens
        entry["in_estimated"] += estimate_tokens(request.system) + estimate_tokens(request.user)
        total += spec.llm_model.cost_usd(outcome.input_tokens, outcome.output_tokens)
    per_model = {}
    for label, entry in per_label.items():
        measured = entry["out"]
        per_model[label] = {
            "samples": entry["samples"],
            "failed": entry["failed"],
            "output_tokens_p50": percentile(measured, 0.5),
            "output_tokens_p90": percentile(measured, 0.9),
            "input_factor": round(entry["in_real"] / entry["in_estimated"], 4)
            if entry["in_estimated"]
            else None,
        }
    return {
        "cells": len(outcomes),
        "cost_usd": str(total.quantize(MICRO_USD)),
        "per_model": per_model,
        "errors": errors[:10],
    }


def pilot_cells(data: Mapping[str, Any]) -> int:
    """The ``pilot`` field of an estimate request: 0 (none) to ``MAX_PILOT_CELLS``."""
    value = data.get("pilot", 0)
    if value in (None, "", 0, "0"):
        return 0
    try:
        cells = int(value)
    except (TypeError, ValueError):
        cells = -1
    if isinstance(value, bool) or not 1 <= cells <= MAX_PILOT_CELLS:
        raise FieldErrors(
            {"pilot": f"A number of cells to run first, from 1 to {MAX_PILOT_CELLS} (0: none)."}
        )
    return cells


def job_estimate_with_pilot(plan: JobPlan, data: Mapping[str, Any]) -> dict[str, Any]:
    """The estimate, calibrated by a pilot when the request asks for one."""
    cells = pilot_cells(data)
    return job_estimate(plan, run_pilot(plan, cells) if cells else None)
