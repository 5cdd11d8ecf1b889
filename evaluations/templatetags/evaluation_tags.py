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
