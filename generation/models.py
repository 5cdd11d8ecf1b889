"""Generation jobs: items x prompt versions x model configurations x repetitions x temperatures.

Every cell of the matrix is a ``GenerationOutput`` row created with the job, with a
deterministic ``custom_id``; progress is completed / total and a restarted runner knows
exactly what is left. Database constraints keep one output per cell.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from evalplatform import validation
from evalplatform.accounts.models import Team
from evalplatform.prompts.models import PromptVersion
from evalplatform.providers.models import LLMModel


class JobStatus(models.TextChoices):
    CREATED = "created", "Created"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class JobMode(models.TextChoices):
    LIVE = "live", "Live"
    BATCH = "batch", "Batch (half price, slower)"


# The ``work_kind`` of generation jobs' provider batches (``runs.ProviderBatch``).
BATCH_WORK_KIND = "generation"


class SourceKind(models.TextChoices):
    SCENARIO = "scenario", "Items of a scenario"
    MANUAL = "manual", "Manual upload"
    PROMPT_ONLY = "prompt_only", "Prompt only"
    JUDGE = "judge", "Tasks of a scenario, for an LLM judge"
    JUDGE_FILE = "judge_file", "A judge file: each row its own request"


# Jobs that do not hold their owner's one running slot: a judge run's (judges of one
# scenario run side by side) and a judge file's (its requests were submitted together).
SLOT_FREE_SOURCES = ("judge", "judge_file")
# A running job holds its owner's slot while it occupies task workers: a live job of the
# owner's own items. A batch job waits at the provider and holds none.
HOLDS_SLOT = models.Q(mode="live") & ~models.Q(source_kind__in=SLOT_FREE_SOURCES)


class GenerationJob(models.Model):
    team_lookup = "team"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="generation_jobs")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="generation_jobs"
    )
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=20, choices=JobStatus.choices, default=JobStatus.CREATED)
    mode = models.CharField(max_length=10, choices=JobMode.choices, default=JobMode.LIVE)
    source_kind = models.CharField(max_length=20, choices=SourceKind.choices)
    source_meta = models.JSONField(default=dict, blank=True)
    repetitions = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(100)]
    )
    temperatures = models.JSONField(default=list)
    max_tokens = models.PositiveIntegerField(
        null=True, blank=True, validators=validation.bounded(1, validation.MAX_TOKENS)
    )
    budget_usd = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=validation.bounded(validation.USD_MIN, validation.USD_MAX),
    )
    max_retries = models.PositiveIntegerField(default=3, validators=[MaxValueValidator(10)])
    # Batch mode: cells that failed in a batch run again live instead of in a new batch.
    finish_live = models.BooleanField(default=False)
    concurrency = models.PositiveIntegerField(
        default=8, validators=[MinValueValidator(1), MaxValueValidator(256)]
    )
    config = models.JSONField(default=dict, help_text="Frozen snapshot of the configuration.")
    estimate = models.JSONField(default=dict, blank=True)
    total_cells = models.PositiveIntegerField(default=0)
    completed_cells = models.PositiveIntegerField(default=0)
    failed_cells = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    # Budget held for cells in flight; spend + reserved never passes the budget.
    reserved_usd = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    # The runner holding the job, and until when (renewed while it runs).
    runner_token = models.CharField(max_length=32, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    status_message = models.CharField(max_length=500, blank=True)
    # Its items and cells are still being written, a chunk per transaction (no write holds
    # SQLite's one write lock for long): hidden from lists and pages, and it cannot start.
    writing = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["owner", "status", "queued_at"])]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=JobStatus.values), name="job_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(completed_cells__lte=models.F("total_cells")),
                name="job_completed_within_total",
            ),
            # One running job per user among those that occupy workers (the services lock
            # the owner row to decide it).
            models.UniqueConstraint(
                fields=["owner"],
                condition=models.Q(status="running") & HOLDS_SLOT,
                name="one_running_live_job_per_owner",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def holds_slot(self) -> bool:
        """Whether running this job takes its owner's one running slot."""
        return self.mode == JobMode.LIVE and self.source_kind not in SLOT_FREE_SOURCES

    @property
    def progress(self) -> float:
        done = self.completed_cells + self.failed_cells
        return round(done / self.total_cells, 4) if self.total_cells else 0.0


