"""The manager's model: the raters known only by name, whose judgments were imported."""

from __future__ import annotations

from django.db import models

from evalplatform.accounts.models import Team


class ExternalRater(models.Model):
    """A rater known only by name, from imported judgments collected elsewhere."""

    team_lookup = "team"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="external_raters")
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="external_rater_per_team")
        ]

    def __str__(self) -> str:
        return self.name
