"""The review's model: a manager's adjudicated answer to a task."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from scenarios.models import Scenario, Task


class Adjudication(models.Model):
    """A manager's answer to one task, the reference its raters are held to (exports,
    analytics). ``presented`` is the task's own order (its variant ids), under whose keys the
    answer was checked by the scenario type's strict check; ``payload`` is in the stored
    shape of ``Judgment.payload``. Setting it again keeps the earlier answers in ``history``
    (oldest first); every change is also in the audit log."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="adjudications")
    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="adjudication")
    presented = models.JSONField(default=list)
    payload = models.JSONField(default=dict)
    note = models.TextField(blank=True)
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    set_at = models.DateTimeField(default=timezone.now)
    # The answers it replaced: [{"payload", "note", "set_by", "set_at"}], oldest first.
    history = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["scenario_id", "task_id"]

    def __str__(self) -> str:
        return f"adjudication of {self.task}"
