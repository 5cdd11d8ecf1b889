"""The quality checks' model: the evaluators a manager left out of a scenario's analytics."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from scenarios.models import Scenario


class RaterExclusion(models.Model):
    """An evaluator whose judgments of a scenario the analytics leave out (their judgments
    stay, and the quality figures still show them). Deleting the row takes them back in;
    both are audited."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="exclusions")
    evaluator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    excluded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["scenario_id", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["scenario", "evaluator"], name="one_exclusion_per_evaluator"
            )
        ]

    def __str__(self) -> str:
        return f"{self.evaluator} excluded from {self.scenario}"
