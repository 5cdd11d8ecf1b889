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
    # Off the scheduler's model: how steeply the rater sees the strengths' difference
    # (people: 1), and how far it favours the world's ``family`` (its maker's models).
    slope: float = 1.0
    favour: float = 0.0


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
    family: frozenset[int] = frozenset()

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
            seen = who.slope * (self.truth[x] - self.truth[y])
            seen += who.favour * ((x in self.family) - (y in self.family))
            p = design.first_wins(seen, who.reliability, who.bias)
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

    def plan_round(
        self,
        found: design.Estimate,
        question: Question,
        candidates: np.ndarray,
        usd: float,
        hours: float,
        *,
        target: float | None = None,
        max_tasks: int = 500,
    ) -> int:
        """One round: ``design.plan`` from ``found`` with this budget, its tasks answered;
        how many."""
        raters = offered(found, self.raters)
        chosen = design.plan(
            fitted=found,
            question=question,
            candidates=candidates,
            raters=raters,
            budget_usd=usd,
            budget_hours=hours,
            target_width=target,
            max_tasks=max_tasks,
        )
        by_key = {who.key: who for who in self.raters}
        for p, r in chosen.picks:
            self.answer(int(candidates[p, 0]), int(candidates[p, 1]), by_key[raters[r].key])
        return len(chosen.picks)

    def estimate(self) -> design.Estimate:
        return design.estimate(
            len(self.truth),
            np.array(self.first, int),
            np.array(self.second, int),
            np.array(self.outcome),
            np.array(self.rater, dtype=object),
            np.array(self.task, int),
            judges=tuple(r.key for r in self.raters if r.key != HUMAN),
        )


def world(
    n: int, spread: float, seed: int, raters: tuple[SimRater, ...], favoured: int = 0
) -> World:
    """A world of ``n`` entities with strengths from N(0, spread^2); its family (the models
    a self-preferring judge favours) is the ``favoured`` strongest."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(0, spread, n)
    family = frozenset(np.argsort(-truth)[:favoured].tolist())
    return World(truth, rng, raters, family=family)


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


def offered(found: design.Estimate, raters: tuple[SimRater, ...]) -> list[design.Rater]:
    """The work on offer: each rater's task, its measured repeat correlation and its cost."""
    return [
        design.Rater(
            who.key,
            who.verdicts_per_task,
            found.quality[who.key].repeat_correlation,
            who.usd_per_task,
            who.hours_per_task,
        )
        for who in raters
    ]


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
        if not w.plan_round(found, question, candidates, round_usd, round_hours, target=target):
            break
    return w.usd, w.hours, current


# --- the scheduler against uniform random allocation at equal spend ------------------------------
WORLDS: dict[str, tuple[tuple[SimRater, ...], int]] = {
    # The scheduler's own model: the raters above.
    "on_model": ((PEOPLE, *JUDGES), 0),
    # Judges flatter than people: no coin flips, but a gentler slope (off its model).
    "flatter_judges": (
        (
            PEOPLE,
            SimRater("judge:cheap", 1.0, 0.8, 2, 0.0008, 0.0, sticky=0.7, slope=0.35),
            SimRater("judge:good", 1.0, 0.3, 1, 0.006, 0.0, slope=0.6),
            SimRater("judge:broken", 1.0, 1.0, 1, 0.002, 0.0, slope=0.1),
        ),
        0,
    ),
    # The good judge favours its maker's model, the strongest, by 0.7 logits.
    "self_preferring": (
        (
            PEOPLE,
            JUDGES[0],
            SimRater("judge:good", 0.85, 0.3, 1, 0.006, 0.0, favour=0.7),
            JUDGES[2],
        ),
        1,
    ),
    # A first-position push of 3 logits, beyond the old grid's 2.
    "position_3": (
        (PEOPLE, SimRater("judge:cheap", 0.55, 3.0, 2, 0.0008, 0.0, sticky=0.7), *JUDGES[1:]),
        0,
    ),
}


@dataclass
class Outcome:
    """What one design ended with: per contrast of the question, the estimate, its sd and
    the truth; whether its answer is right; what it spent."""

    estimate: np.ndarray
    sd: np.ndarray
    truth: np.ndarray
    right: bool
    usd: float
    people_tasks: int


def _calibrated(n: int, spread: float, seed: int, world_name: str) -> World:
    raters, favoured = WORLDS[world_name]
    w = world(n, spread, seed, raters, favoured=favoured)
    chain = w.rng.permutation(n)
    for i, j in zip(chain[:-1].tolist(), chain[1:].tolist(), strict=True):
        for who in w.raters:
            w.answer(i, j, who)
    return w


def _outcome(w: World, kind: str) -> Outcome:
    found = w.estimate()
    question = question_for(kind, w.truth)
    pi, pj = design.contrast_pairs(question, found.theta)
    sd = np.sqrt(found.cov[pi, pi] + found.cov[pj, pj] - 2 * found.cov[pi, pj])
    estimate = found.theta[pi] - found.theta[pj]
    truth = w.truth[pi] - w.truth[pj]
    order, true_order = np.argsort(-found.theta), np.argsort(-w.truth)
    if kind == "pair":
        right = bool(np.sign(estimate[0]) == np.sign(truth[0]))
    elif kind == "top_k":
        right = set(order[: question.k].tolist()) == set(true_order[: question.k].tolist())
    else:
        right = bool((order == true_order).all())
    people = len({t for t, r in zip(w.task, w.rater, strict=True) if r == HUMAN})
    return Outcome(estimate, sd, truth, right, w.usd, people)


def scheduled(
    n: int,
    spread: float,
    seed: int,
    kind: str,
    budget_usd: float,
    world_name: str,
    rounds: int = 8,
    max_tasks: int = 2000,
) -> Outcome:
    """The scheduler with ``budget_usd`` (money only), after the calibration chain: rounds
    of ``design.plan`` (each of at most ``max_tasks`` tasks, with an equal share of what is
    left), re-estimated after each."""
    w = _calibrated(n, spread, seed, world_name)
    question = question_for(kind, w.truth)
    i_all, j_all = np.triu_indices(n, 1)
    candidates = np.stack([i_all, j_all], axis=1)
    for done in range(rounds):
        found = w.estimate()
        share = (budget_usd - w.usd) / (rounds - done)
        w.plan_round(found, question, candidates, share, 1e9, max_tasks=max_tasks)
    return _outcome(w, kind)


def uniform(
    n: int, spread: float, seed: int, kind: str, budget_usd: float, world_name: str
) -> Outcome:
    """Uniform random allocation at the same spend: after the same calibration chain,
    pairs drawn uniformly, each answered by people and by every judge (today's design),
    until the next would pass ``budget_usd``."""
    w = _calibrated(n, spread, seed, world_name)
    draw = np.random.default_rng(seed + 10_000)
    per_pair = sum(who.usd_per_task for who in w.raters)
    while w.usd + per_pair <= budget_usd + 1e-9:
        i, j = draw.choice(n, 2, replace=False).tolist()
        for who in w.raters:
            w.answer(i, j, who)
    return _outcome(w, kind)
