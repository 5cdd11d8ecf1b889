"""Gemini generateContent / streamGenerateContent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from evalplatform.providers.llm import errors
from evalplatform.providers.llm.base import HTTPAdapter, StreamState, _int_or_none, join_url
from evalplatform.providers.llm.types import LLMRequest, Reasoning, ResponseSchema

_BLOCKED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII"}


def _without_additional(schema: Any) -> Any:
    """A JSON schema without ``additionalProperties`` (Gemini's schemas have none)."""
    if isinstance(schema, dict):
        return {k: _without_additional(v) for k, v in schema.items() if k != "additionalProperties"}
    if isinstance(schema, list):
        return [_without_additional(v) for v in schema]
    return schema


class GeminiAdapter(HTTPAdapter):
    protocol = "gemini"
    filtered_finishes = frozenset(_BLOCKED)
    structured_output = True
    own_family = "google"

    @classmethod
    def schema_params(cls, schema: ResponseSchema) -> dict[str, Any]:
        """``responseSchema`` (without ``additionalProperties``, which Gemini has not)."""
        return {
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseSchema": _without_additional(dict(schema.schema)),
            }
        }

    @classmethod
    def reasoning_params(cls, reasoning: Reasoning) -> dict[str, Any]:
        """``thinkingConfig``: a budget of 0 turns thinking off; an enabled request gives
        its budget, else its effort as ``thinkingLevel``, else -1 (the model decides)."""
        config: dict[str, Any]
        if not reasoning.enabled:
            config = {"thinkingBudget": 0}
        elif reasoning.budget_tokens is not None:
            config = {"thinkingBudget": reasoning.budget_tokens}
        elif reasoning.effort:
            config = {"thinkingLevel": reasoning.effort}
        else:
            config = {"thinkingBudget": -1}
        return {"generationConfig": {"thinkingConfig": config}}

    @classmethod
    def reasoning_setting(cls, params: Mapping[str, Any]) -> Any:
        """``thinkingConfig``, in ``generationConfig`` as the request carries it, or on its
        own: e.g. ``{"thinkingBudget": 0}`` or ``{"thinkingLevel": "low"}``."""
        generation = params.get("generationConfig")
        for holder in (generation if isinstance(generation, Mapping) else {}, params):
            if holder.get("thinkingConfig") is not None:
                return holder["thinkingConfig"]
        return None

    @classmethod
    def reasoning_in(cls, params: Mapping[str, Any]) -> Reasoning | None:
        setting = cls.reasoning_setting(params)
        if not isinstance(setting, Mapping):
            return None if setting is None else Reasoning(enabled=not cls.is_off(setting))
        budget = setting.get("thinkingBudget")
        level = setting.get("thinkingLevel")
        if budget == 0 or (level is not None and cls.is_off(level)):
            return Reasoning(enabled=False)
        return Reasoning(
            enabled=True,
            effort=str(level) if level is not None else None,
            budget_tokens=budget if isinstance(budget, int) and budget > 0 else None,
        )

    def headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "x-goog-api-key": self.api_key}

    def url(self, request: LLMRequest, *, stream: bool) -> str:
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return join_url(self.base_url, "/v1beta", f"/models/{quote(request.model)}:{method}")

    def body(self, request: LLMRequest, *, stream: bool) -> dict[str, Any]:
        earlier = [
            {"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
            for role, text in request.turns
        ]
        body: dict[str, Any] = {
            "contents": [*earlier, {"role": "user", "parts": self.user_parts(request)}]
        }
        if request.system:
            body["systemInstruction"] = {"parts": [{"text": request.system}]}
        config: dict[str, Any] = {}
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if request.max_tokens is not None:
            config["maxOutputTokens"] = request.max_tokens
        if config:
            body["generationConfig"] = config
        return body

    @staticmethod
    def user_parts(request: LLMRequest) -> list[dict[str, Any]]:
        """The final user message's parts: its text, then each image (inline bytes, or a
        file URI)."""
        images = [
            {"file_data": {"mime_type": image.media_type, "file_uri": image.url}}
            if image.url
            else {"inline_data": {"mime_type": image.media_type, "data": image.data}}
            for image in request.images
        ]
        return [{"text": request.user}, *images]

    @staticmethod
    def _usage(data: Any) -> tuple[int, int]:
        usage = data.get("usageMetadata") or {}
        # Output is billed as candidates + thoughts.
        output = int(usage.get("candidatesTokenCount", 0)) + int(usage.get("thoughtsTokenCount", 0))
        return int(usage.get("promptTokenCount", 0)), output

    def details(self, data: Any) -> tuple[str, int | None]:
        usage = data.get("usageMetadata") or {}
        return data.get("modelVersion") or "", _int_or_none(usage.get("thoughtsTokenCount"))

    @staticmethod
    def _text(candidate: Any) -> str:
        parts = (candidate.get("content") or {}).get("parts") or []
        return "".join(p.get("text", "") for p in parts if not p.get("thought"))

    def parse(self, data: Any) -> tuple[str, int, int, str]:
        candidates = data.get("candidates") or []
        if not candidates:
            reason = (data.get("promptFeedback") or {}).get("blockReason")
            if reason:
                raise errors.content_filtered(reason)
            raise KeyError("candidates")
        candidate = candidates[0]
        finish = candidate.get("finishReason") or ""
        text = self._text(candidate)
        if finish in _BLOCKED and not text:
            raise errors.content_filtered(finish)
        input_tokens, output_tokens = self._usage(data)
        return text, input_tokens, output_tokens, finish

    def on_event(self, state: StreamState, event: str, data: Any) -> str:
        if "usageMetadata" in data:
            state.input_tokens, state.output_tokens = self._usage(data)
            state.reasoning_tokens = self.details(data)[1]
        if isinstance(data.get("modelVersion"), str):
            state.model_version = data["modelVersion"]
        candidates = data.get("candidates") or []
        if not candidates:
            reason = (data.get("promptFeedback") or {}).get("blockReason")
            if reason:
                raise errors.content_filtered(reason)
            return ""
        candidate = candidates[0]
        if candidate.get("finishReason"):
            state.finish_reason = candidate["finishReason"]
            state.finished = True
        return self._text(candidate)
