"""The three protocols' bodies as the fake server speaks them (replies, errors, stream events)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from evalplatform.providers.llm.types import LLMRequest


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


# --- requests → neutral ---------------------------------------------------------------------
def openai_request(body: dict[str, Any]) -> LLMRequest:
    system = [
        _text_of(m.get("content"))
        for m in body["messages"]
        if m.get("role") in ("system", "developer")
    ]
    user = [_text_of(m.get("content")) for m in body["messages"] if m.get("role") == "user"]
    return LLMRequest(
        model=str(body["model"]),
        system="\n".join(system),
        user="\n".join(user),
        temperature=body.get("temperature"),
        max_tokens=body.get("max_completion_tokens") or body.get("max_tokens"),
        params={"seed": body["seed"]} if "seed" in body else {},
    )


def anthropic_request(body: dict[str, Any]) -> LLMRequest:
    if not isinstance(body.get("max_tokens"), int):
        raise ValueError("max_tokens: Field required")
    user = [_text_of(m.get("content")) for m in body["messages"] if m.get("role") == "user"]
    return LLMRequest(
        model=str(body["model"]),
        system=_text_of(body.get("system", "")),
        user="\n".join(user),
        temperature=body.get("temperature"),
        max_tokens=body["max_tokens"],
    )


def gemini_request(model: str, body: dict[str, Any]) -> LLMRequest:
    def parts(content: Any) -> str:
        return "".join(p.get("text", "") for p in (content or {}).get("parts", []))

    config = body.get("generationConfig") or {}
    return LLMRequest(
        model=model,
        system=parts(body.get("systemInstruction")),
        user="\n".join(parts(c) for c in body["contents"] if c.get("role", "user") == "user"),
        temperature=config.get("temperature"),
        max_tokens=config.get("maxOutputTokens"),
        params={"seed": config["seed"]} if "seed" in config else {},
    )


# --- replies --------------------------------------------------------------------------------
OPENAI_FINISH = {"stop": "stop", "length": "length"}
ANTHROPIC_FINISH = {"stop": "end_turn", "length": "max_tokens"}
GEMINI_FINISH = {"stop": "STOP", "length": "MAX_TOKENS"}


def openai_reply(model: str, text: str, finish: str, usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": OPENAI_FINISH[finish],
            }
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        },
    }


def anthropic_reply(model: str, text: str, finish: str, usage: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": ANTHROPIC_FINISH[finish],
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def anthropic_tool_reply(
    tool: str, model: str, text: str, finish: str, usage: tuple[int, int]
) -> dict[str, Any]:
    """A forced tool call: the answer (a JSON object, else ``{"text": ...}``) as its input."""
    try:
        given = json.loads(text)
    except ValueError:
        given = None
    reply = anthropic_reply(model, text, finish, usage)
    reply["content"] = [
        {
            "type": "tool_use",
            "id": f"toolu_{uuid.uuid4().hex[:24]}",
            "name": tool,
            "input": given if isinstance(given, dict) else {"text": text},
        }
    ]
    reply["stop_reason"] = "tool_use"
    return reply


def gemini_reply(
    model: str, text: str, finish: str | None, usage: tuple[int, int]
) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": text}]},
        "index": 0,
    }
    if finish is not None:
        candidate["finishReason"] = GEMINI_FINISH[finish]
    return {
        "candidates": [candidate],
        "usageMetadata": {
            "promptTokenCount": usage[0],
            "candidatesTokenCount": usage[1],
            "thoughtsTokenCount": 0,
            "totalTokenCount": usage[0] + usage[1],
        },
        "modelVersion": model,
    }


# --- errors ---------------------------------------------------------------------------------
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
    529: "server_error",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    529: "UNAVAILABLE",
}


def error_body(
    protocol: str,
    status: int,
    message: str,
    *,
    quota: bool = False,
    retry_after: float | None = None,
) -> dict[str, Any]:
    if protocol == "openai":
        kind = "insufficient_quota" if quota else _OPENAI_TYPES.get(status, "invalid_request_error")
        code = kind if quota else ("rate_limit_exceeded" if status == 429 else None)
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}
    if protocol == "anthropic":
        kind = (
            "rate_limit_error" if quota else _ANTHROPIC_TYPES.get(status, "invalid_request_error")
        )
        return {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": f"req_{uuid.uuid4().hex[:20]}",
        }
    body: dict[str, Any] = {
        "error": {
            "code": status,
            "message": message,
            "status": _GEMINI_STATUS.get(status, "INTERNAL"),
        }
    }
    if retry_after is not None:
        body["error"]["details"] = [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_after:g}s"}
        ]
    return body


def sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    stream: AsyncIterator[bytes] | None = None
    content_type: bytes = b"application/json"


def json_reply(
    data: Any, status: int = 200, headers: list[tuple[bytes, bytes]] | None = None
) -> Reply:
    return Reply(status=status, body=json.dumps(data).encode(), headers=headers or [])
