"""Scenarios: what people (and LLM judges) evaluate.

A ``Scenario`` of one type (rating, ranking, comparison, labeling) holds ``ScenarioItem``s
(the shared context, e.g. a generation job's source item) with their ``Variant``s (the
outputs, with the model and prompt that made them kept, and hidden from evaluators in blind
mode). ``Task``s are what one rater answers: a variant to rate or label, a pair to compare in
a recorded presentation order, or an item's variants to rank in a recorded order. Tasks are
made when the scenario is created, from its seeded design, so the design is reproducible.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from evalplatform import validation
from evalplatform.accounts.models import Team, TeamGroup
from scenarios.types import registry

# The choices of ``Scenario.type``: one member per type of ``scenarios.types`` (RATING =
# "rating", ...), so that a new type is one new module there.
ScenarioType = models.TextChoices(  # type: ignore[call-overload]
    "ScenarioType",
    [(value.upper(), (value, label)) for value, label in registry.choices()],
    module=__name__,
)


class ScenarioTypeField(models.CharField):
    """``Scenario.type``: its choices are the registry's types (the admin and model forms
    offer and check them), left out of migrations and of the schema, so that a new type is a
    new module of ``scenarios.types`` and no migration. The services check a type against
    the registry before anything is written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 20)
        kwargs["choices"] = ScenarioType.choices
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("choices", None)
        return name, path, args, kwargs


class ScenarioStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    OPEN = "open", "Open"
    CLOSED = "closed", "Closed"


class WrittenScenarios(models.Manager["Scenario"]):
    """Scenarios whose items, variants and tasks are all written: one being written (a
    chunk per transaction) is no one's to see, open or change until it is."""

    def get_queryset(self) -> models.QuerySet[Scenario]:
        return super().get_queryset().filter(writing=False)


