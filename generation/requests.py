"""Rows that carry their own request: an OpenAI Chat Completions body (a judge file's line),
checked and reduced to what the adapters send to any provider, and that request rebuilt for
a cell.

``chat_request(body)`` reads a body (``model``, ``messages``, optional ``temperature``,
``max_tokens`` / ``max_completion_tokens`` and a few OpenAI parameters) into a ``RowRequest``
or raises ``BadRow`` with one sentence naming the field. The system and developer messages
lead and are joined into the system prompt; the conversation must end with the user's
message; text content only (a string, or a list of text parts). ``to_llm`` makes the cell's
``LLMRequest`` for the model the row named.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from evalplatform import validation
from evalplatform.providers.llm.types import LLMRequest

# Parameters of an OpenAI body sent on as they are, to OpenAI-compatible servers only (the
# other providers have no such field, or another name and meaning for it).
OPENAI_PARAMS = frozenset(
    {
        "top_p",
        "stop",
        "seed",
        "response_format",
        "presence_penalty",
        "frequency_penalty",
        "reasoning_effort",
        "logprobs",
        "top_logprobs",
        "logit_bias",
    }
)
# Fields an OpenAI body may have that change nothing here.
IGNORED = frozenset({"user", "metadata", "store", "service_tier"})
ROLES = ("system", "developer", "user", "assistant")


def unstorable(value: Any, depth: int = 0) -> str | None:
    """Why a parsed JSON value cannot be stored by both databases (a NUL character, a lone
    surrogate, a number that is not finite or does not fit a double, too deep), or None."""
    if depth > 64:
        return "nested too deeply"
    if isinstance(value, str):
        if "\x00" in value:
            return "holds a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "holds an unpaired surrogate"
        return None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return None if abs(value) < 2**63 else "holds a number too large"
    if isinstance(value, float):
        return None if math.isfinite(value) else "holds a number that is not finite"
    if isinstance(value, list):
        return next((p for v in value if (p := unstorable(v, depth + 1))), None)
    if isinstance(value, dict):
        return next(
            (
                p
                for k, v in value.items()
                if (p := unstorable(k, depth + 1) or unstorable(v, depth + 1))
            ),
            None,
        )
    return "holds a value that is not JSON"


def storable(value: Any, depth: int = 0) -> Any:
    """``value`` made storable: NUL and surrogates dropped from text, numbers that are not
    finite or too large become None, deeper than 64 levels cut (None)."""
    if depth > 64:
        return None
    if isinstance(value, str):
        return value.replace("\x00", "").encode("utf-8", "ignore").decode("utf-8")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**63 else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [storable(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {storable(str(k), depth + 1): storable(v, depth + 1) for k, v in value.items()}
    return str(value)


class BadRow(ValueError):
    """A body that cannot be sent: the message says why, naming the field."""


@dataclass(frozen=True)
class RowRequest:
    model: str  # as the row names it (a model id or a team alias)
    user: str
    system: str = ""
    turns: tuple[tuple[str, str], ...] = ()
    temperature: float | None = None
    max_tokens: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    def as_data(self) -> dict[str, Any]:
        """JSON for the cell's item."""
        data = asdict(self)
        data["turns"] = [list(turn) for turn in self.turns]
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RowRequest:
        return cls(
            **{k: v for k, v in data.items() if k not in ("turns",)},
            turns=tuple((str(r), str(t)) for r, t in data.get("turns") or ()),
        )

    def to_llm(self, model_id: str, default_max_tokens: int) -> LLMRequest:
        return LLMRequest(
            model=model_id,
            user=self.user,
            system=self.system,
            turns=self.turns,
            temperature=self.temperature,
            max_tokens=self.max_tokens or default_max_tokens,
            params=dict(self.params),
        )


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        text = content
    elif isinstance(content, list) and content:
        parts = []
        for n, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise BadRow(f"{where}.content[{n}]: only text parts are supported.")
            if not isinstance(part.get("text"), str):
                raise BadRow(f"{where}.content[{n}].text: a string.")
            parts.append(part["text"])
        text = "\n".join(parts)
    else:
        raise BadRow(f"{where}.content: a string or a list of text parts.")
    if "\x00" in text:
        raise BadRow(f"{where}.content holds a NUL character.")
    return text


