"""The ``joint_model`` block of a comparison scenario's analytics: every pairwise verdict,
people's and LLM judges', in one Bradley-Terry model (``joint``) with the covariates built
here, and its figures as JSON.

The covariates, each per rater (people pooled as ``humans``; each judge as
``judge:<name>``, as ``position_bias`` names it): ``position`` (1 on the rater's verdicts:
the log-odds that the output shown first wins, beyond the strengths), ``length`` (log2 of
the ratio of the shown outputs' lengths: per doubling), ``markdown`` (the difference of
their markdown densities, elements per 100 characters) and, for a judge whose model's
family is known, ``self_preference`` (+1 when the first shown was made by the judge's
family and the second not, -1 the other way round, 0 otherwise).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
from django.conf import settings

from evaluations.analytics import joint, stats, style
from evaluations.analytics.data import Row
from evaluations.judgments.models import LLMJudge, RaterKind
from scenarios.models import Variant

# The bootstrap's resamples are at most this many (the ``resamples`` option's, else):
# each refits the whole model, so the work stays bounded.
RESAMPLES = getattr(settings, "ANALYTICS_JOINT_MODEL_RESAMPLES", 200)
EFFECTS = ("position", "length", "markdown", "self_preference")
HUMANS = "humans"
Z = 1.959964  # the normal quantile of a 95% interval
_ENTITY = {"by_model": "model", "by_prompt": "prompt", "by_configuration": "configuration"}


def entity_grouping(
    groupings: list[tuple[str, dict[int, str]]],
) -> tuple[str, dict[int, str]]:
    """What the strengths rank: the configurations when they tell more than the models or
    the prompts alone, else whichever of those has more groups (the models on a draw)."""
    found = dict(groupings)
    if "by_configuration" in found:
        return "configuration", found["by_configuration"]
    models, prompts = found["by_model"], found["by_prompt"]
    if len(set(prompts.values())) > len(set(models.values())):
        return "prompt", prompts
    return "model", models


def joint_model(
    rows: list[Row],
    variants: dict[int, Variant],
    judges: list[LLMJudge],
    sources: Mapping[int, tuple[str, str]],
    groupings: list[tuple[str, dict[int, str]]],
    options: dict[str, Any],
) -> dict[str, Any] | None:
    """The block, or None without two entities compared."""
    entity, group = entity_grouping(groupings)
    rows = [
        r
        for r in rows
        if len(r.presented) == 2 and r.presented[0] in group and r.presented[1] in group
    ]
    labels = sorted({group[pk] for r in rows for pk in r.presented}, key=str)
    if len(labels) < 2:
        return None
    index = {label: i for i, label in enumerate(labels)}
    a = np.array([index[group[r.presented[0]]] for r in rows], int)
    b = np.array([index[group[r.presented[1]]] for r in rows], int)
    y = np.array([_outcome(r) for r in rows], float)
    rater_of = [_rater(r) for r in rows]
    names, x = covariates(rows, rater_of, variants, judges, sources)
    found = joint.cells(a, b, x, y)
    controlled = joint.fit(len(labels), found)
    plain = joint.fit(len(labels), found, effects=False)
    if not controlled.compared.any():
        return None
    resamples = max(0, min(options["resamples"], RESAMPLES))
    wald = joint.bootstrap_work([controlled, plain], found, resamples) > joint.BOOTSTRAP_WORK
    if wald:
        intervals = [_wald(f, found, len(labels)) for f in (controlled, plain)]
    else:
        boots = joint.bootstrap(
            [controlled, plain], found, len(labels), resamples=resamples, seed=options["seed"]
        )
        intervals = [
            _percentiles(f, boot) for f, boot in zip((controlled, plain), boots, strict=True)
        ]
    raters = sorted(set(rater_of), key=lambda name: (name != HUMANS, name))
    scales: list[dict[str, Any]] = []
    if len(raters) > 1:
        # Each rater on its own scale (the first, the people when there are any, the
        # reference): the effects net of a judge's decisiveness, with Wald intervals.
        columns = [names.index(("position", rater)) for rater in raters]
        group = np.argmax(found.x[:, columns] == 1, axis=1)
        own = joint.scaled_fit(len(labels), found, group, controlled)
        controlled = dataclasses.replace(
            controlled, strength=own.strength, effect=own.effect, converged=own.converged
        )
        intervals[0] = (
            own.strength - Z * own.strength_error,
            own.strength + Z * own.strength_error,
            own.effect - Z * own.effect_error,
            own.effect + Z * own.effect_error,
        )
        scales = _scales(raters, own)
    games = np.bincount(a[a != b], minlength=len(labels)) + np.bincount(
        b[a != b], minlength=len(labels)
    )
    by_rater = Counter(rater_of)
    return {
        "entity": entity,
        "judgments": len(rows),
        "by_rater": dict(sorted(by_rater.items(), key=lambda kv: (kv[0] != HUMANS, kv[0]))),
        "strengths": _strengths(labels, controlled, intervals[0], games),
        "strengths_without_controls": _strengths(labels, plain, intervals[1], games),
        "effects": _effects(names, controlled, intervals[0], by_rater),
        "scales": scales,
        "fit": {
            "converged": controlled.converged and plain.converged,
            "components": controlled.components,
            "connected": controlled.components == 1,
            "regularized": bool(
                controlled.regularized_entities.any() or controlled.regularized_effects.any()
            ),
            "regularized_without_controls": bool(plain.regularized_entities.any()),
            "parameters": controlled.columns.size,
            "intervals": "wald" if wald or scales else "bootstrap" if resamples else None,
            "intervals_without_controls": "wald" if wald else "bootstrap" if resamples else None,
            "resamples": 0 if wald else resamples,
            "seed": options["seed"],
        },
    }


def _scales(raters: list[str], own: joint.ScaledFit) -> list[dict[str, Any]]:
    """Each rater's discrimination relative to the reference's (the first: 1), with its
    95% interval; ``identified`` false where its verdicts cannot tell it (none between
    entities of different strengths), then read as the reference's."""
    out = []
    for g, rater in enumerate(raters):
        told = bool(own.scaled[g])
        gamma, error = own.log_scale[g], own.log_scale_error[g]
        out.append(
            {
                "rater": rater,
                "reference": g == 0,
                "identified": g == 0 or told,
                "scale": stats.rounded(float(np.exp(gamma))),
                "ci_low": stats.rounded(float(np.exp(gamma - Z * error))) if told else None,
                "ci_high": stats.rounded(float(np.exp(gamma + Z * error))) if told else None,
            }
        )
    return out


