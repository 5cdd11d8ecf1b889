"""The OpenAI, Anthropic and Gemini batch protocols (see ``batch`` for the interface)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import IO, Any
from urllib.parse import quote, urlsplit

from evalplatform.providers.llm import errors
from evalplatform.providers.llm.base import join_url
from evalplatform.providers.llm.batch import (
    Batches,
    BatchHandle,
    BatchResult,
    BatchStatus,
    Chunk,
    file_chunks,
)
from evalplatform.providers.llm.types import LLMRequest

# How far the provider's clock may be from ours when matching a batch by creation time.
CLOCK_SKEW_S = 120
# How many pages of recent batches ``find`` reads at most, of how many each.
FIND_PAGES = 20
FIND_PAGE_SIZE = 100


def _dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


class OpenAIBatches(Batches):
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
        return _dumps(
            {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}
        )

    async def create(self, body: IO[bytes], chunk: Chunk, group: str, name: str) -> BatchHandle:
        upload = await self._json(
            "POST",
            self._url("/files"),
            data={"purpose": "batch"},
            files={"file": (f"{name}.jsonl", body, "application/jsonl")},
        )
        batch = await self._json(
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
            "openai", batch["id"], chunk.count, chunk.size, input_file_id=upload["id"]
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
        params: dict[str, Any] = {"limit": FIND_PAGE_SIZE}
        for _ in range(FIND_PAGES):  # newest first: stop at batches older than the submission
            listed = await self._json("GET", self._url("/batches"), params=params)
            data = listed.get("data") or []
            for b in data:
                if (b.get("metadata") or {}).get("name") == name[:512] and b["id"] not in exclude:
                    found.append(
                        BatchHandle(
                            "openai",
                            b["id"],
                            int((b.get("request_counts") or {}).get("total", 0)),
                            0,
                            input_file_id=str(b.get("input_file_id") or ""),
                        )
                    )
            older = data and int(data[-1].get("created_at", 0)) < created_after - CLOCK_SKEW_S
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


class AnthropicBatches(Batches):
    def _url(self, path: str = "") -> str:
        return join_url(self.adapter.base_url, "/v1", "/messages/batches" + path)

    def new_chunk(self, display_name: str, group: str) -> Chunk:
        return Chunk(prefix=b'{"requests":[', separator=b",", suffix=b"]}")

    def line(self, custom_id: str, request: LLMRequest) -> bytes:
        return _dumps({"custom_id": custom_id, "params": self.adapter._body(request, stream=False)})

    async def create(self, body: IO[bytes], chunk: Chunk, group: str, name: str) -> BatchHandle:
        data = await self._json(
            "POST",
            self._url(),
            content=file_chunks(body),
            headers={"content-length": str(chunk.size)},
        )
        return BatchHandle("anthropic", data["id"], chunk.count, chunk.size)

    def _status(self, data: dict[str, Any]) -> BatchStatus:
        counts = data.get("request_counts") or {}
        raw_state = data["processing_status"]
        # Only "ended" is an end; anything unknown is still in progress.
        state = {"ended": "completed", "canceling": "cancelling"}.get(raw_state, "in_progress")
        total = sum(int(v) for v in counts.values())
        if raw_state == "ended" and data.get("cancel_initiated_at"):
            state = "cancelled"
        elif raw_state == "ended" and int(counts.get("expired", 0)):
            # The batch ran out of time (24 h): what finished is kept, the rest expired.
            state = "expired"
        return BatchStatus(
            state=state,
            provider_state=raw_state,
            total=total,
            succeeded=int(counts.get("succeeded", 0)),
            failed=sum(int(counts.get(k, 0)) for k in ("errored", "canceled", "expired")),
            output_refs={"results_url": data["results_url"]} if data.get("results_url") else {},
            raw=data,
        )

    async def poll(self, handle: BatchHandle) -> BatchStatus:
        return self._status(await self._json("GET", self._url(f"/{handle.remote_id}")))

    async def cancel(self, handle: BatchHandle) -> BatchStatus:
        return self._status(await self._json("POST", self._url(f"/{handle.remote_id}/cancel")))

    async def find(
        self, name: str, *, request_count: int, created_after: float, exclude: set[str]
    ) -> list[BatchHandle]:
        # Message batches keep no name: match the request count and the creation time.
        found = []
        params: dict[str, Any] = {"limit": FIND_PAGE_SIZE}
        for _ in range(FIND_PAGES):
            listed = await self._json("GET", self._url(), params=params)
            data = listed.get("data") or []
            oldest = None
            for b in data:
                try:
                    created = datetime.fromisoformat(str(b["created_at"]).replace("Z", "+00:00"))
                except (KeyError, ValueError):
                    continue
                oldest = created.timestamp()
                total = sum(int(v) for v in (b.get("request_counts") or {}).values())
                if (
                    b["id"] not in exclude
                    and total == request_count
                    and created.timestamp() >= created_after - CLOCK_SKEW_S
                ):
                    found.append(BatchHandle("anthropic", b["id"], total, 0))
            older = oldest is not None and oldest < created_after - CLOCK_SKEW_S
            if not listed.get("has_more") or not data or older:
                break
            params["after_id"] = listed.get("last_id") or data[-1]["id"]
        return found

    async def _results(
        self, handle: BatchHandle, status: BatchStatus
    ) -> AsyncIterator[BatchResult]:
        # The key goes with the request: follow results_url only on the configured host.
        own = self._url(f"/{handle.remote_id}/results")
        given = status.output_refs.get("results_url", "")
        url = given if given and urlsplit(given)[:2] == urlsplit(own)[:2] else own
        async for line in self._lines(url):
            custom_id = str(line.get("custom_id"))
            result = line.get("result") or {}
            kind = result.get("type")
            if kind == "succeeded":
                yield self._result(custom_id, result.get("message"))
            elif kind == "errored":
                error = (result.get("error") or {}).get("error") or {}
                error_type = str(error.get("type", "api_error"))
                retry = error_type in {"api_error", "overloaded_error", "rate_limit_error"}
                yield self._failure(
                    custom_id,
                    str(error.get("message", error_type)),
                    "server" if retry else "bad_request",
                    result,
                )
            else:
                yield self._failure(
                    custom_id,
                    f"Request {kind}.",
                    "cancelled" if kind == "canceled" else "expired",
                    result,
                )


class GeminiBatches(Batches):
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

    def new_chunk(self, display_name: str, group: str) -> Chunk:
        # The whole body, wrapper included, is in the chunk, so its size is what is sent.
        head = _dumps({"display_name": display_name[:128]})[:-1]
        return Chunk(
            prefix=b'{"batch":' + head + b',"input_config":{"requests":{"requests":[',
            separator=b",",
            suffix=b"]}}}}",
        )

    def line(self, custom_id: str, request: LLMRequest) -> bytes:
        return _dumps(
            {"request": self.adapter._body(request, stream=False), "metadata": {"key": custom_id}}
        )

    async def create(self, body: IO[bytes], chunk: Chunk, group: str, name: str) -> BatchHandle:
        url = self._url(f"/models/{quote(group)}:batchGenerateContent")
        data = await self._json(
            "POST", url, content=file_chunks(body), headers={"content-length": str(chunk.size)}
        )
        return BatchHandle(
            "gemini",
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
        params: dict[str, Any] = {"pageSize": FIND_PAGE_SIZE}
        for _ in range(FIND_PAGES):
            listed = await self._json("GET", self._url("/batches"), params=params)
            for operation in listed.get("operations") or listed.get("batches") or []:
                meta = operation.get("metadata") or {}
                remote_id = str(operation.get("name", "")).removeprefix("batches/")
                if meta.get("displayName") == name[:128] and remote_id not in exclude:
                    stats = meta.get("batchStats") or {}
                    found.append(
                        BatchHandle(
                            "gemini",
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
