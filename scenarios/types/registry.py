"""Which scenario types exist: every module of this package but ``base`` and ``registry``
holds one (a subclass of ``ScenarioKind``), found here on first use, so that a new type is a
new module and nothing else. Code that depends on a scenario's type asks this registry for
its type object (``of(scenario)``, ``get(value)``) and calls it."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import Any

from scenarios.types.base import ScenarioKind

_NOT_TYPES = {"base", "registry"}
# The type the new-scenario form starts with.
DEFAULT = "comparison"


@cache
def _by_value() -> dict[str, ScenarioKind]:
    found: list[ScenarioKind] = []
    # The package's path (its directory), where each type is a module of its own.
    for module_info in pkgutil.iter_modules(importlib.import_module(__package__).__path__):
        if module_info.name in _NOT_TYPES or module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__package__}.{module_info.name}")
        found += [
            cls()
            for cls in vars(module).values()
            if isinstance(cls, type)
            and issubclass(cls, ScenarioKind)
            and cls.__module__ == module.__name__
        ]
    by_value: dict[str, ScenarioKind] = {}
    for kind in sorted(found, key=lambda k: k.position):
        if kind.value in by_value:
            raise RuntimeError(f"Two scenario types are called {kind.value!r}.")
        by_value[kind.value] = kind
    return by_value


def every() -> tuple[ScenarioKind, ...]:
    """Every type, in their ``position`` order."""
    return tuple(_by_value().values())


def get(value: str) -> ScenarioKind:
    """The type stored as ``value``; ``KeyError`` when there is none."""
    return _by_value()[value]


def find(value: Any) -> ScenarioKind | None:
    """The type stored as ``value``, or None (a form's or a request's value, unchecked)."""
    return _by_value().get(value) if isinstance(value, str) else None


def of(scenario: Any) -> ScenarioKind:
    """A scenario's type (anything with a ``type``: a ``Scenario``)."""
    return get(scenario.type)


def values() -> list[str]:
    return list(_by_value())


def choices() -> list[tuple[str, str]]:
    """``(value, label)`` of every type: the choices of ``Scenario.type``."""
    return [(kind.value, kind.label) for kind in every()]


def listed(words: list[str], last: str) -> str:
    """``a, b or c`` (``last``: "or", "and"), for messages naming types."""
    return ", ".join(words[:-1]) + f" {last} " + words[-1] if len(words) > 1 else "".join(words)
