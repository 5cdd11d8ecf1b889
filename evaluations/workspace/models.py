"""The workspace's models: the earlier answers of revised judgments and the evaluators'
flags on tasks."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from evalplatform import validation
from scenarios.models import Scenario, Task


class JudgmentRevision(models.Model):
    """An earlier answer of a judgment its evaluator revised: what it said, and from when
    (``answered_at``) until when (``replaced_at``). The judgment row holds the latest answer,
    which analytics and exports read."""

    team_lookup = "judgment__scenario__team"

    judgment = models.ForeignKey(
        "evaluations.Judgment", on_delete=models.CASCADE, related_name="revisions"
    )
    payload = models.JSONField(default=dict)
    rationale = models.TextField(blank=True)
    comment = models.TextField(blank=True)
    time_spent_ms = models.PositiveIntegerField(
        null=True, blank=True, validators=validation.bounded(0, validation.TIME_SPENT_MAX_MS)
    )
    answered_at = models.DateTimeField()
    replaced_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["judgment_id", "pk"]

    def __str__(self) -> str:
        return f"{self.judgment} before {self.replaced_at:%Y-%m-%d %H:%M}"


class FlagReason(models.TextChoices):
    BROKEN = "broken", "Broken (missing or garbled content)"
    UNCLEAR = "unclear", "Unclear (cannot be answered as asked)"
    OFFENSIVE = "offensive", "Offensive"


class TaskFlag(models.Model):
    """An evaluator's flag on a task, with a reason and an optional note, for the managers.
    A task flagged instead of answered was given back like a skipped one."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="flags")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="flags")
    evaluator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="task_flags"
    )
    reason = models.CharField(max_length=20, choices=FlagReason.choices)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["scenario_id", "-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["task", "evaluator"], name="one_flag_per_evaluator"),
            models.CheckConstraint(
                condition=models.Q(reason__in=FlagReason.values), name="flag_reason_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reason} · {self.task}"
