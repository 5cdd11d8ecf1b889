"""The scheduler's model on seeded simulations with known strengths and judges of known
reliability, position bias and cost (``evaluations.planner.design`` and ``simulation``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from evaluations.planner import design, simulation
from evaluations.planner.design import HUMAN, Question


def test_each_verdicts_gradient_matches_finite_differences():
    """The joint fit's (and the plan's) dP/dparams, checked by central differences of P
    itself, for a person's verdict and a judge's, at a point off every prior mean; the
    columns a person has no parameter for carry 0."""
    layout = design.Layout(4, ("judge:a", "judge:b"))
    params = np.random.default_rng(7).normal(0, 0.8, layout.size)
    first, second = np.array([0, 2, 3]), np.array([1, 0, 2])
    judge = np.array([-1, 0, 1])  # people, then each judge
    p, columns, values = design._gradients(layout, params, first, second, judge)
    h = 1e-6
    for v in range(3):
        numeric = np.zeros(layout.size)
        for k in range(layout.size):
            up, down = params.copy(), params.copy()
            up[k] += h
            down[k] -= h
            pick = slice(v, v + 1)
            plus = design._gradients(layout, up, first[pick], second[pick], judge[pick])[0]
            minus = design._gradients(layout, down, first[pick], second[pick], judge[pick])[0]
            numeric[k] = (plus[0] - minus[0]) / (2 * h)
        analytic = np.bincount(columns[v], values[v], layout.size)
        np.testing.assert_allclose(analytic, numeric, atol=1e-7)
        assert 0 < p[v] < 1
    # A person's verdict moves only the strengths and the people's bias.
    people = np.flatnonzero(np.bincount(columns[0], np.abs(values[0]), layout.size))
    assert set(people.tolist()) == {0, 1, layout.bias(-1)}


def test_each_judges_reliability_and_bias_are_recovered_against_people():
    w = simulation.world(8, 1.5, seed=3, raters=(simulation.PEOPLE, *simulation.JUDGES))
    i_all, j_all = np.triu_indices(8, 1)
    for _ in range(25):
        for i, j in zip(i_all.tolist(), j_all.tolist(), strict=True):
            for who in w.raters:
                w.answer(i, j, who)
    found = w.estimate()
    for who in simulation.JUDGES:
        quality = found.quality[who.key]
        assert quality.against_people
        assert quality.reliability == pytest.approx(who.reliability, abs=0.12), who.key
        if who.reliability >= 0.5:  # a near coin-flipper's bias is barely identified
            assert quality.bias == pytest.approx(who.bias, abs=0.35), who.key
    # The sticky judge repeats itself; the others' repeats (one verdict a task) are unknown.
    assert found.quality["judge:cheap"].repeat_correlation > 0.3
    # The fit recovers the truth's order.
    assert np.corrcoef(found.theta, w.truth)[0, 1] > 0.95


def _raters(found, raters=(simulation.PEOPLE, *simulation.JUDGES)):
    return simulation.offered(found, raters)


def test_a_plan_keeps_to_its_budget_and_narrows_the_interval():
    w = simulation.world(6, 1.0, seed=1, raters=(simulation.PEOPLE, *simulation.JUDGES))
    for i, j in itertools.combinations(range(6), 2):
        for _ in range(3):  # each judge measured against people on every pair
            for who in w.raters:
                w.answer(i, j, who)
    found = w.estimate()
    i_all, j_all = np.triu_indices(6, 1)
    candidates = np.stack([i_all, j_all], axis=1)
    for question in (Question("pair", a=0, b=3), Question("top_k", k=2), Question("ranking")):
        planned = design.plan(
            fitted=found,
            question=question,
            candidates=candidates,
            raters=_raters(found),
            budget_usd=0.5,
            budget_hours=0.05,
        )
        assert planned.picks
        assert planned.usd <= 0.5 + 1e-9 and planned.hours <= 0.05 + 1e-9
        assert planned.after["width"] < planned.before["width"]
        keys = [_raters(found)[r].key for _, r in planned.picks]
        # The judge that agrees with people little better than chance is not worth its price.
        assert keys.count("judge:broken") <= len(keys) // 10
    # A pair question spends on pairs that tell about its pair: most picks touch 0 or 3.
    pair = design.plan(
        fitted=found,
        question=Question("pair", a=0, b=3),
        candidates=candidates,
        raters=_raters(found),
        budget_usd=0.5,
        budget_hours=0.0,
    )
    touching = [p for p, _ in pair.picks if {0, 3} & set(candidates[p].tolist())]
    assert len(touching) >= 0.8 * len(pair.picks)
    # No budget for people's hours: no people's task.
    assert all(_raters(found)[r].key != HUMAN for _, r in pair.picks)


@pytest.mark.parametrize("kind", ["pair", "top_k"])
def test_the_scheduler_reaches_the_fixed_designs_width_for_less_than_half(kind):
    """Against today's design (every pair, people and every judge on every task), run until
    the question's interval is as narrow as the fixed design's after three passes."""
    n, spread, seed = 6, 1.0, 11
    _, _, target = simulation.fixed_cost(n, spread, seed, kind, 0.0, max_passes=3)
    fixed_usd, fixed_hours, fixed_width = simulation.fixed_cost(n, spread, seed, kind, target)
    usd, hours, width = simulation.planned_cost(
        n, spread, seed, kind, target, round_usd=fixed_usd / 20, round_hours=fixed_hours / 20
    )
    assert fixed_width <= target and width <= target
    assert usd <= 0.5 * fixed_usd
    assert hours <= 0.5 * fixed_hours


def test_raw_agreement_with_people_counts_decided_tasks_only():
    H, J = HUMAN, "judge:1"
    first = np.array([0, 0, 0, 1, 1, 0, 2])
    second = np.array([1, 1, 1, 2, 2, 1, 0])
    outcome = np.array([1.0, 1.0, 0.0, 1.0, 0.0, 0.5, 1.0])
    rater = np.array([H, H, J, H, J, J, J], dtype=object)
    task = np.array([1, 1, 1, 2, 2, 1, 3])
    # Task 1: people say 0; the judge says 1 (disagrees) and ties (not counted). Task 2:
    # people say 1; the judge says 2 (disagrees). Task 3: no people.
    assert design.agreement_with_people(first, second, outcome, rater, task) == {J: (0.0, 2)}
    outcome[2] = 1.0
    assert design.agreement_with_people(first, second, outcome, rater, task) == {J: (0.5, 2)}


def test_the_joint_fit_carries_a_judges_uncertainty_into_the_strengths():
    """A judge's reliability and bias are parameters of the one fit, not plugged in: they
    stay uncertain, and their covariance with the strengths is part of the strengths'."""
    w = simulation.world(6, 1.0, seed=4, raters=(simulation.PEOPLE, simulation.JUDGES[1]))
    for i, j in itertools.combinations(range(6), 2):
        for who in w.raters:
            w.answer(i, j, who)
        for _ in range(4):
            w.answer(i, j, simulation.JUDGES[1])
    free = w.estimate()
    layout = free.layout
    assert layout.judges == ("judge:good",)
    assert free.joint_cov.shape == (layout.size, layout.size)
    slot = layout.reliability(0)
    # The judge's reliability is measured (its sd on the logit below the prior's), not known.
    sd_eta = float(np.sqrt(free.joint_cov[slot, slot]))
    assert 0 < sd_eta < design.RELIABILITY_PRIOR_SD
    # Its covariance with the strengths is not zero: its uncertainty reaches them.
    assert np.abs(free.joint_cov[:6, slot]).max() > 1e-4
    # The marginal covariance of the strengths is the joint's block.
    np.testing.assert_allclose(free.cov, free.joint_cov[:6, :6])


