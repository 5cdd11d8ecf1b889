"""Reads of invitations: a scenario's invitations, one of them."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from evaluations.invitations.models import Invitation
from scenarios.models import Scenario


def scenario_invitations(scenario: Scenario) -> QuerySet[Invitation]:
    """The scenario's invitations with who invited and who accepted."""
    return scenario.invitations.select_related("invited_by", "accepted_by")


def invitation_of(scenario: Scenario, pk: Any) -> Invitation | None:
    """The scenario's invitation ``pk``; None if it is not this scenario's."""
    return Invitation.objects.filter(scenario=scenario, pk=pk).first()
