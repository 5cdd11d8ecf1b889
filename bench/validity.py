"""The analytics' own figures against simulated worlds whose truth is known (issue 36), with
fixed seeds: what each figure reads, how often its 95% interval covers the truth, and how
often a true-zero effect is flagged.

    python bench/validity.py [--seeds 20]

Two parts:

- **Joint model** (``evaluations.analytics.joint``, as ``joint_table`` builds it): six
  models, people and one judge comparing random pairs. The judge is ``k`` times as decisive
  as people (0.5, 1, 2, 3), may prefer its own family (0 or +0.7, the family making the two
  strongest models), and may push the first position shown (0, +1 or +2.5 logits). Each
  output's length and markdown go with its model's strength, but no rater cares for them
  (true effect 0).
  Reported per world and effect, with each rater on its own scale (``joint.scaled_fit``,
  what the analytics fit) and, for comparison, on one shared scale (the fit before):
  truth, mean estimate, coverage of the 95% (Wald) interval, and for true-zero effects the
  share of seeds whose interval excludes 0.
- **Judge cards** (``evaluations.analytics.cards``): a good judge and its twin (the same
  draws plus a push to the first position shown) on 200 pairs that three people judged,
  each pair asked in both orders by the judge's own swap or by the design's reversed
  tasks. Reported: how often the twin's kappa is below the good judge's, counted per
  verdict (the card now) and by each item's most frequent verdict (the card before), and
  how often a flip-rate gate at 0.28 excludes the twin but not the good judge, and how
  often the card's kappa interval (200 bootstrap resamples of the items) covers each
  judge's kappa in the population (a world of 20,000 pairs).

- **Budget scheduler** (``evaluations.planner.simulation``): eight models with strengths
  from N(0, 1), people and three judges (cheap and noisy with a first-position push, good,
  nearly useless), $15 to spend. The scheduler (a calibration chain, then eight rounds of
  plans, re-estimated after each) against uniform random allocation of the same money
  (the same chain, then random pairs each answered by people and every judge), in worlds on
  its model and off it (judges flatter than people, a judge favouring its maker's model by
  0.7 logits, a first-position push of 3 logits), for the pair, top-3 and ranking
  questions. Reported: coverage of the 95% interval of the question's contrasts, RMSE, the
  share of seeds with the right answer (the pair's sign, the top-3 set, the whole order),
  and the people's tasks bought. ``--parts scheduler`` runs this part alone.

Figures from fewer than 20 seeds are no claim. Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODELS = 6
STRENGTH = np.linspace(1.2, -1.2, MODELS)  # the people's scale: model 0 strongest
Z = 1.959964
GATE = 0.28  # a flip-rate gate between the good judge's flip rate and its twin's


# --- the joint model ----------------------------------------------------------------------------
def joint_world(
    seed: int, decisive: float, own: float, push: float, *, scale: bool, verdicts: int = 1500
) -> dict[str, tuple[float, float, float]]:
    """One replication: each judge effect's (truth, estimate, Wald half-width)."""
    from evaluations.analytics import joint

    rng = np.random.default_rng(seed)
    family = np.zeros(MODELS)
    family[:2] = 1.0  # the judge's family made the two strongest models
    rows_a, rows_b, rows_x, rows_y = [], [], [], []
    # Columns: people's position, length, markdown; the judge's position, length, markdown,
    # self-preference (as joint_table names them).
    for rater in (0, 1):
        a = rng.integers(0, MODELS, verdicts)
        b = (a + rng.integers(1, MODELS, verdicts)) % MODELS
        # Each output's length and markdown: its model's (stronger models write longer,
        # with more markdown) and its own.
        d_len = 0.6 * (STRENGTH[a] - STRENGTH[b]) + rng.normal(0, 0.5, (verdicts, 2)) @ [1, -1]
        d_md = 0.8 * (STRENGTH[a] - STRENGTH[b]) + rng.normal(0, 0.5, (verdicts, 2)) @ [1, -1]
        d_own = family[a] - family[b]
        if rater == 0:
            logit = STRENGTH[a] - STRENGTH[b]
            x = np.column_stack([np.ones(verdicts), d_len, d_md, np.zeros((verdicts, 4))])
        else:
            logit = decisive * (STRENGTH[a] - STRENGTH[b]) + push + own * d_own
            x = np.column_stack([np.zeros((verdicts, 3)), np.ones(verdicts), d_len, d_md, d_own])
        y = (rng.random(verdicts) < 1 / (1 + np.exp(-logit))).astype(float)
        rows_a.append(a), rows_b.append(b), rows_x.append(x), rows_y.append(y)
    found = joint.cells(
        np.concatenate(rows_a), np.concatenate(rows_b), np.vstack(rows_x), np.concatenate(rows_y)
    )
    fitted = joint.fit(MODELS, found)
    if scale:  # a scale per rater (the people the reference; the judge's verdicts: group 1)
        group = (found.x[:, 3] == 1).astype(int)
        own_scale = joint.scaled_fit(MODELS, found, group, fitted)
        estimate, effect_error = own_scale.effect, own_scale.effect_error
    else:
        _, effect_error = joint.wald(fitted, found, MODELS)
        estimate = fitted.effect
    truth = {
        "judge position": push,
        "judge length": 0.0,
        "judge markdown": 0.0,
        "judge self_preference": own,
    }
    columns = {"judge position": 3, "judge length": 4, "judge markdown": 5,
               "judge self_preference": 6}  # fmt: skip
    return {
        name: (truth[name], float(estimate[k]), Z * float(effect_error[k]))
        for name, k in columns.items()
    }


