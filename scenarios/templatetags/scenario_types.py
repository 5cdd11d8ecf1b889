"""``{% scenario_kinds as kinds %}``: every scenario type, for the pages that offer them (the
scenario form, a generation job's "Convert to scenario" dialog), which include each type's
settings templates (``ScenarioKind.settings_template``, ``dialog_template``)."""

from __future__ import annotations

from django import template

from scenarios.types import registry
from scenarios.types.base import ScenarioKind

register = template.Library()


@register.simple_tag
def scenario_kinds() -> tuple[ScenarioKind, ...]:
    return registry.every()
