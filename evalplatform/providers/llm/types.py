from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reasoning:
    """Whether a model should reason (think) before it answers, in no provider's words.

    ``effort``: "minimal", "low", "medium" or "high" (OpenAI's ``reasoning_effort``,
    Gemini's ``thinkingLevel``); ``budget_tokens``: the most tokens to think with
    (Anthropic's ``budget_tokens``, Gemini's ``thinkingBudget``). Each adapter maps them to
    its wire format (``Adapter.reasoning_params``) and reads them back from a configuration's
    parameters in its own words (``Adapter.reasoning_in``).
    """

    enabled: bool
    effort: str | None = None
    budget_tokens: int | None = None


@dataclass(frozen=True)
class ResponseSchema:
    """A JSON schema the reply must follow (structured output), named for the providers
    that want a name (OpenAI's ``json_schema.name``, Anthropic's forced tool)."""

    schema: Mapping[str, Any]
    name: str = "reply"


@dataclass(frozen=True)
class ImagePart:
    """An image of the final user message: its bytes (``data``, base64) with their
    ``media_type``, or a ``url`` the provider fetches itself."""

    media_type: str
    data: str = ""
    url: str = ""

    def data_url(self) -> str:
        """The image as a URL: its own, or a ``data:`` URL of its bytes."""
        return self.url or f"data:{self.media_type};base64,{self.data}"


@dataclass(frozen=True)
class LLMRequest:
    """What to ask, independent of the provider.

    ``turns``: the conversation before the final ``user`` message, as (role, text) pairs
    with role "user" or "assistant" (a judge file's multi-turn rows). ``images``: content
    parts of the final user message beside its text. ``response_schema``
    and ``reasoning`` say what the caller means; each adapter writes them in its provider's
    words, live and batch. ``repetition``: which of a design's repeated calls this is (None
    outside such a design): providers that take a seed may use it (the mock does, so
    repeated calls differ reproducibly). ``params`` is deep-merged into the provider's
    request body last, for settings the neutral fields do not cover (``top_p``, a
    provider's own options, ...); what it sets wins.
    """

    model: str
    user: str
    system: str = ""
    turns: tuple[tuple[str, str], ...] = ()
    temperature: float | None = None
    max_tokens: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    response_schema: ResponseSchema | None = None
    reasoning: Reasoning | None = None
    repetition: int | None = None
    images: tuple[ImagePart, ...] = ()


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