def joint_table(seeds: int, *, scale: bool = True) -> list[dict[str, Any]]:
    worlds = [
        (decisive, own, push)
        for decisive in (0.5, 1.0, 2.0, 3.0)
        for own, push in ((0.0, 0.0), (0.7, 0.0), (0.0, 1.0), (0.0, 2.5))
    ]
    table = []
    for decisive, own, push in worlds:
        runs = [joint_world(1000 + s, decisive, own, push, scale=scale) for s in range(seeds)]
        for effect in runs[0]:
            truth = runs[0][effect][0]
            estimates = np.array([r[effect][1] for r in runs])
            half = np.array([r[effect][2] for r in runs])
            covered = np.abs(estimates - truth) <= half
            flagged = np.abs(estimates) > half
            table.append(
                {
                    "decisiveness": decisive,
                    "self_preference": own,
                    "position": push,
                    "effect": effect,
                    "truth": truth,
                    "mean_estimate": round(float(estimates.mean()), 3),
                    "coverage": round(float(covered.mean()), 3),
                    "false_positive_rate": round(float(flagged.mean()), 3) if truth == 0 else None,
                }
            )
    return table


# --- the cards ----------------------------------------------------------------------------------
def card_world(
    seed: int, reversed_tasks: bool, *, pairs: int = 200, resamples: int = 0
) -> dict[str, Any]:
    """One replication: the good judge's and its twin's kappa (per verdict and by most
    frequent verdict) and flip rates."""
    from evaluations.analytics import cards
    from evaluations.analytics.agreement import Bootstrap, Names, unit_values, versus
    from evaluations.analytics.data import Row
    from evaluations.analytics.pairwise import PairwiseAnalysis
    from scenarios.types import registry

    rng = np.random.default_rng(seed)
    quality = rng.normal(0, 1, 2 * pairs)
    reading, comparison = PairwiseAnalysis(), registry.get("comparison")
    names = Names({pk: f"v{pk}" for pk in range(2 * pairs)})
    people: list[Row] = []
    judged: dict[str, list[Row]] = {"good": [], "twin": []}
    pk = 0
    for p in range(pairs):
        u, v = 2 * p, 2 * p + 1
        margin = quality[u] - quality[v]
        for r in range(3):
            pk += 1
            won_u = rng.random() < 1 / (1 + np.exp(-1.5 * margin))
            people.append(Row(pk, p, f"person-{r}", "human", None, [u, v],
                              {"winner": "A" if won_u else "B"}, 0, None, False, None))  # fmt: skip
        for swapped in (False, True):
            shown = [v, u] if swapped else [u, v]
            first_margin = quality[shown[0]] - quality[shown[1]]
            draw = rng.random()
            task = p + (pairs if swapped and reversed_tasks else 0)
            for name, push in (("good", 0.0), ("twin", 1.2)):
                pk += 1
                first_wins = draw < 1 / (1 + np.exp(-(2.0 * first_margin + push)))
                judged[name].append(Row(pk, task, f"judge:{name}", "judge", 1, shown,
                                        {"winner": "A" if first_wins else "B"}, 0, 0.0,
                                        swapped and not reversed_tasks, None))  # fmt: skip
    people_units = unit_values(people, reading, None, names)
    found: dict[str, Any] = {}
    for name, rows in judged.items():
        boot = Bootstrap(resamples, seed)
        card = cards.human_agreement(rows, {None: people_units}, reading, {}, boot, names)
        before = versus(people_units, unit_values(rows, reading, None, names), scored=False)
        flips = cards.flip_rate(rows, comparison)
        found[name] = {
            "kappa": card["kappa"],
            "kappa_ci": card["kappa_ci"],
            "kappa_most_frequent": before.get("cohen_kappa"),
            "flip_rate": flips["rate"] if flips else None,
            "flip_pairs": (flips["own_swaps"], flips["design_reversals"]) if flips else (0, 0),
        }
    return found


