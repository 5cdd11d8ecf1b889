"""OpenAI Chat Completions and any OpenAI-compatible server (Together, Ollama, vLLM, ...):
the live adapter (its words for reasoning, response schemas and images, its public base URL)
and the Batch API (files, batches, limits). Its quota word, ``insufficient_quota``, is the
one every adapter reads (``HTTPAdapter.quota_exhausted``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import IO, Any

from evalplatform.providers.llm import batch, errors
from evalplatform.providers.llm.base import HTTPAdapter, StreamState, _int_or_none, join_url
from evalplatform.providers.llm.batch import (
    Batches,
    BatchHandle,
    BatchLimits,
    BatchResult,
    BatchStatus,
    Chunk,
    json_line,
)
from evalplatform.providers.llm.types import LLMRequest, Reasoning, ResponseSchema

# The effort asked for when a request wants reasoning and names none (OpenAI's default).
DEFAULT_EFFORT = "medium"


class OpenAIAdapter(HTTPAdapter):
    protocol = "openai"
    default_base_url = "https://api.openai.com"
    filtered_finishes = frozenset({"content_filter"})
    structured_output = True
    reserved_fields = frozenset(
        {"model", "messages", "stream", "n", "max_tokens", "max_completion_tokens", "temperature"}
    )
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


class OpenAIBatches(Batches):
    limits = BatchLimits(50_000, 200 * 1024 * 1024)
    _STATES = {
        "validating": "validating",
        "in_progress": "in_progress",
        "finalizing": "finalizing",
        "completed": "completed",
        "failed": "failed",
        "expired": "expired",
        "cancelling": "cancelling",
        "cancelled": "cancelled",
    }

    def _url(self, path: str) -> str:
        return join_url(self.adapter.base_url, "/v1", path)

    def new_chunk(self, display_name: str, group: str) -> Chunk:
        return Chunk()

    def line(self, custom_id: str, request: LLMRequest) -> bytes:
        body = self.adapter._body(request, stream=False)
        return json_line(
            {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}
        )

    async def create(self, body: IO[bytes], chunk: Chunk, group: str, name: str) -> BatchHandle:
        upload = await self._json(
            "POST",
            self._url("/files"),
            data={"purpose": "batch"},
            files={"file": (f"{name}.jsonl", body, "application/jsonl")},
        )
        created = await self._json(
            "POST",
            self._url("/batches"),
            json={
                "input_file_id": upload["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "metadata": {"name": name[:512]},
            },
        )
        return BatchHandle(
            self.protocol, created["id"], chunk.count, chunk.size, input_file_id=upload["id"]
        )

    def _status(self, data: dict[str, Any]) -> BatchStatus:
        counts = data.get("request_counts") or {}
        refs = {k: data[k] for k in ("output_file_id", "error_file_id") if data.get(k)}
        return BatchStatus(
            state=self._STATES.get(data["status"], "in_progress"),
            provider_state=data["status"],
            total=int(counts.get("total", 0)),
            succeeded=int(counts.get("completed", 0)),
            failed=int(counts.get("failed", 0)),
            output_refs=refs,
            raw=data,
        )

    async def poll(self, handle: BatchHandle) -> BatchStatus:
        return self._status(await self._json("GET", self._url(f"/batches/{handle.remote_id}")))

    async def cancel(self, handle: BatchHandle) -> BatchStatus:
        url = self._url(f"/batches/{handle.remote_id}/cancel")
        return self._status(await self._json("POST", url))

    async def find(
        self, name: str, *, request_count: int, created_after: float, exclude: set[str]
    ) -> list[BatchHandle]:
        found = []
        params: dict[str, Any] = {"limit": batch.FIND_PAGE_SIZE}
        for _ in range(batch.FIND_PAGES):  # newest first: stop at batches older than the submission
            listed = await self._json("GET", self._url("/batches"), params=params)
            data = listed.get("data") or []
            for b in data:
                if (b.get("metadata") or {}).get("name") == name[:512] and b["id"] not in exclude:
                    found.append(
                        BatchHandle(
                            self.protocol,
                            b["id"],
                            int((b.get("request_counts") or {}).get("total", 0)),
                            0,
                            input_file_id=str(b.get("input_file_id") or ""),
                        )
                    )
            older = data and int(data[-1].get("created_at", 0)) < created_after - batch.CLOCK_SKEW_S
            if not listed.get("has_more") or not data or older:
                break
            params["after"] = data[-1]["id"]
        return found

    async def _results(
        self, handle: BatchHandle, status: BatchStatus
    ) -> AsyncIterator[BatchResult]:
        for ref in ("output_file_id", "error_file_id"):
            file_id = status.output_refs.get(ref)
            if not file_id:
                continue
            async for line in self._lines(self._url(f"/files/{file_id}/content")):
                custom_id = str(line.get("custom_id"))
                response, error = line.get("response"), line.get("error")
                if response and int(response.get("status_code", 0)) < 300:
                    yield self._result(custom_id, response.get("body"))
                elif response:
                    body = response.get("body") or {}
                    message = (body.get("error") or {}).get("message", "request failed")
                    status_code = int(response.get("status_code", 0)) or None
                    yield self._http_failure(custom_id, message, status_code, body)
                else:
                    code = str((error or {}).get("code", "batch_error"))
                    kind = (
                        "expired"
                        if code == "batch_expired"
                        else ("cancelled" if "cancel" in code else "batch_error")
                    )
                    yield self._failure(
                        custom_id, str((error or {}).get("message", code)), kind, error
                    )
