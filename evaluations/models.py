"""Evaluations: assignments of tasks to evaluators, invitations, LLM judges and their runs,
and judgments in one table: evaluators', LLM judges' (each judge a rater of its own) and
imported ones (external raters)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from evalplatform import validation
from evalplatform.accounts.models import Team
from scenarios.models import Scenario, Task


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


class AssignmentStatus(models.TextChoices):
    RESERVED = "reserved", "Reserved"
    DONE = "done", "Done"
    SKIPPED = "skipped", "Skipped"
    EXPIRED = "expired", "Expired"


class Assignment(models.Model):
    """A task handed to one evaluator. While ``reserved`` (until ``expires_at``) it holds one
    of the task's ``overlap`` places; an evaluator is never handed the same task twice."""

    team_lookup = "task__scenario__team"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="assignments")
    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="assignments")
    evaluator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments"
    )
    status = models.CharField(
        max_length=10, choices=AssignmentStatus.choices, default=AssignmentStatus.RESERVED
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["scenario", "evaluator", "status"]),
            models.Index(fields=["status", "expires_at"]),
        ]
        constraints = [
            models.UniqueConstraint(fields=["task", "evaluator"], name="one_assignment_per_task"),
            # An evaluator holds one reservation per scenario, however many requests race.
            models.UniqueConstraint(
                fields=["scenario", "evaluator"],
                condition=models.Q(status="reserved"),
                name="one_reservation_per_evaluator",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=AssignmentStatus.values),
                name="assignment_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.evaluator} · {self.task}"


class RaterKind(models.TextChoices):
    HUMAN = "human", "Evaluator"
    EXTERNAL = "external", "External rater"
    JUDGE = "judge", "LLM judge"


class LLMJudge(models.Model):
    """An LLM judge of one scenario: a model configuration (model + parameters such as
    thinking) and a versioned judge prompt (the rubric as its System block, a task template
    as the rest), asked at one or more temperatures, ``repetitions`` times, and for pairs and
    rankings optionally in both presentation orders (``swap``). Each judge is a rater of its
    own; several may score the same scenario. Its runs are generation jobs of the one
    execution engine (live or batch, retries, budget, events)."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="judges")
    name = models.CharField(max_length=200)
    prompt_version = models.ForeignKey(
        "prompts.PromptVersion", on_delete=models.PROTECT, related_name="+"
    )
    llm_model = models.ForeignKey("providers.LLMModel", on_delete=models.PROTECT, related_name="+")
    params = models.JSONField(default=dict, blank=True, help_text="e.g. thinking settings.")
    temperatures = models.JSONField(default=list)
    repetitions = models.PositiveIntegerField(
        default=1, validators=validation.bounded(1, validation.JUDGE_REPETITIONS_MAX)
    )
    swap = models.BooleanField(default=False, help_text="Judge each pair in both orders.")
    mode = models.CharField(max_length=10, default="live")
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
    # How its replies are read (evaluations.judges.verdicts.REPLY_FORMATS); {}: the
    # platform's own JSON.
    reply_format = models.JSONField(default=dict, blank=True)
    # A manager's opt-in: this judge's verdicts count in the rankings even when it falls
    # below its scenario's trust gate (``TrustGate``); audited.
    include_untrusted = models.BooleanField(
        default=False, help_text="Count its verdicts in rankings even when untrusted."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judges_created"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name, verbose_name_plural = "LLM judge", "LLM judges"
        ordering = ["scenario_id", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["scenario", "name"], name="judge_name_per_scenario")
        ]

    def __str__(self) -> str:
        return self.name


class JudgeRun(models.Model):
    """One run of a judge over (some of) its scenario's tasks: a generation job whose items
    are the tasks in their presentation orders."""

    team_lookup = "judge__scenario__team"

    judge = models.ForeignKey(LLMJudge, on_delete=models.CASCADE, related_name="runs")
    job = models.OneToOneField(
        "generation.GenerationJob", on_delete=models.CASCADE, related_name="judge_run"
    )
    tasks = models.CharField(max_length=20, default="unjudged")
    # The judge's configuration when the run started (``evaluations.analytics.cards.
    # configuration``): what its judge card was measured with.
    configuration = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.judge} · {self.job}"


class ParseStatus(models.TextChoices):
    OK = "ok", "JSON"
    EXTRACTED = "extracted", "JSON found in fences or prose"
    FAILED = "failed", "Not a valid verdict"


class Judgment(models.Model):
    """One answer to one task (by an evaluator, an external rater or an LLM judge).
    ``presented`` lists the variant ids in the order the rater saw them; ``payload`` is the
    answer in the scenario type's shape (rating ``{"scores": {dim: n}, "justifications":
    {dim: text}}``, comparison ``{"winner": "A" | "B" | "tie"}`` with A the variant shown
    first, ranking ``{"ranking": [variant ids, best first]}``, labeling ``{"labels": [...],
    "text": ...}``). A judge's reply that is no valid verdict is kept with ``parse_status``
    failed and an empty payload (its raw text is on ``output``)."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="judgments")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="judgments")
    rater_kind = models.CharField(max_length=10, choices=RaterKind.choices)
    evaluator = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="judgments",
    )
    external_rater = models.ForeignKey(
        ExternalRater, null=True, blank=True, on_delete=models.CASCADE, related_name="judgments"
    )
    judge = models.ForeignKey(
        LLMJudge, null=True, blank=True, on_delete=models.CASCADE, related_name="judgments"
    )
    # A judge's reply: the output holds its raw text, tokens and cost.
    output = models.OneToOneField(
        "generation.GenerationOutput",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="judgment",
    )
    repetition = models.PositiveIntegerField(default=0)
    temperature = models.FloatField(null=True, blank=True)
    swapped = models.BooleanField(
        default=False, help_text="Shown in the reverse of the task's order (position swap)."
    )
    parse_status = models.CharField(
        max_length=10, choices=ParseStatus.choices, default=ParseStatus.OK
    )
    parse_error = models.CharField(max_length=500, blank=True)
    presented = models.JSONField(default=list)
    payload = models.JSONField(default=dict)
    rationale = models.TextField(blank=True)
    # An evaluator's note to the managers about the task (not part of the answer).
    comment = models.TextField(blank=True)
    time_spent_ms = models.PositiveIntegerField(
        null=True, blank=True, validators=validation.bounded(0, validation.TIME_SPENT_MAX_MS)
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # When the evaluator last revised it (the earlier answers: ``revisions``).
    revised_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["scenario_id", "pk"]
        indexes = [
            models.Index(fields=["scenario", "rater_kind"]),
            models.Index(fields=["judge", "task"]),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "evaluator"],
                condition=models.Q(evaluator__isnull=False),
                name="one_judgment_per_evaluator_and_task",
            ),
            # A judge answers each task once per order, repetition and temperature.
            models.UniqueConstraint(
                fields=["judge", "task", "swapped", "repetition", "temperature"],
                condition=models.Q(judge__isnull=False),
                name="one_judgment_per_judge_call",
            ),
        ]

    def __str__(self) -> str:
        return f"judgment {self.pk} of {self.task}"


