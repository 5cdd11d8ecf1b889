from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import mark_safe

from evaluations.markdown import render

register = template.Library()


@register.filter
def temperatures(values: list[float | None] | None) -> str:
    """A judge's or job's temperatures, null shown as none sent."""
    return ", ".join("none sent" if t is None else f"{t:g}" for t in values or [])


@register.filter
def markdown(text: str) -> str:
    """Sanitized Markdown (see ``evaluations.markdown``)."""
    return mark_safe(render(text))  # noqa: S308 (cleaned by nh3 just above)


NONE = "\u2013"  # an en dash


@register.filter
def figure(value: Any, places: int = 3) -> str:
    """A statistic as the analytics pages print every one: ``places`` decimals (3 unless
    told), a dash for none; so a κ never shows as -0.06206897 beside 3-decimal intervals."""
    if value is None or value == "":
        return NONE
    try:
        return f"{float(value):.{int(places)}f}"
    except (TypeError, ValueError):
        return str(value)
