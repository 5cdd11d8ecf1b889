"""A scenario's analytics: every figure of docs/analytics.md in one JSON-ready dict.

``analyze(scenario, raters=...)`` loads the scenario's data once (``data.load``: valid
verdicts only; judges' unparseable replies are counted in the judge table) and ``compute``
works out from it, reading nothing else, by the analysis its scenario type names
(``ANALYSES``): the win / tie / loss matrix, Bradley-Terry strengths with bootstrap intervals
and ranks, Elo, position bias, reverse-order consistency (by variant, and aggregated by model
and by prompt); people's and judges' verdicts in one model with their effects
(``joint_table``); ratings by dimension, model and prompt with repeat-call stability; rankings;
labels; agreement between people and between people and each judge; the judge comparison
table. ``raters``: "all", "humans" (evaluators and imported raters), "judges", or
"judge:<id>"; by default "humans" when the scenario has people's judgments, else "all"
(``default_raters``). Stability, agreement and the joint model are each judge's and the
people's whatever the filter (a judge filter narrows them to that judge).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from itertools import combinations
from typing import Any

import numpy as np

# scipy.stats is imported inside the functions that use it: it takes about a second to
# import, and the web server loads this module before answering its first request.
from threadpoolctl import threadpool_limits

from evalplatform import validation
from evaluations.analytics import bradley_terry, cards, data, joint_table, plackett_luce, stats
from evaluations.analytics.adjudicated import adjudicated
from evaluations.analytics.agreement import agreement, category, task_name, unit_values, versus
from evaluations.analytics.data import AnalysisData, Row
from evaluations.analytics.stats import rounded as _round
from evaluations.models import Judgment, LLMJudge, RaterKind
from scenarios.models import Scenario, Variant
from scenarios.types import registry

DEFAULTS = {"resamples": 1000, "seed": 0, "elo_k": 4.0, "elo_order": "chronological"}
ELO_ROUNDS = 100


def rater_filter(raters: str) -> Callable[[Row], bool]:
    if raters == "all":
        return lambda r: True
    if raters == "humans":
        return lambda r: r.kind != RaterKind.JUDGE
    if raters == "judges":
        return lambda r: r.kind == RaterKind.JUDGE
    if raters.startswith("judge:") and validation.digits(raters[6:]) is not None:
        wanted = int(raters[6:])
        return lambda r: r.judge == wanted
    raise ValueError(raters)


# --- comparisons --------------------------------------------------------------------------------
def _comparison_arrays(rows: list[Row], group: Callable[[int], Any]):
    """(labels, a, b, s, rows used): each judgment as first shown vs second shown, after
    mapping variants to groups (judgments within one group left out). Labels are sorted, so
    that the figures do not depend on the order of the rows."""
    pairs, used = [], []
    for row in rows:
        first, second = group(row.presented[0]), group(row.presented[1])
        if first == second:
            continue
        winner = row.payload.get("winner")
        pairs.append((first, second, 1.0 if winner == "A" else 0.0 if winner == "B" else 0.5))
        used.append(row)
    labels = sorted({x for first, second, _ in pairs for x in (first, second)}, key=str)
    index = {label: i for i, label in enumerate(labels)}
    a = np.array([index[first] for first, _, _ in pairs], int)
    b = np.array([index[second] for _, second, _ in pairs], int)
    s = np.array([outcome for _, _, outcome in pairs], float)
    return labels, a, b, s, used


def _bt_table(labels, a, b, s, options, extra: Callable[[Any], dict] | None = None) -> dict:
    """Bradley-Terry strengths with intervals and ranks, fitted per connected component
    (``bradley_terry``): ranks are within the component, which each item names when there
    are several."""
    n = len(labels)
    if n < 2 or len(a) == 0:
        return {"items": [], "connected": None, "regularized": False}
    fit = bradley_terry.fit(n, a, b, s)
    boot = bradley_terry.bootstrap(
        n, a, b, s, fit, resamples=options["resamples"], seed=options["seed"]
    )
    return _strength_table(labels, fit, boot, bradley_terry.wald(n, a, b, s, fit), options, extra)


def _strength_table(
    labels, fit, boot, error, options, extra: Callable[[Any], dict] | None = None
) -> dict:
    """The rows and the fit block of strengths ``fit`` with bootstrap resamples ``boot``
    (B, n) and Wald standard errors ``error`` (n,; NaN where the bootstrap gives them)."""
    n = len(labels)
    low, high = np.full(n, np.nan), np.full(n, np.nan)
    booted = np.isfinite(boot).all(axis=0) if len(boot) else np.zeros(n, bool)
    if booted.any():
        low[booted], high[booted] = np.percentile(boot[:, booted], [2.5, 97.5], axis=0)
    by_wald = np.isfinite(error)
    low = np.where(by_wald, fit.strength - 1.959964 * error, low)
    high = np.where(by_wald, fit.strength + 1.959964 * error, high)
    order = np.zeros(n, int)
    for c in range(fit.components):
        members = np.nonzero(fit.component == c)[0]
        order[members] = stats.ranks(fit.strength[members])
    several = fit.components > 1
    items = [
        {
            "variant": labels[i],
            "strength": _round(fit.strength[i]),
            "ci_low": _round(low[i]),
            "ci_high": _round(high[i]),
            "rank": int(order[i]),
            **({"component": int(fit.component[i])} if several else {}),
            **(extra(labels[i]) if extra else {}),
        }
        for i in range(n)
    ]
    items.sort(key=lambda item: (item.get("component", 0), item["rank"], str(item["variant"])))
    return {
        "items": items,
        "connected": fit.connected,
        "regularized": bool(fit.regularized.any()),
        "converged": fit.converged,
        "components": fit.components,
        "regularized_components": int((~fit.strongly_connected).sum()),
        "intervals": "wald"
        if by_wald.all()
        else "bootstrap+wald"
        if by_wald.any()
        else "bootstrap",
        "resamples": options["resamples"],
        "seed": options["seed"],
    }


def describe(variant: Variant) -> dict[str, Any]:
    """What names an output in the tables: its item, the model and prompt that made it,
    its repetition and temperature when a generation job made it, and its own id."""
    meta = variant.meta if isinstance(variant.meta, dict) else {}
    return {
        "item": variant.item.item_id,
        "model": variant.model_label,
        "prompt": variant.prompt_label,
        **{key: meta[key] for key in ("repetition", "temperature") if key in meta},
        "variant_id": variant.variant_id,
    }


def configuration(variant: Variant) -> str:
    """What made an output but its repetition: model (configuration), prompt, temperature."""
    meta = variant.meta if isinstance(variant.meta, dict) else {}
    parts = [variant.model_label or "(none)", variant.prompt_label or "(none)"]
    if meta.get("temperature") is not None:
        parts.append(f"t={meta['temperature']}")
    return " · ".join(parts)


def groupings(variants: dict[int, Variant]) -> list[tuple[str, dict[int, str]]]:
    """The groups the model-level answers rank: ``by_model``, ``by_prompt`` and, when it
    tells more than either, ``by_configuration`` (each a label for every variant)."""
    model = {pk: v.model_label or "(none)" for pk, v in variants.items()}
    prompt = {pk: v.prompt_label or "(none)" for pk, v in variants.items()}
    found = [("by_model", model), ("by_prompt", prompt)]
    config = {pk: configuration(v) for pk, v in variants.items()}
    if len(set(config.values())) > max(len(set(model.values())), len(set(prompt.values()))):
        found.append(("by_configuration", config))
    return found


MATRIX_LIMIT = 50  # variants: above, the matrix is given as the list of compared pairs


def _win_matrix(labels, a, b, s) -> dict[str, Any]:
    """Wins, ties and losses of each variant (row) against each other (column); with more
    than ``MATRIX_LIMIT`` variants, only the pairs that were compared."""
    n = len(labels)
    if n > MATRIX_LIMIT:
        counts: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0, 0])
        for x, y, outcome in zip(a.tolist(), b.tolist(), s.tolist(), strict=True):
            low, high = min(x, y), max(x, y)
            won = outcome if x == low else 1 - outcome
            counts[(low, high)][0 if won == 1 else 1 if won == 0.5 else 2] += 1
        return {
            "variants": labels,
            "pairs": [
                {"variant": labels[x], "opponent": labels[y], "wins": w, "ties": t, "losses": lost}
                for (x, y), (w, t, lost) in sorted(counts.items())
            ],
        }
    wins = np.zeros((n, n), int)
    ties = np.zeros((n, n), int)
    np.add.at(wins, (a[s == 1], b[s == 1]), 1)
    np.add.at(wins, (b[s == 0], a[s == 0]), 1)
    np.add.at(ties, (a[s == 0.5], b[s == 0.5]), 1)
    ties = ties + ties.T
    return {
        "variants": labels,
        "wins": wins.tolist(),
        "ties": ties.tolist(),
        "losses": wins.T.tolist(),
    }


def _elo(labels, a, b, s, options) -> list[dict[str, Any]]:
    if len(labels) < 2 or len(a) == 0:
        return []
    result = stats.elo(
        len(labels),
        a,
        b,
        s,
        k=options["elo_k"],
        order=options["elo_order"],
        rounds=ELO_ROUNDS,
        seed=options["seed"],
    )
    items = [
        {
            "variant": labels[i],
            "rating": _round(result["rating"][i]),
            "median": _round(result["median"][i]),
            "ci_low": _round(result["ci_low"][i]),
            "ci_high": _round(result["ci_high"][i]),
        }
        for i in range(len(labels))
    ]
    return sorted(items, key=lambda item: -item["median"])


def _position(rows: list[Row]) -> dict[str, Any]:
    """First-position wins among the verdicts that are not ties: exact binomial test."""

    def count(subset: Iterable[Row]) -> dict[str, Any]:
        winners = [r.payload.get("winner") for r in subset]
        decided = [w for w in winners if w in ("A", "B")]
        return stats.binomial(decided.count("A"), len(decided)) | {"ties": winners.count("tie")}

    by_rater = defaultdict(list)
    for row in rows:
        by_rater[row.rater].append(row)
    return {
        "overall": count(rows),
        "by_rater": {rater: count(group) for rater, group in sorted(by_rater.items())},
    }


def _reverse_pairs(rows: list[Row]) -> list[tuple[Row, Row]]:
    """Judgments of the same two variants by the same rater (same repetition and
    temperature) in both presentation orders, paired in the order they were made."""
    orders: dict[tuple, tuple[list[Row], list[Row]]] = defaultdict(lambda: ([], []))
    for row in rows:
        u, v = row.presented
        low, high = min(u, v), max(u, v)
        key = (row.rater, row.repetition, row.temperature, low, high)
        orders[key][0 if u == low else 1].append(row)
    return [
        pair
        for forward, backward in orders.values()
        for pair in zip(forward, backward, strict=False)
    ]


def _winner_variant(row: Row) -> Any:
    winner = row.payload.get("winner")
    return "tie" if winner not in ("A", "B") else row.presented["AB".index(winner)]


def _consistency(pairs: list[tuple[Row, Row]], options) -> dict[str, Any]:
    flags, first, second = [], 0, 0
    for one, other in pairs:
        same = _winner_variant(one) == _winner_variant(other)
        flags.append(1.0 if same else 0.0)
        if not same:
            w1, w2 = one.payload.get("winner"), other.payload.get("winner")
            first += w1 == w2 == "A"
            second += w1 == w2 == "B"
    array = np.array(flags)
    low, high = stats.bootstrap_share(array, resamples=options["resamples"], seed=options["seed"])
    return {
        "pairs": len(flags),
        "consistent": int(array.sum()) if len(array) else 0,
        "share": _round(array.mean()) if len(array) else None,
        "ci_low": _round(low),
        "ci_high": _round(high),
        "inconsistent_first_position": first,
        "inconsistent_second_position": second,
    }


def _reverse_consistency(rows: list[Row], options) -> dict[str, Any]:
    pairs = _reverse_pairs(rows)
    by_rater = defaultdict(list)
    for pair in pairs:
        by_rater[pair[0].rater].append(pair)
    return {
        "overall": _consistency(pairs, options),
        "by_rater": {r: _consistency(p, options) for r, p in sorted(by_rater.items())},
    }


def comparisons(rows: list[Row], variants: dict[int, Variant], options) -> dict[str, Any]:
    label = {pk: f"{v.item.item_id}/{v.variant_id}" for pk, v in variants.items()}
    by_label = {label[pk]: v for pk, v in variants.items()}

    def named(name: str) -> dict[str, Any]:
        variant = by_label.get(name)
        return describe(variant) if variant else {}

    labels, a, b, s, used = _comparison_arrays(rows, lambda pk: label[pk])
    table = _bt_table(labels, a, b, s, options, named)
    result: dict[str, Any] = {
        "win_matrix": _win_matrix(labels, a, b, s),
        "bradley_terry": table["items"],
        "bradley_terry_fit": {k: v for k, v in table.items() if k != "items"}
        | {"resamples": options["resamples"], "seed": options["seed"]},
        "elo": [item | named(item["variant"]) for item in _elo(labels, a, b, s, options)],
        "position_bias": _position(used),
        "reverse_consistency": _reverse_consistency(used, options),
    }
    for name, group in groupings(variants):
        g_labels, ga, gb, gs, _ = _comparison_arrays(rows, group.__getitem__)
        table = _bt_table(g_labels, ga, gb, gs, options)
        result[name] = {
            "bradley_terry": _with_win_rates(table["items"], g_labels, ga, gb, gs),
            "connected": table["connected"],
            "regularized": table["regularized"],
            "intervals": table.get("intervals"),
            "judgments": len(ga),
            "win_matrix": _win_matrix(g_labels, ga, gb, gs),
        }
    return result


def _with_win_rates(items: list[dict], labels, a, b, s) -> list[dict[str, Any]]:
    """Each group's judgments against other groups and its win rate (ties as halves)."""
    index = {label: i for i, label in enumerate(labels)}
    n = len(labels)
    games = np.bincount(a, minlength=n) + np.bincount(b, minlength=n)
    wins = np.bincount(a, weights=s, minlength=n) + np.bincount(b, weights=1 - s, minlength=n)
    for item in items:
        i = index[item["variant"]]
        item["judgments"] = int(games[i])
        item["win_rate"] = _round(wins[i] / games[i]) if games[i] else None
    return items


