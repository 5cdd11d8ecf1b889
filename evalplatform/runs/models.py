"""The execution engine's models: the registry of provider batches."""

from __future__ import annotations

from django.db import models

from evalplatform.accounts.models import Team
from evalplatform.providers.models import ProviderConnection


class BatchState(models.TextChoices):
    SUBMITTING = "submitting", "Submitting"
    VALIDATING = "validating", "Validating"
    IN_PROGRESS = "in_progress", "In progress"
    FINALIZING = "finalizing", "Finalizing"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    EXPIRED = "expired", "Expired"
    CANCELLING = "cancelling", "Cancelling"
    CANCELLED = "cancelled", "Cancelled"
    LOST = "lost", "Not found at the provider"


class ProviderBatch(models.Model):
    """One batch at a provider, recorded before it is sent: a row in ``submitting`` whose
    worker died before the provider's id was written is found again at the provider
    (``Batches.find``) rather than sent twice. Polling reads this table only, so it resumes
    after any restart. ``work_kind``/``work_id`` name what the batch is for (a generation
    job, a judge run); the work's own rows point back here."""

    team_lookup = "team"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="provider_batches")
    connection = models.ForeignKey(
        ProviderConnection, on_delete=models.CASCADE, related_name="batches"
    )
    work_kind = models.CharField(max_length=40)
    work_id = models.PositiveBigIntegerField()
    model_id = models.CharField(max_length=200)
    name = models.CharField(max_length=120, unique=True, help_text="Sent to the provider.")
    protocol = models.CharField(max_length=20)
    remote_id = models.CharField(max_length=200, blank=True)
    input_file_id = models.CharField(max_length=200, blank=True)
    state = models.CharField(
        max_length=20, choices=BatchState.choices, default=BatchState.SUBMITTING
    )
    provider_state = models.CharField(max_length=60, blank=True)
    request_count = models.PositiveIntegerField(default=0)
    submitted_bytes = models.PositiveBigIntegerField(default=0)
    succeeded = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    # Gemini returns inline results in input order without keys: the order is kept here.
    custom_ids = models.JSONField(default=list, blank=True)
    round = models.PositiveIntegerField(default=1, help_text="1 = first submission.")
    error_message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    polled_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # Results recorded (or the batch given up): nothing more to do with it.
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "provider batches"
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["work_kind", "work_id"]),
            models.Index(fields=["closed_at", "state"]),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["connection", "remote_id"],
                condition=~models.Q(remote_id=""),
                name="batch_remote_id_once",
            ),
            models.CheckConstraint(
                condition=models.Q(state__in=BatchState.values), name="batch_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.remote_id or self.state})"

    @property
    def is_open(self) -> bool:
        return self.closed_at is None


class TeamTask(models.Model):
    """A team's task on the shared task workers (``evalplatform.runs.fairshare``): a row
    while it runs, holding one of the team's shares until ``lease_until`` (renewed while it
    runs), or while it waits for one (``running`` false; one waiting row per ``key``).
    Tasks in the broker's queue have no row: they take a share, or wait, when a worker
    picks them up."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="tasks")
    key = models.CharField(max_length=200, help_text="What the task is for.")
    func = models.CharField(max_length=200)
    args = models.JSONField(default=list, blank=True)
    running = models.BooleanField(default=False)
    queued_at = models.DateTimeField(help_text="When it first waited (or started).")
    # A waiting task handed to the broker again when a share freed: not again for a while.
    dispatched_at = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["queued_at", "pk"]
        indexes = [models.Index(fields=["team", "running", "queued_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["key"], condition=models.Q(running=False), name="team_task_waits_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({'running' if self.running else 'waiting'})"
