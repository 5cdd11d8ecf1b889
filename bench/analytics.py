"""The whole analytics JSON (1,000 bootstrap resamples) of three comparison scenarios of the
sizes users bring, each on a fresh database:

- ``pandalm``: the PandaLM human judgments (999 items, two outputs each, from five models,
  three annotators: 2,997 judgments; ``tests/evaluations/fixtures``). Target 2 s.
- ``big``: 20 variants and 50,000 judgments by 10 imported raters, in random presentation
  orders, drawn from known strengths with a position bias. Target 5 s.
- ``per_output``: 2,000 outputs in 1,000 items (two each, from four models), 3 judgments
  per item. Target 3 s.

    python bench/analytics.py [--resamples 1000] [--only pandalm,big,per_output]

Runs on SQLite in a temporary directory (or DATABASE_URL). Prints, per shape, the time to
read the judgments and to compute, the peak memory of the computation (tracemalloc), the
recovery of the true order where it is known (Kendall's tau), and the time the analytics
page takes to open once the stored analysis is there (``page_s``: the stored result
computed as a worker does, then the page asked for as a manager; target 1 s). Last line:
JSON. (The time is of an untraced run; the memory of a second, traced one.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TARGETS = {"pandalm": 2.0, "big": 5.0, "per_output": 3.0}
PAGE_TARGET = 1.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--only", default=",".join(TARGETS))
    args = parser.parse_args()
    os.environ.setdefault("EVAL_DATA_DIR", tempfile.mkdtemp(prefix="evalbench-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from evalplatform.accounts.models import Membership, Team
    from evalplatform.accounts.roles import Role

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench")
    team = Team.objects.create(name="Bench", slug="bench")
    Membership.objects.create(user=user, team=team, role=Role.MANAGER)
    report: dict[str, object] = {"database": django.db.connection.vendor}
    within = True
    for shape in args.only.split(","):
        scenario, truth = SHAPES[shape](user, team)
        figures = measure(scenario, truth, args.resamples)
        target = TARGETS[shape]
        figures["page_s"] = page_time(scenario, user, args.resamples)
        within &= figures["analytics_s"] <= target and figures["page_s"] <= PAGE_TARGET
        print(
            f"{shape}: {figures['variants']} variants, {figures['judgments']} judgments, "
            f"{args.resamples} resamples: read {figures['read_s']:.2f} s, analytics "
            f"{figures['analytics_s']:.2f} s (target {target} s), peak "
            f"{figures['peak_mb']:.0f} MB, JSON {figures['json_kb']:.0f} kB, page "
            f"{figures['page_s']:.2f} s (target {PAGE_TARGET} s)"
            + (f", Kendall's tau {figures['kendall_tau']:.3f}" if "kendall_tau" in figures else "")
        )
        report[shape] = figures | {"target_s": target}
    report["all_within_target"] = within
    print(json.dumps(report))


def page_time(scenario, user, resamples: int) -> float:
    """Seconds to open the analytics page (as a browser would, signed in) once its stored
    analysis is computed, the way a worker computes it."""
    from django.test import Client

    from evaluations.analytics import results
    from evaluations.analytics.api import options_from

    options = options_from({"resamples": str(resamples)}, scenario)
    state = results.current(scenario, options)
    if not state.fresh:
        results.compute(state.analysis.pk)  # what the worker does
    client = Client(SERVER_NAME="localhost")
    client.force_login(user)
    url = f"/scenarios/{scenario.pk}/analytics?resamples={resamples}"
    began = time.perf_counter()
    response = client.get(url)
    seconds = time.perf_counter() - began
    assert response.status_code == 200, response.status_code
    html = response.content.decode()
    assert html.index("Models, prompts") < html.index("strengths of each output")
    return round(seconds, 3)


def measure(scenario, truth, resamples: int) -> dict:
    import numpy as np
    from scipy import stats as sps

    from evaluations.analytics import analyze, data

    began = time.perf_counter()
    loaded = data.load(scenario)
    read_s = time.perf_counter() - began
    began = time.perf_counter()
    result = analyze.compute(loaded, resamples=resamples)
    analytics_s = time.perf_counter() - began
    # Memory in a second run: tracing allocations slows the computation down.
    tracemalloc.start()
    analyze.compute(loaded, resamples=resamples)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    figures = {
        "variants": len(loaded.variants),
        "judgments": len(loaded.rows),
        "read_s": round(read_s, 3),
        "analytics_s": round(analytics_s, 3),
        "peak_mb": round(peak / 2**20, 1),
        "json_kb": round(len(json.dumps(result, default=str)) / 1024, 1),
        "components": result["bradley_terry_fit"]["components"],
    }
    if truth:
        rows = [r for r in result["bradley_terry"] if r["variant"] in truth]
        tau = sps.kendalltau([truth[r["variant"]] for r in rows], [r["strength"] for r in rows])
        figures["kendall_tau"] = round(float(tau.statistic), 4)
    models = result["by_model"]["bradley_terry"]
    figures["models"] = len(models)
    figures["model_ci_width_mean"] = round(
        float(np.mean([m["ci_high"] - m["ci_low"] for m in models])), 4
    )
    return figures


def _upload(user, team, name: str, rows: list[str]):
    from scenarios import services as scenarios

    return scenarios.scenario_from_upload(
        user=user,
        team=team,
        data={"name": name, "type": "comparison", "seed": 1, "config": {"ties": True}},
        raw="\n".join(["item_id,variant_id,content,model", *rows]).encode(),
        filename="v.csv",
    )


def _judgments(scenario, made: list[tuple[int, list[int], str, str]]) -> None:
    """(task, presented, winner, rater) as imported raters' judgments."""
    from evaluations.models import ExternalRater, Judgment, RaterKind

    raters = {
        name: ExternalRater.objects.create(team=scenario.team, name=f"{scenario.name}-{name}")
        for name in sorted({m[3] for m in made})
    }
    Judgment.objects.bulk_create(
        [
            Judgment(
                scenario=scenario,
                task_id=task,
                rater_kind=RaterKind.EXTERNAL,
                external_rater=raters[rater],
                presented=presented,
                payload={"winner": winner},
            )
            for task, presented, winner, rater in made
        ],
        batch_size=5000,
    )


