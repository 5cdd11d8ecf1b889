from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from evalplatform import validation
from evalplatform.accounts import policy
from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import PROMPTS_EDIT
from evalplatform.errors import Conflict, FieldErrors, Forbidden, validate_instance
from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion, VersionLocked
from evalplatform.prompts.rendering import (
    Block,
    RenderedPrompt,
    missing_for,
    placeholders,
    render,
    render_all,
    variables_in,
)

MAX_BLOCKS = 100
MAX_TITLE = 200  # PromptBlock.title
MAX_BODY = 100_000
MAX_NOTE = 300  # PromptVersion.note


def _require_edit(user: Any, team: Team | int) -> None:
    if not policy.has_feature(user, PROMPTS_EDIT, team):
        raise Forbidden()


MAX_SHOWN_PROBLEMS = 20  # malformed placeholders quoted per block; the rest are counted


def malformed_in(body: str) -> str:
    """What is wrong with a block body's placeholders ("" when nothing is): the first
    ``MAX_SHOWN_PROBLEMS`` quoted, the rest counted."""
    bad = [f"{p.text!r} {p.problem}" for p in placeholders(body) if p.name is None]
    more = len(bad) - MAX_SHOWN_PROBLEMS
    return " ".join(bad[:MAX_SHOWN_PROBLEMS]) + (f" And {more:,} more." if more > 0 else "")


def blocks_validate(blocks: Any) -> list[Block]:
    """Check a list of ``{"title", "body"}``; errors name the block index and field, and
    every placeholder that is no variable."""
    if not isinstance(blocks, list) or not blocks:
        raise FieldErrors({"blocks": "Give at least one block as a list of {title, body}."})
    if len(blocks) > MAX_BLOCKS:
        raise FieldErrors({"blocks": f"At most {MAX_BLOCKS} blocks."})
    errors: dict[str, str] = {}
    result: list[Block] = []
    for index, raw in enumerate(blocks):
        if not isinstance(raw, Mapping):
            errors[f"blocks[{index}]"] = "A block is an object with 'title' and 'body'."
            continue
        title, body = raw.get("title", ""), raw.get("body")
        if not isinstance(title, str):
            errors[f"blocks[{index}].title"] = "The title must be text."
        else:
            validation.text(
                title, name=f"blocks[{index}].title", errors=errors, max_length=MAX_TITLE
            )
        if not isinstance(body, str) or not body.strip():
            errors[f"blocks[{index}].body"] = "The body must be non-empty text."
        else:
            validation.text(body, name=f"blocks[{index}].body", errors=errors, max_length=MAX_BODY)
        unknown = set(raw) - {"title", "body"}
        if unknown:
            errors[f"blocks[{index}]"] = f"Unknown keys: {', '.join(sorted(unknown))}."
        if isinstance(body, str) and (bad := malformed_in(body)):
            errors[f"blocks[{index}].body"] = bad
        if f"blocks[{index}]" not in errors and isinstance(title, str) and isinstance(body, str):
            result.append(Block(title=title.strip(), body=body))
    if errors:
        raise FieldErrors(errors)
    return result


def _mapping(name: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldErrors({name: "Must be an object of variable names to values."})
    if _holds_nul(value):  # PostgreSQL's jsonb refuses them
        raise FieldErrors({name: "Names and values cannot hold NUL characters."})
    return dict(value)


def _holds_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str) and "\x00" in current:
            return True
        if isinstance(current, Mapping):
            stack += [*current.keys(), *current.values()]
        elif isinstance(current, list | tuple):
            stack += current
    return False


def _note(note: Any) -> str:
    errors: dict[str, str] = {}
    checked = validation.text(note, name="note", errors=errors, max_length=MAX_NOTE)
    if errors:
        raise FieldErrors(errors)
    return checked


def _write_blocks(version: PromptVersion, blocks: Sequence[Block]) -> None:
    PromptBlock.objects.bulk_create(
        PromptBlock(version=version, position=i, title=b.title, body=b.body)
        for i, b in enumerate(blocks)
    )


def template_create(
    *,
    user: Any,
    team: Team,
    name: str,
    blocks: Any,
    description: str = "",
    default_variables: Any = None,
    sample_item: Any = None,
    note: str = "",
) -> PromptTemplate:
    _require_edit(user, team)
    checked = blocks_validate(blocks)
    defaults, sample = (
        _mapping("default_variables", default_variables),
        _mapping("sample_item", sample_item),
    )
    note = _note(note)
    template = PromptTemplate(
        team=team, name=name.strip(), description=description, created_by=user
    )
    validate_instance(template, unique_field="name")
    with transaction.atomic():
        template.save()
        version = PromptVersion.objects.create(
            template=template,
            number=1,
            note=note,
            default_variables=defaults,
            sample_item=sample,
            created_by=user,
        )
        _write_blocks(version, checked)
    return template


def template_update(
    *, user: Any, template: PromptTemplate, name: str | None = None, description: str | None = None
) -> PromptTemplate:
    _require_edit(user, template.team_id)
    if name is not None:
        template.name = name.strip()
    if description is not None:
        template.description = description
    validate_instance(template, unique_field="name")
    template.save()
    return template


