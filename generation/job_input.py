"""The declared input of a job request: what each part of a request to plan a job must look
like, checked field by field without the database (``planning.job_plan`` adds the team's
prompt versions, models and items, and the checks across fields).

Each checker takes the raw value and the ``errors`` dict of the request, in the style of
``evalplatform.validation``: it records a message under the field's key and returns a clean
value (or a default), and raises nothing, except where a request cannot be read further
(``source_spec``). The keys and messages are the API's: tests and clients depend on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from evalplatform import validation
from evalplatform.errors import FieldErrors
from evalplatform.providers.llm import kinds
from generation.models import JobMode


@dataclass(frozen=True)
class JobFields:
    """The job's own settings: everything but its prompts, models and source."""

    name: str
    mode: Any  # one of ``JobMode``'s values; None when refused ("mode" in the errors)
    finish_live: bool
    repetitions: int
    max_tokens: int | None
    max_retries: int
    concurrency: int
    temperatures: list[float | None]  # None: a slot where no temperature is sent
    budget_usd: Decimal | None

    @classmethod
    def read(cls, data: Mapping[str, Any], errors: dict[str, str]) -> JobFields:
        """The settings of ``data``; their problems go to ``errors``, in this order."""
        name = str(data.get("name") or "").strip()
        if not name or len(name) > 200:
            errors["name"] = "A job needs a name of at most 200 characters."
        mode = validation.one_of(
            data.get("mode", JobMode.LIVE),
            name="mode",
            choices=JobMode.values,
            errors=errors,
            message="live or batch.",
        )
        finish_live = data.get("finish_live", False)
        # Stricter than ``validation.flag``: an explicit null is refused too.
        if not isinstance(finish_live, bool):
            errors["finish_live"] = "true or false."
        return cls(
            name=name,
            mode=mode,
            finish_live=finish_live is True,
            repetitions=_whole(data, "repetitions", 1, 1, 100, errors),
            max_tokens=validation.max_tokens(data.get("max_tokens"), errors=errors),
            max_retries=_whole(data, "max_retries", 3, 0, 10, errors),
            concurrency=_whole(data, "concurrency", 8, 1, 256, errors),
            temperatures=validation.temperatures(
                data.get("temperatures", [data.get("temperature", 0.7)]),
                errors=errors,
                default=[0.7],
                allow_none=True,
            ),
            budget_usd=validation.usd(data.get("budget_usd"), errors=errors),
        )


def _whole(
    data: Mapping[str, Any], name: str, default: int, lo: int, hi: int, errors: dict[str, str]
) -> int:
    number = validation.whole_number(
        data.get(name, default), name=name, lo=lo, hi=hi, errors=errors, default=default
    )
    return default if number is None else number


def prompt_version_ids(value: Any, errors: dict[str, str]) -> list[int]:
    """The prompt versions' ids, in order (empty when they are not a list of ids)."""
    ids = value or []
    if not isinstance(ids, list) or not ids or not all(validation.is_integer(i) for i in ids):
        errors["prompt_versions"] = "Choose at least one prompt version (a list of ids)."
        return []
    return ids


def model_entries(value: Any, errors: dict[str, str]) -> list[dict[str, Any]]:
    """The model configurations, each as an object ``{model, label, params}`` (a bare id is
    ``{"model": id}``); their fields are checked with the model they name (``params_problem``)."""
    entries = value or []
    if not isinstance(entries, list) or not entries:
        errors["models"] = "Choose at least one model (ids, or objects {model, label, params})."
        return []
    return [m if isinstance(m, dict) else {"model": m} for m in entries]


def params_problem(params: Any) -> str | None:
    """What is wrong with a model configuration's parameters, if anything."""
    if not isinstance(params, dict):
        return "Parameters are an object."
    if reserved := reserved_params(params):
        return (
            f"{', '.join(reserved)} are set by the job (model, prompt, max_tokens, "
            "temperature, one reply), not by parameters; "
            '"temperature": null sends no temperature for this model.'
        )
    return None


# Request fields the job sets itself: parameters may not override them, or the budget
# reservation (based on max_tokens and one reply) and the pricing would be wrong.
def reserved_params(params: Mapping[str, Any]) -> list[str]:
    """The parameters a job sets itself (each provider's words: ``kinds.reserved_params``);
    ``"temperature": null`` (send none) is allowed."""
    return kinds.reserved_params(params)


def source_spec(value: Any) -> dict[str, Any]:
    """The source object; a request without one readable is refused at once (the other
    fields' problems are not reported with it)."""
    source = value or {}
    if not isinstance(source, dict):
        raise FieldErrors({"source": "The source is an object: {type, format, content}."})
    return source
