"""The ``mock`` kind: an offline provider, deterministic for a given request and seed.

Plain prompts get fluent-looking filler of a length drawn from the request. Judge prompts
(recognized by the JSON they ask for) get valid JSON:

- ``"winner"``: a comparison of ``Response A:`` / ``Response B:`` → ``{"winner": "A"|"B"|"tie"}``;
- ``"ranking"``: ``Response <label>:`` sections → ``{"ranking": [labels, best first]}``;
- ``"scores"``: dimensions written ``name (min-max)`` → ``{"scores": {name: number}}``
  (no dimension found: ``overall`` on 1-5);
- ``"labels"``: a line ``Labels: a, b, c`` → ``{"labels": [...]}`` (two when the prompt
  says "multiple");
- the seeds' own shapes: pairwiseLLM's template (``<BETTER_SAMPLE>`` in the prompt, the
  samples written ``SAMPLE 1:`` / ``SAMPLE 2:``) → ``<BETTER_SAMPLE>SAMPLE_1</BETTER_SAMPLE>``
  and a sentence; the essay rubric (``total_score`` in the prompt) → every ``<name>_score``
  the prompt names on its range ("1-6"; else 1-5), a ``<name>_justification`` for each and
  their ``total_score``; the judge files' ``{"score", "rationale"}`` and "A or B, plus one
  sentence".

Every text has a latent quality (a hash of the text), so judges agree with each other more
than chance. ``temperature`` scales the noise: at 0 the answer is the quality ordering (still
subject to the position bias), at 1 it varies by ``noise``. ``position_bias`` adds that share
of first-position wins.

Repeated calls: a request with ``params["seed"]`` always gets the same answer (vary the seed
to get calls that differ reproducibly); a request of a repeated-call design without one is
seeded with its ``repetition``. Without a seed, a request
at a temperature above 0 is sampled anew on each call, as a real model's is: its n-th
identical call draws with n in the key (the first call's answer is the seedless one, as
before); at temperature 0, or none given, every call gets the same answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import re
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from evalplatform import validation
from evalplatform.providers.estimate import CHARS_PER_TOKEN, estimate_tokens, tokens_in_chars
from evalplatform.providers.llm.anthropic import AnthropicAdapter
from evalplatform.providers.llm.base import Adapter, StreamItem
from evalplatform.providers.llm.gemini import GeminiAdapter
from evalplatform.providers.llm.openai import OpenAIAdapter
from evalplatform.providers.llm.types import LLMRequest, LLMResponse, ProviderError, Reasoning

_WORDS = [
    "the",
    "model",
    "answer",
    "clearly",
    "states",
    "each",
    "point",
    "with",
    "care",
    "and",
    "some",
    "detail",
    "about",
    "context",
    "results",
    "evidence",
    "reasoning",
    "summary",
    "however",
    "therefore",
    "overall",
    "quality",
    "response",
    "because",
    "example",
    "important",
    "consider",
    "approach",
    "data",
    "question",
    "useful",
    "specific",
    "brief",
    "thorough",
]
_SECTION = re.compile(
    r"(?im)^[ \t]*(?:#+[ \t]*)?(?:response|output|answer|variant|candidate)[ \t]+"
    r"\[?([A-Za-z0-9]{1,8})\]?[ \t]*:?"
)
# A dimension is ``name (min-max)``: preferably at the start of a line (a bulleted list, names
# may have spaces), else a single word anywhere.
_DASH = r"(?:-|\u2013|to)"
_DIMENSION_LINE = re.compile(
    r"(?m)^[ \t]*(?:[-*]|\d+[.)])?[ \t]*([A-Za-z_][^\n(:]{0,60}?)[ \t]*"
    rf"\(\s*(-?\d+)\s*{_DASH}\s*(-?\d+)\s*\)(?=[ \t]*(?::|$))"
)
_DIMENSION_WORD = re.compile(
    rf"([A-Za-z_][A-Za-z0-9_\-]{{0,40}})\s*\(\s*(-?\d+)\s*{_DASH}\s*(-?\d+)\s*\)"
)
_LABELS = re.compile(r"(?im)^[ \t]*labels?[ \t]*:[ \t]*(.+)$")
# The lines a judge prompt fences each response with (``evaluations.judges.services.fence``).
_FENCE = re.compile(r"(?m)^<<<(?:END )?RESPONSE [A-Z]{1,2} [0-9a-f]{16}>>>\n?")


# The mock bills by the estimation heuristic, so estimates are exact on the input side.
tokens_for = estimate_tokens


def quality(text: str) -> float:
    """A stable latent quality in [0, 1) for a text."""
    digest = hashlib.sha256(" ".join(text.split()).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class MockSettings:
    latency_s: float = 0.0
    failure_rate: float = 0.0
    seed: int = 0
    position_bias: float = 0.0
    noise: float = 1.0
    fenced_json_rate: float = 0.0
    # The share of requests that ask for thinking whose replies report reasoning tokens
    # (below 1: a model that does not always honour the setting).
    thinking_rate: float = 1.0

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> MockSettings:
        known = {k: options[k] for k in cls.__dataclass_fields__ if k in options}
        return cls(**{k: type(getattr(cls, k))(v) for k, v in known.items()})

    @classmethod
    def problems(cls, options: Mapping[str, Any]) -> dict[str, str]:
        """What is wrong with a connection's mock options, by option name (empty: nothing).
        Every option is bounded; a name that is not an option is refused."""
        errors: dict[str, str] = {}
        for name, value in options.items():
            if name == "seed":
                validation.seed(value, errors=errors, name=name)
            elif name in OPTION_BOUNDS:
                lo, hi, what = OPTION_BOUNDS[name]
                validation.number(value, name=name, lo=lo, hi=hi, errors=errors, message=f"{what}.")
            else:
                errors[str(name)[:100]] = "Not a mock option (" + ", ".join(OPTIONS) + ")."
        return errors


# The bounds of the mock's numeric options (a connection's ``options``), with what each is.
OPTION_BOUNDS: dict[str, tuple[float, float, str]] = {
    "latency_s": (0.0, 60.0, "Seconds each call takes, from 0 to 60"),
    "failure_rate": (0.0, 1.0, "The share of calls that fail, from 0 to 1"),
    "position_bias": (0.0, 1.0, "The added share of first-position wins, from 0 to 1"),
    "noise": (0.0, 10.0, "The judgments' noise at temperature 1, from 0 to 10"),
    "fenced_json_rate": (0.0, 1.0, "The share of JSON replies in a code fence, from 0 to 1"),
}
OPTIONS = tuple(MockSettings.__dataclass_fields__)


def request_key(request: LLMRequest, seed: int) -> str:
    """A digest of everything that determines the answer."""
    blob = json.dumps(
        [
            seed,
            request.model,
            request.system,
            *([list(request.turns)] if request.turns else []),  # keys without turns unchanged
            *([repr(request.reasoning)] if request.reasoning else []),
            *([[i.data_url() for i in request.images]] if request.images else []),
            request.user,
            request.temperature,
            request.max_tokens,
            dict(request.params),
        ],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def samples_anew(request: LLMRequest) -> bool:
    """Whether identical calls should differ: sampling (a temperature above 0, or none sent:
    the providers' default, 1) that no ``seed`` parameter pins."""
    temperature = 1.0 if request.temperature is None else request.temperature
    return temperature > 0 and request.params.get("seed") is None


class Draws:
    """How many times each sampled request (``samples_anew``) has been answered, for the key
    of its next answer; bounded, the oldest forgotten."""

    LIMIT = 100_000

    def __init__(self) -> None:
        self._counts: OrderedDict[str, int] = OrderedDict()

    def key(self, request: LLMRequest, base: str) -> str:
        """The key to answer ``request`` with (``base``: its ``request_key``)."""
        if not samples_anew(request):
            return base
        drawn = self._counts.pop(base, 0)
        self._counts[base] = drawn + 1
        if len(self._counts) > self.LIMIT:
            self._counts.popitem(last=False)
        return base if drawn == 0 else f"{base}:draw:{drawn}"


class MockAdapter(Adapter):
    """Speaks every provider's words for reasoning (a mock connection stands in for any of
    them), and has no structured output."""

    protocol = "mock"
    default_base_url = ""  # in-process: nothing to reach
    own_family = "mock"
    DIALECTS = (AnthropicAdapter, GeminiAdapter, OpenAIAdapter)

    @classmethod
    def reasoning_setting(cls, params: Mapping[str, Any]) -> Any:
        """The first of Anthropic's ``thinking``, Gemini's ``thinkingConfig`` and OpenAI's
        ``reasoning_effort`` the parameters set."""
        for dialect in cls.DIALECTS:
            setting = dialect.reasoning_setting(params)
            if setting is not None:
                return setting
        return None

    @classmethod
    def reasoning_in(cls, params: Mapping[str, Any]) -> Reasoning | None:
        for dialect in cls.DIALECTS:
            if dialect.reasoning_setting(params) is not None:
                return dialect.reasoning_in(params)
        return None

    @staticmethod
    def seeded(request: LLMRequest) -> LLMRequest:
        """A repeated call's request seeded with its repetition (unless it names a seed)."""
        if request.repetition is None or "seed" in request.params:
            return request
        return replace(request, params={**request.params, "seed": request.repetition})

    def __init__(
        self,
        settings: MockSettings | None = None,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.settings = settings or MockSettings()
        self.sleep = sleep
        # Attempts per failing request, so retries can succeed; bounded, oldest dropped.
        self._attempts: OrderedDict[str, int] = OrderedDict()
        self.draws = Draws()

    async def complete(self, request: LLMRequest) -> LLMResponse:
        request = self.seeded(request)
        key = request_key(request, self.settings.seed)
        attempt = self._attempts.get(key, 0)
        self._attempts[key] = attempt + 1
        if len(self._attempts) > 100_000:
            self._attempts.popitem(last=False)
        if self.settings.latency_s:
            await self.sleep(self.settings.latency_s)
        failure = random.Random(f"{key}:fail:{attempt}").random()  # noqa: S311
        if failure < self.settings.failure_rate:
            raise ProviderError(
                "Mock failure (failure_rate)", kind="server", retryable=True, status=500
            )
        self._attempts.pop(key, None)
        text, finish = answer(request, self.settings, key=self.draws.key(request, key))
        reasoning = 0
        thinking = request.reasoning or self.reasoning_in(request.params)
        if thinking is not None and thinking.enabled:
            honoured = random.Random(f"{key}:thinking").random()  # noqa: S311
            reasoning = 16 + len(text) // 4 if honoured < self.settings.thinking_rate else 0
        return LLMResponse(
            text=text,
            input_tokens=tokens_for(request.system) + tokens_for(request.user),
            output_tokens=tokens_for(text),
            finish_reason=finish,
            latency_s=self.settings.latency_s,
            raw={"mock": True, "model": request.model},
            model_version=request.model,
            reasoning_tokens=reasoning,
        )

    async def stream(self, request: LLMRequest) -> AsyncGenerator[StreamItem, None]:
        response = await self.complete(request)
        words = response.text.split(" ")
        for start in range(0, len(words), 4):
            chunk = " ".join(words[start : start + 4])
            yield chunk if start == 0 else " " + chunk
        yield response


def answer(request: LLMRequest, settings: MockSettings, *, key: str = "") -> tuple[str, str]:
    """The reply text and finish reason for a request (shared with the fake provider server)."""
    rng = random.Random(key or request_key(request, settings.seed))  # noqa: S311 - simulation
    prompt = f"{request.system}\n{request.user}"
    temperature = request.temperature if request.temperature is not None else 1.0
    noise = settings.noise * max(0.0, temperature)
    payload: dict[str, Any] | None = None
    if "<BETTER_SAMPLE>" in prompt:  # pairwiseLLM's template: the tag, then a sentence
        better = _better_sample(request.user, rng, noise, settings)
        return f"<BETTER_SAMPLE>{better}</BETTER_SAMPLE>\nThat sample is stronger.", "stop"
    if "total_score" in prompt:
        payload = _rubric(prompt, request.user, rng, noise)
    elif '"winner"' in prompt:
        payload = _compare(request.user, rng, noise, settings)
    elif '"ranking"' in prompt:
        payload = _rank(request.user, rng, noise, settings)
    elif '"scores"' in prompt:
        payload = _rate(prompt, request.user, rng, noise)
    elif '"labels"' in prompt:
        payload = _label(prompt, request.user, rng, noise)
    elif '"score"' in prompt:  # a judge file's rubric row: {"score", "rationale"}
        payload = _score(prompt, request.user, rng, noise)
    if payload is None:
        if "A or B" in prompt:  # a judge file's pairwise row: the choice, then a sentence
            winner = _compare(request.user, rng, noise, settings)["winner"]
            winner = winner if winner != "tie" else "A"
            return f"{winner}. Answer {winner} is more complete.", "stop"
        return _prose(request, rng)
    text = json.dumps(payload)
    if rng.random() < settings.fenced_json_rate:
        text = f"Here is my verdict:\n```json\n{text}\n```"
    return text, "stop"


def _prose(request: LLMRequest, rng: random.Random) -> tuple[str, str]:
    wanted = rng.randint(30, 220)
    limit = request.max_tokens
    # Words are drawn until the text holds ``wanted`` tokens (or reaches the cap): the text's
    # length is kept as words are added and compared with the lengths those token counts
    # take, with no join or count per word (the fake provider answers thousands at once).
    enough = _chars_for(wanted)
    cap = _chars_for(limit) if limit is not None else None
    choice = rng.choice
    words: list[str] = []
    chars = 0  # len(" ".join(words))
    while chars < enough:
        word = choice(_WORDS)
        chars += len(word) + 1 if words else len(word)
        words.append(word)
        if cap is not None and chars >= cap:
            return " ".join(words).capitalize(), "length"
    return " ".join(words).capitalize() + ".", "stop"


def _chars_for(tokens: int) -> int:
    """The fewest characters that ``tokens_for`` counts as ``tokens`` or more."""
    chars = max(0, math.floor((tokens - 1) * CHARS_PER_TOKEN))
    while chars > 0 and tokens_in_chars(chars - 1) >= tokens:
        chars -= 1
    while tokens_in_chars(chars) < tokens:
        chars += 1
    return chars


def _sections(text: str) -> list[tuple[str, str]]:
    text = _FENCE.sub("", text)  # a judge prompt's fences around each response
    marks = [(m.start(), m.end(), m.group(1)) for m in _SECTION.finditer(text)]
    return [
        (label, text[end : (marks[i + 1][0] if i + 1 < len(marks) else len(text))].strip())
        for i, (_, end, label) in enumerate(marks)
    ]


def _compare(user: str, rng: random.Random, noise: float, settings: MockSettings) -> dict[str, Any]:
    sections = dict(_sections(user))
    a, b = sections.get("A", user[: len(user) // 2]), sections.get("B", user[len(user) // 2 :])
    margin = (quality(a) - quality(b)) * 4 + rng.gauss(0, noise)
    p_first = 1 / (1 + math.exp(-margin))
    p_first = min(1.0, p_first + settings.position_bias)
    if abs(margin) < 0.1 and noise == 0 and settings.position_bias == 0:
        winner = "tie"
    elif noise == 0:
        winner = "A" if p_first >= 0.5 else "B"
    else:
        winner = "A" if rng.random() < p_first else "B"
    return {
        "winner": winner,
        "rationale": f"Response {winner} is more complete."
        if winner != "tie"
        else "Both are equally good.",
    }


_SAMPLE = re.compile(r"(?im)^[ \t]*(?:#+[ \t]*)?sample[ \t_]*([12])\b[ \t]*:?")
_RUBRIC_FIELD = re.compile(r"\b([a-z][a-z0-9]*(?:_[a-z0-9]+)*?)_score\b")


def _better_sample(user: str, rng: random.Random, noise: float, settings: MockSettings) -> str:
    """``SAMPLE_1`` or ``SAMPLE_2`` by the samples' qualities (pairwiseLLM asks for one)."""
    marks = list(_SAMPLE.finditer(user))
    texts = {
        m.group(1): user[m.end() : marks[i + 1].start() if i + 1 < len(marks) else len(user)]
        for i, m in enumerate(marks)
    }
    half = len(user) // 2
    first, second = texts.get("1", user[:half]), texts.get("2", user[half:])
    verdict = _compare(f"Response A:\n{first}\nResponse B:\n{second}", rng, noise, settings)
    return "SAMPLE_2" if verdict["winner"] == "B" else "SAMPLE_1"


def _rubric(prompt: str, user: str, rng: random.Random, noise: float) -> dict[str, Any]:
    """The essay rubric: each ``<name>_score`` on the prompt's range, a justification for
    each, and their total."""
    names = [n for n in dict.fromkeys(_RUBRIC_FIELD.findall(prompt)) if n != "total"]
    names = names or ["overall"]
    found = re.search(r"\b(\d+)\s*(?:-|\u2013|to)\s*(\d+)\b", prompt)
    lo, hi = (int(found.group(1)), int(found.group(2))) if found else (1, 5)
    if not lo < hi <= 1000:
        lo, hi = 1, 5
    base = quality(user)
    payload: dict[str, Any] = {}
    for name in names:
        value = lo + (base + 0.3 * (quality(name + user) - 0.5)) * (hi - lo) + rng.gauss(0, noise)
        payload[f"{name}_score"] = int(min(hi, max(lo, round(value))))
        payload[f"{name}_justification"] = f"The {name.replace('_', ' ')} is judged on the rubric."
    payload["total_score"] = sum(payload[f"{n}_score"] for n in names)
    return payload


def _rank(user: str, rng: random.Random, noise: float, settings: MockSettings) -> dict[str, Any]:
    sections = _sections(user)
    if not sections:
        return {"ranking": []}
    scored = []
    for position, (label, text) in enumerate(sections):
        bias = settings.position_bias * 4 if position == 0 else 0.0
        scored.append((quality(text) * 4 + bias + rng.gauss(0, noise), label))
    return {"ranking": [label for _, label in sorted(scored, reverse=True)]}


def _rate(prompt: str, user: str, rng: random.Random, noise: float) -> dict[str, Any]:
    found = _DIMENSION_LINE.findall(prompt) or _DIMENSION_WORD.findall(prompt)
    dimensions = {name.strip(): (int(lo), int(hi)) for name, lo, hi in found if int(lo) < int(hi)}
    if not dimensions:
        dimensions = {"overall": (1, 5)}
    base = quality(user)
    scores = {}
    for name, (lo, hi) in dimensions.items():
        offset = quality(name + user) - 0.5
        value = lo + (base + 0.3 * offset) * (hi - lo) + rng.gauss(0, noise)
        scores[name] = int(min(hi, max(lo, round(value))))
    return {"scores": scores, "rationale": "Scored against each dimension."}


def _score(prompt: str, user: str, rng: random.Random, noise: float) -> dict[str, Any]:
    """One score from 1 to 5 (or the range the prompt names, "1-5")."""
    found = re.search(r"\b(\d+)\s*(?:-|to)\s*(\d+)\b", prompt)
    lo, hi = (int(found.group(1)), int(found.group(2))) if found else (1, 5)
    if lo >= hi:
        lo, hi = 1, 5
    value = lo + quality(user) * (hi - lo) + rng.gauss(0, noise)
    return {"score": int(min(hi, max(lo, round(value)))), "rationale": "Scored on the rubric."}


def _label(prompt: str, user: str, rng: random.Random, noise: float) -> dict[str, Any]:
    match = _LABELS.search(prompt)
    labels = [x.strip().strip("\"'") for x in match.group(1).split(",")] if match else []
    labels = [x for x in labels if x] or ["yes", "no"]
    order = sorted(
        labels, key=lambda x: quality(x + user) + rng.gauss(0, noise * 0.2), reverse=True
    )
    count = 2 if "multiple" in prompt.lower() and len(labels) > 1 else 1
    return {"labels": order[:count]}
