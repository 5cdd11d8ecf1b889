"""Model text as sanitized Markdown: CommonMark with raw HTML off (any HTML in the text is
shown as text), then the HTML cleaned by nh3 (no scripts, no event handlers, safe links)."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def render(text: str) -> str:
    return nh3.clean(_md.render(text or ""), link_rel="noopener noreferrer nofollow")