def card_table(seeds: int) -> list[dict[str, Any]]:
    table = []
    # Each judge's kappa in the population: one world of 20,000 pairs.
    population = card_world(1, False, pairs=20_000)
    for reversed_tasks in (False, True):
        runs = [card_world(2000 + s, reversed_tasks, resamples=200) for s in range(seeds)]
        good = [r["good"] for r in runs]
        twin = [r["twin"] for r in runs]
        covered = [
            r[name]["kappa_ci"][0] <= population[name]["kappa"] <= r[name]["kappa_ci"][1]
            for r in runs
            for name in ("good", "twin")
        ]

        def mean(rows: list[dict[str, Any]], key: str) -> float:
            return round(float(np.mean([r[key] for r in rows])), 3)

        table.append(
            {
                "pairs_in_both_orders_from": "reversed tasks" if reversed_tasks else "own swaps",
                "good_kappa": mean(good, "kappa"),
                "twin_kappa": mean(twin, "kappa"),
                "twin_below_good_share": round(
                    float(
                        np.mean([t["kappa"] < g["kappa"] for g, t in zip(good, twin, strict=True)])
                    ),
                    3,
                ),
                "before_good_kappa": mean(good, "kappa_most_frequent"),
                "before_twin_kappa": mean(twin, "kappa_most_frequent"),
                "before_twin_below_good_share": round(
                    float(
                        np.mean(
                            [
                                t["kappa_most_frequent"] < g["kappa_most_frequent"]
                                for g, t in zip(good, twin, strict=True)
                            ]
                        )
                    ),
                    3,
                ),
                "good_flip_rate": mean(good, "flip_rate"),
                "twin_flip_rate": mean(twin, "flip_rate"),
                "gate_excludes_twin_only_share": round(
                    float(
                        np.mean(
                            [
                                t["flip_rate"] > GATE >= g["flip_rate"]
                                for g, t in zip(good, twin, strict=True)
                            ]
                        )
                    ),
                    3,
                ),
                "flip_pairs_own_design": list(good[0]["flip_pairs"]),
                "population_kappa_good": population["good"]["kappa"],
                "population_kappa_twin": population["twin"]["kappa"],
                "kappa_interval_coverage": round(float(np.mean(covered)), 3),
            }
        )
    return table


