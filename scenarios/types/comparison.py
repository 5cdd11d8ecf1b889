"""Comparison: two variants a task, A shown first and B second; the answer is the winner (or
a tie, when the scenario allows ties).

The design: pairs within each item or across the whole variant set; all pairs or a sample (a
count or a share, and within items at most ``max_pairs_per_item`` of each item's); each
pair's presentation order drawn at random; a share of the pairs also asked in the reverse
order. The same seed gives the same tasks in the same order. A sample never lists every
pair: pairs are drawn by their rank among all pairs and unranked, so 8,000 variants
compared across items (32 million pairs) cost what the sample costs.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from evalplatform.errors import FieldErrors
from scenarios.types.base import (
    JUDGE_PREAMBLE,
    KEYS,
    DesignItems,
    ImportedRow,
    Rejected,
    ScenarioKind,
    TaskLike,
    TaskSpec,
    VariantLike,
    categorical_held_to,
    flag,
    form_int,
    most_common_share,
    share,
    two_variants_per_item,
)


def _form_share(value: str, *, percent: bool = False) -> float | str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return number / 100 if percent else number


MAX_SAMPLE = 10_000_000  # sample_count and max_pairs_per_item: far beyond any design limit


def _pairs_of(n: int) -> int:
    return n * (n - 1) // 2


def _unrank(n: int, rank: int) -> tuple[int, int]:
    """The ``rank``-th pair (i < j) of ``n`` things in ``itertools.combinations`` order."""

    def before(i: int) -> int:  # pairs whose first element is below i
        return i * (2 * n - i - 1) // 2

    i = max(0, int(n - 2 - math.floor(math.sqrt(max(0, 4 * n * (n - 1) - 8 * rank - 7)) / 2 - 0.5)))
    while i > 0 and before(i) > rank:  # float rounding, either way
        i -= 1
    while before(i + 1) <= rank:
        i += 1
    return i, rank - before(i) + i + 1


def _groups(items: DesignItems, config: Mapping[str, Any]) -> list[tuple[Any, Sequence[Any]]]:
    if config.get("pairing", "within_item") == "across":
        return [(None, [v for _, variants in items for v in variants])]
    return [(item, variants) for item, variants in items]


def _pool(config: Mapping[str, Any], sizes: Sequence[int]) -> list[int]:
    """Each group's number of candidate pairs (capped by ``max_pairs_per_item``)."""
    cap = config.get("max_pairs_per_item")
    return [min(_pairs_of(n), cap) if cap else _pairs_of(n) for n in sizes]


def _wanted(config: Mapping[str, Any], total: int) -> int:
    if config.get("sample_count") is not None:
        return min(total, int(config["sample_count"]))
    if config.get("sample_share") is not None:
        return min(total, max(1, round(total * float(config["sample_share"]))))
    return total


def _winners(config: Mapping[str, Any]) -> list[str]:
    return ["A", "B", "tie"] if config.get("ties", True) else ["A", "B"]


