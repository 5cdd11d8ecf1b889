"""Ranking: all the variants of an item a task, in a recorded presentation order; the answer
orders their keys, best first, and is stored as variant ids.

Imported judgments are one row a place, ``item_id, rater, variant, rank`` (1 the best), as
the CSV export writes them; the rows of one rater and item make one ranking, which places
every variant of the item once."""

from __future__ import annotations

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
    two_variants_per_item,
)


class Ranking(ScenarioKind):
    value = "ranking"
    label = "Ranking"
    position = 20
    description = "sort the variants of an item"
    answer_keys = ("ranking",)
    swappable = True
    analysis = "rankings"
    export_columns = ("rank", "variant", "model", "prompt")
    import_columns = (("variant", "model"),)
    judge_prompt = (
        {
            "title": "System",
            "body": JUDGE_PREAMBLE + " Rank all the responses to the same input from best to "
            "worst.\n\nReply with one JSON object and nothing else:\n"
            '{"ranking": [{{keys}} in your order, best first], "rationale": "<one sentence>"}',
        },
        {"title": "Task", "body": "{{instructions}}\n\nInput:\n{{context}}\n\n{{responses}}"},
    )

    def check_items(self, config: Mapping[str, Any], sizes: Sequence[tuple[str, int]]) -> None:
        two_variants_per_item(sizes)

    seconds_per_task = 90

    def variants_per_task(self, mean_variants: float) -> float:
        return mean_variants

    def task_count(self, config: Mapping[str, Any], sizes: Sequence[int]) -> int:
        return len(sizes)

    def design(
        self, items: DesignItems, config: Mapping[str, Any], rng: random.Random
    ) -> list[TaskSpec]:
        """One task per item, its variants in a random order."""
        tasks = []
        for item, variants in items:
            order = list(variants)
            rng.shuffle(order)
            tasks.append(TaskSpec(item, order=tuple(order)))
        rng.shuffle(tasks)
        return tasks

    def answer_from_form(self, post: Any, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"ranking": [k for k in post.get("ranking", "").split(",") if k]}

    def check_answer(
        self, answer: Mapping[str, Any], *, config: Mapping[str, Any], presented: Sequence[Any]
    ) -> dict[str, Any]:
        ranking = answer.get("ranking")
        keys = KEYS[: len(presented)]
        if not isinstance(ranking, list) or sorted(map(str, ranking)) != sorted(keys):
            raise FieldErrors({"answer.ranking": f"Every key once, best first: {', '.join(keys)}."})
        return self.stored({"ranking": [str(key) for key in ranking]}, presented)

    def read_verdict(
        self, found: Mapping[str, Any], *, config: Mapping[str, Any], keys: Sequence[str]
    ) -> dict[str, Any]:
        ranking = found.get("ranking")
        if not isinstance(ranking, list):
            raise Rejected('No "ranking" list.')
        given = [str(k).strip().upper() for k in ranking]
        if sorted(given) != sorted(keys):
            raise Rejected(f"The ranking must list {', '.join(keys)} once each.")
        return {"ranking": given}

    def stored(self, answer: Mapping[str, Any], presented: Sequence[Any]) -> dict[str, Any]:
        keys = KEYS[: len(presented)]
        return {"ranking": [presented[keys.index(key)] for key in answer["ranking"]]}

    def judge_responses(self, contents: Sequence[str], keys: Sequence[str]) -> dict[str, str]:
        return {
            "keys": ", ".join(f'"{k}"' for k in keys),
            "responses": "\n\n".join(
                f"Response {k}:\n{text}" for k, text in zip(keys, contents, strict=True)
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
        for rank, pk in enumerate(payload.get("ranking") or [], 1):
            v = variants[pk]
            yield [rank, v.variant_id, v.model_label, v.prompt_label]

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
        """``item_id, rater, variant, rank``: one place a row, ``rank`` 1 (the best) to the
        number of the item's variants."""
        variant_id = str(row.get("variant") or "").strip()
        raw_rank = row.get("rank")
        v = variants.get((item, variant_id))
        if not variant_id:
            problems.append("variant is missing")
        elif v is None:
            problems.append(f"item {item!r} has no such variant")
        try:
            rank = None if isinstance(raw_rank, bool) else int(str(raw_rank).strip())
        except ValueError:
            rank = None
        if raw_rank is None or not str(raw_rank).strip():
            problems.append("rank is missing")
        elif v is not None and (rank is None or not 1 <= rank <= len(item_variants)):
            problems.append(f"rank is a whole number from 1 to {len(item_variants)}")
        if problems or v is None or rank is None:
            return None
        # The item's variants, whatever the place: the rows of one rater and item merge.
        return ImportedRow(tuple(item_variants), {"ranking": {rank: v.variant_id}})

    def merge_imported(
        self, *, rater: str, earlier: dict[str, Any], later: dict[str, Any]
    ) -> str | None:
        places = earlier["ranking"]
        for rank, variant_id in later["ranking"].items():
            if rank in places:
                return f"{rater} gave rank {rank} of this item twice"
            if variant_id in places.values():
                return f"{rater} ranked {variant_id} of this item twice"
            places[rank] = variant_id
        return None

    def finish_imported(
        self, *, rater: str, answer: dict[str, Any], presented: Sequence[VariantLike]
    ) -> str | None:
        """The places (rank → variant id) as the stored ranking of variant ids, best first;
        the variants left out when there are some."""
        places = answer["ranking"]
        missing = [v.variant_id for v in presented if v.variant_id not in places.values()]
        if missing:
            return (
                f"{rater}'s ranking (its rows from this line on) leaves out "
                f"{', '.join(missing)}; a ranking places every variant of its item once"
            )
        by_id = {v.variant_id: v.pk for v in presented}
        answer["ranking"] = [by_id[places[rank]] for rank in sorted(places)]
        return None

    def import_task(self, presented: Sequence[VariantLike]) -> TaskSpec:
        """The item's task, which orders all its variants (one made for the import shows
        them in their order in the item)."""
        return TaskSpec(None, order=tuple(v.pk for v in presented))