# --- the budget scheduler -----------------------------------------------------------------------
SCHEDULER_BUDGET = 15.0


def scheduler_cell(args: tuple[str, str, str, int]) -> dict[str, Any]:
    """One world, question, design and seed: the contrasts' errors and coverage."""
    from evaluations.planner import simulation

    world, kind, design_name, seed = args
    run = simulation.scheduled if design_name == "scheduler" else simulation.uniform
    found = run(8, 1.0, seed, kind, SCHEDULER_BUDGET, world)
    error = found.estimate - found.truth
    return {
        "covered": (np.abs(error) <= Z * found.sd).tolist(),
        "squared": (error**2).tolist(),
        "right": found.right,
        "people": found.people_tasks,
        "usd": found.usd,
    }


def scheduler_table(seeds: int, processes: int) -> list[dict[str, Any]]:
    from multiprocessing import Pool

    from evaluations.planner import simulation

    cells = [
        (world, kind, name, seed)
        for world in simulation.WORLDS
        for kind in simulation.KINDS
        for name in ("scheduler", "uniform_random")
        for seed in range(seeds)
    ]
    with Pool(processes) as pool:
        found = pool.map(scheduler_cell, cells, chunksize=1)
    rows: list[dict[str, Any]] = []
    for world in simulation.WORLDS:
        for kind in simulation.KINDS:
            row: dict[str, Any] = {"world": world, "question": kind}
            for name in ("scheduler", "uniform_random"):
                mine = [
                    f for c, f in zip(cells, found, strict=True) if c[:3] == (world, kind, name)
                ]
                row[name] = {
                    "coverage": round(
                        float(np.mean(np.concatenate([f["covered"] for f in mine]))), 3
                    ),
                    "rmse": round(
                        float(np.sqrt(np.mean(np.concatenate([f["squared"] for f in mine])))), 3
                    ),
                    "right_answer": round(float(np.mean([f["right"] for f in mine])), 3),
                    "people_tasks": round(float(np.mean([f["people"] for f in mine])), 1),
                    "usd": round(float(np.mean([f["usd"] for f in mine])), 2),
                }
            rows.append(row)
    return rows


