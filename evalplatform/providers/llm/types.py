from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LLMRequest:
    """What to ask, independent of the provider.

    ``params`` is deep-merged into the provider's request body last, for settings the neutral
    fields do not cover (thinking / reasoning, ``top_p``, response formats, ...). ``turns``:
    the conversation before the final ``user`` message, as (role, text) pairs with role
    "user" or "assistant" (a judge file's multi-turn rows).
    """

    model: str
    user: str
    system: str = ""
    turns: tuple[tuple[str, str], ...] = ()
    temperature: float | None = None
    max_tokens: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LLMResponse:
    text: str
    input_tokens: int
    output_tokens: int
    finish_reason: str
    latency_s: float
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # The model snapshot the provider says answered ("" when it says none), and the
    # reasoning (thinking) tokens it reports apart (None when it reports none).
    model_version: str = ""
    reasoning_tokens: int | None = None


class ProviderError(Exception):
    """A failed call. ``retryable`` decides whether the retry schedule applies.

    ``kind`` is one of: rate_limit, overloaded, server, timeout, connection, conflict (all
    retryable); quota, auth, permission, not_found, bad_request, too_large, content_filter,
    malformed (permanent). ``raw_text`` keeps what the provider sent.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
        raw_text: str = "",
    ):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.raw_text = raw_text
        self.attempts = 1  # set by the client to the number of calls made

    def __repr__(self) -> str:
        return f"ProviderError({self.kind}, status={self.status}, retryable={self.retryable})"
