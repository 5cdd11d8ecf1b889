"""The invitations' model: an invitation by email to evaluate one scenario."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from scenarios.models import Scenario


class Invitation(models.Model):
    """An invitation by email to evaluate one scenario. The link carries a secret token
    (only its SHA-256 is stored); whoever accepts it becomes an evaluator of this scenario
    only (not a member of the team), until the invitation is withdrawn."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="invitations_sent",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    emailed_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="invitations_accepted",
    )
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["accepted_by", "scenario"])]

    def __str__(self) -> str:
        return f"{self.email} → {self.scenario}"

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "withdrawn"
        if self.accepted_by_id is not None:
            return "accepted"
        if self.expires_at <= timezone.now():
            return "expired"
        return "pending"