# --- ratings ------------------------------------------------------------------------------------
def _score_rows(rows: list[Row]) -> list[tuple[Row, str, float]]:
    return [
        (row, dimension, float(score))
        for row in rows
        for dimension, score in (row.payload.get("scores") or {}).items()
    ]


def ratings(rows: list[Row], variants: dict[int, Variant], config: dict) -> dict[str, Any]:
    scored = _score_rows(rows)
    out: dict[str, Any] = {"dimensions": []}
    for dim in config.get("dimensions", []):
        name = dim["name"]
        values = [(row, score) for row, d, score in scored if d == name]
        entry: dict[str, Any] = {
            "dimension": name,
            "scale": [dim["min"], dim["max"]],
            "overall": _summary([score for _, score in values]),
            "distribution": {
                str(k): v for k, v in sorted(Counter(score for _, score in values).items())
            },
        }
        for key, group in groupings(variants):
            groups: dict[str, list[float]] = defaultdict(list)
            for row, score in values:
                groups[group[row.presented[0]]].append(score)
            entry[key] = [
                {"group": group, **_summary(scores), "distribution": dict(Counter(scores))}
                for group, scores in sorted(groups.items())
            ]
        out["dimensions"].append(entry)
    return out


def _summary(values: list[float]) -> dict[str, Any]:
    return {k: _round(v) for k, v in stats.summarize(np.array(values, float)).as_dict().items()}


