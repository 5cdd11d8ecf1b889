"""The provider layer: one async adapter per wire protocol behind one interface.

- ``types``: the provider-neutral request and response, and ``ProviderError``.
- ``errors``: classification of failures (retryable or permanent) and retry hints.
- ``retry``: the platform schedule (1 s / 5 s / 15 s) with provider hints first.
- ``base``: the adapter interface and the HTTP plumbing the adapters share.
- ``batch``: the batch interface, its chunking and what the batch protocols share.
- ``openai`` / ``anthropic`` / ``gemini``: one module per provider, holding everything about
  it: the live adapter (its words for reasoning, response schemas and images), its default
  base URL, what its quota 429s look like, and its ``Batches`` with their limits.
- ``mock``: the offline adapter (speaks every provider's words, has no batch API).
- ``client``: one shared ``httpx.AsyncClient`` per connection, concurrency cap, rate limit;
  the registries of HTTP adapters and batch protocols by kind.
- ``kinds``: what the apps ask of a connection kind without a connection.
"""

from evalplatform.providers.llm.types import LLMRequest, LLMResponse, ProviderError

__all__ = ["LLMRequest", "LLMResponse", "ProviderError"]
