"""Declared inputs: each use case's request as one DRF serializer that the API, the web forms
and the services share.

A use case (a job, a judge, a plan request, a scenario, a judge-file batch) declares its
fields once, as an ``Input``. The API documents the body from it (``extend_schema(request=
...)``: drf-spectacular reads the fields' bounds), the web forms build the same mapping from
their fields and hand it to the same service, and the service reads it with ``read``:
field by field, each value checked by the rules of ``evalplatform.validation`` (one set of
bounds and messages for the whole platform), every problem recorded under the field's key.
Only the checks across fields and against the database stay in the services, which then
raise one ``FieldErrors`` naming every problem, before anything is written.

A refused field still yields a value (its ``fallback``), so a service goes on to check the
rest and reports all problems at once, as a form does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from decimal import Decimal
from typing import Any, cast

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import build_choice_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from evalplatform import validation
from evalplatform.errors import FieldErrors

Errors = dict[str, str]
# What a field's rule raises for a bad value: its message is the field's error.
Invalid = ValidationError

# An object's id, as the schema documents it.
ID_SCHEMA: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": validation.ID_MAX}


class Checked(serializers.Field):
    """A field whose value is checked by one of ``evalplatform.validation``'s rules.

    ``missing``: the value read when the request has no such key (a callable gets the whole
    request, for defaults taken from another key). ``fallback``: what the service gets when
    the value is refused, so it can check the rest. Absent keys are never an error by
    themselves: the rule decides what an absent value means.
    """

    def __init__(self, *, missing: Any = None, fallback: Any = None, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)
        self.missing = missing
        self.fallback = fallback

    @property
    def key(self) -> str:
        """The field's name: the key of the request it reads, and of its errors."""
        return cast(str, self.field_name)

    def get_value(self, dictionary: Mapping[str, Any]) -> Any:
        if self.key in dictionary:
            return dictionary[self.key]
        return self.missing(dictionary) if callable(self.missing) else self.missing

    def run_validation(self, data: Any = None) -> Any:
        return self.checked(data, self.context)

    def checked(self, raw: Any, context: Mapping[str, Any]) -> Any:
        """The clean value of ``raw``, or ``Invalid`` with the field's message."""
        errors: Errors = {}
        value = self.check(raw, errors, context)
        if errors:
            raise Invalid(next(iter(errors.values())))
        return value

    def check(self, raw: Any, errors: Errors, context: Mapping[str, Any]) -> Any:
        """The clean value of ``raw``; a problem goes to ``errors`` (any key) or is raised
        as ``Invalid``. ``context``: the request's (``Input.read``'s keywords)."""
        raise NotImplementedError

    def to_representation(self, value: Any) -> Any:
        return value

    def schema(self) -> dict[str, Any]:
        """This field's OpenAPI schema (its bounds)."""
        return {}


class _Bounded(Checked):
    """A number from ``lo`` to ``hi``; null or "" is ``default``. ``hi`` may depend on the
    request's context (``hi(context)``, e.g. the scenario's number of models); ``most`` is
    then the bound the schema documents."""

    openapi_type = ""
    rule: Callable[..., Any]

    def __init__(
        self,
        lo: Any,
        hi: Any,
        *,
        default: Any = None,
        message: str | None = None,
        most: Any = None,
        **kw: Any,
    ) -> None:
        kw.setdefault("missing", default)
        kw.setdefault("fallback", default)
        super().__init__(**kw)
        self.lo, self.hi, self.default_value, self.message = lo, hi, default, message
        self.most = most if callable(hi) else hi

    def check(self, raw: Any, errors: Errors, context: Mapping[str, Any]) -> Any:
        return type(self).rule(
            raw,
            name=self.key,
            lo=self.lo,
            hi=self.hi(context) if callable(self.hi) else self.hi,
            errors=errors,
            default=self.default_value,
            message=self.message,
        )

    def schema(self) -> dict[str, Any]:
        found = {"type": self.openapi_type, "minimum": self.lo, "maximum": self.most}
        if self.default_value is None:
            found["nullable"] = True
        return found


class Whole(_Bounded):
    """A whole number from ``lo`` to ``hi`` (a digit string counts: form fields)."""

    openapi_type = "integer"
    rule = staticmethod(validation.whole_number)


class Number(_Bounded):
    """A finite number (integer or decimal) from ``lo`` to ``hi``."""

    openapi_type = "number"
    rule = staticmethod(validation.number)


class Usd(Checked):
    """An amount in US dollars, four decimals at most; null is none."""

    def check(self, raw: Any, errors: Errors, context: Mapping[str, Any]) -> Decimal | None:
        return validation.usd(raw, errors=errors, name=self.key)

    def schema(self) -> dict[str, Any]:
        return {
            "type": "number",
            "minimum": float(validation.USD_MIN),
            "maximum": float(validation.USD_MAX),
            "nullable": True,
        }


