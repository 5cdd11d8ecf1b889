"""The fake provider's batch APIs: OpenAI files + batches, Anthropic message batches, Gemini
inline batches. A batch moves through its states over ``batch_duration_s``; lines fail by
``batch_failure_rate`` or by a ``[[fault:...]]`` marker; ``[[batch:expire]]`` in any request
makes the batch expire with half its requests done; results come back shuffled (OpenAI,
Anthropic) or in input order without keys (Gemini). ``[[fault:KIND*N]]`` fails only the first
N submissions of that request; ``[[fault:reject]]`` makes the provider refuse a submission
(HTTP 500; ``[[fault:reject-401]]``: refuse the API key, ``[[fault:reject-404]]``: the model);
``[[batch:drop]]`` loses that request's result line. Each protocol also lists recent batches."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any, Protocol
from urllib.parse import parse_qs

from evalplatform.providers.fake import wire
from evalplatform.providers.fake.config import FakeConfig
from evalplatform.providers.fake.wire import Reply, json_reply
from evalplatform.providers.llm.types import LLMRequest

_FAULT = re.compile(r"\[\[fault:([a-z0-9_]+)(?:\*(\d+))?")
_TYPES = "type.googleapis.com/google.ai.generativelanguage.v1main."
# Result lines of a streamed results file per block.
STREAM_LINES = 500
_ERROR_STATUS = {"400": 400, "401": 401, "404": 404, "quota": 429, "429": 429, "529": 529}


@dataclass
class FakeBatch:
    id: str
    protocol: str
    requests: list[tuple[str, LLMRequest]]
    created: float
    model: str = ""
    input_file_id: str = ""
    name: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)  # custom_id -> its n-th submission
    sequence: int = 0  # the n-th batch this server was given
    cancelled_at: float | None = None
    processed_at_cancel: int = 0
    cancel_polled: bool = False
    expire: bool = False
    kinds: list[tuple[str, str, Any]] | None = field(default=None, repr=False)
    answers: dict[int, tuple[LLMRequest, str, str, Any]] = field(default_factory=dict, repr=False)


class Answerer(Protocol):
    """What the batch store needs of the fake provider: its settings and its answers."""

    config: FakeConfig

    def answer(self, request: LLMRequest) -> tuple[str, str, tuple[int, int]]: ...


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


class BatchStore:
    def __init__(self, provider: Answerer):
        self.provider = provider
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, FakeBatch] = {}
        # Times each custom_id was submitted, across batches (``[[fault:KIND*N]]`` fails
        # only its first N submissions).
        self.seen: dict[str, int] = {}

    def routes(self) -> list[tuple[str, re.Pattern[str], Any]]:
        r = re.compile
        return [
            ("POST", r(r"^/v1/files$"), self.openai_upload),
            ("GET", r(r"^/v1/files/(?P<file_id>[^/]+)/content$"), self.openai_file),
            ("POST", r(r"^/v1/batches$"), self.openai_create),
            ("GET", r(r"^/v1/batches$"), self.openai_list),
            ("GET", r(r"^/v1/batches/(?P<batch_id>[^/]+)$"), self.openai_get),
            ("POST", r(r"^/v1/batches/(?P<batch_id>[^/]+)/cancel$"), self.openai_cancel),
            ("POST", r(r"^/v1/messages/batches$"), self.anthropic_create),
            ("GET", r(r"^/v1/messages/batches$"), self.anthropic_list),
            ("GET", r(r"^/v1/messages/batches/(?P<batch_id>[^/]+)$"), self.anthropic_get),
            (
                "POST",
                r(r"^/v1/messages/batches/(?P<batch_id>[^/]+)/cancel$"),
                self.anthropic_cancel,
            ),
            (
                "GET",
                r(r"^/v1/messages/batches/(?P<batch_id>[^/]+)/results$"),
                self.anthropic_results,
            ),
            (
                "POST",
                r(r"^/v1beta/models/(?P<model>[^/:]+):batchGenerateContent$"),
                self.gemini_create,
            ),
            ("GET", r(r"^/v1beta/batches$"), self.gemini_list),
            ("GET", r(r"^/v1beta/batches/(?P<batch_id>[^/:]+)$"), self.gemini_get),
            ("POST", r(r"^/v1beta/batches/(?P<batch_id>[^/:]+):cancel$"), self.gemini_cancel),
        ]

    # --- shared -------------------------------------------------------------------------------
    def _reply(self, data: Any, status: int = 200) -> Reply:
        return json_reply(data, status)

    def _missing(self, protocol: str, what: str) -> Reply:
        return self._reply(wire.error_body(protocol, 404, f"No such {what}."), 404)

    def _add(
        self, protocol: str, requests: list[tuple[str, LLMRequest]], **fields: Any
    ) -> FakeBatch:
        prefix = {"openai": "batch_", "anthropic": "msgbatch_", "gemini": ""}[protocol]
        batch = FakeBatch(
            id=prefix + uuid.uuid4().hex[:20],
            protocol=protocol,
            requests=requests,
            created=time.time(),
            expire=any("[[batch:expire]]" in r.user for _, r in requests),
            sequence=len(self.batches) + 1,
            **fields,
        )
        for custom_id, _ in requests:
            self.seen[custom_id] = batch.attempts[custom_id] = self.seen.get(custom_id, 0) + 1
        self.batches[batch.id] = batch
        return batch

    def _rejected(self, protocol: str, requests: list[tuple[str, LLMRequest]]) -> Reply | None:
        """``[[fault:reject]]`` in a request: the provider refuses the whole submission
        (``[[fault:reject-401]]``, ``-404``: with that status)."""
        for status, marker in ((401, "-401"), (404, "-404"), (500, "")):
            if any(f"[[fault:reject{marker}]]" in r.user for _, r in requests):
                message = {401: "Incorrect API key provided.", 404: "The model does not exist."}
                text = message.get(status, "Batch submission failed.")
                return self._reply(wire.error_body(protocol, status, text), status)
        return None

    def _fraction(self, batch: FakeBatch) -> float:
        duration = self.provider.config.batch_duration_s
        return 1.0 if duration <= 0 else min(1.0, (time.time() - batch.created) / duration)

    def _processed(self, batch: FakeBatch) -> int:
        if batch.cancelled_at is not None:
            return batch.processed_at_cancel
        done = math.floor(len(batch.requests) * self._fraction(batch))
        return min(done, len(batch.requests) // 2) if batch.expire else done

    def _ended(self, batch: FakeBatch) -> bool:
        return batch.cancelled_at is not None or self._fraction(batch) >= 1.0

    def _kinds(self, batch: FakeBatch) -> list[tuple[str, str, Any]]:
        """(custom_id, 'succeeded'|'errored'|'expired'|'cancelled', an error's status) per
        request: what the counts need, without writing the answers."""
        if batch.kinds is not None:
            return batch.kinds
        processed = (
            self._processed(batch)
            if batch.cancelled_at is not None or batch.expire
            else len(batch.requests)
        )
        config = self.provider.config
        result: list[tuple[str, str, Any]] = []
        for index, (custom_id, request) in enumerate(batch.requests):
            if index >= processed:
                result.append(
                    (custom_id, "cancelled" if batch.cancelled_at is not None else "expired", None)
                )
                continue
            marker = _FAULT.search(f"{request.system}\n{request.user}")
            if marker and marker.group(2) and batch.attempts[custom_id] > int(marker.group(2)):
                marker = None  # failed its first N times already
            # Drawn from the request's own history, not the random batch id: the same
            # requests fail the same way on every run, and a re-submission draws afresh.
            attempt = batch.attempts[custom_id]
            rng = random.Random(f"{config.seed}:{custom_id}:{attempt}")  # noqa: S311
            if marker or rng.random() < config.batch_failure_rate:
                kind = marker.group(1) if marker else "500"
                result.append((custom_id, "errored", _ERROR_STATUS.get(kind, 500)))
                continue
            result.append((custom_id, "succeeded", None))
        if self._ended(batch):
            batch.kinds = result
        return result

    def _answer(self, batch: FakeBatch, index: int) -> tuple[LLMRequest, str, str, Any]:
        """The answer to the batch's ``index``-th request, written once, when first read."""
        if index not in batch.answers:
            request = batch.requests[index][1]
            batch.answers[index] = (request, *self.provider.answer(request))
        return batch.answers[index]

    def _outcomes(self, batch: FakeBatch) -> list[tuple[str, str, Any]]:
        """(custom_id, 'succeeded'|'errored'|'expired'|'cancelled', payload) per request: a
        success's payload is its answer, written when the results are first read (not at
        each poll)."""
        return [
            (custom_id, kind, self._answer(batch, index) if kind == "succeeded" else payload)
            for index, (custom_id, kind, payload) in enumerate(self._kinds(batch))
        ]

    def _shuffled(self, batch: FakeBatch) -> list[tuple[int, str, str, Any]]:
        """(request index, custom_id, kind, an error's status) per result line, in the
        order the provider sends them (answers are written as the lines are)."""
        # [[batch:drop]]: the provider "forgets" that request's result line.
        outcomes = [
            (index, *outcome)
            for index, (outcome, (_, request)) in enumerate(
                zip(self._kinds(batch), batch.requests, strict=True)
            )
            if "[[batch:drop]]" not in request.user
        ]
        random.Random(f"{self.provider.config.seed}:{batch.sequence}").shuffle(outcomes)  # noqa: S311
        return outcomes

    def _counts(self, batch: FakeBatch) -> tuple[int, int]:
        processed = self._processed(batch)
        outcomes = self._kinds(batch)[:processed]
        ok = sum(1 for _, kind, _ in outcomes if kind == "succeeded")
        return ok, sum(1 for _, kind, _ in outcomes if kind == "errored")

    def _cancel(self, batch: FakeBatch) -> None:
        if batch.cancelled_at is None and not self._ended(batch):
            batch.processed_at_cancel = self._processed(batch)
            batch.cancelled_at = time.time()

    # --- OpenAI -------------------------------------------------------------------------------
    async def openai_upload(self, raw: bytes, headers: dict[str, str], **_: Any) -> Reply:
        message = BytesParser(policy=HTTP).parsebytes(
            b"Content-Type: " + headers.get("content-type", "").encode() + b"\r\n\r\n" + raw
        )
        fields: dict[str, str] = {}
        content, filename = b"", "upload.jsonl"
        for part in message.iter_parts():  # type: ignore[attr-defined]
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True) or b""
            if part.get_filename():
                filename, content = str(part.get_filename()), bytes(payload)
            elif name:
                fields[str(name)] = bytes(payload).decode()
        if fields.get("purpose") != "batch" or not content:
            return self._reply(
                wire.error_body("openai", 400, "Upload a JSONL file with purpose=batch."), 400
            )
        file_id = "file-" + uuid.uuid4().hex[:24]
        self.files[file_id] = content
        return self._reply(
            {
                "id": file_id,
                "object": "file",
                "bytes": len(content),
                "created_at": int(time.time()),
                "filename": filename,
                "purpose": "batch",
            }
        )

    async def openai_file(self, file_id: str, **_: Any) -> Reply:
        if file_id.startswith("out-") or file_id.startswith("err-"):
            batch = self.batches.get(file_id[4:])
            if batch is None or not self._ended(batch):
                return self._missing("openai", "file")
            return Reply(
                stream=self._streamed(self._openai_lines(batch, errors=file_id.startswith("err-"))),
                content_type=b"application/octet-stream",
            )
        if file_id not in self.files:
            return self._missing("openai", "file")
        return Reply(body=self.files[file_id], content_type=b"application/octet-stream")

    def _openai_lines(self, batch: FakeBatch, *, errors: bool) -> Iterator[bytes]:
        for index, custom_id, kind, payload in self._shuffled(batch):
            line: dict[str, Any] | None = None
            if kind == "succeeded" and not errors:
                request, text, finish, usage = self._answer(batch, index)
                body = wire.openai_reply(request.model, text, finish, usage)
                line = {
                    "id": f"batch_req_{uuid.uuid4().hex[:12]}",
                    "custom_id": custom_id,
                    "response": {"status_code": 200, "request_id": "req_fake", "body": body},
                    "error": None,
                }
            elif kind == "errored" and errors:
                line = {
                    "id": f"batch_req_{uuid.uuid4().hex[:12]}",
                    "custom_id": custom_id,
                    "response": {
                        "status_code": payload,
                        "request_id": "req_fake",
                        "body": wire.error_body("openai", payload, "Injected batch failure."),
                    },
                    "error": None,
                }
            elif kind in ("expired", "cancelled") and errors:
                code = "batch_expired" if kind == "expired" else "batch_cancelled"
                line = {
                    "id": f"batch_req_{uuid.uuid4().hex[:12]}",
                    "custom_id": custom_id,
                    "response": None,
                    "error": {"code": code, "message": f"Request {kind}."},
                }
            if line is not None:
                yield json.dumps(line).encode() + b"\n"

    async def _streamed(self, lines: Iterator[bytes]) -> AsyncIterator[bytes]:
        """``lines`` sent a block at a time as they are written, as a provider streams a
        large file: the client reads the first results while the rest are being written."""
        while block := list(itertools.islice(lines, STREAM_LINES)):
            yield b"".join(block)
            await asyncio.sleep(0)  # let the server's other requests run between blocks

    async def openai_create(self, raw: bytes, **_: Any) -> Reply:
        body = json.loads(raw or b"{}")
        content = self.files.get(str(body.get("input_file_id")))
        if content is None:
            return self._reply(wire.error_body("openai", 400, "input_file_id not found."), 400)
        requests = []
        for number, line in enumerate(content.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                requests.append((str(item["custom_id"]), wire.openai_request(item["body"])))
            except (ValueError, KeyError, TypeError):
                return self._reply(wire.error_body("openai", 400, f"Invalid line {number}."), 400)
        ids = [c for c, _ in requests]
        if len(set(ids)) != len(ids):
            return self._reply(wire.error_body("openai", 400, "Duplicate custom_id."), 400)
        if rejected := self._rejected("openai", requests):
            return rejected
        batch = self._add(
            "openai",
            requests,
            input_file_id=body["input_file_id"],
            metadata=dict(body.get("metadata") or {}),
        )
        return self._reply(self._openai_object(batch))

    def _openai_object(self, batch: FakeBatch) -> dict[str, Any]:
        ended = self._ended(batch)
        fraction = self._fraction(batch)
        if batch.cancelled_at is not None:
            status = "cancelled" if batch.cancel_polled else "cancelling"
            batch.cancel_polled = True
        elif ended:
            status = "expired" if batch.expire else "completed"
        else:
            status = "validating" if fraction < 0.1 else "in_progress"
        ok, failed = self._counts(batch)
        done = status in ("completed", "expired", "cancelled")
        has_errors = done and any(kind != "succeeded" for _, kind, _ in self._kinds(batch))
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": status,
            "output_file_id": f"out-{batch.id}" if done else None,
            "error_file_id": f"err-{batch.id}" if has_errors else None,
            "created_at": int(batch.created),
            "request_counts": {"total": len(batch.requests), "completed": ok, "failed": failed},
            "errors": None,
            "metadata": batch.metadata,
        }

    def _page(
        self, protocol: str, query: str, size_key: str, after_key: str
    ) -> tuple[list[FakeBatch], bool]:
        """Newest first, ``size_key`` at a time, after the batch named by ``after_key``."""
        params = parse_qs(query)
        size = int(params.get(size_key, ["100"])[0])
        mine = sorted(
            (b for b in self.batches.values() if b.protocol == protocol),
            key=lambda b: (b.created, b.id),
            reverse=True,
        )
        after = params.get(after_key, [""])[0]
        if after:
            ids = [b.id for b in mine]
            mine = mine[ids.index(after) + 1 :] if after in ids else []
        return mine[:size], len(mine) > size

    async def openai_list(self, query: str = "", **_: Any) -> Reply:
        page, more = self._page("openai", query, "limit", "after")
        data = [self._openai_object(b) for b in page]
        return self._reply({"object": "list", "data": data, "has_more": more})

    async def openai_get(self, batch_id: str, **_: Any) -> Reply:
        batch = self.batches.get(batch_id)
        return (
            self._reply(self._openai_object(batch)) if batch else self._missing("openai", "batch")
        )

    async def openai_cancel(self, batch_id: str, **_: Any) -> Reply:
        batch = self.batches.get(batch_id)
        if batch is None:
            return self._missing("openai", "batch")
        self._cancel(batch)
        return self._reply(self._openai_object(batch))

    # --- Anthropic ----------------------------------------------------------------------------
    async def anthropic_create(self, raw: bytes, headers: dict[str, str], **_: Any) -> Reply:
        try:
            body = json.loads(raw)
            requests = [
                (str(r["custom_id"]), wire.anthropic_request(r["params"])) for r in body["requests"]
            ]
        except (ValueError, KeyError, TypeError) as exc:
            return self._reply(wire.error_body("anthropic", 400, f"Invalid batch: {exc}"), 400)
        if any(not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", c) for c, _ in requests):
            return self._reply(
                wire.error_body("anthropic", 400, "custom_id must match ^[a-zA-Z0-9_-]{1,64}$"), 400
            )
        if rejected := self._rejected("anthropic", requests):
            return rejected
        batch = self._add("anthropic", requests, name=headers.get("host", "127.0.0.1"))
        return self._reply(self._anthropic_object(batch))

    def _anthropic_object(self, batch: FakeBatch) -> dict[str, Any]:
        ended = self._ended(batch) and not (
            batch.cancelled_at is not None and not batch.cancel_polled
        )
        if batch.cancelled_at is not None:
            batch.cancel_polled = True
        counts = {
            "processing": len(batch.requests),
            "succeeded": 0,
            "errored": 0,
            "canceled": 0,
            "expired": 0,
        }
        if ended:
            counts["processing"] = 0
            for _, kind, _ in self._kinds(batch):
                counts[{"cancelled": "canceled"}.get(kind, kind)] += 1
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended"
            if ended
            else ("canceling" if batch.cancelled_at else "in_progress"),
            "request_counts": counts,
            "created_at": _iso(batch.created),
            "expires_at": _iso(batch.created + 86400),
            "ended_at": _iso(time.time()) if ended else None,
            "cancel_initiated_at": _iso(batch.cancelled_at) if batch.cancelled_at else None,
            "archived_at": None,
            "results_url": f"http://{batch.name}/v1/messages/batches/{batch.id}/results"
            if ended
            else None,
        }

    async def anthropic_list(self, query: str = "", **_: Any) -> Reply:
        page, more = self._page("anthropic", query, "limit", "after_id")
        data = [self._anthropic_object(b) for b in page]
        last = page[-1].id if page else None
        return self._reply({"data": data, "has_more": more, "last_id": last})

    async def anthropic_get(self, batch_id: str, **_: Any) -> Reply:
        batch = self.batches.get(batch_id)
        return (
            self._reply(self._anthropic_object(batch))
            if batch
            else self._missing("anthropic", "batch")
        )

    async def anthropic_cancel(self, batch_id: str, **_: Any) -> Reply:
        batch = self.batches.get(batch_id)
        if batch is None:
            return self._missing("anthropic", "batch")
        if batch.cancelled_at is None and not self._ended(batch):
            self._cancel(batch)
            batch.cancel_polled = False  # this answer says "canceling"; the next poll "ended"
        return self._reply(self._anthropic_object(batch))

    async def anthropic_results(self, batch_id: str, **_: Any) -> Reply:
        batch = self.batches.get(batch_id)
        if batch is None or not self._ended(batch):
            return self._missing("anthropic", "batch results")
        lines = []
        for index, custom_id, kind, payload in self._shuffled(batch):
            if kind == "succeeded":
                request, text, finish, usage = self._answer(batch, index)
                result = {
                    "type": "succeeded",
                    "message": wire.anthropic_reply(request.model, text, finish, usage),
                }
            elif kind == "errored":
                result = {
                    "type": "errored",
                    "error": wire.error_body("anthropic", payload, "Injected batch failure."),
                }
            else:
                result = {"type": "canceled" if kind == "cancelled" else "expired"}
            lines.append(json.dumps({"custom_id": custom_id, "result": result}).encode())
        return Reply(body=b"\n".join(lines) + b"\n", content_type=b"application/binary")

    # --- Gemini -------------------------------------------------------------------------------
    async def gemini_create(self, raw: bytes, model: str, **_: Any) -> Reply:
        try:
            spec = json.loads(raw)["batch"]
            inline = spec["input_config"]["requests"]["requests"]
            requests = [
                (
                    str((item.get("metadata") or {}).get("key", index)),
                    wire.gemini_request(model, item["request"]),
                )
                for index, item in enumerate(inline)
            ]
        except (ValueError, KeyError, TypeError) as exc:
            return self._reply(wire.error_body("gemini", 400, f"Invalid batch: {exc}"), 400)
        if rejected := self._rejected("gemini", requests):
            return rejected
        batch = self._add("gemini", requests, model=model, name=str(spec.get("display_name", "")))
        return self._reply(self._gemini_object(batch))

    def _gemini_object(self, batch: FakeBatch) -> dict[str, Any]:
        ended = self._ended(batch)
        fraction = self._fraction(batch)
        if batch.cancelled_at is not None:
            state = "CANCELLED"
        elif ended:
            state = "EXPIRED" if batch.expire else "SUCCEEDED"
        else:
            state = "PENDING" if fraction < 0.1 else "RUNNING"
        ok, failed = self._counts(batch)
        total = len(batch.requests)
        data: dict[str, Any] = {
            "name": f"batches/{batch.id}",
            "metadata": {
                "@type": _TYPES + "GenerateContentBatch",
                "model": f"models/{batch.model}",
                "displayName": batch.name,
                "state": f"BATCH_STATE_{state}",
                "batchStats": {
                    "requestCount": str(total),
                    "successfulRequestCount": str(ok),
                    "failedRequestCount": str(failed),
                    "pendingRequestCount": str(total - ok - failed),
                },
            },
            "done": ended,
        }
        if ended:
            answers = []
            for _, kind, payload in self._outcomes(batch):
                if kind == "succeeded":
                    request, text, finish, usage = payload
                    answers.append(
                        {"response": wire.gemini_reply(request.model, text, finish, usage)}
                    )
                elif kind == "errored":
                    answers.append(
                        {"error": {"code": payload, "message": "Injected batch failure."}}
                    )
                else:
                    break  # not processed: no entry
            data["response"] = {
                "@type": _TYPES + "GenerateContentBatchOutput",
                "inlinedResponses": {"inlinedResponses": answers},
            }
        return data

    async def gemini_list(self, query: str = "", **_: Any) -> Reply:
        page, more = self._page("gemini", query, "pageSize", "pageToken")
        body: dict[str, Any] = {"operations": [self._gemini_object(b) for b in page]}
        if more and page:
            body["nextPageToken"] = page[-1].id
        return self._reply(body)

    async def gemini_get(self, batch_id: str, **_: Any) -> Reply:
        batch = self.batches.get(batch_id)
        return (
            self._reply(self._gemini_object(batch)) if batch else self._missing("gemini", "batch")
        )

    async def gemini_cancel(self, batch_id: str, **_: Any) -> Reply:
        batch = self.batches.get(batch_id)
        if batch is None:
            return self._missing("gemini", "batch")
        self._cancel(batch)
        return self._reply({})
