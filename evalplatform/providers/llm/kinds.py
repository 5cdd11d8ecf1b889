"""What callers ask of a provider kind without a connection: its adapter, its words for the
neutral request fields (reasoning, a response schema), and whether it has a batch API.

The apps ask here instead of comparing a connection's ``kind`` with a provider's name: a
new provider is one module (its adapter, and its ``Batches`` when it has a batch API), one
line in ``ADAPTERS`` and ``client.HTTP_ADAPTERS`` (and ``client.BATCHES``), and its
``ProviderKind``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalplatform.providers.llm.anthropic import AnthropicAdapter
from evalplatform.providers.llm.base import Adapter
from evalplatform.providers.llm.client import BATCHES
from evalplatform.providers.llm.gemini import GeminiAdapter
from evalplatform.providers.llm.mock import MockAdapter
from evalplatform.providers.llm.openai import OpenAIAdapter
from evalplatform.providers.llm.types import Reasoning, ResponseSchema

ADAPTERS: dict[str, type[Adapter]] = {
    "openai": OpenAIAdapter,
    "anthropic": AnthropicAdapter,
    "gemini": GeminiAdapter,
    "mock": MockAdapter,
}


def adapter_for(kind: str) -> type[Adapter]:
    """The adapter class of a connection kind (an unknown kind reads as the mock, which
    speaks every provider's words and sends nothing)."""
    return ADAPTERS.get(kind, MockAdapter)


def reserved_params(params: Mapping[str, Any]) -> list[str]:
    """The parameters a configuration may not set, in any provider's words, because the
    platform sets them itself (the model, the messages, the token limit, the temperature,
    one reply, streaming); ``"temperature": null`` (send none) is allowed."""
    adapters = [ADAPTERS[kind] for kind in ("openai", "anthropic", "gemini")]
    fields = frozenset().union(*(a.reserved_fields for a in adapters))
    found = sorted(
        k for k in params if k in fields and not (k == "temperature" and params[k] is None)
    )
    for adapter in adapters:
        nested = params.get(adapter.reserved_within) if adapter.reserved_within else None
        if isinstance(nested, Mapping):
            found += [f"{adapter.reserved_within}.{k}" for k in sorted(nested) if k in fields]
    return found


def own_family(kind: str) -> str | None:
    """The family of the kind's models when its provider serves only its own (a
    connection's kind says who made a model only then)."""
    adapter = ADAPTERS.get(kind)
    return adapter.own_family if adapter is not None else None


def has_batch_api(kind: str) -> bool:
    """Whether the kind speaks a batch protocol (the offline mock speaks none)."""
    return kind in BATCHES


def speaks_chat_completions(kind: str) -> bool:
    """Whether the kind takes Chat Completions bodies as they are."""
    return adapter_for(kind).chat_completions


def has_structured_output(kind: str) -> bool:
    """Whether the kind can hold a reply to a JSON schema."""
    return adapter_for(kind).structured_output


def schema_params(kind: str, schema: ResponseSchema) -> dict[str, Any]:
    """The request parameters that hold a reply to ``schema`` in the kind's words."""
    return adapter_for(kind).schema_params(schema)


def reasoning_setting_as_written(params: Mapping[str, Any]) -> Any:
    """The reasoning setting among a configuration's parameters in any provider's words (as
    the mock reads them: Anthropic's, then Gemini's, then OpenAI's)."""
    return MockAdapter.reasoning_setting(params) if isinstance(params, Mapping) else None


def reasoning_in(kind: str, params: Mapping[str, Any]) -> Reasoning | None:
    """The reasoning a configuration's parameters ask for, in no provider's words."""
    return adapter_for(kind).reasoning_in(params) if isinstance(params, Mapping) else None
