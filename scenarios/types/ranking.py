"""Ranking: all the variants of an item a task, in a recorded presentation order; the answer
orders their keys, best first, and is stored as variant ids.

Imported judgments are one row a place, ``item_id, rater, variant, rank`` (1 the best), as
the CSV export writes them; the rows of one rater and item make one ranking, which places
every variant of the item once."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from itertools import combinations
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
    kendall_tau,
    rounded,
    two_variants_per_item,
)


class Ranking(ScenarioKind):
    value = "ranking"
    label = "Ranking"
    position = 20
    description = "sort the variants of an item"
    answer_keys = ("ranking",)
    reply_parts = ("ranking",)
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
        {
            "title": "Task",
            "body": "{{instructions}}\n\nInput:\n{{context}}\n\n{{responses_fenced}}",
        },
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
        """``ranking``, the keys best first joined by commas (the evaluator page), or one
        ``place`` field a place, best first (the review page's form)."""
        if "place" in post:
            return {"ranking": [k for k in post.getlist("place") if k]}
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

    def under_keys(self, payload: Mapping[str, Any], presented: Sequence[Any]) -> dict[str, Any]:
        """The ranking's variant ids as the presented keys."""
        if "ranking" not in payload:
            return dict(payload)
        key_of = dict(zip(presented, KEYS, strict=False))
        return {"ranking": [key_of[pk] for pk in payload["ranking"] if pk in key_of]}

    def review_form(
        self, answer: Mapping[str, Any], config: Mapping[str, Any], keys: Sequence[str]
    ) -> dict[str, Any]:
        """A place for every key, each with the answer's key there (None past its end)."""
        ranking = list(answer.get("ranking") or [])
        ranking += [None] * (len(keys) - len(ranking))
        return {"places": [{"place": n + 1, "current": key} for n, key in enumerate(ranking)]}

    def form_fill(
        self, answer: Mapping[str, Any], config: Mapping[str, Any], keys: Sequence[str]
    ) -> dict[str, Any]:
        """``order``: the answer's ranking, then any key it leaves out."""
        order = [k for k in answer.get("ranking") or [] if k in keys]
        return {"order": order + [k for k in keys if k not in order]}

    # --- answers compared: variant ids, best first -----------------------------------------
    fast_seconds = 5.0

    def answer_value(self, payload: Mapping[str, Any], presented: Sequence[Any]) -> Any:
        ranking = payload.get("ranking")
        return tuple(ranking) if isinstance(ranking, list) and ranking else None

    def disagreement(self, values: Sequence[Any], config: Mapping[str, Any]) -> float | None:
        """(1 - the mean Kendall tau of every two rankings) / 2: 1 when every two rankings
        are reversals of each other."""
        taus = [t for a, b in combinations(values, 2) if (t := kendall_tau(a, b)) is not None]
        return (1 - sum(taus) / len(taus)) / 2 if taus else None

    def in_task_keys(
        self, payload: Mapping[str, Any], presented: Sequence[Any], task_order: Sequence[Any]
    ) -> dict[str, Any]:
        keys = {pk: KEYS[i] for i, pk in enumerate(task_order)}
        return {"ranking": [keys.get(pk) for pk in self.answer_value(payload, presented) or ()]}

    def summary(
        self, payload: Mapping[str, Any], presented: Sequence[Any], task_order: Sequence[Any]
    ) -> str:
        """ "B > A > C", under the task's keys."""
        shown = self.in_task_keys(payload, presented, task_order)
        return " > ".join(str(k) for k in shown["ranking"])

    def export_cell(
        self,
        payload: Mapping[str, Any],
        presented: Sequence[Any],
        row: Mapping[str, Any],
        variant_ids: Mapping[Any, str],
    ) -> Any:
        """The adjudicated rank of the row's ``variant``."""
        found = self.answer_value(payload, presented)
        if found is None:
            return ""
        ranked = [variant_ids.get(pk) for pk in found]
        variant = row.get("variant")
        return ranked.index(variant) + 1 if variant in ranked else ""

    def held_to(
        self, pairs: Sequence[tuple[Any, Any, Sequence[Any]]], config: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The share of identical rankings and the mean Kendall tau."""
        same, taus = [], []
        for mine, theirs, _ in pairs:
            if mine is None or theirs is None:
                continue
            same.append(mine == theirs)
            tau = kendall_tau(mine, theirs)
            if tau is not None:
                taus.append(tau)
        return {
            "accuracy": rounded(sum(same) / len(same)) if same else None,
            "mean_kendall_tau": rounded(sum(taus) / len(taus)) if taus else None,
        }

    def agreement_key(self, payload: Mapping[str, Any], presented: Sequence[Any]) -> Any:
        return tuple(payload.get("ranking") or [])

    def position_key(self, payload: Mapping[str, Any], presented: Sequence[Any]) -> Any:
        """The places, by the positions shown."""
        order = list(presented)
        return tuple(order.index(v) if v in order else v for v in payload.get("ranking") or [])

    def followed(self, payload: Mapping[str, Any], asked: Mapping[str, Any]) -> bool:
        return list(payload.get("ranking") or []) == list(asked.get("ranking") or [])

    def correct(
        self,
        payload: Mapping[str, Any],
        presented: Sequence[Any],
        gold: Mapping[str, Any],
        gold_presented: Sequence[Any],
    ) -> bool:
        return list(payload.get("ranking") or []) == list(gold.get("ranking") or [])

    def verdict_properties(self, config: Mapping[str, Any]) -> dict[str, Any] | None:
        return {
            "ranking": {
                "type": "array",
                "description": "Every response's key once, best first.",
                "items": {"type": "string", "enum": list(KEYS)},
            }
        }

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
