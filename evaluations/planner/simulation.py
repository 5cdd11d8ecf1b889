"""Seeded simulations of the scheduler against today's fixed design, for the tests and for
``bench/active_budget.py``: true strengths known, people and judges of known reliability,
position bias and cost.

Today's fixed design: passes over every pair of entities, each pair one task, every task
answered by people (``overlap`` of them) and by every judge (a judge runs over all
"unjudged" tasks). The scheduler: one calibration task per entity (a random spanning chain,
answered by everyone, so each judge is measured against people), then rounds of ``plan``
with a round's budget, each round's verdicts simulated and the model estimated again
(``design.estimate``), until the question's interval is as narrow as the target. Both stop
by the same measured criterion; the cost each needed is what the bench compares.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evaluations.planner import design
from evaluations.planner.design import HUMAN, Question


@dataclass(frozen=True)
class SimRater:
    key: str
    reliability: float
    bias: float
    verdicts_per_task: int
    usd_per_task: float
    hours_per_task: float
    # The chance a repeat of the same task copies the rater's first verdict (temperature 0).
    sticky: float = 0.0


# People: reliable, a little position bias, paid by the hour (30 s a verdict at $30/h).
PEOPLE = SimRater(HUMAN, 1.0, 0.2, 1, 0.25, 30 / 3600)
JUDGES = (
    # Cheap and noisy, strongly favouring the first shown.
    SimRater("judge:cheap", 0.55, 0.8, 2, 0.0008, 0.0, sticky=0.7),
    # Good and dearer.
    SimRater("judge:good", 0.85, 0.3, 1, 0.006, 0.0),
    # Nearly useless: agrees with people little better than chance.
    SimRater("judge:broken", 0.1, 1.0, 1, 0.002, 0.0),
)


@dataclass
class World:
    truth: np.ndarray
    rng: np.random.Generator
    raters: tuple[SimRater, ...]
    first: list[int] = field(default_factory=list)
    second: list[int] = field(default_factory=list)
    outcome: list[float] = field(default_factory=list)
    rater: list[str] = field(default_factory=list)
    task: list[int] = field(default_factory=list)
    usd: float = 0.0
    hours: float = 0.0
    tasks: int = 0

    def answer(self, i: int, j: int, who: SimRater) -> None:
        """One task of the pair for ``who``: its verdicts (random order; a judge with two
        verdicts per task sees both orders), its cost."""
        self.tasks += 1
        self.usd += who.usd_per_task
        self.hours += who.hours_per_task
        if self.rng.random() < 0.5:
            i, j = j, i
        kept: float | None = None
        for r in range(who.verdicts_per_task):
            x, y = (i, j) if r % 2 == 0 or who.key == HUMAN else (j, i)
            p = design.first_wins(self.truth[x] - self.truth[y], who.reliability, who.bias)
            won = float(self.rng.random() < p)
            if kept is not None and (x, y) == (i, j) and self.rng.random() < who.sticky:
                won = kept
            if (x, y) == (i, j):
                kept = won
            self.first.append(x)
            self.second.append(y)
            self.outcome.append(won)
            self.rater.append(who.key)
            self.task.append(self.tasks)

    def estimate(self) -> design.Estimate:
        return design.estimate(
            len(self.truth),
            np.array(self.first, int),
            np.array(self.second, int),
            np.array(self.outcome),
            np.array(self.rater, dtype=object),
            np.array(self.task, int),
        )


def world(n: int, spread: float, seed: int, raters: tuple[SimRater, ...]) -> World:
    rng = np.random.default_rng(seed)
    return World(rng.normal(0, spread, n), rng, raters)


KINDS = ("pair", "top_k", "ranking")


def question_for(kind: str, truth: np.ndarray) -> Question:
    """The question asked of a simulated world: the two strongest (``pair``: the closest
    call at the top), the top 3, or the whole ranking."""
    order = np.argsort(-truth)
    if kind == "pair":
        return Question("pair", a=int(order[0]), b=int(order[1]))
    if kind == "top_k":
        return Question("top_k", k=3)
    return Question("ranking", tau=0.9)


def width(found: design.Estimate, question: Question) -> float:
    return design.answer(question, found.theta, found.cov)["width"]


def fixed_cost(
    n: int, spread: float, seed: int, kind: str, target: float, max_passes: int = 60
) -> tuple[float, float, float]:
    """Today's design: passes over every pair, each task for people and every judge, until
    the question's interval is ``target`` wide; (usd, hours, width reached)."""
    w = world(n, spread, seed, (PEOPLE, *JUDGES))
    question = question_for(kind, w.truth)
    i_all, j_all = np.triu_indices(n, 1)
    current = np.inf
    for _ in range(max_passes):
        for i, j in zip(i_all.tolist(), j_all.tolist(), strict=True):
            for who in w.raters:
                w.answer(i, j, who)
        current = width(w.estimate(), question)
        if current <= target:
            break
    return w.usd, w.hours, current


def planned_cost(
    n: int,
    spread: float,
    seed: int,
    kind: str,
    target: float,
    round_usd: float,
    round_hours: float,
    max_rounds: int = 200,
) -> tuple[float, float, float]:
    """The scheduler's spending to the same width: a calibration chain, then rounds of
    ``design.plan`` (each with ``round_usd`` and ``round_hours``), re-estimated after each;
    (usd, hours, width reached)."""
    w = world(n, spread, seed, (PEOPLE, *JUDGES))
    question = question_for(kind, w.truth)
    chain = w.rng.permutation(n)
    for i, j in zip(chain[:-1].tolist(), chain[1:].tolist(), strict=True):
        for who in w.raters:
            w.answer(i, j, who)
    i_all, j_all = np.triu_indices(n, 1)
    candidates = np.stack([i_all, j_all], axis=1)
    current = np.inf
    for _ in range(max_rounds):
        found = w.estimate()
        current = width(found, question)
        if current <= target:
            break
        raters = [
            design.Rater(
                who.key,
                found.quality[who.key].reliability,
                found.quality[who.key].bias,
                who.verdicts_per_task,
                found.quality[who.key].repeat_correlation,
                who.usd_per_task,
                who.hours_per_task,
            )
            for who in w.raters
        ]
        chosen = design.plan(
            theta=found.theta,
            cov=found.cov,
            question=question,
            candidates=candidates,
            raters=raters,
            budget_usd=round_usd,
            budget_hours=round_hours,
            target_width=target,
        )
        if not chosen.picks:
            break
        by_key = {who.key: who for who in w.raters}
        for p, r in chosen.picks:
            w.answer(int(candidates[p, 0]), int(candidates[p, 1]), by_key[raters[r].key])
    return w.usd, w.hours, current
