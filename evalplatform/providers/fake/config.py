"""The fake provider's settings: latency, faults, batch timing and failures, mock answers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from evalplatform.providers.llm.mock import MockSettings
from evalplatform.providers.llm.types import LLMRequest


@dataclass
class FakeConfig:
    latency_s: float = 0.0
    fault_rate: float = 0.0
    fault_kinds: tuple[str, ...] = ("429", "500", "529", "timeout", "malformed")
    retry_after_s: float = 1.0
    timeout_s: float = 30.0
    seed: int = 0
    stream_chunk_words: int = 3
    stream_chunk_delay_s: float = 0.0  # a pause after each streamed chunk (slow streams)
    # Batches (see batches.py): seconds from submission to the end, share of failed lines.
    batch_duration_s: float = 1.0
    batch_failure_rate: float = 0.0
    mock: MockSettings = field(default_factory=MockSettings)
    # A reply of the test's own making for every request (else the mock's answer).
    reply: Callable[[LLMRequest], str] | None = None
