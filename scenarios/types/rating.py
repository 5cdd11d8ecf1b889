"""Rating: one variant a task, scored on each dimension of a rubric (whole-number scales,
with optional anchors and justifications)."""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from evalplatform import validation
from evalplatform.errors import FieldErrors
from scenarios.types.base import (
    JUDGE_PREAMBLE,
    ONE_RESPONSE_TASK,
    ImportedRow,
    Rejected,
    ScenarioKind,
    TaskLike,
    VariantLike,
    form_int,
    rounded,
)

MAX_DIMENSIONS = 20
MAX_SCALE_STEPS = 100
# A score on a gold task is correct within this of gold's (on every dimension).
GOLD_TOLERANCE = 1
EMPTY_DIMENSION_ROWS = 2  # the scenario form's blank rows, to add dimensions


def anchors_text(anchors: Mapping[str, str]) -> str:
    return "; ".join(f"{point}={label}" for point, label in anchors.items())


def dimension_rows(dimensions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rubric as the scenario form's rows of fields, with blank rows to add dimensions."""
    rows = [
        {**dim, "anchors_text": anchors_text(dim.get("anchors") or {}), "n": n}
        for n, dim in enumerate(dimensions)
    ]
    start = len(rows)
    rows += [
        {"name": "", "description": "", "min": 1, "max": 5, "anchors_text": "", "n": start + k}
        for k in range(EMPTY_DIMENSION_ROWS)
    ]
    return rows


def _anchors(text: str) -> dict[str, str] | str:
    """``1=Poor; 5=Great`` → ``{"1": "Poor", "5": "Great"}`` (the text itself when it does not
    parse, so that the check names the problem)."""
    anchors: dict[str, str] = {}
    for part in (text or "").split(";"):
        if not part.strip():
            continue
        point, sep, label = part.partition("=")
        if not sep:
            return text
        anchors[point.strip()] = label.strip()
    return anchors


def dimensions_from_rows(post: Any) -> list[dict[str, Any]]:
    """Rows ``dim-N-name``, ``-description``, ``-min``, ``-max``, ``-anchors``,
    ``-justification``; a row without a name is left out."""
    rows = sorted(
        {
            int(key.split("-")[1])
            for key in post
            if key.startswith("dim-")
            and key.count("-") == 2
            and validation.digits(key.split("-")[1]) is not None
        }
    )
    dimensions = []
    for n in rows:
        name = post.get(f"dim-{n}-name", "").strip()
        if not name:
            continue
        dimensions.append(
            {
                "name": name,
                "description": post.get(f"dim-{n}-description", "").strip(),
                "min": form_int(post.get(f"dim-{n}-min", "1")),
                "max": form_int(post.get(f"dim-{n}-max", "5")),
                "anchors": _anchors(post.get(f"dim-{n}-anchors", "")),
                "justification": post.get(f"dim-{n}-justification") == "1",
            }
        )
    return dimensions


def _number(value: Any) -> float | None:
    """A judge's score: a finite number, or a string holding one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def rubric_text(config: Mapping[str, Any]) -> str:
    """The judge prompt's ``{{rubric}}``: ``- name (min-max): description (anchors)``."""
    lines = []
    for dim in config.get("dimensions", []):
        parts = [dim.get("description") or ""]
        if dim.get("anchors"):
            parts.append("(" + "; ".join(f"{k} = {v}" for k, v in dim["anchors"].items()) + ")")
        lines.append(
            f"- {dim['name']} ({dim['min']}-{dim['max']}): " + " ".join(p for p in parts if p)
        )
    return "\n".join(lines)


class Rating(ScenarioKind):
    value = "rating"
    label = "Rating (rubric)"
    position = 10
    description = "each output scored on every dimension"
    settings_template = "evaluations/settings/rating.html"
    initial_config = {"dimensions": [{"name": "Quality", "min": 1, "max": 5}]}
    form_labels = {"dimensions": "Rubric"}
    answer_keys = ("scores", "justifications")
    reply_groups = ("scores",)
    analysis = "ratings"
    export_columns = ("variant", "model", "prompt", "dimension", "score", "justification")
    import_columns = (("variant", "model"),)
    judge_prompt = (
        {
            "title": "System",
            "body": JUDGE_PREAMBLE + " Score the response on every dimension of the rubric, with "
            "a number inside that dimension's scale.\n\nRubric:\n{{rubric}}\n\n"
            "Reply with one JSON object and nothing else:\n"
            '{"scores": {"<dimension>": <number>, ...}, "rationale": "<one or two sentences>"}',
        },
        ONE_RESPONSE_TASK,
    )

    seconds_per_task = 60

    def check_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        dimensions = config.get("dimensions")
        if not isinstance(dimensions, list) or not 1 <= len(dimensions) <= MAX_DIMENSIONS:
            raise FieldErrors(
                {"config.dimensions": f"A list of 1 to {MAX_DIMENSIONS} rubric dimensions."}
            )
        errors: dict[str, str] = {}
        names: set[str] = set()
        clean: list[dict[str, Any]] = []
        for index, dim in enumerate(dimensions):
            where = f"config.dimensions[{index}]"
            if not isinstance(dim, dict):
                errors[where] = "A dimension is an object {name, description, min, max, anchors}."
                continue
            name = str(dim.get("name") or "").strip()
            low, high = dim.get("min", 1), dim.get("max", 5)
            if not name or len(name) > 100:
                errors[f"{where}.name"] = "A name of at most 100 characters."
            elif name in names:
                errors[f"{where}.name"] = "Each dimension once."
            names.add(name)
            if (
                not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high))
                or not low < high
                or high - low > MAX_SCALE_STEPS
            ):
                errors[f"{where}.scale"] = (
                    f"Whole numbers min < max, at most {MAX_SCALE_STEPS} steps apart."
                )
                continue
            anchors = dim.get("anchors") or {}
            if not isinstance(anchors, dict) or not all(
                (n := validation.digits(str(k), signed=True)) is not None
                and low <= n <= high
                and isinstance(v, str)
                for k, v in anchors.items()
            ):
                errors[f"{where}.anchors"] = 'Labels for scale points: {"1": "poor", ...}.'
                anchors = {}
            clean.append(
                {
                    "name": name,
                    "description": str(dim.get("description") or ""),
                    "min": low,
                    "max": high,
                    "anchors": {str(int(k)): v for k, v in anchors.items()},
                    "justification": bool(dim.get("justification", False)),
                }
            )
        if errors:
            raise FieldErrors(errors)
        return {"dimensions": clean}

    def config_from_form(self, post: Any, current: Mapping[str, Any] | None) -> dict[str, Any]:
        return {"dimensions": dimensions_from_rows(post)}

    def form_values(self, config: Mapping[str, Any]) -> dict[str, Any]:
        dimensions = [
            {**d, "anchors": d["anchors"] if isinstance(d.get("anchors"), dict) else {}}
            for d in config.get("dimensions", [])
            if isinstance(d, dict)
        ]
        return {"dimension_rows": dimension_rows(dimensions)}

    def form_label(self, key: str, config: Mapping[str, Any]) -> str:
        """``dimensions[1].scale`` is "Rubric row “Tone”: min and max" (by its name)."""
        found = re.fullmatch(r"dimensions\[(\d+)\](?:\.(\w+))?", key)
        if not found:
            return super().form_label(key, config)
        index, part = int(found.group(1)), found.group(2)
        dimensions = config.get("dimensions")
        dim = dimensions[index] if isinstance(dimensions, list) and index < len(dimensions) else {}
        name = str(dim.get("name") or "").strip() if isinstance(dim, dict) else ""
        row = f"Rubric row “{name[:40]}”" if name else f"Rubric row {index + 1}"
        parts = {"scale": "min and max", "name": "name", "anchors": "anchors"}
        return f"{row}: {parts.get(part or '', part)}" if part else row

    def answer_from_form(self, post: Any, config: Mapping[str, Any]) -> dict[str, Any]:
        scores: dict[str, Any] = {}
        notes: dict[str, str] = {}
        for index, dim in enumerate(config["dimensions"]):
            raw = post.get(f"score_{index}", "")
            number = validation.digits(raw, signed=True)
            scores[dim["name"]] = number if number is not None else raw or None
            if post.get(f"note_{index}"):
                notes[dim["name"]] = post.get(f"note_{index}")
        return {"scores": scores, "justifications": notes}

    def check_answer(
        self, answer: Mapping[str, Any], *, config: Mapping[str, Any], presented: Sequence[Any]
    ) -> dict[str, Any]:
        scores, notes = answer.get("scores"), answer.get("justifications") or {}
        errors: dict[str, str] = {}
        if not isinstance(scores, dict):
            raise FieldErrors({"answer.scores": "An object {dimension: score}."})
        clean: dict[str, int] = {}
        for dim in config["dimensions"]:
            value = scores.get(dim["name"])
            where = f"answer.scores.{dim['name']}"
            if isinstance(value, bool) or not isinstance(value, int):
                errors[where] = f"A whole number from {dim['min']} to {dim['max']}."
            elif not dim["min"] <= value <= dim["max"]:
                errors[where] = f"From {dim['min']} to {dim['max']}."
            else:
                clean[dim["name"]] = value
        unknown = set(scores) - {d["name"] for d in config["dimensions"]}
        if unknown:
            errors["answer.scores"] = f"Unknown dimensions: {', '.join(sorted(unknown))}."
        if not isinstance(notes, dict) or not all(isinstance(v, str) for v in notes.values()):
            errors["answer.justifications"] = "An object {dimension: text}."
        if errors:
            raise FieldErrors(errors)
        kept = {d["name"]: notes[d["name"]] for d in config["dimensions"] if notes.get(d["name"])}
        return {"scores": clean, "justifications": kept}

    def read_verdict(
        self, found: Mapping[str, Any], *, config: Mapping[str, Any], keys: Sequence[str]
    ) -> dict[str, Any]:
        scores = found.get("scores")
        if not isinstance(scores, dict):
            raise Rejected('No "scores" object {dimension: number}.')
        dimensions = config.get("dimensions", [])
        names = {d["name"] for d in dimensions}
        unknown = sorted(set(scores) - names)
        if unknown:
            raise Rejected(f"Unknown dimensions: {', '.join(map(str, unknown))}.")
        clean: dict[str, float | int] = {}
        for dim in dimensions:
            if dim["name"] not in scores:
                raise Rejected(f"No score for {dim['name']}.")
            number = _number(scores[dim["name"]])
            if number is None:
                raise Rejected(f"The score for {dim['name']} is not a number.")
            if not dim["min"] <= number <= dim["max"]:
                raise Rejected(
                    f"The score for {dim['name']} ({number:g}) is outside "
                    f"{dim['min']}-{dim['max']}."
                )
            clean[dim["name"]] = int(number) if number.is_integer() else number
        return {"scores": clean, "justifications": {}}

    def form_fill(
        self, answer: Mapping[str, Any], config: Mapping[str, Any], keys: Sequence[str]
    ) -> dict[str, Any]:
        """Each dimension's score and justification, in the rubric's order; ``scale``:
        each dimension with its index, points, score and justification."""
        dimensions = config.get("dimensions", [])
        scores, notes = answer.get("scores") or {}, answer.get("justifications") or {}
        chosen = [scores.get(d["name"]) if isinstance(scores, dict) else None for d in dimensions]
        written = [notes.get(d["name"], "") if isinstance(notes, dict) else "" for d in dimensions]
        return {
            "order": list(keys),
            "scores": chosen,
            "notes": written,
            "scale": [
                (index, dim, list(range(dim["min"], dim["max"] + 1)), score, note)
                for index, (dim, score, note) in enumerate(
                    zip(dimensions, chosen, written, strict=True)
                )
            ],
        }

    def review_form(
        self, answer: Mapping[str, Any], config: Mapping[str, Any], keys: Sequence[str]
    ) -> dict[str, Any]:
        """Each dimension with its points and the answer's score."""
        dimensions = [d for d in config.get("dimensions", []) if isinstance(d, dict)]
        scores = answer.get("scores") or {}
        return {
            "scores": [
                {
                    "index": i,
                    "name": dim["name"],
                    "points": list(range(dim["min"], dim["max"] + 1)),
                    "current": scores.get(dim["name"]),
                }
                for i, dim in enumerate(dimensions)
            ]
        }

    # --- answers compared: the scores by dimension -----------------------------------------
    agreement_measure = "mean absolute difference from the others' mean score"

    def answer_value(self, payload: Mapping[str, Any], presented: Sequence[Any]) -> Any:
        scores = payload.get("scores")
        return dict(scores) if isinstance(scores, dict) else None

    def disagreement(self, values: Sequence[Any], config: Mapping[str, Any]) -> float | None:
        """Per dimension, the standard deviation of the scores (n in the denominator) over
        half the dimension's scale, the most it can be; the mean over the dimensions."""
        spreads = []
        for dim in config.get("dimensions", []):
            scores = [float(s[dim["name"]]) for s in values if s.get(dim["name"]) is not None]
            half = (dim["max"] - dim["min"]) / 2
            if len(scores) >= 2 and half > 0:
                mean = sum(scores) / len(scores)
                sd = (sum((x - mean) ** 2 for x in scores) / len(scores)) ** 0.5
                spreads.append(min(1.0, sd / half))
        return sum(spreads) / len(spreads) if spreads else None

    def spread(
        self, values: Sequence[Any], config: Mapping[str, Any]
    ) -> list[dict[str, Any]] | None:
        """Each dimension's scores of a task, with their mean, SD (n) and range."""
        rows = []
        for dim in config.get("dimensions", []):
            scores = [float(s[dim["name"]]) for s in values if s and s.get(dim["name"]) is not None]
            if not scores:
                continue
            mean = sum(scores) / len(scores)
            sd = (sum((x - mean) ** 2 for x in scores) / len(scores)) ** 0.5
            rows.append(
                {
                    "dimension": dim["name"],
                    "n": len(scores),
                    "mean": round(mean, 4),
                    "sd": round(sd, 4),
                    "range": max(scores) - min(scores),
                }
            )
        return rows

    def summary(
        self, payload: Mapping[str, Any], presented: Sequence[Any], task_order: Sequence[Any]
    ) -> str:
        """ "clarity 4 · tone 2"."""
        scores = payload.get("scores") or {}
        return " · ".join(f"{dim} {score}" for dim, score in scores.items())

    def export_cell(
        self,
        payload: Mapping[str, Any],
        presented: Sequence[Any],
        row: Mapping[str, Any],
        variant_ids: Mapping[Any, str],
    ) -> Any:
        """The adjudicated score of the row's ``dimension``."""
        found = self.answer_value(payload, presented)
        return "" if found is None else found.get(row.get("dimension"), "")

    def held_to(
        self, pairs: Sequence[tuple[Any, Any, Sequence[Any]]], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The share of exact scores and the mean absolute error, over every dimension
        (``scores``, ``accuracy``, ``mean_abs_error``) and ``by_dimension``."""
        by_dimension: dict[str, list[float]] = defaultdict(list)
        for mine, theirs, _ in pairs:
            mine, theirs = mine or {}, theirs or {}
            for dim in config.get("dimensions", []):
                name = dim["name"]
                if mine.get(name) is not None and theirs.get(name) is not None:
                    by_dimension[name].append(float(mine[name]) - float(theirs[name]))

        def scored(diffs: list[float]) -> dict[str, Any]:
            return {
                "scores": len(diffs),
                "accuracy": rounded(sum(d == 0 for d in diffs) / len(diffs)) if diffs else None,
                "mean_abs_error": (
                    rounded(sum(abs(d) for d in diffs) / len(diffs)) if diffs else None
                ),
            }

        every = [d for diffs in by_dimension.values() for d in diffs]
        return scored(every) | {
            "by_dimension": {name: scored(diffs) for name, diffs in by_dimension.items()}
        }

    def agreement_key(self, payload: Mapping[str, Any], presented: Sequence[Any]) -> Any:
        return tuple(sorted((payload.get("scores") or {}).items()))

    def agreement_with(
        self,
        payload: Mapping[str, Any],
        key: Any,
        others: Sequence[tuple[Any, Mapping[str, Any]]],
    ) -> float | None:
        """The mean over dimensions of the absolute difference from the others' mean."""
        theirs_all = [p.get("scores") or {} for _, p in others]
        diffs = []
        for dim, value in (payload.get("scores") or {}).items():
            theirs = [o[dim] for o in theirs_all if isinstance(o.get(dim), int | float)]
            if theirs and isinstance(value, int | float):
                diffs.append(abs(value - statistics.fmean(theirs)))
        return statistics.fmean(diffs) if diffs else None

    def flat(self, payloads: Sequence[Mapping[str, Any]]) -> bool:
        """One score for every answer of some dimension."""
        by_dim: dict[str, set[Any]] = defaultdict(set)
        for payload in payloads:
            for dim, value in (payload.get("scores") or {}).items():
                by_dim[dim].add(value)
        return any(len(values) == 1 for values in by_dim.values())

    def followed(self, payload: Mapping[str, Any], asked: Mapping[str, Any]) -> bool:
        return (payload.get("scores") or {}) == (asked.get("scores") or {})

    def correct(
        self,
        payload: Mapping[str, Any],
        presented: Sequence[Any],
        gold: Mapping[str, Any],
        gold_presented: Sequence[Any],
    ) -> bool:
        """Every dimension of gold's within ``GOLD_TOLERANCE``."""
        scores, wanted = payload.get("scores") or {}, gold.get("scores") or {}
        return all(
            isinstance(scores.get(dim), int | float) and abs(scores[dim] - value) <= GOLD_TOLERANCE
            for dim, value in wanted.items()
        )

    def verdict_properties(self, config: Mapping[str, Any]) -> dict[str, Any] | None:
        """A number per dimension, every one required."""
        names = [d["name"] for d in config.get("dimensions", [])]
        scale = "; ".join(f"{d['name']}: {d['min']} to {d['max']}" for d in config["dimensions"])
        return {
            "scores": {
                "type": "object",
                "description": f"A score per dimension ({scale}).",
                "properties": {name: {"type": "number"} for name in names},
                "required": names,
                "additionalProperties": False,
            }
        }

    def judge_variables(self, config: Mapping[str, Any]) -> dict[str, str]:
        return {"rubric": rubric_text(config)}

    def export_rows(
        self,
        *,
        payload: Mapping[str, Any],
        shown: Sequence[VariantLike],
        variants: Mapping[Any, VariantLike],
        task: TaskLike,
    ) -> Iterator[list[Any]]:
        v = shown[0]
        notes = payload.get("justifications") or {}
        for dimension, score in (payload.get("scores") or {}).items():
            yield [
                v.variant_id,
                v.model_label,
                v.prompt_label,
                dimension,
                score,
                notes.get(dimension, ""),
            ]

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
        """``item_id, variant, rater, dimension, score``: one score a row."""
        dims = {d["name"]: d for d in config.get("dimensions", [])}
        v = variants.get((item, str(row.get("variant") or "").strip()))
        dimension = str(row.get("dimension") or "").strip()
        raw_score = row.get("score")
        try:
            score = int(str(raw_score).strip())
        except (TypeError, ValueError):
            score = None
        if v is None:
            problems.append(f"item {item!r} has no such variant")
        if dimension not in dims:
            problems.append(f"unknown dimension {dimension!r}")
        elif score is None or not dims[dimension]["min"] <= score <= dims[dimension]["max"]:
            d = dims[dimension]
            problems.append(f"score is a whole number from {d['min']} to {d['max']}")
        if problems or v is None or score is None:
            return None
        return ImportedRow((v,), {"scores": {dimension: score}, "justifications": {}})

    def merge_imported(
        self, *, rater: str, earlier: dict[str, Any], later: dict[str, Any]
    ) -> str | None:
        given = earlier["scores"]
        for dimension, score in later["scores"].items():
            if dimension in given:
                return f"{rater} scored {dimension} of this variant twice"
            given[dimension] = score
        return None

    def import_config(self, rows: Sequence[Mapping[str, Any]], *, scale: str) -> dict[str, Any]:
        """A rubric of the dimensions the rows name, each on ``scale`` (``1-5``)."""
        dimensions: list[str] = []
        for row in rows:
            dimension = str(row.get("dimension") or "")
            if dimension and dimension not in dimensions:
                dimensions.append(dimension)
        low, _, high = scale.partition("-")
        return {"dimensions": [{"name": d, "min": int(low), "max": int(high)} for d in dimensions]}