@pytest.mark.slow
@pytest.mark.parametrize("world_name", ["on_model", "self_preferring"])
def test_at_equal_spend_the_scheduler_covers_and_beats_uniform_random(world_name):
    """Ten seeds of the pair question (bench/validity.py runs 20 of every question and
    world): its 95% intervals cover the truth in at least 8 of 10, and its squared error is
    below that of uniform random allocation of the same money."""
    covered, mine, theirs = 0, [], []
    for seed in range(10):
        planned = simulation.scheduled(8, 1.0, seed, "pair", 15.0, world_name)
        random = simulation.uniform(8, 1.0, seed, "pair", 15.0, world_name)
        assert planned.usd <= 15.0 + 1e-9 and random.usd <= 15.0 + 1e-9
        covered += int(abs(planned.estimate[0] - planned.truth[0]) <= 1.96 * planned.sd[0])
        mine.append(float(planned.estimate[0] - planned.truth[0]) ** 2)
        theirs.append(float(random.estimate[0] - random.truth[0]) ** 2)
    assert covered >= 8
    assert np.mean(mine) < np.mean(theirs)


def test_a_plan_measures_an_unknown_judge_first_within_its_share():
    """Between close models a good judge and a coin both say about 1/2, so a judge seen on
    a chain of neighbours keeps its prior's reliability: the plan first buys it tasks on
    pairs far apart (at most CALIBRATION_SHARE of the money), and counts on the lower end
    of its reliability's interval for the question."""
    w = simulation.world(8, 1.0, seed=2, raters=(simulation.PEOPLE, simulation.JUDGES[2]))
    order = np.argsort(-w.truth)
    for i, j in itertools.pairwise(order.tolist()):
        for who in w.raters:
            w.answer(i, j, who)
    found = w.estimate()
    i_all, j_all = np.triu_indices(8, 1)
    candidates = np.stack([i_all, j_all], axis=1)
    raters = simulation.offered(found, w.raters)
    planned = design.plan(
        fitted=found,
        question=Question("ranking"),
        candidates=candidates,
        raters=raters,
        budget_usd=2.0,
        budget_hours=1e9,
    )
    first = planned.picks[: planned.calibration]
    assert first and all(raters[r].key == "judge:broken" for _, r in first)
    assert len(first) * simulation.JUDGES[2].usd_per_task <= design.CALIBRATION_SHARE * 2.0
    # Far apart: the calibration pairs are further apart than the chain's neighbours.
    gap = [abs(found.theta[candidates[p, 0]] - found.theta[candidates[p, 1]]) for p, _ in first]
    assert np.mean(gap) > 2 * np.mean(np.abs(np.diff(np.sort(found.theta))))
    assert design.counted_on(found, "judge:broken") < found.quality["judge:broken"].reliability


