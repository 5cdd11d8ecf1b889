"""``{% scenario_kinds as kinds %}``: every scenario type, for the scenario form (an upload's
and a generation job's conversion), which includes each type's settings template
(``ScenarioKind.settings_template``)."""

from __future__ import annotations

from django import template

from scenarios.types import registry
from scenarios.types.base import ScenarioKind

register = template.Library()


@register.simple_tag
def scenario_kinds() -> tuple[ScenarioKind, ...]:
    return registry.every()