def chat_request(body: Any, *, openai_compatible: bool = True) -> RowRequest:
    """The request of an OpenAI Chat Completions body (see the module's docstring);
    ``openai_compatible``: the model it names is served by an OpenAI-compatible server (which
    alone takes ``OPENAI_PARAMS``)."""
    if not isinstance(body, dict):
        raise BadRow("body: a JSON object (the Chat Completions request).")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise BadRow("body.model: the name of one of the team's models.")
    system, turns = _conversation(body.get("messages"))
    # The other fields' problems are reported together, in one sentence each.
    errors: dict[str, str] = {}
    temperature = body.get("temperature")
    if temperature is not None and validation.temperatures_problem([temperature]):
        errors["body.temperature"] = "a number from 0 to 2."
    raw_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    max_tokens = validation.max_tokens(raw_tokens, errors=errors, name="body.max_tokens")
    if body.get("n") not in (None, 1):
        errors["body.n"] = "only 1 (one reply per row)."
    if body.get("stream") not in (None, False):
        errors["body.stream"] = "a batch does not stream."
    params = _params(body, openai_compatible=openai_compatible, errors=errors)
    if errors:
        raise BadRow(" ".join(f"{k}: {v}" for k, v in errors.items()))
    return RowRequest(
        model=model.strip(),
        user=turns[-1][1],
        system="\n\n".join(system),
        turns=tuple(turns[:-1]),
        temperature=float(temperature) if temperature is not None else None,
        max_tokens=max_tokens,
        params=params,
    )


# The fields of an Anthropic Messages request read here (``messages_body``).
MESSAGES_FIELDS = frozenset(
    {"model", "messages", "system", "max_tokens", "temperature", "top_p", "stop_sequences"}
)


def messages_body(params: Any) -> dict[str, Any]:
    """An Anthropic Messages request (a Message Batches line's ``params``) as the Chat
    Completions body ``chat_request`` reads: ``system`` (text or text blocks) leads as a
    system message, ``stop_sequences`` is ``stop``; text content only. Raises ``BadRow``
    naming the field (``params.…``)."""
    if not isinstance(params, dict):
        raise BadRow("params: a JSON object (the Messages request).")
    for key in params:
        if key not in MESSAGES_FIELDS and key != "metadata":
            raise BadRow(f"params.{storable(str(key))[:100]}: not supported here.")
    messages = params.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRow("params.messages: a non-empty list of messages.")
    converted: list[dict[str, Any]] = []
    if params.get("system") is not None:
        converted.append({"role": "system", "content": _text(params["system"], "params.system")})
    for n, message in enumerate(messages):
        where = f"params.messages[{n}]"
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise BadRow(f"{where}: an object with role (user or assistant) and content.")
        converted.append({"role": message["role"], "content": _text(message.get("content"), where)})
    body: dict[str, Any] = {"model": params.get("model"), "messages": converted}
    for ours, theirs in (
        ("max_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("stop", "stop_sequences"),
    ):
        if params.get(theirs) is not None:
            body[ours] = params[theirs]
    return body


def _conversation(messages: Any) -> tuple[list[str], list[tuple[str, str]]]:
    """The system prompt's parts and the turns (role, text) of ``body.messages``: system and
    developer messages first, the user's last."""
    if not isinstance(messages, list) or not messages:
        raise BadRow("body.messages: a non-empty list of messages.")
    system: list[str] = []
    turns: list[tuple[str, str]] = []
    for n, message in enumerate(messages):
        where = f"body.messages[{n}]"
        if not isinstance(message, dict):
            raise BadRow(f"{where}: an object with role and content.")
        role = message.get("role")
        if role not in ROLES:
            raise BadRow(f"{where}.role: one of {', '.join(ROLES)} (tools are not supported).")
        if message.get("tool_calls") or message.get("function_call"):
            raise BadRow(f"{where}: tool calls are not supported.")
        text = _text(message.get("content"), where)
        if role in ("system", "developer"):
            if turns:
                raise BadRow(f"{where}: system messages must come before the conversation.")
            system.append(text)
        else:
            turns.append((role, text))
    if not turns or turns[-1][0] != "user":
        raise BadRow("body.messages: the last message must be the user's.")
    return system, turns


# The fields ``chat_request`` reads itself.
_READ = frozenset({"model", "messages", "temperature", "max_tokens", "max_completion_tokens", "n"})


def _params(body: dict[str, Any], *, openai_compatible: bool, errors: dict[str, str]) -> dict:
    """The parameters sent on as they are (``OPENAI_PARAMS``); any other field is refused."""
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key in _READ or key in IGNORED or key == "stream":
            continue
        if key not in OPENAI_PARAMS:
            errors[f"body.{storable(key)[:100]!r}"] = "not supported here."
        elif not openai_compatible:
            errors[f"body.{key}"] = "sent only to OpenAI-compatible models; this one is not."
        else:
            params[key] = value
    return params