def test_people_alone_are_planned_for():
    """No judge at all: the joint fit has the strengths and the people's bias only."""
    w = simulation.world(5, 1.0, seed=5, raters=(simulation.PEOPLE,))
    for i, j in itertools.combinations(range(5), 2):
        w.answer(i, j, simulation.PEOPLE)
    found = w.estimate()
    assert found.layout.judges == () and found.layout.size == 6
    planned = design.plan(
        fitted=found,
        question=Question("pair", a=0, b=1),
        candidates=np.array([[0, 1], [0, 2], [1, 2]]),
        raters=simulation.offered(found, w.raters),
        budget_usd=1.0,
        budget_hours=0.1,
    )
    assert planned.picks and planned.calibration == 0
    assert planned.after["width"] < planned.before["width"]


def test_other_judges_verdicts_are_left_out_of_the_fit():
    """``judges`` names the judges fitted: another judge's verdicts do not enter it (an
    untrusted judge, or one not named in raters), and its parameters are not made."""
    w = simulation.world(5, 1.0, seed=6, raters=(simulation.PEOPLE, *simulation.JUDGES))
    for i, j in itertools.combinations(range(5), 2):
        for who in w.raters:
            w.answer(i, j, who)
    everyone = w.estimate()
    assert everyone.layout.judges == ("judge:broken", "judge:cheap", "judge:good")
    args = (np.array(w.first), np.array(w.second), np.array(w.outcome))
    rest = (np.array(w.rater, dtype=object), np.array(w.task))
    good = design.estimate(5, *args, *rest, judges=("judge:good",))
    assert good.layout.judges == ("judge:good",) and set(good.quality) == {HUMAN, "judge:good"}
    people = np.array(w.rater, dtype=object) != "judge:broken"
    kept = [np.array(a)[people] for a in (w.first, w.second, w.outcome, w.rater, w.task)]
    alone = design.estimate(5, *kept, judges=("judge:good", "judge:cheap"))
    both = design.estimate(5, *args, *rest, judges=("judge:good", "judge:cheap"))
    np.testing.assert_allclose(both.theta, alone.theta)
