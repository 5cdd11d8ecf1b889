"""Analyses computed once, not per request.

``current(scenario, options)`` answers at once: the stored result when it is of the
scenario's judgments as they are; otherwise, when the work is small (judgments x resamples
up to ``INLINE_WORK``), the result computed there and stored; otherwise the last result (if
any) with the recomputation queued for a worker (``compute``, django-q2), once per state of
the judgments however many ask. The page and the API show which.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Max
from django.utils import timezone

from evalplatform.runs import fairshare
from evaluations.analytics import data
from evaluations.analytics.analyze import DEFAULTS, ELO_ROUNDS, analyze
from evaluations.analytics.cards import GATE_FIELDS, source_of
from evaluations.analytics.models import AnalysisStatus, StoredAnalysis
from evaluations.judgments.models import LLMJudge
from evaluations.review.models import Adjudication
from scenarios.models import Scenario

logger = logging.getLogger(__name__)

# Judgments x (resamples + 1, at least Elo's rounds) computed in the request: about half a
# second here; and never more judgments than INLINE_JUDGMENTS.
INLINE_WORK = 1_000_000
INLINE_JUDGMENTS = 20_000
# A computation queued (or started) this long ago and not done is taken as lost (a worker
# killed, a queue flushed) and queued again: past the task queue's own timeout.
LOST_AFTER = timedelta(seconds=settings.Q_CLUSTER.get("timeout", 3600) + 300)
# Part of every key: a new version of the analyses makes every stored result stale.
VERSION = 5


@dataclass
class State:
    """What a request gets: the stored analysis, whether its result is of the judgments as
    they are (``fresh``), and the number of judgments now."""

    analysis: StoredAnalysis
    fresh: bool
    judgments: int

    def describe(self) -> dict[str, Any]:
        """The ``analysis`` block of the JSON: status, when and from how many judgments."""
        analysis = self.analysis
        return {
            "status": analysis.status if not self.fresh else AnalysisStatus.DONE,
            "fresh": self.fresh,
            "computed_at": analysis.computed_at.isoformat() if analysis.computed_at else None,
            "judgments": analysis.judgments if analysis.result is not None else None,
            "judgments_now": self.judgments,
            "seconds": analysis.seconds,
            "error": analysis.error or None,
            **(
                {"stage": analysis.stage or None, "progress": analysis.progress}
                if analysis.status == AnalysisStatus.RUNNING and not self.fresh
                else {}
            ),
        }


def _key(options: dict[str, Any]) -> str:
    canonical = DEFAULTS | {"raters": "all"} | {k: v for k, v in options.items() if v is not None}
    canonical["version"] = VERSION
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()


def fingerprint(scenario: Scenario) -> tuple[str, int]:
    """The state of what an analysis reads (its judgments, their revisions, judges, gold
    tasks, excluded evaluators, adjudicated answers and trust gate) in one string, and the
    number of judgments."""
    # A revised answer changes what an analysis reads: its time is part of the state.
    judged = data.judgments(scenario).aggregate(
        n=Count("pk"), last=Max("pk"), revised=Max("revised_at")
    )
    judges = list(
        LLMJudge.objects.filter(scenario=scenario)
        .order_by("pk")
        .values_list(
            "pk",
            "name",
            "params",
            "prompt_version_id",
            "llm_model_id",
            "llm_model__model_id",
            "temperatures",
            "repetitions",
            "swap",
            "max_tokens",
            "reply_format",
            "include_untrusted",
        )
    )
    # The gate the judges are held to: the scenario's own, else its team's default (a
    # change of the team's gate makes every analysis of its scenarios without one stale).
    held_to = data.gate_for(scenario)
    gate = (
        []
        if held_to is None
        else [
            {name: getattr(held_to, name) for name in (*GATE_FIELDS, "include_untrusted")}
            | {"source": source_of(held_to)}
        ]
    )
    # Gold tasks, excluded evaluators and adjudications change what is read without a new
    # judgment.
    left_out = data.left_out(scenario)
    adjudicated = Adjudication.objects.filter(scenario=scenario).aggregate(
        n=Count("pk"), last=Max("set_at")
    )
    shown = json.dumps(
        [scenario.name, scenario.config, judges, left_out, adjudicated, gate],
        sort_keys=True,
        default=str,
    )
    digest = hashlib.sha256(shown.encode()).hexdigest()[:16]
    revised = judged["revised"].isoformat() if judged["revised"] else ""
    return f"{judged['n']}:{judged['last']}:{revised}:{digest}", judged["n"]


def current(scenario: Scenario, options: dict[str, Any]) -> State:
    key = _key(options)
    state, judgments = fingerprint(scenario)
    analysis = _stored(scenario, key, options)
    if analysis.status == AnalysisStatus.DONE and analysis.fingerprint == state:
        return State(analysis, True, judgments)
    resamples = max(options.get("resamples", DEFAULTS["resamples"]), ELO_ROUNDS)
    if judgments <= INLINE_JUDGMENTS and judgments * (resamples + 1) <= INLINE_WORK:
        try:
            _run(analysis, state)
        except Exception:  # stored as failed: the API answers 503 with the reason
            logger.exception("analysis %s failed", analysis.pk)
        return State(analysis, analysis.status == AnalysisStatus.DONE, judgments)
    with transaction.atomic():
        locked = StoredAnalysis.objects.select_for_update().get(pk=analysis.pk)
        waiting = locked.status in (AnalysisStatus.PENDING, AnalysisStatus.RUNNING)
        since = locked.started_at if locked.status == AnalysisStatus.RUNNING else None
        lost = waiting and (since or locked.requested_at) < timezone.now() - LOST_AFTER
        # Queued, running or failed for these judgments already: not again (unless lost).
        asked = locked.wanted == state and (waiting or locked.status == AnalysisStatus.FAILED)
        if lost or not asked:
            locked.status, locked.wanted = AnalysisStatus.PENDING, state
            locked.requested_at, locked.error = timezone.now(), ""
            locked.save(update_fields=["status", "wanted", "requested_at", "error"])
            # Within the team's share of the task workers (``evalplatform.runs.fairshare``).
            transaction.on_commit(
                lambda: fairshare.submit(
                    team_id=scenario.team_id,
                    func=compute,
                    args=[locked.pk],
                    key=f"analysis-{locked.pk}",
                    name=f"analysis-{locked.pk}-{time.time_ns()}",
                )
            )
    return State(locked, False, judgments)


def _stored(scenario: Scenario, key: str, options: dict[str, Any]) -> StoredAnalysis:
    found = StoredAnalysis.objects.filter(scenario=scenario, key=key).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return StoredAnalysis.objects.create(scenario=scenario, key=key, options=options)
    except IntegrityError:  # made by a request at the same moment
        return StoredAnalysis.objects.get(scenario=scenario, key=key)


def compute(analysis_id: int) -> None:
    """The task: compute a stored analysis of the judgments as they are now."""
    analysis = StoredAnalysis.objects.select_related("scenario__team").filter(pk=analysis_id)
    found = analysis.first()
    if found is None:
        return
    state, _ = fingerprint(found.scenario)
    if found.status == AnalysisStatus.DONE and found.fingerprint == state:
        return  # done meanwhile (in a request, or by another task)
    _run(found, state, report=True)


def _plain(value: Any) -> Any:
    """JSON as every database stores it: no NaN or infinity (PostgreSQL refuses them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _run(analysis: StoredAnalysis, state: str, *, report: bool = False) -> None:
    """Compute and store; ``report``: keep ``stage`` and ``progress`` up to date for the
    page (a background computation)."""
    stored = StoredAnalysis.objects.filter(pk=analysis.pk)
    stored.update(
        status=AnalysisStatus.RUNNING,
        started_at=timezone.now(),
        wanted=state,
        stage="loading the judgments",
        progress=0.0,
    )

    def progress(stage: str, share: float) -> None:
        stored.update(stage=stage[:100], progress=round(share, 3))

    began = time.perf_counter()
    try:
        shown = progress if report else None
        result = analyze(analysis.scenario, progress=shown, **analysis.options)
    except Exception as exc:  # stored for the page; the worker's log has the traceback
        analysis.status, analysis.error = AnalysisStatus.FAILED, f"{type(exc).__name__}: {exc}"
        StoredAnalysis.objects.filter(pk=analysis.pk).update(
            status=analysis.status, error=analysis.error
        )
        raise
    analysis.result = _plain(json.loads(json.dumps(result, default=str)))
    analysis.status, analysis.fingerprint, analysis.wanted = AnalysisStatus.DONE, state, state
    analysis.judgments = int(state.split(":")[0])
    analysis.computed_at, analysis.error = timezone.now(), ""
    analysis.seconds = round(time.perf_counter() - began, 3)
    # An update, not a save: a scenario deleted meanwhile takes its analyses with it.
    StoredAnalysis.objects.filter(pk=analysis.pk).update(
        result=analysis.result,
        status=analysis.status,
        fingerprint=state,
        wanted=state,
        judgments=analysis.judgments,
        computed_at=analysis.computed_at,
        error="",
        seconds=analysis.seconds,
        stage="",
        progress=1.0,
    )
