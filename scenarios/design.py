"""Checking a scenario's configuration, and its task design: pure, seeded functions, each
done by the scenario's type (``scenarios.types``). The same seed gives the same tasks in the
same order."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from evalplatform.errors import FieldErrors
from scenarios.types import registry
from scenarios.types.base import DesignItems, TaskSpec

__all__ = ["TaskSpec", "check_config", "design"]


def check_config(kind: str, config: Any) -> dict[str, Any]:
    """The configuration for a scenario type, normalized; ``FieldErrors`` names what is wrong."""
    if not isinstance(config, dict):
        raise FieldErrors({"config": "The configuration is an object."})
    return registry.get(kind).check_config(config)


def design(
    kind: str,
    items: DesignItems,
    config: Mapping[str, Any],
    seed: int,
) -> list[TaskSpec]:
    """The tasks of a scenario from its items' variant keys, in presentation order."""
    rng = random.Random(seed)  # noqa: S311 (a reproducible design, not a secret)
    return registry.get(kind).design(items, config, rng)
