"""OpenAI Chat Completions and any OpenAI-compatible server (Together, Ollama, vLLM, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalplatform.providers.llm import errors
from evalplatform.providers.llm.base import HTTPAdapter, StreamState, _int_or_none, join_url
from evalplatform.providers.llm.types import LLMRequest, Reasoning, ResponseSchema

# The effort asked for when a request wants reasoning and names none (OpenAI's default).
DEFAULT_EFFORT = "medium"


class OpenAIAdapter(HTTPAdapter):
    protocol = "openai"
    filtered_finishes = frozenset({"content_filter"})
    structured_output = True
    chat_completions = True

    @classmethod
    def schema_params(cls, schema: ResponseSchema) -> dict[str, Any]:
        """A strict JSON schema ``response_format``."""
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": schema.name, "strict": True, "schema": dict(schema.schema)},
            }
        }

    @classmethod
    def reasoning_params(cls, reasoning: Reasoning) -> dict[str, Any]:
        """``reasoning_effort``: "none" turns it off; a token budget has no OpenAI word, so
        an enabled request without an effort asks for the default one."""
        if not reasoning.enabled:
            return {"reasoning_effort": "none"}
        return {"reasoning_effort": reasoning.effort or DEFAULT_EFFORT}

    @classmethod
    def reasoning_setting(cls, params: Mapping[str, Any]) -> Any:
        """``reasoning_effort`` (or the Responses API's ``reasoning.effort``), as
        ``{"reasoning_effort": effort}``."""
        reasoning = params.get("reasoning")
        effort = params.get("reasoning_effort")
        if effort is None and isinstance(reasoning, dict):
            effort = reasoning.get("effort")
        return {"reasoning_effort": effort} if effort is not None else None

    @classmethod
    def reasoning_in(cls, params: Mapping[str, Any]) -> Reasoning | None:
        setting = cls.reasoning_setting(params)
        if setting is None:
            return None
        effort = setting["reasoning_effort"]
        if cls.is_off(effort):
            return Reasoning(enabled=False)
        return Reasoning(enabled=True, effort=str(effort))

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def url(self, request: LLMRequest, *, stream: bool) -> str:
        return join_url(self.base_url, "/v1", "/chat/completions")

    def body(self, request: LLMRequest, *, stream: bool) -> dict[str, Any]:
        messages = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages += [{"role": role, "content": text} for role, text in request.turns]
        messages.append({"role": "user", "content": self.user_content(request)})
        body: dict[str, Any] = {"model": request.model, "messages": messages}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body[self.options.get("max_tokens_param", "max_completion_tokens")] = request.max_tokens
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    @staticmethod
    def user_content(request: LLMRequest) -> Any:
        """The final user message's content: its text, or with images, content parts."""
        if not request.images:
            return request.user
        return [
            {"type": "text", "text": request.user},
            *({"type": "image_url", "image_url": {"url": i.data_url()}} for i in request.images),
        ]

    def parse(self, data: Any) -> tuple[str, int, int, str]:
        choice = data["choices"][0]
        finish = choice.get("finish_reason") or ""
        text = choice["message"].get("content") or ""
        if finish == "content_filter" and not text:
            raise errors.content_filtered("content_filter")
        usage = data.get("usage") or {}
        return (
            text,
            int(usage.get("prompt_tokens", 0)),
            int(usage.get("completion_tokens", 0)),
            finish,
        )

    def details(self, data: Any) -> tuple[str, int | None]:
        usage = data.get("usage") or {}
        detail = usage.get("completion_tokens_details") or {}
        return data.get("model") or "", _int_or_none(detail.get("reasoning_tokens"))

    def on_event(self, state: StreamState, event: str, data: Any) -> str:
        if "error" in data:
            raise errors.ProviderError(
                str(data["error"].get("message", data["error"])), kind="server", retryable=True
            )
        usage = data.get("usage")
        if usage:
            state.input_tokens = int(usage.get("prompt_tokens", 0))
            state.output_tokens = int(usage.get("completion_tokens", 0))
            detail = usage.get("completion_tokens_details") or {}
            state.reasoning_tokens = _int_or_none(detail.get("reasoning_tokens"))
        if isinstance(data.get("model"), str):
            state.model_version = data["model"]
        choices = data.get("choices") or []
        if not choices:
            return ""
        choice = choices[0]
        if choice.get("finish_reason"):
            state.finish_reason = choice["finish_reason"]
            state.finished = True
        return (choice.get("delta") or {}).get("content") or ""
