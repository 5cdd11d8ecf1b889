"""Labeling: one variant a task; the answer is one label of the scenario's set (or several,
when it allows them), with free text when it takes some.

Imported judgments are one row each, ``item_id, variant, rater, labels, text``: the labels
joined by ``|`` as the CSV export writes them (a JSON list in JSON lines also does), the
text optional."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from evalplatform.errors import FieldErrors
from scenarios.types.base import (
    JUDGE_PREAMBLE,
    ONE_RESPONSE_TASK,
    ImportedRow,
    Rejected,
    ScenarioKind,
    TaskLike,
    VariantLike,
    categorical_held_to,
    flag,
    most_common_share,
)

MAX_LABELS = 100
MAX_TEXT = 20_000
# Between the labels of one cell of a file: the CSV export's and the import's separator.
SEPARATOR = "|"


def _labels_of(value: Any) -> list[str] | str:
    """The labels of an imported row's ``labels`` cell (``a|b``, or a JSON list of names),
    stripped; the problem as text when they are none or do not parse."""
    if isinstance(value, str):
        parts = value.split(SEPARATOR) if value.strip() else []
    elif isinstance(value, list) and all(isinstance(label, str) for label in value):
        parts = value
    elif value is None:
        parts = []
    else:
        return f"labels are names joined by {SEPARATOR} (or a JSON list of names)"
    labels = [label.strip() for label in parts]
    if not labels:
        return "labels is missing"
    if not all(labels):
        return f"an empty label (labels are joined by {SEPARATOR})"
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        return f"labels given twice: {', '.join(map(repr, twice))}"
    return labels


class Labeling(ScenarioKind):
    value = "labeling"
    label = "Labeling"
    position = 40
    description = "assign categories"
    settings_template = "evaluations/settings/labeling.html"
    initial_config = {"labels": ["good", "bad"], "multiple": False, "free_text": False}
    form_labels = {"labels": "Labels", "multiple": "Several labels per task"}
    answer_keys = ("labels", "text")
    reply_parts = ("labels",)
    analysis = "labels"
    export_columns = ("variant", "model", "prompt", "labels", "text")
    import_columns = (("variant", "model"),)
    judge_prompt = (
        {
            "title": "System",
            "body": JUDGE_PREAMBLE + " Label the response. {{label_rule}}\nLabels: {{labels}}\n\n"
            "Reply with one JSON object and nothing else:\n"
            '{"labels": ["<label>", ...], "rationale": "<one sentence>"}',
        },
        ONE_RESPONSE_TASK,
    )

    seconds_per_task = 20

    def check_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        labels = config.get("labels")
        if (
            not isinstance(labels, list)
            or not 2 <= len(labels) <= MAX_LABELS
            or not all(isinstance(label, str) and label.strip() for label in labels)
        ):
            raise FieldErrors({"config.labels": f"A list of 2 to {MAX_LABELS} label names."})
        labels = [label.strip() for label in labels]
        errors: dict[str, str] = {}
        if len(set(labels)) != len(labels):
            errors["config.labels"] = "Each label once."
        clean = {
            "labels": labels,
            "multiple": flag(config, "multiple", False, errors),
            "free_text": flag(config, "free_text", False, errors),
        }
        if errors:
            raise FieldErrors(errors)
        return clean

    def config_from_form(self, post: Any, current: Mapping[str, Any] | None) -> dict[str, Any]:
        labels = [line.strip() for line in post.get("labels", "").splitlines() if line.strip()]
        return {
            "labels": labels,
            "multiple": post.get("multiple") == "1",
            "free_text": post.get("free_text") == "1",
        }

    def form_values(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"labels_text": "\n".join(str(label) for label in config.get("labels", []))}

    def answer_from_form(self, post: Any, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"labels": post.getlist("labels"), "text": post.get("text", "")}

    def check_answer(
        self, answer: Mapping[str, Any], *, config: Mapping[str, Any], presented: Sequence[Any]
    ) -> dict[str, Any]:
        labels = answer.get("labels")
        allowed_labels = config["labels"]
        if (
            not isinstance(labels, list)
            or not labels
            or not all(label in allowed_labels for label in labels)
            or len(set(labels)) != len(labels)
            or (len(labels) > 1 and not config.get("multiple"))
        ):
            how = "one or more" if config.get("multiple") else "exactly one"
            raise FieldErrors(
                {"answer.labels": f"{how.capitalize()} of: {', '.join(allowed_labels)}."}
            )
        text = answer.get("text", "")
        if text and not config.get("free_text"):
            raise FieldErrors({"answer.text": "This scenario takes no free text."})
        if not isinstance(text, str) or len(text) > MAX_TEXT:
            raise FieldErrors({"answer.text": f"Text of at most {MAX_TEXT:,} characters."})
        return {"labels": labels, "text": text}

    def read_verdict(
        self, found: Mapping[str, Any], *, config: Mapping[str, Any], keys: Sequence[str]
    ) -> dict[str, Any]:
        labels = found.get("labels", found.get("label"))
        if isinstance(labels, str):
            labels = [labels]
        allowed_labels = config.get("labels", [])
        if not isinstance(labels, list) or not labels:
            raise Rejected('No "labels" list.')
        by_folded = {str(label).casefold(): label for label in allowed_labels}
        chosen = []
        for label in labels:
            match = by_folded.get(str(label).strip().casefold())
            if match is None:
                raise Rejected(f"{label!r} is not one of the labels.")
            if match not in chosen:
                chosen.append(match)
        if len(chosen) > 1 and not config.get("multiple"):
            raise Rejected("One label only.")
        text_note = found.get("text", "")
        return {"labels": chosen, "text": text_note if isinstance(text_note, str) else ""}

    def from_reply(self, part: str, value: Any) -> Any:
        """Labels written in one field, comma-separated, as a list."""
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value

    def form_fill(
        self, answer: Mapping[str, Any], config: Mapping[str, Any], keys: Sequence[str]
    ) -> dict[str, Any]:
        return {
            "order": list(keys),
            "labels": answer.get("labels") or [],
            "text": answer.get("text") or "",
        }

    def review_form(
        self, answer: Mapping[str, Any], config: Mapping[str, Any], keys: Sequence[str]
    ) -> dict[str, Any]:
        return {"labels": answer.get("labels") or [], "text": answer.get("text") or ""}

    # --- answers compared: the set of labels ------------------------------------------------
    def answer_value(self, payload: Mapping[str, Any], presented: Sequence[Any]) -> Any:
        """The labels, as a sorted tuple."""
        labels = payload.get("labels")
        return tuple(sorted(map(str, labels))) if isinstance(labels, list) else None

    def disagreement(self, values: Sequence[Any], config: Mapping[str, Any]) -> float | None:
        """1 - the share of the most frequent set of labels."""
        return most_common_share(values)

    def summary(
        self, payload: Mapping[str, Any], presented: Sequence[Any], task_order: Sequence[Any]
    ) -> str:
        """ "helpful, safe", with the text after when there is some."""
        text = payload.get("text") or ""
        return ", ".join(map(str, payload.get("labels") or [])) + (f" · “{text}”" if text else "")

    def export_cell(
        self,
        payload: Mapping[str, Any],
        presented: Sequence[Any],
        row: Mapping[str, Any],
        variant_ids: Mapping[Any, str],
    ) -> Any:
        """The labels joined by ``|`` (as ``labels``)."""
        found = self.answer_value(payload, presented)
        return "" if found is None else SEPARATOR.join(found)

    def held_to(
        self, pairs: Sequence[tuple[Any, Any, Sequence[Any]]], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Accuracy and Cohen's kappa of the sets of labels."""
        return categorical_held_to([(mine, theirs) for mine, theirs, _ in pairs])

    def agreement_key(self, payload: Mapping[str, Any], presented: Sequence[Any]) -> Any:
        return tuple(sorted(map(str, payload.get("labels") or [])))

    def followed(self, payload: Mapping[str, Any], asked: Mapping[str, Any]) -> bool:
        return sorted(payload.get("labels") or []) == sorted(asked.get("labels") or [])

    def correct(
        self,
        payload: Mapping[str, Any],
        presented: Sequence[Any],
        gold: Mapping[str, Any],
        gold_presented: Sequence[Any],
    ) -> bool:
        return self.followed(payload, gold)

    def verdict_properties(self, config: Mapping[str, Any]) -> dict[str, Any] | None:
        return {
            "labels": {
                "type": "array",
                "items": {"type": "string", "enum": list(config.get("labels", []))},
            }
        }

    def judge_variables(self, config: Mapping[str, Any]) -> dict[str, str]:
        return {
            "labels": ", ".join(config.get("labels", [])),
            "label_rule": (
                "Choose every label that applies (multiple labels are allowed)."
                if config.get("multiple")
                else "Choose exactly one label."
            ),
        }

    def export_rows(
        self,
        *,
        payload: Mapping[str, Any],
        shown: Sequence[VariantLike],
        variants: Mapping[Any, VariantLike],
        task: TaskLike,
    ) -> Iterator[list[Any]]:
        v = shown[0]
        labels = SEPARATOR.join(payload.get("labels") or [])
        yield [v.variant_id, v.model_label, v.prompt_label, labels, payload.get("text", "")]

    def read_import_row(
        self,
        row: Mapping[str, Any],
        *,
        item: str,
        variants: Mapping[tuple[str, str], VariantLike],
        item_variants: Sequence[VariantLike],
        config: Mapping[str, Any],
        problems: list[str],
    ) -> ImportedRow | None:
        """``item_id, variant, rater, labels, text``: one judgment a row, its labels joined
        by ``|``; ``text`` optional."""
        v = variants.get((item, str(row.get("variant") or "").strip()))
        if v is None:
            problems.append(f"item {item!r} has no such variant")
        labels = _labels_of(row.get("labels"))
        if isinstance(labels, str):
            problems.append(labels)
        else:
            allowed = config.get("labels", [])
            unknown = [label for label in labels if label not in allowed]
            if unknown:
                problems.append(f"not among the scenario's labels: {', '.join(map(repr, unknown))}")
            elif len(labels) > 1 and not config.get("multiple"):
                problems.append("this scenario takes one label a judgment")
        text = row.get("text")
        text = "" if text is None else text
        if not isinstance(text, str):
            problems.append("text is text")
        elif len(text) > MAX_TEXT:
            problems.append(f"text has more than {MAX_TEXT:,} characters")
        elif text.strip() and not config.get("free_text"):
            problems.append("this scenario takes no free text")
        if problems or v is None or isinstance(labels, str) or not isinstance(text, str):
            return None
        return ImportedRow((v,), {"labels": labels, "text": text.strip()})

    def merge_imported(
        self, *, rater: str, earlier: dict[str, Any], later: dict[str, Any]
    ) -> str | None:
        return f"{rater} labeled this variant twice"

    def import_config(self, rows: Sequence[Mapping[str, Any]], *, scale: str) -> dict[str, Any]:
        """The labels the rows name, sorted; ``multiple`` when a row has several,
        ``free_text`` when one has text."""
        found = [_labels_of(row.get("labels")) for row in rows]
        read = [labels for labels in found if isinstance(labels, list)]
        texts = [row.get("text") for row in rows]
        return {
            "labels": sorted({label for labels in read for label in labels}),
            "multiple": any(len(labels) > 1 for labels in read),
            "free_text": any(isinstance(text, str) and text.strip() for text in texts),
        }