def _outcome(row: Row) -> float:
    """1 the first shown won, 0 the second, ½ a tie (as every comparison figure reads)."""
    winner = row.payload.get("winner")
    return 1.0 if winner == "A" else 0.0 if winner == "B" else 0.5


def _rater(row: Row) -> str:
    return row.rater if row.kind == RaterKind.JUDGE else HUMANS


def covariates(
    rows: list[Row],
    rater_of: list[str],
    variants: dict[int, Variant],
    judges: list[LLMJudge],
    sources: Mapping[int, tuple[str, str]],
) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The covariates' names, (effect, rater), and their values, one row per verdict
    (``rater_of``: each verdict's rater, ``humans`` or ``judge:<name>``)."""
    raters = sorted(set(rater_of), key=lambda name: (name != HUMANS, name))
    names = [(effect, rater) for rater in raters for effect in EFFECTS]
    # Each verdict's rater, and the first column of its covariates.
    place = {rater: i for i, rater in enumerate(raters)}
    offset = np.array([place[r] for r in rater_of], int) * len(EFFECTS)
    shown = sorted({pk for r in rows for pk in r.presented})
    slot = {pk: i for i, pk in enumerate(shown)}
    first = np.array([slot[r.presented[0]] for r in rows], int)
    second = np.array([slot[r.presented[1]] for r in rows], int)
    log_length = np.array([style.log_length(variants[pk].content) for pk in shown])
    density = np.array([style.markdown_density(variants[pk].content) for pk in shown])
    family = [
        style.family(
            sources.get(pk, ("", ""))[0],
            variants[pk].model_label,
            kind=sources.get(pk, ("", ""))[1] or None,
        )
        for pk in shown
    ]
    judge_family = {
        j.pk: style.family(
            j.llm_model.model_id, j.llm_model.display_name, kind=j.llm_model.connection.kind
        )
        for j in judges
    }
    # The family of each verdict's judge, and whether each shown output is of it.
    own = [judge_family.get(r.judge) if r.judge is not None else None for r in rows]
    first_own = np.array(
        [o is not None and family[f] == o for o, f in zip(own, first, strict=True)]
    )
    second_own = np.array(
        [o is not None and family[f] == o for o, f in zip(own, second, strict=True)]
    )
    x = np.zeros((len(rows), len(names)))
    every = np.arange(len(rows))
    x[every, offset + EFFECTS.index("position")] = 1.0
    x[every, offset + EFFECTS.index("length")] = log_length[first] - log_length[second]
    x[every, offset + EFFECTS.index("markdown")] = density[first] - density[second]
    judged = np.array([o is not None for o in own], bool)
    x[every[judged], (offset + EFFECTS.index("self_preference"))[judged]] = (
        first_own.astype(float) - second_own
    )[judged]
    return names, x


def _percentiles(
    fitted: joint.JointFit, boot: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, ...]:
    """(strength low, high, effect low, high): the bootstrap's 2.5th and 97.5th percentiles
    (NaN without resamples)."""
    strengths, effects = boot
    m, q = len(fitted.strength), len(fitted.effect)
    if not len(strengths):
        return np.full(m, np.nan), np.full(m, np.nan), np.full(q, np.nan), np.full(q, np.nan)
    s_low, s_high = np.percentile(strengths, [2.5, 97.5], axis=0)
    e_low, e_high = np.full(q, np.nan), np.full(q, np.nan)
    fitted_effects = np.isfinite(fitted.effect)
    if fitted_effects.any():
        e_low[fitted_effects], e_high[fitted_effects] = np.percentile(
            effects[:, fitted_effects], [2.5, 97.5], axis=0
        )
    return s_low, s_high, e_low, e_high


def _wald(fitted: joint.JointFit, found: joint.Cells, entities: int) -> tuple[np.ndarray, ...]:
    strength_error, effect_error = joint.wald(fitted, found, entities)
    return (
        fitted.strength - Z * strength_error,
        fitted.strength + Z * strength_error,
        fitted.effect - Z * effect_error,
        fitted.effect + Z * effect_error,
    )


def _strengths(
    labels: list[str],
    fitted: joint.JointFit,
    intervals: tuple[np.ndarray, ...],
    games: np.ndarray,
) -> list[dict[str, Any]]:
    """The compared entities' rows, as ``bradley_terry``'s: ranks within their component
    (named when there are several), best first."""
    low, high = intervals[0], intervals[1]
    compared = np.nonzero(fitted.compared)[0]
    order = np.zeros(len(labels), int)
    for c in np.unique(fitted.component[compared]):
        members = compared[fitted.component[compared] == c]
        order[members] = stats.ranks(fitted.strength[members])
    several = fitted.components > 1
    number = {c: n for n, c in enumerate(np.unique(fitted.component[compared]))}
    items = [
        {
            "variant": labels[i],
            "strength": stats.rounded(fitted.strength[i]),
            "ci_low": stats.rounded(low[i]),
            "ci_high": stats.rounded(high[i]),
            "rank": int(order[i]),
            "judgments": int(games[i]),
            "regularized": bool(fitted.regularized_entities[i]),
            **({"component": number[fitted.component[i]]} if several else {}),
        }
        for i in compared
    ]
    items.sort(key=lambda item: (item.get("component", 0), item["rank"], str(item["variant"])))
    return items


def _effects(
    names: list[tuple[str, str]],
    fitted: joint.JointFit,
    intervals: tuple[np.ndarray, ...],
    by_rater: Mapping[str, int],
) -> list[dict[str, Any]]:
    """Each covariate that is not zero everywhere: its estimate (log-odds) with its
    interval; ``identified`` false (and no estimate) when the verdicts cannot tell it
    apart from the strengths and the covariates before it."""
    low, high = intervals[2], intervals[3]
    return [
        {
            "effect": effect,
            "rater": rater,
            "estimate": stats.rounded(fitted.effect[k]),
            "ci_low": stats.rounded(low[k]),
            "ci_high": stats.rounded(high[k]),
            "identified": not bool(fitted.aliased[k]),
            "regularized": bool(fitted.regularized_effects[k]),
            "judgments": by_rater[rater],
        }
        for k, (effect, rater) in enumerate(names)
        if fitted.present[k]
    ]
