"""The models every sub-package of ``evaluations`` reads: the tasks handed to evaluators
(``Assignment``), the LLM judges and their runs, and the judgments in one table: evaluators',
LLM judges' (each judge a rater of its own) and imported ones (external raters).

The judges' models are here rather than in ``evaluations.judges`` because the analytics read
them while the judges' pages show the analytics' trust cards (judges -> analytics); and
``Assignment`` because the invitations release an evaluator's reservations while the
workspace asks the invitations who may evaluate (workspace -> invitations). In either
sub-package they would close an import cycle between siblings. Like every models module of
the app, it imports no other module of ``evaluations``: ``Judgment.external_rater`` names its
model (``evaluations.manager.models``) as a string."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from evalplatform import validation
from scenarios.models import Scenario, Task


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
        "evaluations.ExternalRater",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="judgments",
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
            # The same for a call that sent no temperature (NULLs are distinct in the one
            # above, on SQLite and PostgreSQL alike).
            models.UniqueConstraint(
                fields=["judge", "task", "swapped", "repetition"],
                condition=models.Q(judge__isnull=False, temperature__isnull=True),
                name="one_judgment_per_judge_call_without_temperature",
            ),
        ]

    def __str__(self) -> str:
        return f"judgment {self.pk} of {self.task}"
