from django import template
from django.utils.safestring import mark_safe

from evaluations.markdown import render

register = template.Library()


@register.filter
def markdown(text: str) -> str:
    """Sanitized Markdown (see ``evaluations.markdown``)."""
    return mark_safe(render(text))  # noqa: S308 (cleaned by nh3 just above)
