"""A pilot: a few real cells of a planned job, run before it exists, to calibrate its
estimate with measured reply lengths (median and p90) and prompt tokens.

The cells are a seeded sample, spread evenly over the model configurations (with more
configurations than cells, a seeded choice of them gets one each). They are real provider
calls at the live price, one call a cell (a failed call is not retried: it is reported), so a
pilot never makes more than ``MAX_PILOT_CELLS`` calls; what they cost is reported and written
to the audit log, and they are not part of any job.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from evalplatform.accounts import audit
from evalplatform.errors import FieldErrors
from evalplatform.prompts import services as prompt_services
from evalplatform.providers.estimate import estimate_tokens
from evalplatform.providers.llm.client import ProviderClient
from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.providers.llm.types import LLMRequest, ProviderError
from generation import job_input
from generation.cells import MICRO_USD, UNCAPPED_RESERVE_TOKENS
from generation.planning import JobPlan, job_estimate
from generation.selectors import percentile

MAX_PILOT_CELLS = 20
PARALLEL = 8
# A pilot's cell is one call: a failure is reported, not retried (nor waited for).
ONE_CALL = RetryPolicy(max_retries=0)


def _sample(plan: JobPlan, cells: int, seed: int) -> list[tuple[Any, LLMRequest]]:
    rendered = [
        prompt_services.version_render(version=version, items=plan.items)
        for version in plan.prompts
    ]
    rng = random.Random(seed)  # noqa: S311 (a reproducible sample, not a secret)
    models = list(plan.models)
    if len(models) > cells:  # no more calls than cells: a seeded choice of configurations
        kept = set(rng.sample(range(len(models)), cells))
        models = [spec for index, spec in enumerate(models) if index in kept]
    base, extra = divmod(cells, len(models))
    chosen = []
    for position, spec in enumerate(models):
        wanted = base + (position < extra)
        params = {k: v for k, v in spec.params.items() if k != "temperature"}
        # This configuration's own (prompt, item, temperature) cells: one that sends no
        # temperature has one temperature, so no two of its calls are the same request.
        combos = [
            (prompt, item, temperature)
            for prompt in range(len(plan.prompts))
            for item in range(len(plan.items))
            for temperature in dict.fromkeys(plan.temperatures_for(spec))
        ]
        for prompt, item, temperature in rng.sample(combos, min(wanted, len(combos))):
            text = rendered[prompt][item]
            chosen.append(
                (
                    spec,
                    LLMRequest(
                        model=spec.llm_model.model_id,
                        system=text.system,
                        user=text.user,
                        temperature=temperature,
                        max_tokens=plan.max_tokens or UNCAPPED_RESERVE_TOKENS,
                        params=params,
                        response_schema=job_input.response_schema(spec.response_schema)
                        if spec.response_schema
                        else None,
                    ),
                )
            )
    return chosen[:cells]


async def _run(chosen: list[tuple[Any, LLMRequest]]) -> list[tuple[Any, LLMRequest, Any]]:
    clients: dict[int, ProviderClient] = {}
    gate = asyncio.Semaphore(PARALLEL)

    async def one(spec: Any, request: LLMRequest) -> tuple[Any, LLMRequest, Any]:
        connection = spec.llm_model.connection
        if connection.pk not in clients:
            clients[connection.pk] = ProviderClient.for_connection(connection, retry=ONE_CALL)
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


def run_pilot(plan: JobPlan, cells: int, *, user: Any, seed: int = 0) -> dict[str, Any]:
    """Run ``cells`` sampled cells live, one call each, for ``user`` (the audit log names
    them); per model configuration: samples, failures, reply tokens (p50, p90) and the ratio
    of real to estimated prompt tokens."""
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
    cost = str(total.quantize(MICRO_USD))
    audit.record(
        user=user,
        team=plan.team,
        action="generation.pilot.run",
        target=f"pilot of {plan.name}"[:300],
        calls=len(outcomes),
        failed=len(errors),
        cost_usd=cost,
        models=sorted(per_model),
    )
    return {"cells": len(outcomes), "cost_usd": cost, "per_model": per_model, "errors": errors[:10]}


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


def job_estimate_with_pilot(plan: JobPlan, data: Mapping[str, Any], *, user: Any) -> dict[str, Any]:
    """The estimate, calibrated by a pilot (run for ``user``) when the request asks for one."""
    cells = pilot_cells(data)
    return job_estimate(plan, run_pilot(plan, cells, user=user) if cells else None)