class Temperatures(Checked):
    """Distinct temperatures from 0 to 2; with ``allow_none``, null entries (no temperature
    sent) stay None."""

    def __init__(
        self, *, default: list[float] | None = None, allow_none: bool = False, **kw: Any
    ) -> None:
        self.default_value = list(default or [0.7])
        kw.setdefault("missing", lambda data: list(self.default_value))
        kw.setdefault("fallback", list(self.default_value))
        super().__init__(**kw)
        self.allow_none = allow_none

    def check(self, raw: Any, errors: Errors, context: Mapping[str, Any]) -> list[float | None]:
        return validation.temperatures(
            raw,
            errors=errors,
            default=self.default_value,
            name=self.key,
            allow_none=self.allow_none,
        )

    def schema(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "type": "number",
            "minimum": validation.TEMPERATURE_MIN,
            "maximum": validation.TEMPERATURE_MAX,
        }
        if self.allow_none:
            item["nullable"] = True
        return {"type": "array", "items": item, "minItems": 1}


class Flag(Checked):
    """true or false (JSON booleans only); null is ``default`` unless ``strict``."""

    def __init__(self, *, default: bool = False, strict: bool = False, **kw: Any) -> None:
        kw.setdefault("missing", default)
        kw.setdefault("fallback", default)
        super().__init__(**kw)
        self.default_value, self.strict = default, strict

    def check(self, raw: Any, errors: Errors, context: Mapping[str, Any]) -> bool:
        if self.strict and not isinstance(raw, bool):
            raise Invalid("true or false.")
        return validation.flag(raw, name=self.key, errors=errors, default=self.default_value)

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}


class OneOf(Checked):
    """One of ``choices``: values, or Django's ``(value, label)`` pairs (``JobMode.choices``:
    documented as the model field's enum is); or a function giving them, for choices that
    grow after import (the registry's scenario types)."""

    def __init__(
        self,
        choices: Collection[Any] | Callable[[], Collection[Any]],
        *,
        message: str | Callable[[], str],
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.choices, self.message = choices, message

    def _pairs(self) -> list[tuple[Any, Any]]:
        choices = self.choices() if callable(self.choices) else self.choices
        return [c if isinstance(c, tuple) else (c, c) for c in choices]

    def check(self, raw: Any, errors: Errors, context: Mapping[str, Any]) -> Any:
        return validation.one_of(
            raw,
            name=self.key,
            choices=[value for value, _ in self._pairs()],
            errors=errors,
            message=self.message() if callable(self.message) else self.message,
        )

    def schema(self) -> dict[str, Any]:
        return build_choice_field(serializers.ChoiceField(choices=self._pairs()))


class Text(Checked):
    """Text of at most ``max_length`` characters that both databases store; ``required``:
    stripped, and not empty."""

    def __init__(
        self,
        max_length: int,
        *,
        required_text: bool = False,
        message: str | None = None,
        **kw: Any,
    ) -> None:
        kw.setdefault("fallback", "")
        super().__init__(**kw)
        self.max_length, self.required_text, self.message = max_length, required_text, message

    def check(self, raw: Any, errors: Errors, context: Mapping[str, Any]) -> str:
        return validation.text(
            raw,
            name=self.key,
            errors=errors,
            max_length=self.max_length,
            required=self.required_text,
            message=self.message,
        )

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "maxLength": self.max_length}


class Ids(Checked):
    """A list of ids (integers, not booleans); ``at_least_one``: not empty."""

    def __init__(self, *, message: str, at_least_one: bool = True, **kw: Any) -> None:
        kw.setdefault("fallback", [])
        super().__init__(**kw)
        self.message, self.at_least_one = message, at_least_one

    def check(self, raw: Any, errors: Errors, context: Mapping[str, Any]) -> list[int]:
        ids = raw or []
        if (
            not isinstance(ids, list)
            or (self.at_least_one and not ids)
            or not all(validation.is_id(i) for i in ids)
        ):
            raise Invalid(self.message)
        return ids

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "items": ID_SCHEMA}


