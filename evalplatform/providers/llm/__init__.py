"""The provider layer: one async adapter per wire protocol behind one interface.

- ``types``: the provider-neutral request and response, and ``ProviderError``.
- ``errors``: classification of failures (retryable or permanent) and retry hints.
- ``retry``: the platform schedule (1 s / 5 s / 15 s) with provider hints first.
- ``openai`` / ``anthropic`` / ``gemini``: the HTTP adapters; ``mock``: the offline one.
- ``client``: one shared ``httpx.AsyncClient`` per connection, concurrency cap, rate limit.
"""

from evalplatform.providers.llm.types import LLMRequest, LLMResponse, ProviderError

__all__ = ["LLMRequest", "LLMResponse", "ProviderError"]
