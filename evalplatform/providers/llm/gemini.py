"""Gemini: the generateContent / streamGenerateContent adapter (its words for reasoning,
response schemas and images, its public base URL, its quota 429s) and inline batches
(batchGenerateContent, one batch per model, limits included)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import IO, Any
from urllib.parse import quote

from evalplatform.providers.llm import batch, errors
from evalplatform.providers.llm.base import HTTPAdapter, StreamState, _int_or_none, join_url
from evalplatform.providers.llm.batch import (
    Batches,
    BatchHandle,
    BatchLimits,
    BatchResult,
    BatchStatus,
    Chunk,
    file_chunks,
    json_line,
)
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
    default_base_url = "https://generativelanguage.googleapis.com"
    filtered_finishes = frozenset(_BLOCKED)
    structured_output = True
    reserved_fields = frozenset(
        {
            "model",
            "contents",
            "systemInstruction",
            "candidateCount",
            "maxOutputTokens",
            "temperature",
        }
    )
    reserved_within = "generationConfig"
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

    @classmethod
    def quota_exhausted(
        cls,
        message: str,
        error_type: str,
        code: str,
        hint: float | None,
        headers: Mapping[str, str],
    ) -> bool:
        """RESOURCE_EXHAUSTED is both: a rate limit comes with RetryInfo, a billing one
        without it and says "billing"."""
        return super().quota_exhausted(message, error_type, code, hint, headers) or (
            hint is None and "billing" in message.lower()
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


class GeminiBatches(Batches):
    # Inline batches must stay under 20 MB; larger inputs are split into several.
    limits = BatchLimits(50_000, 20_000_000 - 1)
    _STATES = {
        "PENDING": "validating",
        "RUNNING": "in_progress",
        "SUCCEEDED": "completed",
        "FAILED": "failed",
        "CANCELLED": "cancelled",
        "EXPIRED": "expired",
    }

    def _url(self, path: str) -> str:
        return join_url(self.adapter.base_url, "/v1beta", path)

    def group(self, request: LLMRequest) -> str:
        """A batch is sent to one model's URL: one batch per model."""
        return request.model

    def new_chunk(self, display_name: str, group: str) -> Chunk:
        # The whole body, wrapper included, is in the chunk, so its size is what is sent.
        head = json_line({"display_name": display_name[:128]})[:-1]
        return Chunk(
            prefix=b'{"batch":' + head + b',"input_config":{"requests":{"requests":[',
            separator=b",",
            suffix=b"]}}}}",
        )

    def line(self, custom_id: str, request: LLMRequest) -> bytes:
        return json_line(
            {"request": self.adapter._body(request, stream=False), "metadata": {"key": custom_id}}
        )

    async def create(self, body: IO[bytes], chunk: Chunk, group: str, name: str) -> BatchHandle:
        url = self._url(f"/models/{quote(group)}:batchGenerateContent")
        data = await self._json(
            "POST", url, content=file_chunks(body), headers={"content-length": str(chunk.size)}
        )
        return BatchHandle(
            self.protocol,
            data["name"].removeprefix("batches/"),
            chunk.count,
            chunk.size,
            model=group,
            custom_ids=list(chunk.custom_ids),
        )

    def _status(self, data: dict[str, Any]) -> BatchStatus:
        meta = data.get("metadata") or {}
        raw_state = str(meta.get("state", "BATCH_STATE_PENDING"))
        short = raw_state.removeprefix("BATCH_STATE_").removeprefix("JOB_STATE_")
        stats = meta.get("batchStats") or {}
        return BatchStatus(
            state=self._STATES.get(short, "in_progress"),
            provider_state=raw_state,
            total=int(stats.get("requestCount", 0)),
            succeeded=int(stats.get("successfulRequestCount", 0)),
            failed=int(stats.get("failedRequestCount", 0)),
            raw=data,
        )

    async def poll(self, handle: BatchHandle) -> BatchStatus:
        return self._status(await self._json("GET", self._url(f"/batches/{handle.remote_id}")))

    async def cancel(self, handle: BatchHandle) -> BatchStatus:
        await self._json("POST", self._url(f"/batches/{handle.remote_id}:cancel"))
        return await self.poll(handle)

    async def find(
        self, name: str, *, request_count: int, created_after: float, exclude: set[str]
    ) -> list[BatchHandle]:
        found = []
        params: dict[str, Any] = {"pageSize": batch.FIND_PAGE_SIZE}
        for _ in range(batch.FIND_PAGES):
            listed = await self._json("GET", self._url("/batches"), params=params)
            for operation in listed.get("operations") or listed.get("batches") or []:
                meta = operation.get("metadata") or {}
                remote_id = str(operation.get("name", "")).removeprefix("batches/")
                if meta.get("displayName") == name[:128] and remote_id not in exclude:
                    stats = meta.get("batchStats") or {}
                    found.append(
                        BatchHandle(
                            self.protocol,
                            remote_id,
                            int(stats.get("requestCount", 0)),
                            0,
                            model=str(meta.get("model", "")).removeprefix("models/"),
                        )
                    )
            if not listed.get("nextPageToken"):
                break
            params["pageToken"] = listed["nextPageToken"]
        return found

    async def _results(
        self, handle: BatchHandle, status: BatchStatus
    ) -> AsyncIterator[BatchResult]:
        output = (status.raw.get("response") or {}).get("inlinedResponses") or {}
        answers = output.get("inlinedResponses") or []
        if len(answers) > len(handle.custom_ids):
            raise errors.malformed(json.dumps(status.raw)[:2000], "more results than requests")
        for index, answer in enumerate(answers):
            # Results come back in input order; the key may not be echoed.
            custom_id = str((answer.get("metadata") or {}).get("key") or handle.custom_ids[index])
            if "response" in answer:
                yield self._result(custom_id, answer["response"])
            else:
                error = answer.get("error") or {}
                message = str(error.get("message", "request failed"))
                code = int(error.get("code", 0))
                # google.rpc.Status codes: RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE and
                # DEADLINE_EXCEEDED pass with time (HTTP codes are read the same way).
                status_code = {8: 429, 13: 500, 14: 503, 4: 504}.get(code, code) or None
                yield self._http_failure(custom_id, message, status_code, error)
        for custom_id in handle.custom_ids[len(answers) :]:
            yield self._failure(
                custom_id,
                f"No result (batch {status.state}).",
                "expired" if status.state == "expired" else "cancelled",
            )
