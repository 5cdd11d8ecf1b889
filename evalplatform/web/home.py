"""The home page's sections of other apps: each app registers, from its
``AppConfig.ready``, a function of the user returning its section's context (or None when it
has nothing to show) and the template that renders it, so the core never imports them.
Sections show in their ``order``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Section:
    name: str
    template: str
    context: Callable[[Any], dict[str, Any] | None]
    order: int = 50


SECTIONS: dict[str, Section] = {}


def register(section: Section) -> None:
    SECTIONS[section.name] = section


def sections_for(user: Any) -> list[tuple[str, dict[str, Any]]]:
    """(template, context) of each section with something to show to ``user``."""
    shown = []
    for section in sorted(SECTIONS.values(), key=lambda s: (s.order, s.name)):
        context = section.context(user)
        if context:
            shown.append((section.template, context))
    return shown
