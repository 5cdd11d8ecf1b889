"""The analytics' models: the trust gates for LLM judges (a scenario's own and its team's
default) and the stored analyses."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from evalplatform import validation
from evalplatform.accounts.models import Team
from scenarios.models import Scenario


class GateThresholds(models.Model):
    """The thresholds of a trust gate (docs/analytics.md, "Trust gates"), a scenario's own
    (``TrustGate``) or its team's default (``TeamTrustGate``). A threshold left empty is
    not checked."""

    min_kappa = models.FloatField(
        null=True, blank=True, validators=validation.bounded(-1.0, 1.0),
        help_text="Least chance-corrected agreement with people (Cohen's kappa).",
    )  # fmt: skip
    min_shared_items = models.PositiveIntegerField(
        default=0, validators=validation.bounded(0, validation.SHARED_ITEMS_MAX),
        help_text="Least items judged by both the judge and people.",
    )  # fmt: skip
    max_flip_rate = models.FloatField(
        null=True, blank=True, validators=validation.bounded(0.0, 1.0),
        help_text="Most position-swap flips (share of pairs judged both ways).",
    )  # fmt: skip
    max_parse_failure_rate = models.FloatField(
        null=True, blank=True, validators=validation.bounded(0.0, 1.0),
        help_text="Most replies that were no valid verdict (share of calls).",
    )  # fmt: skip
    min_self_consistency = models.FloatField(
        null=True, blank=True, validators=validation.bounded(0.0, 1.0),
        help_text="Least share of repeated calls that gave the same verdict.",
    )  # fmt: skip
    min_adjudicated_accuracy = models.FloatField(
        null=True, blank=True, validators=validation.bounded(0.0, 1.0),
        help_text="Least share of adjudicated answers the judge gave.",
    )  # fmt: skip
    include_untrusted = models.BooleanField(
        default=False, help_text="Count untrusted judges' verdicts in rankings anyway."
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class TrustGate(GateThresholds):
    """A scenario's thresholds for trusting its LLM judges (docs/analytics.md, "Trust
    gates"): a judge whose card falls below any of them is untrusted, and its verdicts are
    left out of the scenario's rankings and of regression reports unless a manager opts in
    (``include_untrusted`` here for every judge of the scenario, or the judge's own). It
    overrides its team's default gate (``TeamTrustGate``) entirely."""

    team_lookup = "scenario__team"

    scenario = models.OneToOneField(Scenario, on_delete=models.CASCADE, related_name="trust_gate")

    def __str__(self) -> str:
        return f"trust gate of {self.scenario}"


class TeamTrustGate(GateThresholds):
    """A team's default trust gate: the thresholds of every scenario of the team that has
    no gate of its own."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="trust_gate")

    def __str__(self) -> str:
        return f"default trust gate of {self.team}"


class AnalysisStatus(models.TextChoices):
    PENDING = "pending", "Waiting for a worker"
    RUNNING = "running", "Computing"
    DONE = "done", "Computed"
    FAILED = "failed", "Failed"


class StoredAnalysis(models.Model):
    """A scenario's analytics for one set of options, computed once and kept: ``result``
    is the JSON of the judgments ``fingerprint`` names (their count and newest id, the
    judges'); new judgments make it stale, and the next request has it recomputed in the
    background while the last result is still shown."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="analyses")
    key = models.CharField(max_length=64)  # the options, hashed
    options = models.JSONField(default=dict)
    status = models.CharField(
        max_length=10, choices=AnalysisStatus.choices, default=AnalysisStatus.PENDING
    )
    # What is being (or was last) computed, and what ``result`` is of.
    wanted = models.CharField(max_length=100, blank=True)
    fingerprint = models.CharField(max_length=100, blank=True)
    result = models.JSONField(null=True, blank=True)
    judgments = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    requested_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    computed_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)
    # While running in the background: what is being computed and the share done (0 to 1).
    stage = models.CharField(max_length=100, blank=True)
    progress = models.FloatField(default=0.0)

    class Meta:
        verbose_name_plural = "stored analyses"
        constraints = [
            models.UniqueConstraint(fields=["scenario", "key"], name="one_analysis_per_options")
        ]

    def __str__(self) -> str:
        return f"{self.scenario} analysis {self.key[:8]}"
