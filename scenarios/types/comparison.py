"""Comparison: two variants a task, A shown first and B second; the answer is the winner (or
a tie, when the scenario allows ties).

The design: pairs within each item or across the whole variant set; all pairs or a sample (a
count or a share); each pair's presentation order drawn at random; a share of the pairs also
asked in the reverse order. The same seed gives the same tasks in the same order.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from evalplatform.errors import FieldErrors
from scenarios.types.base import (
    JUDGE_PREAMBLE,
    DesignItems,
    ImportedRow,
    Rejected,
    ScenarioKind,
    TaskLike,
    TaskSpec,
    VariantLike,
    flag,
    form_int,
    share,
    two_variants_per_item,
)


def _form_share(value: str, *, percent: bool = False) -> float | str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return number / 100 if percent else number


def _number(value: str, default: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _winners(config: Mapping[str, Any]) -> list[str]:
    return ["A", "B", "tie"] if config.get("ties", True) else ["A", "B"]


class Comparison(ScenarioKind):
    value = "comparison"
    label = "Comparison (A vs B)"
    position = 30
    description = "A vs B, pairs within each item"
    settings_template = "evaluations/settings/comparison.html"
    dialog_template = "evaluations/convert/comparison.html"
    answer_keys = ("winner",)
    is_pairwise = True
    swappable = True
    analysis = "pairwise"
    initial_config = {"pairing": "within_item", "reverse_share": 0, "ties": True}
    export_columns = (
        "variant_a",
        "variant_b",
        "model_a",
        "model_b",
        "prompt_a",
        "prompt_b",
        "winner",
        "winner_variant",
        "reverse_of_task",
    )
    import_columns = (("variant_a", "model_a"), ("variant_b", "model_b"))
    judge_prompt = (
        {
            "title": "System",
            "body": JUDGE_PREAMBLE + " Decide which of the two responses to the same input is "
            "better.\n\nReply with one JSON object and nothing else:\n"
            '{"winner": {{verdict_options}}, "rationale": "<one sentence>"}',
        },
        {
            "title": "Task",
            "body": "{{instructions}}\n\nInput:\n{{context}}\n\n"
            "Response A:\n{{response_a}}\n\nResponse B:\n{{response_b}}",
        },
    )

    def check_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        errors: dict[str, str] = {}
        pairing = config.get("pairing", "within_item")
        if pairing not in ("within_item", "across"):
            errors["config.pairing"] = "within_item or across."
        count = config.get("sample_count")
        sample_share = config.get("sample_share")
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or count < 1
        ):
            errors["config.sample_count"] = "A number of pairs, at least 1."
        if sample_share is not None and (
            share(sample_share) is None or not 0 < float(sample_share) <= 1
        ):
            errors["config.sample_share"] = "A share of all pairs, above 0 and at most 1."
        if count is not None and sample_share is not None:
            errors["config.sample_count"] = "Give sample_count or sample_share, not both."
        reverse = config.get("reverse_share", 0)
        if share(reverse) is None or not 0 <= float(reverse) <= 1:
            errors["config.reverse_share"] = "A share from 0 to 1 of pairs also asked reversed."
            reverse = 0
        clean = {
            "pairing": pairing,
            "sample_count": count,
            "sample_share": sample_share,
            "reverse_share": float(reverse),
            "ties": flag(config, "ties", True, errors),
        }
        if errors:
            raise FieldErrors(errors)
        return clean

    def check_items(self, config: Mapping[str, Any], sizes: Sequence[tuple[str, int]]) -> None:
        if config.get("pairing") != "across":
            two_variants_per_item(sizes)
        elif sum(count for _, count in sizes) < 2:
            raise FieldErrors({"items": "At least two variants are needed to compare."})

    def design(
        self, items: DesignItems, config: Mapping[str, Any], rng: random.Random
    ) -> list[TaskSpec]:
        if config.get("pairing", "within_item") == "across":
            everything = [v for _, variants in items for v in variants]
            pairs = [(None, a, b) for a, b in itertools.combinations(everything, 2)]
        else:
            pairs = [
                (item, a, b)
                for item, variants in items
                for a, b in itertools.combinations(variants, 2)
            ]
        wanted = len(pairs)
        if config.get("sample_count") is not None:
            wanted = min(len(pairs), int(config["sample_count"]))
        elif config.get("sample_share") is not None:
            wanted = max(1, round(len(pairs) * float(config["sample_share"])))
        if wanted < len(pairs):
            keep = sorted(rng.sample(range(len(pairs)), wanted))
            pairs = [pairs[i] for i in keep]
        tasks = [
            TaskSpec(item, a=a, b=b) if rng.random() < 0.5 else TaskSpec(item, a=b, b=a)
            for item, a, b in pairs
        ]
        reverse_count = round(len(tasks) * float(config.get("reverse_share") or 0))
        for index in sorted(rng.sample(range(len(tasks)), reverse_count)):
            pair = tasks[index]
            tasks.append(TaskSpec(pair.item, a=pair.b, b=pair.a, reverse_of=index))
        # Shuffle the presentation, keeping each reverse pair's link to its original.
        order = list(range(len(tasks)))
        rng.shuffle(order)
        position = {old: new for new, old in enumerate(order)}
        return [
            TaskSpec(
                t.item,
                a=t.a,
                b=t.b,
                reverse_of=position[t.reverse_of] if t.reverse_of is not None else None,
            )
            for t in (tasks[old] for old in order)
        ]

    def config_from_form(self, post: Any, current: Mapping[str, Any] | None) -> dict[str, Any]:
        if current:
            # The pair design was made with the tasks: only the ties can change.
            return {**current, "ties": post.get("ties") == "1"}
        sample = post.get("sample", "").strip()
        config: dict[str, Any] = {
            "pairing": post.get("pairing", "within_item"),
            "reverse_share": _form_share(post.get("reverse_share", "0")),
            "ties": post.get("ties") == "1",
        }
        if sample.endswith("%"):
            config["sample_share"] = _form_share(sample[:-1], percent=True)
        elif sample:
            config["sample_count"] = form_int(sample)
        return config

    def config_from_dialog(self, post: Any) -> dict[str, Any]:
        return {
            "reverse_share": _number(post.get("reverse_share", "0"), 0),
            "ties": post.get("ties") == "1",
        }

    def answer_from_form(self, post: Any, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"winner": post.get("winner")}

    def check_answer(
        self, answer: Mapping[str, Any], *, config: Mapping[str, Any], presented: Sequence[Any]
    ) -> dict[str, Any]:
        allowed = _winners(config)
        if answer.get("winner") not in allowed:
            raise FieldErrors({"answer.winner": " or ".join(allowed) + "."})
        return {"winner": answer["winner"]}

    def read_verdict(
        self, found: Mapping[str, Any], *, config: Mapping[str, Any], keys: Sequence[str]
    ) -> dict[str, Any]:
        winner = found.get("winner")
        if isinstance(winner, str):
            winner = {"a": "A", "b": "B", "tie": "tie"}.get(winner.strip().lower(), winner)
        allowed = _winners(config)
        if winner not in allowed:
            raise Rejected(f"winner must be {' or '.join(allowed)}; the reply has {winner!r}.")
        return {"winner": winner}

    def judge_variables(self, config: Mapping[str, Any]) -> dict[str, str]:
        return {
            "verdict_options": '"A", "B" or "tie"' if config.get("ties", True) else '"A" or "B"'
        }

    def judge_responses(self, contents: Sequence[str], keys: Sequence[str]) -> dict[str, str]:
        return {"response_a": contents[0], "response_b": contents[1]}

    def export_rows(
        self,
        *,
        payload: Mapping[str, Any],
        shown: Sequence[VariantLike],
        variants: Mapping[Any, VariantLike],
        task: TaskLike,
    ) -> Iterator[list[Any]]:
        a, b = shown[0], shown[1]
        winner = payload.get("winner")
        won = {"A": a.variant_id, "B": b.variant_id}.get(str(winner), "")
        yield [
            a.variant_id,
            b.variant_id,
            a.model_label,
            b.model_label,
            a.prompt_label,
            b.prompt_label,
            winner,
            won,
            task.reverse_of_id or "",
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
        """``item_id, variant_a, variant_b, winner, rater``: ``winner`` A, B or tie, the
        variant shown first or second."""
        a = variants.get((item, str(row.get("variant_a") or "").strip()))
        b = variants.get((item, str(row.get("variant_b") or "").strip()))
        winner = str(row.get("winner") or "").strip()
        if a is None or b is None:
            problems.append(f"item {item!r} has no such variant_a / variant_b")
        elif a == b:
            problems.append("variant_a and variant_b are the same")
        if winner not in ("A", "B", "tie"):
            problems.append("winner is A, B or tie")
        elif winner == "tie" and not config.get("ties", True):
            problems.append("this scenario allows no ties")
        if problems or a is None or b is None:
            return None
        return ImportedRow((a, b), {"winner": winner})

    def merge_imported(
        self, *, rater: str, earlier: dict[str, Any], later: dict[str, Any]
    ) -> str | None:
        return f"{rater} judged this pair in this order twice"

    def import_config(self, rows: Sequence[Mapping[str, Any]], *, scale: str) -> dict[str, Any]:
        return {"ties": True}