class GenerationItem(models.Model):
    """One input item of a job (an uploaded row, a scenario item, or the prompt-only item)."""

    team_lookup = "job__team"

    job = models.ForeignKey(GenerationJob, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    item_id = models.CharField(max_length=200)
    data = models.JSONField(default=dict)

    class Meta:
        ordering = ["job_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["job", "item_id"], name="item_job_item_id_unique"),
            models.UniqueConstraint(fields=["job", "position"], name="item_job_position_unique"),
        ]

    def __str__(self) -> str:
        return f"Item {self.item_id}"


class JobPrompt(models.Model):
    """A prompt version used by a job (the version is locked while the job exists)."""

    job = models.ForeignKey(GenerationJob, on_delete=models.CASCADE, related_name="prompts")
    position = models.PositiveIntegerField()
    # None: the rows carry their own requests (a judge file), no prompt is rendered.
    prompt_version = models.ForeignKey(
        PromptVersion, on_delete=models.PROTECT, related_name="+", null=True, blank=True
    )
    label = models.CharField(max_length=250)

    class Meta:
        ordering = ["job_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["job", "position"], name="jobprompt_position_unique")
        ]

    def __str__(self) -> str:
        return self.label


class JobModel(models.Model):
    """A model configuration of a job: a model plus parameter overrides (e.g. thinking on)."""

    job = models.ForeignKey(GenerationJob, on_delete=models.CASCADE, related_name="models")
    position = models.PositiveIntegerField()
    llm_model = models.ForeignKey(LLMModel, on_delete=models.PROTECT, related_name="+")
    label = models.CharField(max_length=250)
    params = models.JSONField(default=dict, blank=True)
    # The JSON schema replies are held to, ``{"name": ..., "schema": {...}}`` (OpenAI's
    # ``json_schema`` shape), in no provider's words: the adapter writes it (a strict
    # ``response_format``, a forced tool, ``responseSchema``). Null: free text.
    response_schema = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["job_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["job", "position"], name="jobmodel_position_unique")
        ]

    def __str__(self) -> str:
        return self.label


class OutputStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"


class GenerationOutput(models.Model):
    """One cell of the matrix."""

    team_lookup = "job__team"

    job = models.ForeignKey(GenerationJob, on_delete=models.CASCADE, related_name="outputs")
    item = models.ForeignKey(GenerationItem, on_delete=models.CASCADE, related_name="outputs")
    prompt = models.ForeignKey(JobPrompt, on_delete=models.CASCADE, related_name="outputs")
    model_config = models.ForeignKey(JobModel, on_delete=models.CASCADE, related_name="outputs")
    repetition = models.PositiveIntegerField(default=0)
    temperature = models.FloatField(null=True, blank=True)  # None: none was sent
    custom_id = models.CharField(max_length=64)
    status = models.CharField(
        max_length=20, choices=OutputStatus.choices, default=OutputStatus.PENDING
    )
    content = models.TextField(blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    # What the provider reported: the model snapshot that answered ("" when it named none)
    # and the reasoning (thinking) tokens counted apart (null when it counted none).
    model_version = models.CharField(max_length=200, blank=True)
    reasoning_tokens = models.PositiveIntegerField(
        null=True, blank=True, validators=validation.bounded(0, validation.INT_MAX)
    )
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    reserved_usd = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    runner_token = models.CharField(max_length=32, blank=True)  # the runner that claimed it
    # The provider batch the cell is in while it runs in batch mode.
    batch = models.ForeignKey(
        "runs.ProviderBatch",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # A live reply's time: in all (every attempt and the waits between them), and of the
    # attempt that answered. Batch results have neither.
    processing_time_ms = models.PositiveIntegerField(null=True, blank=True)
    last_attempt_ms = models.PositiveIntegerField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    error_kind = models.CharField(max_length=40, blank=True)
    error_message = models.TextField(blank=True)
    # The reply read by the job's reply format (``generation.replies``): its fields
    # ({name: value}, null when none was read), how it went ("" when the job has no reply
    # format) and, short of "ok"/"extracted", why.
    parsed = models.JSONField(null=True, blank=True)
    parse_status = models.CharField(max_length=12, blank=True)
    parse_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job_id", "pk"]
        indexes = [
            # (job, status, id): a job's pending cells in id order straight from the index (the
            # live step's claim); without id, PostgreSQL walked the primary key past every
            # finished cell (114 ms a step at 50,000 cells; 0.25 ms with it).
            models.Index(fields=["job", "status", "id"], name="output_job_status_id"),
            # A job's outputs in order (exports, the outputs list): read from the index, not
            # sorted (on PostgreSQL a sort of a large job's rows spills to disk before the
            # first row). SQLite's job index already holds the rowid in order.
            models.Index(fields=["job", "id"], name="output_job_in_order"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "item", "prompt", "model_config", "repetition", "temperature"],
                name="output_one_per_cell",
            ),
            models.UniqueConstraint(fields=["job", "custom_id"], name="output_custom_id_unique"),
            models.CheckConstraint(
                condition=models.Q(status__in=OutputStatus.values), name="output_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.custom_id