class Rule(Checked):
    """A field checked by a function of its own, for a shape only one use case has (a job's
    model entries, a scenario's context fields): ``rule(raw)`` returns the clean value or
    raises ``Invalid(message)``."""

    def __init__(
        self, rule: Callable[[Any], Any], *, openapi: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        super().__init__(**kw)
        self.rule, self.openapi = rule, openapi or {}

    def check(self, raw: Any, errors: Errors, context: Mapping[str, Any]) -> Any:
        return self.rule(raw)

    def schema(self) -> dict[str, Any]:
        return dict(self.openapi)


class Given(Rule):
    """A field taken as given: documented here, checked by the service against the
    database (a team's slug, a file's id, a model's name in the scenario)."""

    def __init__(self, *, openapi: dict[str, Any] | None = None, **kw: Any) -> None:
        super().__init__(_as_given, openapi=openapi, **kw)


def _as_given(raw: Any) -> Any:
    return raw


class Input(serializers.Serializer):
    """A use case's declared input. ``read`` reads a request with it the way a form does:
    every field checked, every problem recorded, a value for every field. Other keys are
    left alone (the services name what they refuse)."""

    @classmethod
    def declared(cls) -> dict[str, Checked]:
        """The fields, bound once per class (a field keeps no state of a request: the
        request's context is passed to it), in the order they are declared."""
        found = cls.__dict__.get("_bound")
        if found is None:
            found = dict(cls().fields)
            assert all(isinstance(f, Checked) for f in found.values()), cls
            cls._bound = found  # type: ignore[attr-defined]
        return found

    @classmethod
    def read(
        cls,
        data: Any,
        errors: Errors | None = None,
        *,
        instance: Any = None,
        **context: Any,
    ) -> dict[str, Any]:
        """Each field's clean value (over ``instance``'s own on an update: a key left out
        keeps the object's value), in the declared order; a refused field gets its
        ``fallback``, and its first message goes under its key. Without ``errors``, any
        problem is raised at once as one ``FieldErrors``; with it, problems are recorded
        there for the caller to raise with its own (database and cross-field) checks."""
        if not isinstance(data, Mapping):
            raise FieldErrors({"body": "A JSON object."})
        found: Errors = {} if errors is None else errors
        values: dict[str, Any] = {}
        for name, field in cls.declared().items():
            try:
                values[name] = field.checked(_raw(instance, name, field, data), context)
            except ValidationError as exc:
                found[name] = _first(exc.detail)
                values[name] = field.fallback
        if errors is None and found:
            raise FieldErrors(found)
        return values


def _raw(instance: Any, name: str, field: Checked, data: Mapping[str, Any]) -> Any:
    """The request's value; on an update (an ``instance``), a key left out keeps the
    object's own value (when it has one)."""
    if instance is not None and name not in data:
        own = getattr(instance, field.source or name, None)
        if own is not None:
            return own
    return field.get_value(data)


def in_order(errors: Errors, declared: type[Input]) -> Errors:
    """``errors`` in the order ``declared`` lists its fields, as a form shows them: a key
    inside a field (``models[2]``) with its field, a key it does not declare after them."""
    order = list(declared._declared_fields)  # the class's fields, in order, unbound

    def rank(key: str) -> int:
        head = _HEAD.match(key)
        name = head.group() if head else key
        return order.index(name) if name in order else len(order)

    return dict(sorted(errors.items(), key=lambda pair: rank(pair[0])))


def shown(key: str, declared: type[Input]) -> str:
    """An error's key named as the form names the field: its label, then where inside it
    (``models[1].params`` is "LLM models #2 params"); a key the input does not declare
    stays as it is."""
    head = _HEAD.match(key)
    name = head.group() if head else key
    field = declared._declared_fields.get(name)
    if field is None:
        return key
    label = field.label or name.replace("_", " ").capitalize()  # DRF's default label
    rest = _INDEX.sub(lambda m: f" #{int(m.group(1)) + 1}", key[len(name) :])
    return (str(label) + rest.replace(".", " ")).strip()


def relabelled(errors: Mapping[str, Sequence[str]], declared: type[Input]) -> dict[str, list[str]]:
    """``errors`` (``FieldErrors.errors``) by the form's names of the fields, for a page."""
    found: dict[str, list[str]] = {}
    for key, messages in errors.items():
        found.setdefault(shown(key, declared), []).extend(messages)
    return found


def sentence(errors: Mapping[str, Sequence[str]], declared: type[Input]) -> str:
    """``errors`` in one line for a page's message: "Job name: …; Max tokens: …"."""
    return "; ".join(
        f"{label}: {' '.join(messages)}" for label, messages in relabelled(errors, declared).items()
    )


_HEAD = re.compile(r"[^.\[]+")
_INDEX = re.compile(r"\[(\d+)\]")


def _first(detail: Any) -> str:
    while isinstance(detail, list | tuple) and detail:
        detail = detail[0]
    if isinstance(detail, dict) and detail:
        return _first(next(iter(detail.values())))
    return str(detail)


class CheckedFieldSchema(OpenApiSerializerFieldExtension):
    """Documents a checked field with the bounds its rule applies."""

    target_class = "evalplatform.inputs.Checked"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        field: Checked = self.target
        found = field.schema()
        if field.help_text:
            found = {**found, "description": str(field.help_text)}
        return found
