"""A judge configuration: what its verdicts depend on (the model, the parameters with the
reasoning asked for, the prompt version, temperatures, repetitions, orders, token limit and
reply format), its fingerprint, what a card was measured with, and whether the reasoning it
asked for was honoured. The judge cards (``cards``) are built from these."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from evalplatform.providers.llm import kinds
from evalplatform.providers.llm.types import Reasoning
from evaluations.analytics.agreement_stats import rounded
from evaluations.analytics.data import Row
from evaluations.judgments.models import LLMJudge


def thinking_setting(params: Any) -> Any:
    """The thinking (reasoning) setting among a model configuration's parameters, as they
    write it, in any provider's words: Anthropic's ``thinking``, Gemini's ``thinkingConfig``,
    OpenAI's ``reasoning_effort`` as ``{"reasoning_effort": "high"}``. None when the
    parameters set none. Whether the configuration asks its provider for reasoning is
    ``kinds.reasoning_in`` of its connection's kind (the cards' ``thinking_requested``)."""
    return kinds.reasoning_setting_as_written(params)


def configuration(judge: LLMJudge) -> dict[str, Any]:
    """What a judge's verdicts depend on: the model (its provider's name for it, and the
    connection's kind), the parameters (thinking among them), the prompt version, the
    temperatures, repetitions, both orders or not, the token limit and the reply format.
    A judge run records it when it starts (``JudgeRun.configuration``)."""
    version = judge.prompt_version
    return {
        "model": judge.llm_model.model_id,
        "provider": judge.llm_model.connection.kind,
        "params": judge.params or {},
        # As written, in any provider's words: a configuration's fingerprint depends on it,
        # so it reads as it was recorded (what the provider honours is the card's
        # ``reasoning.thinking_requested``).
        "thinking": thinking_setting(judge.params),
        "prompt_version": judge.prompt_version_id,
        "prompt": f"{version.template.name} v{version.number}",
        "temperatures": judge.temperatures,
        "repetitions": judge.repetitions,
        "swap": judge.swap,
        "max_tokens": judge.max_tokens,
        "reply_format": judge.reply_format or {},
    }


def _at(config: Mapping[str, Any], temperature: float | None) -> dict[str, Any]:
    """A judge configuration at one temperature (what a card is of)."""
    found = {k: v for k, v in config.items() if k != "temperatures"}
    return found | {"temperature": temperature}


def fingerprint(config: Mapping[str, Any]) -> str:
    """A configuration's fingerprint: its canonical JSON, hashed (16 hex digits)."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def current_fingerprint(judge: LLMJudge, temperature: float | None) -> str | None:
    """The fingerprint of the judge's configuration now at ``temperature``; None when it
    no longer asks at that temperature."""
    config = configuration(judge)
    if temperature not in (config["temperatures"] or [None]):
        return None
    return fingerprint(_at(config, temperature))


def reasoning(rows: list[Row], setting: Any, asked: Reasoning | None) -> dict[str, Any]:
    """Whether the thinking the configuration asked for (``setting`` in its provider's
    words, ``asked`` in none) was honoured: of the replies whose provider counted reasoning
    tokens apart, how many had some. ``honoured`` is None when no reply had a count (the
    provider reports none: Anthropic counts thinking in the output tokens)."""
    counted = [r.reasoning_tokens for r in rows if r.reasoning_tokens is not None]
    requested = asked is not None and asked.enabled
    with_tokens = sum(1 for t in counted if t > 0)
    honoured: bool | None = None
    if counted:
        honoured = with_tokens == len(counted) if requested else None
    return {
        "requested": setting,
        "thinking_requested": requested,
        "replies": len(rows),
        "replies_counted": len(counted),
        "replies_with_reasoning": with_tokens,
        "reasoning_tokens": sum(counted),
        "mean_reasoning_tokens": rounded(sum(counted) / len(counted)) if counted else None,
        "honoured": honoured,
        "honoured_share": rounded(with_tokens / len(counted)) if counted and requested else None,
    }


def measured_with(
    rows: list[Row],
    runs: Mapping[int, Mapping[str, Any]],
    config_now: Mapping[str, Any],
    temperature: float | None,
) -> dict[str, Any]:
    """What a card was measured with: the configurations its verdicts' runs recorded when
    they started (the judge's configuration now for verdicts of no recorded run: a judge
    file's, or a run older than the record), their fingerprints, and the model snapshots
    the provider reported."""
    configs: dict[str, dict[str, Any]] = {}
    unrecorded = 0
    for row in rows:
        recorded = runs.get(row.job) if row.job is not None else None
        if recorded:
            at = _at(recorded, temperature)
            configs.setdefault(fingerprint(at), at)
        else:
            unrecorded += 1
    if not configs:
        at = _at(config_now, temperature)
        configs[fingerprint(at)] = at
    snapshots = Counter(r.model_version for r in rows if r.model_version)
    return {
        "fingerprints": sorted(configs),
        "configurations": [configs[k] for k in sorted(configs)],
        "recorded": unrecorded == 0 and bool(rows),
        "unrecorded_judgments": unrecorded,
        "model_snapshots": [{"model": m, "judgments": n} for m, n in sorted(snapshots.items())],
    }