class Scenario(models.Model):
    team_lookup = "team"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="scenarios")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="scenarios_created"
    )
    name = models.CharField(max_length=200)
    type = ScenarioTypeField()
    status = models.CharField(
        max_length=10, choices=ScenarioStatus.choices, default=ScenarioStatus.DRAFT
    )
    instructions = models.TextField(blank=True)
    # rating: {"dimensions": [{"name", "description", "min", "max", "anchors", "justification"}]}
    # labeling: {"labels": [...], "multiple": bool, "free_text": bool}
    # comparison: {"pairing", "sample_count", "sample_share", "reverse_share", "ties"}
    config = models.JSONField(default=dict, blank=True)
    blind = models.BooleanField(default=True, help_text="Hide model and prompt from evaluators.")
    # The item's context fields a blind scenario shows its evaluators, in this order; null:
    # all of them (a scenario that is not blind shows all of them whatever this says).
    context_fields = models.JSONField(
        null=True, blank=True, help_text="Context fields shown in blind mode (empty: all)."
    )
    overlap = models.PositiveIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(50)],
        help_text="Evaluators per task.",
    )
    seed = models.IntegerField(
        default=0,
        help_text="Seeds the pair design and the orders.",
        validators=validation.bounded(0, validation.SEED_MAX),
    )
    # The most tasks one evaluator is handed (None: no limit); an assignee's own quota
    # overrides it.
    default_quota = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Most tasks per evaluator (empty: no limit).",
        validators=validation.bounded(1, validation.QUOTA_MAX),
    )
    # The chance that a "next task" request hands a gold task (while the evaluator has one
    # they have not been handed), drawn seeded by the scenario's seed, the evaluator and
    # how many tasks they were handed.
    gold_rate = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(0.5)],
        help_text="Share of gold tasks mixed into each evaluator's stream.",
    )
    # The same for attention checks (``GoldTask`` of kind ``attention``), drawn apart.
    attention_rate = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(0.5)],
        help_text="Share of attention checks mixed into each evaluator's stream.",
    )
    # Where the items came from: {"kind": "generation_job", "job": id, "filters": {...}} or
    # {"kind": "upload", "filename": ...}.
    source = models.JSONField(default=dict, blank=True)
    # Its items, variants and tasks are still being written (``WrittenScenarios``).
    writing = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    # Every scenario, those being written too (their writer, and the sweep of what a dead
    # writer left); ``objects``, the default, only those written.
    all_objects = models.Manager()
    objects = WrittenScenarios()

    class Meta:
        default_manager_name = "objects"
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="scenario_name_per_team"),
            models.CheckConstraint(
                condition=models.Q(status__in=ScenarioStatus.values),
                name="scenario_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ScenarioItem(models.Model):
    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    item_id = models.CharField(max_length=200)
    context = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["scenario_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["scenario", "item_id"], name="item_id_per_scenario"),
            models.UniqueConstraint(fields=["scenario", "position"], name="item_position_unique"),
        ]

    def __str__(self) -> str:
        return self.item_id


class Variant(models.Model):
    """One output to evaluate. ``model_label`` and ``prompt_label`` say what made it; in a
    blind scenario evaluators never see them (only managers and exports do)."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="variants")
    item = models.ForeignKey(ScenarioItem, on_delete=models.CASCADE, related_name="variants")
    position = models.PositiveIntegerField()
    variant_id = models.CharField(max_length=200)
    content = models.TextField()
    model_label = models.CharField(max_length=250, blank=True)
    prompt_label = models.CharField(max_length=250, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    # Its text reads as words to its judge (``scenarios.injection``: a heuristic pointer).
    addresses_judge = models.BooleanField(default=False)
    source_output = models.ForeignKey(
        "generation.GenerationOutput",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["item_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["item", "variant_id"], name="variant_id_per_item"),
            models.UniqueConstraint(fields=["item", "position"], name="variant_position_unique"),
        ]

    def __str__(self) -> str:
        return self.variant_id


class Task(models.Model):
    """What one rater answers. Rating and labeling: ``variant_a``. Comparison: ``variant_a``
    shown first, ``variant_b`` second (``reverse_of`` links a reverse pair to the pair it
    mirrors). Ranking: ``order``, the item's variant ids in the order presented."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="tasks")
    item = models.ForeignKey(
        ScenarioItem, null=True, blank=True, on_delete=models.CASCADE, related_name="tasks"
    )
    position = models.PositiveIntegerField()
    variant_a = models.ForeignKey(
        Variant, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    variant_b = models.ForeignKey(
        Variant, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    order = models.JSONField(default=list, blank=True)
    reverse_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="reversed_by"
    )
    # Places held of the scenario's overlap: live reservations plus human judgments. The
    # assignment service changes it under the task's row lock, so it never passes overlap.
    taken = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["scenario_id", "position"]
        indexes = [models.Index(fields=["scenario", "taken", "position"])]
        constraints = [
            models.UniqueConstraint(fields=["scenario", "position"], name="task_position_unique"),
            models.CheckConstraint(
                condition=~models.Q(variant_a=models.F("variant_b")),
                name="task_pair_distinct",
            ),
        ]

    def __str__(self) -> str:
        return f"task {self.position}"


class ScenarioAssignee(models.Model):
    """A member chosen to evaluate a scenario. A scenario with assignees (or assigned groups:
    ``ScenarioAssigneeGroup``) is evaluated by them (and by the people invited to it) only;
    without, by every member of its team who may submit. ``quota``: the most tasks this
    evaluator is handed (None: the scenario's ``default_quota``)."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="assignees")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scenarios_assigned"
    )
    quota = models.PositiveIntegerField(
        null=True, blank=True, validators=validation.bounded(1, validation.QUOTA_MAX)
    )

    class Meta:
        ordering = ["scenario_id", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["scenario", "user"], name="one_assignee_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} · {self.scenario}"


class ScenarioAssigneeGroup(models.Model):
    """A group of the team chosen to evaluate a scenario: whoever is in the group when they
    ask for a task is an assignee (with the scenario's ``default_quota``, unless they are
    also an assignee of their own with a quota). A scenario with assignees or assigned groups
    is evaluated by them (and by its invited guests) only. A group assigned somewhere cannot
    be deleted (``PROTECT``): dropping it silently could open the scenario to everyone."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="assignee_groups")
    group = models.ForeignKey(
        TeamGroup, on_delete=models.PROTECT, related_name="scenario_assignments"
    )

    class Meta:
        ordering = ["scenario_id", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["scenario", "group"], name="one_assignment_per_group")
        ]

    def __str__(self) -> str:
        return f"{self.group} · {self.scenario}"


class GoldKind(models.TextChoices):
    GOLD = "gold", "Gold task"
    ATTENTION = "attention", "Attention check"


class GoldTask(models.Model):
    """A task with a known answer (``answer``, in the stored shape of the scenario's type,
    in the task's presented order), left out of the analytics. It holds no place of the
    overlap: every evaluator may be handed it once.

    Two kinds. ``gold``: one of the scenario's tasks, shown as it is (evaluators cannot tell
    it apart), mixed in at ``gold_rate`` to measure accuracy. ``attention``: a task of its own
    (made by ``attention_add``, reusing another task's variants) whose every variant shows
    ``instruction`` instead of its content ("This is an attention check: choose B"), mixed in
    at ``attention_rate`` to catch inattentive raters."""

    team_lookup = "scenario__team"

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="gold_tasks")
    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="gold")
    kind = models.CharField(max_length=10, choices=GoldKind.choices, default=GoldKind.GOLD)
    instruction = models.TextField(blank=True)
    answer = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["scenario_id", "task_id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=GoldKind.values), name="gold_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.task}"
