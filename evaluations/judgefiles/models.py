"""The judge files' models: the OpenAI Files + Batches API the platform serves (files and
their lines, batches, their refused rows and the verdicts read from their replies)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from evalplatform import validation
from evalplatform.accounts.models import Team


def _public_id(prefix: str) -> str:
    import secrets

    return f"{prefix}{secrets.token_hex(12)}"


class FilePurpose(models.TextChoices):
    BATCH = "batch", "Batch input"
    BATCH_OUTPUT = "batch_output", "Batch output or errors"


class JudgeFileQuerySet(models.QuerySet["JudgeFile"]):
    def written(self) -> JudgeFileQuerySet:
        """Files whose every line is written: one being written (a chunk of lines per
        transaction) has ``lines`` 0 until its last, and is no one's to see."""
        return self.filter(lines__gt=0)


class JudgeFile(models.Model):
    """A file of the OpenAI Files API: an uploaded batch input (one request per line), or a
    batch's output or error file. Its lines are rows of ``JudgeFileLine`` (every worker
    reads them, on one machine or many)."""

    team_lookup = "team"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="judge_files")
    public_id = models.CharField(max_length=40, unique=True)
    purpose = models.CharField(max_length=20, choices=FilePurpose.choices)
    filename = models.CharField(max_length=255)
    bytes = models.BigIntegerField(default=0)
    lines = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = JudgeFileQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.filename} ({self.public_id})"

    def save(self, *args, **kwargs):
        if not self.public_id:
            self.public_id = _public_id("file-")
        super().save(*args, **kwargs)


class JudgeFileLine(models.Model):
    """One line of a judge file, as sent (invalid UTF-8 and NUL characters replaced)."""

    team_lookup = "file__team"

    file = models.ForeignKey(JudgeFile, on_delete=models.CASCADE, related_name="rows")
    number = models.PositiveIntegerField()  # from 1
    text = models.TextField()

    class Meta:
        ordering = ["file", "number"]
        constraints = [
            models.UniqueConstraint(fields=["file", "number"], name="judge_file_line_unique")
        ]

    def __str__(self) -> str:
        return f"line {self.number}"


class BatchStatus(models.TextChoices):
    """OpenAI's batch statuses."""

    VALIDATING = "validating", "Validating"
    FAILED = "failed", "Failed"
    IN_PROGRESS = "in_progress", "In progress"
    FINALIZING = "finalizing", "Finalizing"
    COMPLETED = "completed", "Completed"
    EXPIRED = "expired", "Expired"
    CANCELLING = "cancelling", "Cancelling"
    CANCELLED = "cancelled", "Cancelled"


class JudgeBatch(models.Model):
    """A batch of the OpenAI Batches API: the valid rows of its input file run as one
    generation job (``job``); malformed rows and model errors go to its error file, the
    replies to its output file, and each reply is read into a ``JudgeVerdict``."""

    team_lookup = "team"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="judge_batches")
    public_id = models.CharField(max_length=40, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    input_file = models.ForeignKey(JudgeFile, on_delete=models.PROTECT, related_name="batches")
    endpoint = models.CharField(max_length=100, default="/v1/chat/completions")
    completion_window = models.CharField(max_length=10, default="24h")
    metadata = models.JSONField(default=dict, blank=True)
    budget_usd = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=validation.bounded(validation.USD_MIN, validation.USD_MAX),
    )
    live = models.BooleanField(default=False)  # asked to run live, not through batch APIs
    # The scenario judge whose judgments the rows' verdicts become (each row's
    # ``metadata.task`` names one of its scenario's tasks).
    judge = models.ForeignKey(
        "evaluations.LLMJudge",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="judge_batches",
    )
    # A re-submission of another batch's failed rows.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="resubmissions"
    )
    status = models.CharField(
        max_length=20, choices=BatchStatus.choices, default=BatchStatus.VALIDATING
    )
    job = models.OneToOneField(
        "generation.GenerationJob",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="judge_batch",
    )
    # Validation's progress, a chunk of lines per transaction: the job it writes (``job``
    # once validation ends) and the last input line it has read.
    draft = models.ForeignKey(
        "generation.GenerationJob",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    validated_through = models.PositiveIntegerField(default=0)
    output_file = models.ForeignKey(
        JudgeFile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    error_file = models.ForeignKey(
        JudgeFile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    total = models.PositiveIntegerField(default=0)
    invalid = models.PositiveIntegerField(default=0)  # rows refused when validated
    completed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    errors = models.JSONField(null=True, blank=True)  # why the whole batch failed
    created_at = models.DateTimeField(default=timezone.now)
    in_progress_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    finalizing_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    cancelling_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "judge batches"

    def __str__(self) -> str:
        return self.public_id

    def save(self, *args, **kwargs):
        if not self.public_id:
            self.public_id = _public_id("batch_")
        super().save(*args, **kwargs)


class JudgeRowError(models.Model):
    """A row of a batch's input that could not run: refused when validated (``line`` and
    why), kept for the error file and for re-submission."""

    team_lookup = "batch__team"

    batch = models.ForeignKey(JudgeBatch, on_delete=models.CASCADE, related_name="row_errors")
    line = models.PositiveIntegerField()
    custom_id = models.CharField(max_length=200, blank=True)
    code = models.CharField(max_length=40)
    message = models.TextField()

    class Meta:
        ordering = ["batch", "line"]

    def __str__(self) -> str:
        return f"line {self.line}: {self.code}"


class JudgeVerdict(models.Model):
    """A reply of a batch's row read as a verdict: ``score``, ``verdict``, ``rationale`` and
    the reply's other JSON fields (``fields``); ``parsed`` false keeps an unreadable reply
    flagged (its raw text is the output's)."""

    team_lookup = "batch__team"

    batch = models.ForeignKey(JudgeBatch, on_delete=models.CASCADE, related_name="verdicts")
    output = models.OneToOneField(
        "generation.GenerationOutput", on_delete=models.CASCADE, related_name="judge_verdict"
    )
    custom_id = models.CharField(max_length=200)
    line = models.PositiveIntegerField()
    score = models.FloatField(null=True, blank=True)
    verdict = models.CharField(max_length=200, blank=True)
    rationale = models.TextField(blank=True)
    fields = models.JSONField(default=dict, blank=True)
    parsed = models.BooleanField(default=True)
    problem = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["batch", "line"]
        indexes = [models.Index(fields=["batch", "custom_id"])]

    def __str__(self) -> str:
        return self.custom_id