def print_scheduler(rows: list[dict[str, Any]], seeds: int) -> dict[str, Any]:
    print(
        f"Budget scheduler against uniform random at ${SCHEDULER_BUDGET:g} each, {seeds} seeds"
        " a cell (8 models; scheduler | random):"
    )
    print("  world            question  cover        rmse           right        people's tasks")
    for row in rows:
        a, b = row["scheduler"], row["uniform_random"]
        print(
            f"  {row['world']:<16} {row['question']:<8}  {a['coverage']:.2f} | {b['coverage']:.2f}"
            f"  {a['rmse']:.3f} | {b['rmse']:.3f}  {a['right_answer']:.2f} | "
            f"{b['right_answer']:.2f}  {a['people_tasks']:>5.1f} | {b['people_tasks']:.1f}"
        )
    mine = [r["scheduler"] for r in rows]
    return {
        "scheduler_min_coverage": min(r["coverage"] for r in mine),
        "scheduler_cells_with_coverage_below_0_9": sum(r["coverage"] < 0.9 for r in mine),
        "scheduler_cells_rmse_above_random": sum(
            r["scheduler"]["rmse"] > r["uniform_random"]["rmse"] for r in rows
        ),
        "scheduler_cells_right_answer_below_random": sum(
            r["scheduler"]["right_answer"] < r["uniform_random"]["right_answer"] for r in rows
        ),
        "scheduler_mean_rmse_over_random": round(
            float(np.mean([r["scheduler"]["rmse"] / r["uniform_random"]["rmse"] for r in rows])),
            3,
        ),
        "scheduler_cells": len(rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--parts", nargs="+", default=["joint", "scheduler"], choices=["joint", "scheduler"]
    )
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    os.environ.setdefault("EVAL_DATA_DIR", "/tmp/evalbench-validity")
    import django

    django.setup()
    report: dict[str, Any] = {"seeds": args.seeds}
    if "scheduler" in args.parts:
        scheduler = scheduler_table(args.seeds, args.processes)
        report |= print_scheduler(scheduler, args.seeds) | {"scheduler": scheduler}
    if "joint" not in args.parts:
        print(json.dumps(report))
        return
    shared = joint_table(args.seeds, scale=False)
    joint = joint_table(args.seeds)
    print(
        f"Joint model, {args.seeds} seeds a world (the judge's effects, each rater on its scale):"
    )
    print("  decisive  self-pref  position  effect                 truth  mean    cover  false+")
    for row in joint:
        fp = "" if row["false_positive_rate"] is None else f"{row['false_positive_rate']:.2f}"
        print(
            f"  {row['decisiveness']:>8}  {row['self_preference']:>9}  {row['position']:>8}  "
            f"{row['effect']:<21}  {row['truth']:>5}  {row['mean_estimate']:>6.2f}  "
            f"{row['coverage']:>5.2f}  {fp:>6}"
        )
    card = card_table(args.seeds)
    print(f"Judge cards, {args.seeds} seeds a world (good judge and its position-pushed twin):")
    for row in card:
        print(
            f"  {row['pairs_in_both_orders_from']}: kappa good {row['good_kappa']}, twin "
            f"{row['twin_kappa']} (twin below in {row['twin_below_good_share']:.0%} of seeds; "
            f"by most frequent verdict {row['before_good_kappa']} vs {row['before_twin_kappa']}, "
            f"below in {row['before_twin_below_good_share']:.0%}); flip rate good "
            f"{row['good_flip_rate']}, twin {row['twin_flip_rate']}; a {GATE} gate excludes the "
            f"twin alone in {row['gate_excludes_twin_only_share']:.0%}; the kappa's 95% interval "
            f"(200 resamples of items) covers the population's in "
            f"{row['kappa_interval_coverage']:.0%}"
        )
    zero = [r for r in joint if r["truth"] == 0]
    shared_zero = [r for r in shared if r["truth"] == 0]
    invented = max(r["mean_estimate"] for r in shared_zero if "self" in r["effect"])
    print(
        "On one shared scale (before): coverage from "
        f"{min(r['coverage'] for r in shared):.2f}, true-zero effects flagged in up to "
        f"{max(r['false_positive_rate'] for r in shared_zero):.0%} of seeds; "
        f"self-preference 0 read {invented:+.2f} at most"
    )
    print(
        json.dumps(
            report
            | {
                "joint_min_coverage": min(r["coverage"] for r in joint),
                "joint_max_false_positive_rate": max(r["false_positive_rate"] for r in zero),
                "joint_worlds_with_coverage_below_0_9": sum(r["coverage"] < 0.9 for r in joint),
                "joint_rows": len(joint),
                "joint_mean_coverage": round(float(np.mean([r["coverage"] for r in joint])), 3),
                "joint_mean_false_positive_rate": round(
                    float(np.mean([r["false_positive_rate"] for r in zero])), 3
                ),
                "shared_scale_min_coverage": min(r["coverage"] for r in shared),
                "shared_scale_max_false_positive_rate": max(
                    r["false_positive_rate"] for r in shared_zero
                ),
                "card_twin_below_good_share": min(r["twin_below_good_share"] for r in card),
                "card_before_twin_below_good_share": min(
                    r["before_twin_below_good_share"] for r in card
                ),
                "card_kappa_interval_coverage": min(r["kappa_interval_coverage"] for r in card),
                "card_gate_excludes_twin_only_share": min(
                    r["gate_excludes_twin_only_share"] for r in card
                ),
                "joint": joint,
                "cards": card,
            }
        )
    )


if __name__ == "__main__":
    main()
