"""From the scenario pages' form fields to the services' data (the API's shapes): the fields
every scenario has, and the type's settings (read by its type: ``scenarios.types``). The
services check everything; these functions only collect."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalplatform import inputs
from scenarios.inputs import ScenarioFromJobInput
from scenarios.types import registry
from scenarios.types.base import form_int

# The fields every scenario has, before anything is typed.
INITIAL_FIELDS: dict[str, Any] = {
    "name": "",
    "instructions": "",
    "blind": True,
    "context_fields": None,
    "overlap": 1,
}


def initial_config() -> dict[str, Any]:
    """Every type's initial settings at once (their keys differ): the form shows each
    type's own when it is chosen."""
    config: dict[str, Any] = {}
    for kind in registry.every():
        config |= kind.initial_config
    return config


def form_values(kind: str, fields: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """What the scenario form shows: the fields, the configuration, and what each type's
    settings fieldset shows of it (``ScenarioKind.form_values``)."""
    values: dict[str, Any] = {**fields, "type": kind, "config": config}
    for each in registry.every():
        values |= each.form_values(config)
    return values


# Keys of the services' errors that the forms name otherwise than the API's input does.
_FORM_NAMES = {
    "outputs": "Which outputs",
    "file": "File",
    "team": "Team",
    "items": "Items",
    "seed": "Seed",
}


# The form's own fields: a service error keyed by one of them (or by ``config.…`` for the
# type's settings, ``outputs.…`` for which outputs) is also shown beside it.
_BESIDE = ("name", "instructions", "overlap", "seed", "context_fields", "team", "file", "type")


def named_errors(
    errors: Mapping[str, Sequence[str] | str], kind: str, config: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, str]]:
    """The services' errors (keys such as ``config.dimensions[0].scale``) as the form shows
    them, no API path anywhere: by what the form calls the field ("Rubric row “Clarity”: min
    and max"), in their order, for the list on top; and by the form field they are shown
    beside (``config``: the type's settings fieldset, each prefixed with its label)."""
    labelled: dict[str, str] = {}
    beside: dict[str, str] = {}
    kind_of = registry.find(kind)
    for key, messages in errors.items():
        text = messages if isinstance(messages, str) else " ".join(messages)
        head = key.split(".", 1)[0].split("[", 1)[0]
        if key in ("non_field_errors", ""):
            label = ""
        elif key.startswith("config.") and kind_of is not None:
            label = kind_of.form_label(key[len("config.") :], config)
        elif head in _FORM_NAMES:
            label = _FORM_NAMES[head]
        else:
            label = inputs.shown(key, ScenarioFromJobInput)
        labelled[label] = f"{labelled[label]} {text}" if label in labelled else text
        if head in (*_BESIDE, "outputs", "config"):
            shown = f"{label}: {text}" if head == "config" and label else text
            beside[head] = f"{beside[head]} {shown}" if head in beside else shown
    return labelled, beside


def created(scenario: Any) -> str:
    """The message a form shows once it made a scenario."""
    return f"Scenario “{scenario.name}” created ({scenario.tasks.count()} tasks)."


def config_from_post(kind: str, post: Any, current: dict[str, Any] | None = None) -> dict[str, Any]:
    """The configuration for ``kind`` from the form (none for an unknown type: the service
    names that); ``current``: the scenario's own when editing it (what cannot change, such as
    a pair design, is kept)."""
    found = registry.find(kind)
    return found.config_from_form(post, current) if found is not None else {}


def scenario_fields(post: Any) -> dict[str, Any]:
    """The fields every scenario has."""
    return {
        "name": post.get("name", ""),
        "instructions": post.get("instructions", ""),
        "blind": post.get("blind") == "1",
        "context_fields": context_fields_from_text(post.get("context_fields", "")),
        "overlap": form_int(post.get("overlap", "1")),
    }


def context_fields_from_text(text: Any) -> list[str] | None:
    """The context fields typed as names separated by commas or lines; blank: all (None)."""
    names = [n.strip() for n in str(text or "").replace("\n", ",").split(",")]
    names = [n for n in names if n]
    return names or None