def template_delete(*, user: Any, template: PromptTemplate) -> None:
    _require_edit(user, template.team_id)
    with transaction.atomic():
        if template.versions.filter(locked_at__isnull=False).exists():
            raise Conflict("This template has versions used by jobs and cannot be deleted.")
        template.delete()


def version_create(
    *,
    user: Any,
    template: PromptTemplate,
    blocks: Any,
    default_variables: Any = None,
    sample_item: Any = None,
    note: str = "",
) -> PromptVersion:
    """A new version numbered after the highest existing one."""
    _require_edit(user, template.team_id)
    checked = blocks_validate(blocks)
    defaults, sample = (
        _mapping("default_variables", default_variables),
        _mapping("sample_item", sample_item),
    )
    note = _note(note)
    with transaction.atomic():
        # The template row lock serializes concurrent version creation (PostgreSQL);
        # SQLite's IMMEDIATE transactions already serialize writers.
        PromptTemplate.objects.select_for_update().filter(pk=template.pk).first()
        last = template.versions.aggregate(n=Max("number"))["n"] or 0
        version = PromptVersion.objects.create(
            template=template,
            number=last + 1,
            note=note,
            default_variables=defaults,
            sample_item=sample,
            created_by=user,
        )
        _write_blocks(version, checked)
        PromptTemplate.objects.filter(pk=template.pk).update(updated_at=timezone.now())
    return version


def version_update(
    *,
    user: Any,
    version: PromptVersion,
    blocks: Any = None,
    default_variables: Any = None,
    sample_item: Any = None,
    note: str | None = None,
) -> PromptVersion:
    """Edit a draft version in place; a used (locked) version refuses with 409."""
    _require_edit(user, version.template.team_id)
    checked = blocks_validate(blocks) if blocks is not None else None
    defaults = (
        _mapping("default_variables", default_variables) if default_variables is not None else None
    )
    sample = _mapping("sample_item", sample_item) if sample_item is not None else None
    note = _note(note) if note is not None else None
    with transaction.atomic():
        current = PromptVersion.objects.select_for_update().get(pk=version.pk)
        if current.is_locked:
            raise VersionLocked(
                f"Version {current.number} is used by a job and can no longer change; "
                f"create a new version instead."
            )
        if defaults is not None:
            current.default_variables = defaults
        if sample is not None:
            current.sample_item = sample
        if note is not None:
            current.note = note
        current.save()
        if checked is not None:
            current.blocks.all().delete()
            _write_blocks(current, checked)
        PromptTemplate.objects.filter(pk=current.template_id).update(updated_at=timezone.now())
    return current


def version_delete(*, user: Any, version: PromptVersion) -> None:
    _require_edit(user, version.template.team_id)
    with transaction.atomic():
        if version.template.versions.count() == 1:
            raise Conflict("A template keeps at least one version; delete the template instead.")
        version.delete()


def version_lock(*, version: PromptVersion) -> None:
    """Mark the version as used. Idempotent; called by whatever runs the prompt."""
    PromptVersion.objects.filter(pk=version.pk, locked_at__isnull=True).update(
        locked_at=timezone.now()
    )
    version.refresh_from_db(fields=["locked_at"])


def version_render(
    *, version: PromptVersion, items: Sequence[tuple[str, Mapping[str, Any]]]
) -> list[RenderedPrompt]:
    """Render for each ``(item_id, values)``; ``MissingVariables`` lists every gap."""
    return render_all(version.as_blocks(), items, version.default_variables)


@dataclass(frozen=True)
class VersionPreview:
    """What a version made of these fields would send for its sample item."""

    variables: list[str]  # the names and paths the blocks use, in order of first use
    missing: list[str]  # those the sample item and the default variables lack
    rendered: RenderedPrompt | None  # None when anything is wrong
    errors: dict[str, list[str]] = field(default_factory=dict)  # as creating would raise


def version_preview(
    *, blocks: Any, default_variables: Any = None, sample_item: Any = None
) -> VersionPreview:
    """Check a version's fields as ``version_create`` does and render them for the sample
    item; nothing is written and nothing raises: every problem is in ``errors`` (the same
    field names and messages as creating would answer) or ``missing``."""
    errors: dict[str, list[str]] = {}
    checked: list[Block] = []
    try:
        checked = blocks_validate(blocks)
    except FieldErrors as exc:
        errors |= exc.errors
    mappings: dict[str, dict[str, Any]] = {}
    for name, value in (("default_variables", default_variables), ("sample_item", sample_item)):
        try:
            mappings[name] = _mapping(name, value)
        except FieldErrors as exc:
            errors |= exc.errors
            mappings[name] = {}
    # The variables of every block that has a body, even when another block is wrong.
    readable = checked or [
        Block(title="", body=raw["body"])
        for raw in (blocks if isinstance(blocks, list) else [])[:MAX_BLOCKS]
        if isinstance(raw, Mapping) and isinstance(raw.get("body"), str)
    ]
    sample, defaults = mappings["sample_item"], mappings["default_variables"]
    missing = [m.variable for m in missing_for(readable, [("sample", sample)], defaults)]
    rendered = render(checked, sample, defaults) if not errors and not missing else None
    return VersionPreview(variables_in(readable), missing, rendered, errors)
