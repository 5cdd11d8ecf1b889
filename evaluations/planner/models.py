"""The budget scheduler's model: its proposals (plans) and re-plans."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from scenarios.models import Scenario


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
