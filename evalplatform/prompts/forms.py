"""The prompt editor's form fields read for the services, which check them: this module only
parses what a form cannot carry as it is (the JSON of the variable fields) and applies the
editor's block operations (add, remove, move) when the page runs without JavaScript."""

from __future__ import annotations

import json
from itertools import zip_longest
from typing import Any

from django.http import QueryDict

from evalplatform import validation
from evalplatform.prompts.models import PromptVersion

JSON_FIELDS = ("default_variables", "sample_item")


def _json(raw: str, *, name: str, errors: dict[str, list[str]]) -> Any:
    """The field's JSON value (empty: ``{}``); bad JSON is an error and None."""
    if not raw.strip():
        return {}
    try:
        return validation.json_value(raw)
    except validation.UnstorableJSON as exc:
        errors[name] = [str(exc)]
    except json.JSONDecodeError as exc:
        errors[name] = [f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."]
    except (ValueError, RecursionError):  # too deeply nested
        errors[name] = ["Not valid JSON."]
    return None


def version_fields(post: QueryDict) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The services' version input (blocks, note, default variables, sample item) from the
    editor's fields, and the errors of the JSON fields that do not parse."""
    errors: dict[str, list[str]] = {}
    pairs = zip_longest(post.getlist("block_title"), post.getlist("block_body"), fillvalue="")
    data: dict[str, Any] = {
        "blocks": [{"title": title, "body": body} for title, body in pairs],
        "note": post.get("note", ""),
    }
    for name in JSON_FIELDS:
        data[name] = _json(post.get(name, ""), name=name, errors=errors)
    return data, errors


def shown(post: QueryDict) -> dict[str, Any]:
    """The editor's fields as the user typed them, to show again."""
    data, _ = version_fields(post)
    return data | {name: post.get(name, "") for name in JSON_FIELDS}


def initial(version: PromptVersion | None) -> dict[str, Any]:
    """The editor's fields for a version (None: a new template's two empty blocks)."""
    if version is None:
        return {
            "blocks": [{"title": "System", "body": ""}, {"title": "", "body": ""}],
            "note": "",
            "default_variables": "{}",
            "sample_item": '{"content": ""}',
        }
    return {
        "blocks": [{"title": b.title, "body": b.body} for b in version.blocks.all()],
        "note": version.note,
        **{
            name: json.dumps(getattr(version, name), indent=2, ensure_ascii=False)
            for name in JSON_FIELDS
        },
    }


def apply_op(blocks: list[dict[str, str]], op: str) -> list[dict[str, str]]:
    """``add``, ``remove:i``, ``up:i`` or ``down:i`` applied to the blocks (an unknown
    operation or index changes nothing)."""
    blocks = list(blocks)
    if op == "add":
        return [*blocks, {"title": "", "body": ""}]
    name, _, raw = op.partition(":")
    found = validation.digits(raw, most=3)
    index = -1 if found is None else found
    if not 0 <= index < len(blocks):
        return blocks
    if name == "remove":
        del blocks[index]
    elif name == "up" and index > 0:
        blocks[index - 1], blocks[index] = blocks[index], blocks[index - 1]
    elif name == "down" and index < len(blocks) - 1:
        blocks[index + 1], blocks[index] = blocks[index], blocks[index + 1]
    return blocks
