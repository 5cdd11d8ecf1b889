"""What the joint model controls for, read from the outputs and the models' names: an
output's length and markdown density (style, as in Chatbot Arena's style control), and the
family (maker) of a model, for a judge's preference for its own family's outputs.

Pure functions of text: no database.
"""

from __future__ import annotations

import math
import re

from evalplatform.providers.llm import kinds

# Markdown elements, as Chatbot Arena's style control counts them: headers, list items
# (ordered and unordered), bold spans.
_HEADER = re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.MULTILINE)
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\S", re.MULTILINE)
_BOLD = re.compile(r"\*\*(?=\S)[^*\n]+?\*\*|__(?=\S)[^_\n]+?__")

DENSITY_PER = 100  # markdown elements are counted per this many characters
DENSITY_FLOOR = 100  # characters: a shorter output counts as this long (one bold word in "No.")


def length(text: str) -> int:
    """An output's length in characters."""
    return len(text)


def markdown_elements(text: str) -> int:
    """Headers, list items and bold spans in ``text``."""
    return len(_HEADER.findall(text)) + len(_LIST_ITEM.findall(text)) + len(_BOLD.findall(text))


def markdown_density(text: str) -> float:
    """Markdown elements per ``DENSITY_PER`` characters (an output shorter than
    ``DENSITY_FLOOR`` characters counted as that long)."""
    return markdown_elements(text) * DENSITY_PER / max(len(text), DENSITY_FLOOR)


def log_length(text: str) -> float:
    """log2 of an output's length (at least 1): the difference of two is log2 of the ratio
    of their lengths, +1 when the first is twice as long as the second."""
    return math.log2(max(length(text), 1))


# A model's family, from its name (the first pattern found, case-insensitive): model names
# say who made the model whatever server runs it (an "OpenAI-compatible" connection may
# serve Llama or Qwen), so the name comes first, the connection's kind after.
FAMILIES = (
    ("anthropic", re.compile(r"claude|anthropic", re.IGNORECASE)),
    ("google", re.compile(r"gemini|gemma|palm|bison|google", re.IGNORECASE)),
    ("openai", re.compile(r"(?:^|[/\s:_(])(?:gpt|chatgpt|o[1-9](?:\b|-))|openai|davinci", re.I)),
    ("meta", re.compile(r"llama|meta-", re.IGNORECASE)),
    ("mistral", re.compile(r"mistral|mixtral|codestral|ministral|magistral|pixtral", re.I)),
    ("alibaba", re.compile(r"qwen|qwq", re.IGNORECASE)),
    ("deepseek", re.compile(r"deepseek", re.IGNORECASE)),
    ("xai", re.compile(r"grok", re.IGNORECASE)),
    ("cohere", re.compile(r"command-|cohere|aya-", re.IGNORECASE)),
    ("microsoft", re.compile(r"(?:^|[/\s])phi-", re.IGNORECASE)),
)


def family(*names: str | None, kind: str | None = None) -> str | None:
    """The family of the model named ``names`` (the first that says one), else of its
    connection's ``kind``; None when neither says."""
    for name in names:
        if not name:
            continue
        for found, pattern in FAMILIES:
            if pattern.search(name):
                return found
    return kinds.own_family(kind or "")
