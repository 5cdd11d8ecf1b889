"""Token and cost estimates before a run, without network tokenizers.

The heuristic: **one token per four characters** of prompt text (OpenAI's published rule of
thumb for English), and for the reply a *typical* length (default 300 tokens, or what a pilot
measured) capped by ``max_tokens``, with ``max_tokens`` itself as the *high* case.

Error, as measured by ``tests/providers/test_estimate.py``: against the mock and the fake
server, which bill by the same rule, input tokens are exact and every actual reply stays
within the high case. Real tokenizers differ from the character rule (a rule of thumb for
English prose; code, JSON and non-Latin scripts usually take more tokens per character).
That error is not measured here, since no real tokenizer runs offline: treat the estimate as
a budget guide, and calibrate it with a pilot of a few cells when it matters.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

CHARS_PER_TOKEN = 4.0
DEFAULT_TYPICAL_OUTPUT_TOKENS = 300
# Without a max_tokens cap the high case assumes replies this many times the typical length.
UNCAPPED_HIGH_FACTOR = 4


def estimate_tokens(text: str) -> int:
    return tokens_in_chars(len(text))


def tokens_in_chars(chars: int) -> int:
    """``estimate_tokens`` of a text of ``chars`` characters."""
    return max(1, math.ceil(chars / CHARS_PER_TOKEN)) if chars else 0


class Priced(Protocol):
    def cost_usd(
        self, input_tokens: int, output_tokens: int, *, batch: bool = False
    ) -> Decimal: ...


@dataclass(frozen=True)
class CostEstimate:
    requests: int
    input_tokens: int
    output_tokens_typical: int
    output_tokens_high: int
    live_usd: Decimal
    batch_usd: Decimal
    live_usd_high: Decimal
    batch_usd_high: Decimal


def estimate_cost(
    *,
    model: Priced,
    prompts: Iterable[tuple[str, str]],
    max_tokens: int | None = None,
    typical_output_tokens: int | None = None,
    high_output_tokens: int | None = None,
    input_factor: float = 1.0,
) -> CostEstimate:
    """Estimate for sending each ``(system, user)`` prompt once to ``model``. A pilot
    calibrates it: its median and p90 reply lengths (``typical_output_tokens``,
    ``high_output_tokens``) and the ratio of real to estimated prompt tokens
    (``input_factor``)."""
    typical = typical_output_tokens or DEFAULT_TYPICAL_OUTPUT_TOKENS
    if max_tokens is not None:
        typical = min(typical, max_tokens)
    high = max_tokens if max_tokens is not None else typical * UNCAPPED_HIGH_FACTOR
    if high_output_tokens is not None:
        high = max(typical, min(high, high_output_tokens))
    requests = input_tokens = 0
    for system, user in prompts:
        requests += 1
        input_tokens += estimate_tokens(system) + estimate_tokens(user)
    input_tokens = math.ceil(input_tokens * input_factor)
    out_typical, out_high = typical * requests, high * requests
    return CostEstimate(
        requests=requests,
        input_tokens=input_tokens,
        output_tokens_typical=out_typical,
        output_tokens_high=out_high,
        live_usd=model.cost_usd(input_tokens, out_typical),
        batch_usd=model.cost_usd(input_tokens, out_typical, batch=True),
        live_usd_high=model.cost_usd(input_tokens, out_high),
        batch_usd_high=model.cost_usd(input_tokens, out_high, batch=True),
    )
