"""A scenario's analytics: every figure of docs/analytics.md in one JSON-ready dict.

``analyze(scenario, raters=...)`` loads the scenario's data once (``data.load``: valid
verdicts only; judges' unparseable replies are counted in the judge table) and ``compute``
works out from it, reading nothing else, by the analysis its scenario type names
(``ANALYSES``): the win / tie / loss matrix, Bradley-Terry strengths with bootstrap intervals
and ranks, Elo, position bias, reverse-order consistency (by variant, and aggregated by model
and by prompt: ``pairwise``); people's and judges' verdicts in one model with their effects
(``joint_table``); ratings by dimension, model and prompt with repeat-call stability
(``ratings``); rankings (``rankings``); labels (``labels``); agreement between people and
between people and each judge (``agreement``); the judge comparison table (``judge_table``).
The steps are ``pipeline.run``'s. ``raters``: "all", "humans" (evaluators and imported
raters), "judges", or "judge:<id>"; by default "humans" when the scenario has people's
judgments, else "all" (``default_raters``). Stability, agreement and the joint model are each
judge's and the people's whatever the filter (a judge filter narrows them to that judge).
"""

from __future__ import annotations

from typing import Any

from threadpoolctl import threadpool_limits

from evaluations.analytics import data, pipeline
from evaluations.analytics.common import DEFAULTS, ELO_ROUNDS, Analysis, rater_filter, whose
from evaluations.analytics.data import AnalysisData
from evaluations.analytics.labels import LabelsAnalysis
from evaluations.analytics.pairwise import PairwiseAnalysis
from evaluations.analytics.pipeline import Progress
from evaluations.analytics.rankings import RankingsAnalysis
from evaluations.analytics.ratings import RatingsAnalysis
from evaluations.judgments.models import Judgment, RaterKind
from scenarios.models import Scenario
from scenarios.types import registry

__all__ = [
    "ANALYSES",
    "DEFAULTS",
    "ELO_ROUNDS",
    "Analysis",
    "Progress",
    "analysis_of",
    "analyze",
    "compute",
    "default_raters",
    "rater_filter",
    "whose",
]

ANALYSES: dict[str, Analysis] = {
    "pairwise": PairwiseAnalysis(),
    "ratings": RatingsAnalysis(),
    "rankings": RankingsAnalysis(),
    "labels": LabelsAnalysis(),
}


def analysis_of(scenario: Scenario) -> Analysis:
    """The analysis a scenario's type names (the base ``Analysis`` when it names none)."""
    name = registry.of(scenario).analysis
    return ANALYSES[name] if name is not None else Analysis()


def analyze(
    scenario: Scenario, *, raters: str | None = None, progress: Progress | None = None, **options
) -> dict[str, Any]:
    """A scenario's analytics, its data loaded once (``options``: ``DEFAULTS``' keys)."""
    return compute(
        data.load(scenario), raters=raters or default_raters(scenario), progress=progress, **options
    )


def default_raters(scenario: Scenario) -> str:
    """People when there are people's judgments (what users ask first), else everyone."""
    people = Judgment.objects.filter(scenario=scenario).exclude(rater_kind=RaterKind.JUDGE)
    return "humans" if people.exists() else "all"


def compute(
    loaded: AnalysisData, *, raters: str = "all", progress: Progress | None = None, **options
) -> dict[str, Any]:
    """The analytics of loaded data (``pipeline.run``) as a JSON-ready dict."""
    # One BLAS thread: the fits are many small matrix operations, which BLAS threads only
    # slow down (ten times, measured, when the machine's cores are busy).
    with threadpool_limits(limits=1, user_api="blas"):
        return pipeline.run(
            loaded,
            raters=raters,
            analysis=analysis_of(loaded.scenario),
            progress=progress or (lambda stage, share: None),
            options=options,
        ).as_dict()