class Comparison(ScenarioKind):
    value = "comparison"
    label = "Comparison (A vs B)"
    position = 30
    description = "A vs B, pairs within each item"
    settings_template = "evaluations/settings/comparison.html"
    form_labels = {
        "pairing": "Pairs",
        "sample_count": "How many pairs",
        "sample_share": "How many pairs",
        "max_pairs_per_item": "At most this many pairs of each item",
        "reverse_share": "Share also asked in reverse order",
        "ties": "Ties allowed",
    }
    answer_keys = ("winner",)
    reply_parts = ("winner",)
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
            "Response A:\n{{response_a_fenced}}\n\nResponse B:\n{{response_b_fenced}}",
        },
    )

    seconds_per_task = 30

    def variants_per_task(self, mean_variants: float) -> float:
        return 2.0

    def check_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        errors: dict[str, str] = {}
        pairing = config.get("pairing", "within_item")
        if pairing not in ("within_item", "across"):
            errors["config.pairing"] = "within_item or across."
        count = config.get("sample_count")
        sample_share = config.get("sample_share")
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SAMPLE
        ):
            errors["config.sample_count"] = f"A number of pairs, 1 to {MAX_SAMPLE:,}."
        per_item = config.get("max_pairs_per_item")
        if per_item is not None and (
            isinstance(per_item, bool)
            or not isinstance(per_item, int)
            or not 1 <= per_item <= MAX_SAMPLE
        ):
            errors["config.max_pairs_per_item"] = f"A number of pairs, 1 to {MAX_SAMPLE:,}."
        elif per_item is not None and pairing == "across":
            errors["config.max_pairs_per_item"] = "Only for pairs within each item."
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
            "max_pairs_per_item": per_item,
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

    def task_count(self, config: Mapping[str, Any], sizes: Sequence[int]) -> int:
        if config.get("pairing", "within_item") == "across":
            sizes = [sum(sizes)]
        pairs = _wanted(config, sum(_pool(config, sizes)))
        return pairs + round(pairs * float(config.get("reverse_share") or 0))

    def design(
        self, items: DesignItems, config: Mapping[str, Any], rng: random.Random
    ) -> list[TaskSpec]:
        groups = _groups(items, config)
        sizes = [len(variants) for _, variants in groups]
        pool = _pool(config, sizes)
        starts = list(itertools.accumulate(pool, initial=0))
        total = starts[-1]
        wanted = _wanted(config, total)
        # Ranks among all candidate pairs (in combinations order, group by group), drawn
        # without listing the pairs; a capped group draws its own candidates when reached.
        picks: Sequence[int] = range(total)
        if wanted < total:
            picks = sorted(rng.sample(range(total), wanted))
        pairs = []
        capped: tuple[int, list[int]] = (-1, [])
        for rank in picks:
            group = bisect.bisect_right(starts, rank) - 1
            local = rank - starts[group]
            item, variants = groups[group]
            if pool[group] < _pairs_of(len(variants)):
                if capped[0] != group:
                    chosen = rng.sample(range(_pairs_of(len(variants))), pool[group])
                    capped = (group, sorted(chosen))
                local = capped[1][local]
            i, j = _unrank(len(variants), local)
            pairs.append((item, variants[i], variants[j]))
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

    def form_values(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The sample as typed: a count, or a share as a percentage."""
        share, count = config.get("sample_share"), config.get("sample_count")
        if isinstance(share, int | float) and not isinstance(share, bool):
            return {"sample_text": f"{share * 100:g}%"}
        if isinstance(share, str):
            return {"sample_text": f"{share}%"}
        return {"sample_text": "" if count is None else str(count)}

    def config_from_form(self, post: Any, current: Mapping[str, Any] | None) -> dict[str, Any]:
        if current:
            # The pair design was made with the tasks: only the ties can change.
            return {**current, "ties": post.get("ties") == "1"}
        config: dict[str, Any] = {
            "pairing": post.get("pairing", "within_item"),
            "reverse_share": _form_share(post.get("reverse_share", "").strip() or "0"),
            "ties": post.get("ties") == "1",
        }
        sample = post.get("sample", "").strip()
        if sample.endswith("%"):
            config["sample_share"] = _form_share(sample[:-1], percent=True)
        elif sample and sample.lower() != "all":
            config["sample_count"] = form_int(sample)
        per_item = post.get("max_pairs_per_item", "").strip()
        if per_item and per_item.lower() != "all":
            config["max_pairs_per_item"] = form_int(per_item)
        return config

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

    def form_fill(
        self, answer: Mapping[str, Any], config: Mapping[str, Any], keys: Sequence[str]
    ) -> dict[str, Any]:
        return {"order": list(keys), "winner": answer.get("winner")}

    def review_form(
        self, answer: Mapping[str, Any], config: Mapping[str, Any], keys: Sequence[str]
    ) -> dict[str, Any]:
        return {"winner": answer.get("winner")}

    # --- answers compared: by the variant chosen, whatever the order shown ------------------
    def answer_value(self, payload: Mapping[str, Any], presented: Sequence[Any]) -> Any:
        """The winning variant's id, or "tie"."""
        winner = payload.get("winner")
        if winner == "tie":
            return "tie"
        if winner in ("A", "B") and len(presented) >= 2:
            return presented["AB".index(winner)]
        return None

    def disagreement(self, values: Sequence[Any], config: Mapping[str, Any]) -> float | None:
        """1 - the share of the most frequent answer."""
        return most_common_share(values)

    def in_task_keys(
        self, payload: Mapping[str, Any], presented: Sequence[Any], task_order: Sequence[Any]
    ) -> dict[str, Any]:
        keys = {pk: KEYS[i] for i, pk in enumerate(task_order)}
        found = self.answer_value(payload, presented)
        return {"winner": found if found in (None, "tie") else keys.get(found)}

    def summary(
        self, payload: Mapping[str, Any], presented: Sequence[Any], task_order: Sequence[Any]
    ) -> str:
        """ "A", "B" or "tie", under the task's keys."""
        return str(self.in_task_keys(payload, presented, task_order)["winner"] or "")

    def export_cell(
        self,
        payload: Mapping[str, Any],
        presented: Sequence[Any],
        row: Mapping[str, Any],
        variant_ids: Mapping[Any, str],
    ) -> Any:
        """The winning variant's id, or "tie" (as ``winner_variant``)."""
        found = self.answer_value(payload, presented)
        if found is None:
            return ""
        return found if found == "tie" else variant_ids.get(found, "")

    def held_to(
        self, pairs: Sequence[tuple[Any, Any, Sequence[Any]]], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Accuracy and Cohen's kappa, the winner read as the pair's lower or higher variant
        id (or a tie), so that the categories mean the same in every task."""

        def category(found: Any, presented: Sequence[Any]) -> Any:
            if found in (None, "tie"):
                return found
            return "lower" if found == min(presented) else "higher"

        return categorical_held_to(
            [(category(mine, shown), category(theirs, shown)) for mine, theirs, shown in pairs]
        )

    def agreement_key(self, payload: Mapping[str, Any], presented: Sequence[Any]) -> Any:
        """The variant chosen (or "tie"), whatever the order it was shown in."""
        winner = payload.get("winner")
        index = {"A": 0, "B": 1}.get(winner) if isinstance(winner, str) else None
        return presented[index] if index is not None and index < len(presented) else winner

    def position_key(self, payload: Mapping[str, Any], presented: Sequence[Any]) -> Any:
        return payload.get("winner")

    def followed(self, payload: Mapping[str, Any], asked: Mapping[str, Any]) -> bool:
        return payload.get("winner") == asked.get("winner")

    def verdict_properties(self, config: Mapping[str, Any]) -> dict[str, Any] | None:
        return {"winner": {"type": "string", "enum": _winners(config)}}

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