def _tasks(scenario):
    from scenarios.models import Task

    return list(Task.objects.filter(scenario=scenario).values_list("pk", "variant_a", "variant_b"))


def pandalm(user, team):
    judgments = json.loads((ROOT / "tests/evaluations/fixtures/pandalm_judgments.json").read_text())
    rows = []
    for row in judgments:
        first, second = row["cmp_key"].split("_", 1)
        rows += [f"p{row['idx']},response1,text,{first}", f"p{row['idx']},response2,text,{second}"]
    scenario = _upload(user, team, "PandaLM", rows)
    by_item = {}
    from scenarios.models import Variant

    for pk, item in Variant.objects.filter(scenario=scenario).values_list("pk", "item__item_id"):
        by_item.setdefault(item, []).append(pk)
    task_of = {frozenset((a, b)): t for t, a, b in _tasks(scenario)}
    winner = {0: "tie", 1: "A", 2: "B"}
    made = []
    for row in judgments:
        first, second = sorted(by_item[f"p{row['idx']}"])
        for n in (1, 2, 3):
            made.append(
                (
                    task_of[frozenset((first, second))],
                    [first, second],
                    winner[row[f"annotator{n}"]],
                    f"a{n}",
                )
            )
    _judgments(scenario, made)
    return scenario, None


def big(user, team, variants: int = 20, count: int = 50_000):
    import numpy as np

    rows = [f"essay,v{n:02d},Answer number {n},model-{n % 4}" for n in range(variants)]
    scenario = _upload(user, team, "Big", rows)
    tasks = _tasks(scenario)
    rng = np.random.default_rng(0)
    ids = sorted({v for _, a, b in tasks for v in (a, b)})
    truth = dict(zip(ids, np.linspace(-2, 2, len(ids)), strict=True))
    made = []
    for index in range(count):
        task, a, b = tasks[index % len(tasks)]
        if rng.random() < 0.5:
            a, b = b, a
        p_first = 1 / (1 + np.exp(truth[b] - truth[a])) + 0.05  # a little position bias
        draw = rng.random()
        verdict = "tie" if draw > 0.97 else ("A" if draw < p_first * 0.97 else "B")
        made.append((task, [a, b], verdict, f"r{index % 10}"))
    _judgments(scenario, made)
    return scenario, {f"essay/v{n:02d}": truth[ids[n]] for n in range(len(ids))}


def per_output(user, team, items: int = 1000):
    import numpy as np

    rng = np.random.default_rng(1)
    strength = {f"model-{m}": s for m, s in zip(range(4), (-1.0, -0.3, 0.3, 1.0), strict=True)}
    rows, model_of = [], {}
    for k in range(items):
        for v, m in enumerate(rng.choice(4, size=2, replace=False)):
            rows.append(f"i{k},o{v},text,model-{m}")
            model_of[(f"i{k}", f"o{v}")] = f"model-{m}"
    scenario = _upload(user, team, "PerOutput", rows)
    from scenarios.models import Variant

    label = {
        pk: (item, variant)
        for pk, item, variant in Variant.objects.filter(scenario=scenario).values_list(
            "pk", "item__item_id", "variant_id"
        )
    }
    made = []
    for task, a, b in _tasks(scenario):
        for rater in range(3):
            first, second = (a, b) if rng.random() < 0.5 else (b, a)
            d = strength[model_of[label[first]]] - strength[model_of[label[second]]]
            draw = rng.random()
            verdict = "tie" if draw > 0.95 else ("A" if draw < 0.95 / (1 + np.exp(-d)) else "B")
            made.append((task, [first, second], verdict, f"r{rater}"))
    _judgments(scenario, made)
    return scenario, None


SHAPES = {"pandalm": pandalm, "big": big, "per_output": per_output}


if __name__ == "__main__":
    main()
