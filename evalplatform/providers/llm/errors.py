"""Classifying failures and reading retry hints, in no provider's words: what a 429 means
beyond a rate limit is the adapter's to say (``HTTPAdapter.quota_exhausted``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx
from django.utils import timezone

from evalplatform.providers import netguard
from evalplatform.providers.llm.types import ProviderError

# Provider hints beyond this are ignored in favour of the platform schedule (the official
# OpenAI SDK uses the same bound).
MAX_HINT_S = 120.0

_PERMANENT_KINDS = {
    400: "bad_request",
    401: "auth",
    402: "quota",
    403: "permission",
    404: "not_found",
    413: "too_large",
    422: "bad_request",
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")
# Whether a 429 is billing or quota exhaustion, from (message, type, code, wait hint,
# headers): an adapter's ``quota_exhausted``.
QuotaRule = Callable[[str, str, str, float | None, Mapping[str, str]], bool]


# What an error keeps of the body that came back: a JSON body, compacted, up to this many
# characters; anything else (an HTML page, a service that is no provider) is never kept raw,
# only the status line and the JSON error's message (at most ``MESSAGE_CHARS``).
KEPT_CHARS = 1000
MESSAGE_CHARS = 500


def kept(text: str) -> str:
    """What an error keeps of a body: JSON, compacted and bounded; else nothing."""
    body = _json(text) if len(text) <= 1_000_000 else None
    if body is None:
        return ""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))[:KEPT_CHARS]


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return None


def retry_after_s(headers: Mapping[str, str], body: Any = None) -> float | None:
    """The provider's wait hint: ``retry-after-ms``, ``retry-after`` (seconds or an HTTP date),
    or Gemini's ``RetryInfo.retryDelay`` in the body. ``None`` when absent or out of range."""
    hint: float | None = None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            hint = float(ms) / 1000
        except ValueError:
            hint = None
    if hint is None and (value := headers.get("retry-after")) is not None:
        try:
            hint = float(value)
        except ValueError:
            try:
                when = parsedate_to_datetime(value)
                hint = (when - timezone.now()).total_seconds()
            except (TypeError, ValueError):
                hint = None
    if hint is None and isinstance(body, dict):
        error = body.get("error")
        details = (error.get("details") if isinstance(error, dict) else None) or []
        for detail in details if isinstance(details, list) else []:
            if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
                match = _DURATION.match(str(detail.get("retryDelay", "")))
                if match:
                    hint = float(match.group(1))
    if hint is None or not 0 <= hint <= MAX_HINT_S:
        return None
    return hint


def _error_fields(body: Any) -> tuple[str, str, str]:
    """(message, type, code) from the three protocols' error bodies (and vLLM's flat one)."""
    if not isinstance(body, dict):
        return "", "", ""
    error = body.get("error", body)
    if isinstance(error, dict):
        return (
            str(error.get("message") or ""),
            str(error.get("type") or error.get("status") or ""),
            str(error.get("code") or ""),
        )
    return str(error), "", ""


def scrub(text: str, secret: str) -> str:
    """``text`` without ``secret`` (an API key), as written and as JSON or a URL carries it."""
    if not secret:
        return text
    for form in {secret, json.dumps(secret)[1:-1], quote(secret, safe="")}:
        text = text.replace(form, "[redacted]")
    return text


def redact(error: ProviderError, secret: str) -> ProviderError:
    """Cut ``secret`` out of everything ``error`` keeps. Providers quote a refused key back,
    and an error's message and raw text end up in outputs, exports and logs."""
    if secret:
        error.message = scrub(error.message, secret)
        error.raw_text = scrub(error.raw_text, secret)
        error.args = (error.message,)
    return error


def from_response(
    response: httpx.Response, *, quota_exhausted: QuotaRule, secret: str = ""
) -> ProviderError:
    """Classify a non-2xx response (``secret``, the API key, is cut out of what is kept);
    ``quota_exhausted`` tells a 429 that waiting will not pass from a rate limit."""
    status = response.status_code
    text = scrub(response.text, secret)
    body = _json(text)
    message, error_type, code = _error_fields(body)
    hint = retry_after_s(response.headers, body)
    summary = (
        f"HTTP {status}"
        + (f" {error_type[:100]}" if error_type else "")
        + (f": {message[:MESSAGE_CHARS]}" if message else "")
    )

    def error(kind: str, retryable: bool) -> ProviderError:
        return ProviderError(
            summary,
            kind=kind,
            retryable=retryable,
            status=status,
            retry_after=hint if retryable else None,
            raw_text=kept(text),
        )

    if status == 429:
        if quota_exhausted(message, error_type, code, hint, response.headers):
            return error("quota", False)
        return error("rate_limit", True)
    if status == 529:
        return error("overloaded", True)
    if status in (408, 504):
        return error("timeout", True)
    if status == 409:
        return error("conflict", True)
    if status >= 500:
        return error("server", True)
    return error(_PERMANENT_KINDS.get(status, "bad_request"), False)


def from_transport(exc: httpx.TransportError) -> ProviderError:
    # The library's own text is left out: it can quote request headers, and so the key.
    if isinstance(exc.__cause__, netguard.InternalAddress):  # refused before connecting
        return ProviderError(str(exc.__cause__), kind="internal_address", retryable=False)
    if isinstance(exc, httpx.TimeoutException):
        return ProviderError(f"Timed out: {type(exc).__name__}", kind="timeout", retryable=True)
    if isinstance(exc, httpx.LocalProtocolError):
        return not_sendable()
    return ProviderError(
        f"Connection failed: {type(exc).__name__}", kind="connection", retryable=True
    )


def not_sendable() -> ProviderError:
    return ProviderError(
        "The request could not be sent: the API key or a header holds characters HTTP "
        "cannot carry.",
        kind="bad_request",
        retryable=False,
    )


def malformed(text: str, reason: str) -> ProviderError:
    return ProviderError(
        f"Unreadable reply: {reason}", kind="malformed", retryable=False, raw_text=kept(text)
    )


def content_filtered(reason: str, raw_text: str = "") -> ProviderError:
    return ProviderError(
        f"Blocked by the provider's content filter ({reason})",
        kind="content_filter",
        retryable=False,
        raw_text=raw_text,
    )


def reply_too_large(limit: int, *, declared: int | None = None) -> ProviderError:
    size = f" (the server declared {declared:,} bytes)" if declared is not None else ""
    return ProviderError(
        f"The reply is larger than the platform accepts: over {limit:,} bytes{size}",
        kind="reply_too_large",
        retryable=False,
    )


def reply_too_long(limit: int) -> ProviderError:
    return ProviderError(
        f"The reply is longer than its max_tokens allows: over {limit:,} characters",
        kind="reply_too_long",
        retryable=False,
    )
