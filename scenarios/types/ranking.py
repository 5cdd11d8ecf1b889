"""Ranking: all the variants of an item a task, in a recorded presentation order; the answer
orders their keys, best first, and is stored as variant ids."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from evalplatform.errors import FieldErrors
from scenarios.types.base import (
    JUDGE_PREAMBLE,
    KEYS,
    DesignItems,
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
