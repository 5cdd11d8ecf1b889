"""Adaptive comparison design: instead of (or after) a fixed pair design, add the pairs that
the judgments so far say are worth the most (``stats.next_pairs``: most likely misordered
under the current Bradley-Terry fit, weighted by the variance one comparison removes). The
new tasks go to evaluators through the usual assignment and to judges as "unjudged" tasks;
run a round, then ask for the next.

``bench/adaptive_pairs.py`` measures it against random pairs: it needs less than half the
comparisons when the variants' strengths are well spread, and no fewer when they are close
(docs/analytics.md).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from django.db import transaction

from evalplatform.accounts import policy
from evalplatform.accounts.roles import SCENARIOS_MANAGE
from evalplatform.errors import Conflict, FieldErrors, Forbidden
from evaluations.analytics import data, stats
from scenarios import selectors as scenario_selectors
from scenarios import services as scenario_services
from scenarios.models import Scenario, ScenarioStatus, Task
from scenarios.types import registry

MAX_PAIRS = 1000


def _candidates(
    scenario: Scenario, rows: list[tuple[int, int]], index: dict[int, int]
) -> np.ndarray:
    """The pairs the design allows (``rows``: the variants' ids and items): within each item,
    or across every variant."""
    if scenario.config.get("pairing") == "across":
        groups = {0: [pk for pk, _ in rows]}
    else:
        groups: dict[Any, list[int]] = {}  # type: ignore[no-redef]
        for pk, item in rows:
            groups.setdefault(item, []).append(pk)
    pairs = [
        (index[x], index[y])
        for members in groups.values()
        for n, x in enumerate(members)
        for y in members[n + 1 :]
    ]
    return np.array(pairs, int).reshape(-1, 2)


def add_adaptive_tasks(*, user: Any, scenario: Scenario, count: Any) -> list[Task]:
    """Add ``count`` comparison tasks chosen from the judgments so far (every rater's valid
    verdicts), each pair in a random presentation order."""
    if not policy.may(user, SCENARIOS_MANAGE, scenario):
        raise Forbidden()
    if not registry.of(scenario).is_pairwise:
        raise FieldErrors({"scenario": "Adaptive pairs are for comparison scenarios."})
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PAIRS:
        raise FieldErrors({"count": f"A number of pairs from 1 to {MAX_PAIRS}."})
    if scenario.status == ScenarioStatus.CLOSED:
        raise Conflict("The scenario is closed.")
    variants = data.variant_items(scenario)
    index = {pk: n for n, (pk, _) in enumerate(variants)}
    rows, _ = data.verdicts(scenario)
    a = np.array([index[r.presented[0]] for r in rows], int)
    b = np.array([index[r.presented[1]] for r in rows], int)
    outcome = {"A": 1.0, "B": 0.0}
    s = np.array([outcome.get(str(r.payload.get("winner")), 0.5) for r in rows], dtype=np.float64)
    pairs = stats.next_pairs(len(variants), a, b, s, count, _candidates(scenario, variants, index))
    if not pairs:
        raise Conflict("No pair can be added: the design allows none.")
    item_of = dict(variants)
    with transaction.atomic():
        scenario = Scenario.objects.select_for_update().get(pk=scenario.pk)
        start = scenario_selectors.next_task_position(scenario)
        shuffle = random.Random(f"{scenario.seed}:{start}")  # noqa: S311 - presentation order
        tasks = []
        for i, j in pairs:
            first, second = variants[i][0], variants[j][0]
            if shuffle.random() < 0.5:
                first, second = second, first
            tasks.append(
                scenario_services.NewTask(
                    item_id=item_of[first], variant_a_id=first, variant_b_id=second
                )
            )
        return scenario_services.tasks_add(scenario=scenario, tasks=tasks, start=start)