class JudgmentRevision(models.Model):
    """An earlier answer of a judgment its evaluator revised: what it said, and from when
    (``answered_at``) until when (``replaced_at``). The judgment row holds the latest answer,
    which analytics and exports read."""

    team_lookup = "judgment__scenario__team"

    judgment = models.ForeignKey(Judgment, on_delete=models.CASCADE, related_name="revisions")
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


# --- judge files: the OpenAI Files + Batches API the platform serves -------------------------
def _public_id(prefix: str) -> str:
    import secrets

    return f"{prefix}{secrets.token_hex(12)}"


class FilePurpose(models.TextChoices):
    BATCH = "batch", "Batch input"
    BATCH_OUTPUT = "batch_output", "Batch output or errors"


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
        LLMJudge, null=True, blank=True, on_delete=models.SET_NULL, related_name="judge_batches"
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


# --- the budget scheduler (evaluations.planner) ------------------------------------------------
class PlanStatus(models.TextChoices):
    PROPOSED = "proposed", "Proposed"
    ACCEPTED = "accepted", "Accepted"
    # A re-plan not proposed (``reason``): the remaining budget is spent, the target is
    # reached, or nothing more fits.
    SKIPPED = "skipped", "Skipped"


class BudgetPlan(models.Model):
    """A proposal of the scheduler: the next batch of work (which pairs, on which items, how
    many tasks, for people or which judge) that narrows the ``question``'s interval most for
    the ``budget``, with its projected cost and width. It is computed from the verdicts and
    tasks ``fingerprint`` names; accepting it once they changed is refused (propose again).
    ``submitted``: what accepting made (the tasks, the judges' runs)."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="budget_plans")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(
        max_length=10, choices=PlanStatus.choices, default=PlanStatus.PROPOSED
    )
    question = models.JSONField(default=dict)
    budget = models.JSONField(default=dict)
    fingerprint = models.CharField(max_length=100)
    proposal = models.JSONField(default=dict)
    submitted = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # Re-plans (``evaluations.planner.replan``): computed when an accepted plan's results
    # arrive, for the ``chain``'s question (its first plan) with the budget it has left;
    # ``replans``: the accepted plan it follows. Never accepted by themselves.
    chain = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="chain_plans"
    )
    replans = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="replanned_by"
    )
    trigger = models.CharField(max_length=20, blank=True, default="")  # judge_run or answers
    new_verdicts = models.PositiveIntegerField(default=0)
    verdicts_seen = models.PositiveIntegerField(default=0)  # the chain's verdicts then
    reason = models.CharField(max_length=40, blank=True, default="")  # why skipped
    spending = models.JSONField(null=True, blank=True)  # spent, committed, remaining

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=PlanStatus.values), name="budget_plan_status_valid"
            ),
            # One pending re-plan per chain at a time.
            models.UniqueConstraint(
                fields=["chain"],
                condition=models.Q(status="proposed", chain__isnull=False),
                name="budget_plan_one_pending_replan",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scenario} plan {self.pk}"