def stability(rows: list[Row], config: dict, analysis: Analysis) -> list[dict[str, Any]]:
    """Repeat-call stability of each judge: per item (a task in one presentation order),
    its repeated calls at one temperature."""
    per_judge: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if row.kind == RaterKind.JUDGE:
            per_judge[row.rater].append(row)
    report = []
    for rater, judge_rows in sorted(per_judge.items()):
        report += analysis.stability(rater, judge_rows, config)
    return [r for r in report if r is not None]


def _rating_stability(rater: str, dimension: str, rows: list[Row]) -> dict[str, Any] | None:
    by_temperature: dict[Any, dict[tuple, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        score = (row.payload.get("scores") or {}).get(dimension)
        if score is not None:
            by_temperature[row.temperature][(row.task, row.swapped)].append(float(score))
    conditions = []
    per_item_sd: dict[Any, dict[tuple, float]] = {}
    for temperature, items in sorted(by_temperature.items(), key=lambda kv: kv[0] or 0):
        repeated = {k: v for k, v in items.items() if len(v) >= 2}
        if not repeated:
            continue
        sds = {k: float(np.std(v, ddof=1)) for k, v in repeated.items()}
        per_item_sd[temperature] = sds
        k = min(len(v) for v in repeated.values())
        table = np.array([v[:k] for v in repeated.values()])
        groups = list(repeated.values())
        conditions.append(
            {
                "temperature": temperature,
                "items": len(repeated),
                "repetitions": k,
                "mean_of_item_means": _round(float(np.mean([np.mean(v) for v in groups]))),
                "mean_item_sd": _round(float(np.mean(list(sds.values())))),
                "pooled_sd": _round(float(np.sqrt(np.mean([np.var(v, ddof=1) for v in groups])))),
                "mean_range": _round(float(np.mean([max(v) - min(v) for v in groups]))),
                "share_identical": _round(float(np.mean([len(set(v)) == 1 for v in groups]))),
                "icc": _round(stats.icc_oneway(table)),
            }
        )
    if not conditions:
        return None
    return {
        "rater": rater,
        "dimension": dimension,
        "conditions": conditions,
        "temperature_tests": _temperature_tests(per_item_sd),
    }


def _temperature_tests(per_item_sd: dict[Any, dict[tuple, float]]) -> list[dict[str, Any]]:
    """Each pair of temperatures: the items' SDs compared pairwise (Wilcoxon signed-rank and
    paired t-test)."""
    from scipy import stats as sps

    tests = []
    for low, high in combinations(sorted(per_item_sd, key=lambda t: t or 0), 2):
        common = sorted(set(per_item_sd[low]) & set(per_item_sd[high]))
        x = np.array([per_item_sd[low][k] for k in common])
        y = np.array([per_item_sd[high][k] for k in common])
        entry: dict[str, Any] = {
            "temperatures": [low, high],
            "items": len(common),
            "mean_sd_difference": _round(float((y - x).mean())) if len(common) else None,
            "wilcoxon_p": None,
            "paired_t_p": None,
        }
        if len(common) >= 2 and np.any(x != y):
            entry["wilcoxon_p"] = _round(stats.wilcoxon_p(x, y))
            entry["paired_t_p"] = _round(float(sps.ttest_rel(x, y).pvalue))
        tests.append(entry)
    return tests


def _verdict_stability(rater: str, rows: list[Row]) -> dict[str, Any] | None:
    groups: dict[tuple, list[Any]] = defaultdict(list)
    for row in rows:
        groups[(row.temperature, row.task, row.swapped)].append(_winner_variant(row))
    conditions = []
    for temperature in sorted({k[0] for k in groups}, key=lambda t: t or 0):
        repeated = [v for k, v in groups.items() if k[0] == temperature and len(v) >= 2]
        if repeated:
            conditions.append(
                {
                    "temperature": temperature,
                    "items": len(repeated),
                    "share_identical": _round(float(np.mean([len(set(v)) == 1 for v in repeated]))),
                }
            )
    return {"rater": rater, "dimension": None, "conditions": conditions} if conditions else None


# --- rankings and labels ------------------------------------------------------------------------
def rankings(rows: list[Row], variants: dict[int, Variant], options) -> dict[str, Any]:
    label = {pk: f"{v.item.item_id}/{v.variant_id}" for pk, v in variants.items()}
    places: dict[int, list[int]] = defaultdict(list)
    by_task: dict[int, list[list[int]]] = defaultdict(list)
    pairs_a, pairs_b = [], []
    for row in rows:
        ranking = row.payload.get("ranking") or []
        for place, pk in enumerate(ranking, 1):
            places[pk].append(place)
        by_task[row.task].append(ranking)
        for better, worse in combinations(ranking, 2):
            pairs_a.append(better)
            pairs_b.append(worse)
    mean_rank = sorted(
        (
            {
                "variant": label[pk],
                **describe(variants[pk]),
                "mean_rank": _round(float(np.mean(v))),
                "n": len(v),
            }
            for pk, v in places.items()
        ),
        key=lambda item: item["mean_rank"],
    )
    per_task_w: list[float] = []
    for rankings_of_task in by_task.values():
        complete = [r for r in rankings_of_task if sorted(r) == sorted(rankings_of_task[0])]
        if len(complete) >= 2:
            order = sorted(complete[0])
            matrix = np.array([[r.index(pk) + 1 for pk in order] for r in complete])
            w = stats.kendall_w(matrix)
            if w is not None:
                per_task_w.append(w)
    result: dict[str, Any] = {
        "mean_rank": mean_rank,
        "kendall_w_mean": _round(float(np.mean(per_task_w))) if per_task_w else None,
        "kendall_w_tasks": len(per_task_w),
    }
    result["bradley_terry"] = _plackett_luce_table(rows, variants, label, options)
    models = {}
    for name, group in groupings(variants):
        models[name] = _ranked_groups(rows, group, options)
    # Kept in the rankings block too, as before: the rows of the models' table.
    result["by_model"] = models["by_model"]["bradley_terry"]
    return {"rankings": result, **models}


# Distinct rankings x resamples drawn at once (memory bound of the rankings' bootstrap).
_RANKING_CELLS = 2_000_000


def _ranked_groups(rows: list[Row], group: dict[int, str], options) -> dict[str, Any]:
    """Bradley-Terry of groups (models, prompts) from the pairs each ranking implies between
    outputs of different groups. A ranking's pairs are not independent judgments, so the
    intervals resample whole rankings (each resample's implied pairs refitted by Newton's
    method from the fit), not pairs."""
    orders = [
        tuple(group[pk] for pk in row.payload.get("ranking") or [] if pk in group) for row in rows
    ]
    names = sorted({name for order in orders for name in order}, key=str)
    index = {name: i for i, name in enumerate(names)}
    g = len(names)
    empty: dict[str, Any] = {
        "bradley_terry": [],
        "connected": None,
        "regularized": False,
        "judgments": 0,
    }
    if g < 2:
        return empty
    distinct: dict[tuple[int, ...], int] = Counter(
        tuple(index[name] for name in order) for order in orders
    )
    keys = [k for k in sorted(distinct) if len(set(k)) > 1]
    if not keys:
        return empty
    counts = np.array([distinct[k] for k in keys], float)
    implied = np.zeros((len(keys), g, g))  # each distinct ranking's wins between groups
    for d, order in enumerate(keys):
        for x, y in combinations(order, 2):
            if x != y:
                implied[d, x, y] += 1
    wins = np.tensordot(counts, implied, axes=1)
    fit = bradley_terry.fit_matrix(wins)
    resamples = options["resamples"] if g <= bradley_terry.SMALL else 0
    boot = np.zeros((0, g))
    if resamples:
        rng = np.random.default_rng(options["seed"])
        prior = np.where(fit.regularized, bradley_terry.REGULARIZATION, bradley_terry.RIDGE)
        total = int(counts.sum())
        chunk = max(1, _RANKING_CELLS // max(len(keys), g * g))
        parts = []
        for start in range(0, resamples, chunk):
            size = min(chunk, resamples - start)
            drawn = rng.multinomial(total, counts / total, size=size).astype(float)
            batch = np.tensordot(drawn, implied, axes=1)  # (size, g, g)
            theta, _ = bradley_terry.newton_dense(
                batch, prior[None, :], start=np.repeat(fit.strength[None, :], size, 0)
            )
            parts.append(theta)
        boot = np.concatenate(parts)
        # Centred within each component, like the fit.
        sizes = np.bincount(fit.component)
        means = np.stack([np.bincount(fit.component, weights=row) / sizes for row in boot])
        boot = boot - means[:, fit.component]
    table = _strength_table(names, fit, boot, np.full(g, np.nan), options)
    a, b = np.nonzero(wins)
    weights = wins[a, b]
    items = _with_win_rates(
        table["items"],
        names,
        np.repeat(a, weights.astype(int)),
        np.repeat(b, weights.astype(int)),
        np.ones(int(weights.sum())),
    )
    return {
        "bradley_terry": items,
        "connected": table["connected"],
        "regularized": table["regularized"],
        "intervals": "bootstrap of whole rankings" if resamples else None,
        "judgments": len(orders),
        "win_matrix": None,
    }


def _plackett_luce_table(
    rows: list[Row], variants: dict[int, Variant], label: dict[int, str], options
) -> list[dict[str, Any]]:
    """Each item's variants by Plackett-Luce, fitted per item and bootstrapped by whole
    rankings (``plackett_luce``); ranks within the item, which each row names."""
    groups: dict[tuple, list[list[int]]] = defaultdict(list)
    for row in rows:
        ranking = [pk for pk in row.payload.get("ranking") or [] if pk in variants]
        if len(ranking) >= 2:
            groups[tuple(sorted(ranking, key=lambda pk: label[pk]))].append(ranking)
    keys = sorted(groups, key=lambda members: [label[pk] for pk in members])
    local = [{pk: i for i, pk in enumerate(members)} for members in keys]
    fits = plackett_luce.fit(
        [
            [[index[pk] for pk in r] for r in groups[members]]
            for members, index in zip(keys, local, strict=True)
        ],
        resamples=options["resamples"],
        seed=options["seed"],
    )
    table = []
    for component, (members, fitted) in enumerate(zip(keys, fits, strict=True)):
        strength, boot = fitted.strength, fitted.boot
        low, high = np.full(len(strength), np.nan), np.full(len(strength), np.nan)
        if len(boot):
            low, high = np.percentile(boot, [2.5, 97.5], axis=0)
        order = stats.ranks(strength)
        for i, pk in enumerate(members):
            table.append(
                {
                    "variant": label[pk],
                    "strength": _round(strength[i]),
                    "ci_low": _round(low[i]),
                    "ci_high": _round(high[i]),
                    "rank": int(order[i]),
                    "component": component,
                    **describe(variants[pk]),
                    "regularized": fitted.regularized,
                }
            )
    table.sort(key=lambda item: (item["component"], item["rank"], item["variant"]))
    return table


def labels(rows: list[Row], variants: dict[int, Variant]) -> dict[str, Any]:
    overall: Counter[str] = Counter()
    by_model: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        for label in row.payload.get("labels") or []:
            overall[label] += 1
            by_model[variants[row.presented[0]].model_label or "(none)"][label] += 1
    return {
        "overall": dict(overall.most_common()),
        "by_model": {model: dict(c) for model, c in sorted(by_model.items())},
    }


# --- judges -------------------------------------------------------------------------------------
def judges_table(
    scenario: Scenario,
    judges: list[LLMJudge],
    rows: list[Row],
    unparseable: dict[int, int],
    options,
) -> list[dict[str, Any]]:
    """Every judge configuration on the scenario (prompt version, model, thinking and other
    parameters), with its figures overall and at each temperature (``by_temperature``)."""
    people = [r for r in rows if r.kind != RaterKind.JUDGE]
    analysis, config = analysis_of(scenario), scenario.config
    table = []
    for judge in judges:
        mine = [r for r in rows if r.judge == judge.pk]
        failed = unparseable.get(judge.pk, 0)
        calls = len(mine) + failed
        spent = sum((r.cost or Decimal(0) for r in mine), Decimal(0))
        entry: dict[str, Any] = {
            "judge": judge.pk,
            "name": judge.name,
            "model": judge.llm_model.model_id,
            "params": judge.params,
            "thinking": cards.thinking_setting(judge.params),
            "prompt": f"{judge.prompt_version.template.name} v{judge.prompt_version.number}",
            "temperatures": judge.temperatures,
            "repetitions": judge.repetitions,
            "swap": judge.swap,
            "judgments": len(mine),
            "parse_failures": failed,
            "parse_failure_share": _round(failed / calls) if calls else None,
            "cost_per_judgment_usd": _round(float(spent) / len(mine)) if mine else None,
        }
        entry |= analysis.judge_figures(mine, people, config, options)
        temperatures = sorted({r.temperature for r in mine}, key=lambda t: t or 0)
        entry["by_temperature"] = [
            {"temperature": t, "judgments": len(at)}
            | analysis.judge_figures(at, people, config, options)
            for t in temperatures
            if (at := [r for r in mine if r.temperature == t])
        ]
        table.append(entry)
    return table


# --- by scenario type ---------------------------------------------------------------------------
class Analysis:
    """What a scenario type's judgments are analysed with. A type names its analysis
    (``ScenarioKind.analysis``, a key of ``ANALYSES``); this base, for a type that names
    none, adds nothing of its own to the figures every scenario gets."""

    # The values are scores on the dimensions of a rubric: agreement is interval-scaled and
    # per dimension, and a judge is compared with the people by correlation.
    scored = False
    # The values are sets of labels: agreement is also given per label.
    label_sets = False

    def results(
        self, rows: list[Row], variants: dict[int, Variant], config: dict, options: dict
    ) -> dict[str, Any]:
        """The type's sections of the analysis (``win_matrix``, ``ratings``, ...)."""
        return {}

    def unit_value(
        self, row: Row, dimension: str | None, names: Mapping[int, str]
    ) -> tuple[Any, Any] | None:
        """A judgment's unit of agreement (named by ``names`` of its variants, never by
        database ids) and its value there; None: it has none."""
        return None

    def stability(self, rater: str, rows: list[Row], config: dict) -> list[dict[str, Any] | None]:
        """Repeat-call stability of one judge's rows (None entries are dropped)."""
        return []

    def judge_figures(
        self, subset: list[Row], people: list[Row], config: dict, options: dict
    ) -> dict[str, Any]:
        """The judge-comparison figures of some of a judge's judgments."""
        return {}

    def joint_model(
        self, rows: list[Row], loaded: AnalysisData, options: dict
    ) -> dict[str, Any] | None:
        """People's and judges' verdicts (``rows``) in one model (``joint_table``)."""
        return None


class PairwiseAnalysis(Analysis):
    """Comparisons: win matrix, Bradley-Terry, Elo, position bias, reverse-order
    consistency; verdict stability; agreement on the winner."""

    def results(
        self, rows: list[Row], variants: dict[int, Variant], config: dict, options: dict
    ) -> dict[str, Any]:
        return comparisons(rows, variants, options)

    def unit_value(
        self, row: Row, dimension: str | None, names: Mapping[int, str]
    ) -> tuple[Any, Any] | None:
        # The unit is the unordered pair of variants by their names in sorted order, its
        # value "first", "second" (the pair's variant whose name sorts first or second won)
        # or "tie": categories mean the same in every unit, whatever the ids or the order.
        unit = tuple(sorted(names[pk] for pk in row.presented))
        winner = _winner_variant(row)
        return unit, category("tie" if winner == "tie" else names[winner], unit)

    def stability(self, rater: str, rows: list[Row], config: dict) -> list[dict[str, Any] | None]:
        return [_verdict_stability(rater, rows)]

    def joint_model(
        self, rows: list[Row], loaded: AnalysisData, options: dict
    ) -> dict[str, Any] | None:
        return joint_table.joint_model(
            rows,
            loaded.variants,
            loaded.judges,
            loaded.sources,
            groupings(loaded.variants),
            options,
        )

    def judge_figures(
        self, subset: list[Row], people: list[Row], config: dict, options: dict
    ) -> dict[str, Any]:
        position = _position(subset)["overall"]
        consistency = _consistency(_reverse_pairs(subset), options | {"resamples": 0})
        against = versus(unit_values(people, self), unit_values(subset, self), scored=False)
        return {
            "reverse_consistency": consistency["share"],
            "reverse_pairs": consistency["pairs"],
            "first_position_share": _round(position["share"]),
            "first_position_p_value": _round(position["p_value"]),
            "agreement_with_human_majority": against["agreement_with_human_majority"],
        }


class RatingsAnalysis(Analysis):
    """Ratings: scores by dimension, model and prompt; their stability; agreement on the
    scores of each dimension (the unit is the task)."""

    scored = True

    def results(
        self, rows: list[Row], variants: dict[int, Variant], config: dict, options: dict
    ) -> dict[str, Any]:
        return {"ratings": ratings(rows, variants, config)}

    def unit_value(
        self, row: Row, dimension: str | None, names: Mapping[int, str]
    ) -> tuple[Any, Any] | None:
        value = (row.payload.get("scores") or {}).get(dimension)
        return None if value is None else (task_name(row, names), value)

    def stability(self, rater: str, rows: list[Row], config: dict) -> list[dict[str, Any] | None]:
        return [_rating_stability(rater, dim["name"], rows) for dim in config.get("dimensions", [])]

    def judge_figures(
        self, subset: list[Row], people: list[Row], config: dict, options: dict
    ) -> dict[str, Any]:
        rhos = []
        for dim in config.get("dimensions", []):
            against = versus(
                unit_values(people, self, dim["name"]),
                unit_values(subset, self, dim["name"]),
                scored=True,
            )
            if against.get("spearman") is not None:
                rhos.append(against["spearman"])
        return {"mean_spearman_with_humans": _round(float(np.mean(rhos))) if rhos else None}


class RankingsAnalysis(Analysis):
    """Rankings: mean ranks, Kendall's W, Plackett-Luce per item, Bradley-Terry of the
    models (prompts, configurations) from the pairs the rankings imply, bootstrapped by
    whole rankings."""

    def results(
        self, rows: list[Row], variants: dict[int, Variant], config: dict, options: dict
    ) -> dict[str, Any]:
        found = rankings(rows, variants, options)
        table = found["rankings"]["bradley_terry"]
        return found | {
            "bradley_terry": table,
            "bradley_terry_fit": {
                "model": "plackett_luce",
                "components": len({row["component"] for row in table}),
                "regularized": any(row["regularized"] for row in table),
                "intervals": "bootstrap",
                "resamples": options["resamples"],
                "seed": options["seed"],
            },
        }


class LabelsAnalysis(Analysis):
    """Labels: their counts, overall and by model; agreement on the label set of a task,
    and on each label."""

    label_sets = True

    def results(
        self, rows: list[Row], variants: dict[int, Variant], config: dict, options: dict
    ) -> dict[str, Any]:
        return {"labels": labels(rows, variants)}

    def unit_value(
        self, row: Row, dimension: str | None, names: Mapping[int, str]
    ) -> tuple[Any, Any] | None:
        return task_name(row, names), tuple(sorted(row.payload.get("labels") or []))

    def judge_figures(
        self, subset: list[Row], people: list[Row], config: dict, options: dict
    ) -> dict[str, Any]:
        against = versus(unit_values(people, self), unit_values(subset, self), scored=False)
        return {"agreement_with_human_majority": against["agreement_with_human_majority"]}


ANALYSES: dict[str, Analysis] = {
    "pairwise": PairwiseAnalysis(),
    "ratings": RatingsAnalysis(),
    "rankings": RankingsAnalysis(),
    "labels": LabelsAnalysis(),
}


def analysis_of(scenario: Scenario) -> Analysis:
    name = registry.of(scenario).analysis
    return ANALYSES[name] if name is not None else Analysis()


# --- everything ---------------------------------------------------------------------------------
def analyze(
    scenario: Scenario, *, raters: str | None = None, progress: Progress | None = None, **options
) -> dict[str, Any]:
    return compute(
        data.load(scenario), raters=raters or default_raters(scenario), progress=progress, **options
    )


Progress = Callable[[str, float], None]  # (what is being computed, share done so far)


def default_raters(scenario: Scenario) -> str:
    """People when there are people's judgments (what users ask first), else everyone."""
    people = Judgment.objects.filter(scenario=scenario).exclude(rater_kind=RaterKind.JUDGE)
    return "humans" if people.exists() else "all"


def compute(
    loaded: AnalysisData, *, raters: str = "all", progress: Progress | None = None, **options
) -> dict[str, Any]:
    # One BLAS thread: the fits are many small matrix operations, which BLAS threads only
    # slow down (ten times, measured, when the machine's cores are busy).
    with threadpool_limits(limits=1, user_api="blas"):
        return _compute(loaded, raters, progress or (lambda stage, share: None), options)


def whose(raters: str, judges: Iterable[LLMJudge]) -> str:
    """Whose judgments a filter keeps, in words (every table says it)."""
    if raters == "humans":
        return "people's judgments (evaluators and imported raters)"
    if raters == "judges":
        return "the LLM judges' judgments"
    if raters.startswith("judge:"):
        names = {f"judge:{j.pk}": j.name for j in judges}
        return f"judge {names.get(raters, raters[6:])}'s judgments"
    return "everyone's judgments (people and LLM judges together)"


def _compute(
    loaded: AnalysisData, raters: str, progress: Progress, options: dict[str, Any]
) -> dict[str, Any]:
    options = DEFAULTS | {k: v for k, v in options.items() if v is not None}
    scenario, everything, variants = loaded.scenario, loaded.rows, loaded.variants
    keep = rater_filter(raters)
    rows = [r for r in everything if keep(r)]
    analysis = analysis_of(scenario)
    result: dict[str, Any] = {
        "scenario": {"id": scenario.pk, "name": scenario.name, "type": scenario.type},
        "raters": {
            "filter": raters,
            "label": whose(raters, loaded.judges),
            "judgments": len(rows),
            "by_rater": dict(sorted(Counter(r.rater for r in rows).items())),
        },
        "options": options | {"elo_rounds": ELO_ROUNDS},
        "win_matrix": None,
        "bradley_terry": None,
        "elo": None,
        "position_bias": None,
        "reverse_consistency": None,
        "by_model": None,
        "by_prompt": None,
        "by_configuration": None,
        "ratings": None,
        "stability": None,
        "rankings": None,
        "labels": None,
        "joint_model": None,
        "judge_cards": [],
        "trust": None,
    }
    # Stability is each judge's, agreement between people and between people and each
    # judge, and the joint model people's and judges' together, whatever the filter (the
    # filter narrows them only to some judges).
    judged = rows if raters.startswith("judge") else everything
    people = [r for r in everything if r.kind != RaterKind.JUDGE]
    among = people + [r for r in judged if r.kind == RaterKind.JUDGE]
    # Every judge configuration's card, held to the scenario's trust gate: the verdicts of
    # an untrusted one (no manager opted in) are left out of the rankings and the joint
    # model, never out of the agreement, the stability or the cards.
    progress("judge cards and trust", 0.05)
    kind = registry.of(scenario).analysis
    found = cards.judge_cards(loaded, analysis, kind, options)
    gate = cards.gate_of(loaded.gate)
    opted = {j.pk: j.include_untrusted for j in loaded.judges}
    for card in found:
        card["trust"] = cards.trust(card, gate, judge_opt_in=opted.get(card["judge"], False))
    left_out = {
        (c["judge"], c["temperature"]) for c in found if not c["trust"]["counted_in_rankings"]
    }

    def counted(row: Row) -> bool:
        return row.judge is None or (row.judge, row.temperature) not in left_out

    ranked = [r for r in rows if counted(r)]
    result["judge_cards"] = found
    result["trust"] = {
        "gate": gate,
        "excluded": [
            {"judge": c["judge"], "name": c["name"], "temperature": c["temperature"]}
            for c in found
            if not c["trust"]["counted_in_rankings"]
        ],
        "judgments_excluded": len(rows) - len(ranked),
    }
    result["raters"]["judgments_in_rankings"] = len(ranked)
    progress("strengths, rankings and bootstrap intervals", 0.1)
    result |= analysis.results(ranked, variants, scenario.config, options)
    progress("people and judges in one model", 0.5)
    result["joint_model"] = analysis.joint_model([r for r in among if counted(r)], loaded, options)
    effects = {
        e["rater"]: e
        for e in (result["joint_model"] or {}).get("effects", [])
        if e["effect"] == "self_preference"
    }
    for card in found:
        effect = effects.get(f"judge:{card['name']}")
        if card["self_preference"] is not None and effect is not None:
            card["self_preference"]["joint_model_effect"] = {
                k: effect.get(k) for k in ("estimate", "ci_low", "ci_high")
            }
    progress("repeat-call stability", 0.6)
    result["stability"] = stability(judged, scenario.config, analysis)
    progress("agreement between raters", 0.65)
    result["agreement"] = agreement(among, analysis, scenario.config, variants, options)
    progress("the judges compared", 0.9)
    result["judges"] = judges_table(
        scenario, loaded.judges, everything, loaded.unparseable, options
    )
    # Every rater held to the adjudicated answers, whatever the filter; each judge's
    # figures also in its row of the judge table.
    held = adjudicated(kind, everything, loaded.adjudications, scenario.config)
    result["adjudicated"] = held
    by_name = {entry["rater"]: entry for entry in held["by_rater"]}
    for entry in result["judges"]:
        mine = by_name.get(f"judge:{entry['name']}", {})
        entry["adjudicated_n"] = mine.get("n", 0)
        entry["adjudicated_accuracy"] = mine.get("accuracy")
        entry["trust"] = cards.judge_trust(c for c in found if c["judge"] == entry["judge"])
    return result
