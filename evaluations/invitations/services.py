"""Inviting people by email to evaluate a scenario.

A manager (``feature:scenarios:manage``) invites addresses; each gets a link with a secret
token (only its SHA-256 is stored, so the link is shown once, to the manager, and mailed).
Whoever opens the link signs in or creates an account and accepts: from then on they are in
the scenario's pool (``evaluations.workspace.access``) until the invitation is withdrawn. A link is
good for one account and expires after ``INVITATION_TTL`` unless accepted.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage, get_connection
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from evalplatform.accounts import audit, policy
from evalplatform.accounts.roles import EVALUATIONS_SUBMIT, SCENARIOS_MANAGE
from evalplatform.errors import Conflict, FieldErrors, Forbidden, NotFound
from evaluations.invitations.models import Invitation
from evaluations.judgments.models import Assignment, AssignmentStatus
from scenarios.models import Scenario, ScenarioStatus, Task

logger = logging.getLogger(__name__)

INVITATION_TTL = timedelta(days=14)
MAX_EMAILS = 200


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _manage(user: Any, scenario: Scenario) -> None:
    if not policy.may(user, SCENARIOS_MANAGE, scenario):
        raise Forbidden()


def _clean_emails(emails: Any) -> list[str]:
    if isinstance(emails, str):
        emails = emails.replace(",", "\n").replace(";", "\n").split()
    if not isinstance(emails, list) or not emails:
        raise FieldErrors({"emails": "One or more email addresses."})
    if len(emails) > MAX_EMAILS:
        raise FieldErrors({"emails": f"At most {MAX_EMAILS} addresses at a time."})
    errors: dict[str, str] = {}
    clean: list[str] = []
    for index, email in enumerate(emails):
        try:
            if not isinstance(email, str):
                raise ValidationError("not text")
            validate_email(email.strip())
        except ValidationError:
            errors[f"emails[{index}]"] = f"Not an email address: {str(email)[:100]!r}."
            continue
        normalized = email.strip().lower()
        if normalized not in clean:
            clean.append(normalized)
    if errors:
        raise FieldErrors(errors)
    return clean


def invite(
    *,
    user: Any,
    scenario: Scenario,
    emails: Any,
    link_for: Callable[[str], str],
    note: str = "",
) -> list[tuple[Invitation, str]]:
    """Invite each address (an earlier pending invitation of the same address is replaced);
    return the invitations with their links, and mail them once the invitations are saved."""
    _manage(user, scenario)
    if scenario.status == ScenarioStatus.CLOSED:
        raise Conflict("The scenario is closed: open a new one to invite evaluators.")
    addresses = _clean_emails(emails)
    if not isinstance(note, str) or len(note) > 2000:
        raise FieldErrors({"note": "Text of at most 2,000 characters."})
    now = timezone.now()
    made: list[tuple[Invitation, str]] = []
    with transaction.atomic():
        Invitation.objects.filter(
            scenario=scenario,
            email__in=addresses,
            accepted_by__isnull=True,
            revoked_at__isnull=True,
        ).update(revoked_at=now)
        for email in addresses:
            token = secrets.token_urlsafe(32)
            invitation = Invitation.objects.create(
                scenario=scenario,
                email=email,
                token_hash=_hash(token),
                invited_by=user,
                expires_at=now + INVITATION_TTL,
            )
            made.append((invitation, link_for(token)))
        audit.record(
            user=user,
            team=scenario.team_id,
            action="scenario.invite",
            target=scenario,
            emails=addresses,
        )
    _send(user, scenario, made, note)
    return made


def _send(user: Any, scenario: Scenario, made: Sequence[tuple[Invitation, str]], note: str) -> None:
    """Mail the links. A mail server that fails is logged; the manager still has the links."""
    inviter = user.get_full_name() or user.get_username()
    messages = []
    for invitation, link in made:
        body = (
            f"{inviter} invites you to evaluate “{scenario.name}” "
            f"({scenario.get_type_display().lower()}).\n\n"
            + (f"{note}\n\n" if note else "")
            + f"Open this link to accept (it is valid until "
            f"{invitation.expires_at:%Y-%m-%d}):\n{link}\n"
        )
        messages.append(
            EmailMessage(
                subject=" ".join(f"Invitation to evaluate: {scenario.name}".split()),
                body=body,
                from_email=settings.DEFAULT_FROM_EMAIL,
                to=[invitation.email],
            )
        )
    connection = get_connection()
    for (invitation, _), message in zip(made, messages, strict=True):
        try:
            sent = connection.send_messages([message])
        except Exception:  # the mail server's failure must not lose the invitations
            logger.exception("Sending the invitation email of invitation %s failed", invitation.pk)
            continue
        if sent:
            invitation.emailed_at = timezone.now()
            Invitation.objects.filter(pk=invitation.pk).update(emailed_at=invitation.emailed_at)


def find(token: str) -> Invitation:
    """The invitation a link names, whatever its state; ``NotFound`` for an unknown token."""
    found = (
        Invitation.objects.select_related("scenario__team", "invited_by", "accepted_by")
        .filter(token_hash=_hash(token))
        .first()
    )
    if found is None:
        raise NotFound("This invitation link is not valid.")
    return found


def accept(*, user: Any, token: str) -> Invitation:
    """Join the scenario's pool. Accepting twice is harmless; another account cannot use a
    link already accepted."""
    with transaction.atomic():
        invitation = find(token)
        invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if invitation.revoked_at is not None:
            raise Conflict("This invitation was withdrawn.")
        if invitation.accepted_by_id == user.pk:
            return invitation
        if invitation.accepted_by_id is not None:
            raise Conflict("This invitation was accepted by another account already.")
        if invitation.expires_at <= timezone.now():
            raise Conflict("This invitation has expired: ask for a new one.")
        if invitation.scenario.status == ScenarioStatus.CLOSED:
            raise Conflict("This scenario is closed.")
        invitation.accepted_by, invitation.accepted_at = user, timezone.now()
        invitation.save(update_fields=["accepted_by", "accepted_at"])
    return invitation


def withdraw(*, user: Any, invitation: Invitation) -> Invitation:
    """Withdraw an invitation: a pending link stops working; someone who accepted leaves the
    pool (their open reservations give their places back; their judgments stay)."""
    with transaction.atomic():
        invitation = (
            Invitation.objects.select_for_update().select_related("scenario").get(pk=invitation.pk)
        )
        _manage(user, invitation.scenario)
        if invitation.revoked_at is not None:
            return invitation
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])
        audit.record(
            user=user,
            team=invitation.scenario.team_id,
            action="scenario.invitation.withdraw",
            target=invitation.scenario,
            email=invitation.email,
        )
        if invitation.accepted_by_id is not None:
            still_member = policy.may(
                invitation.accepted_by, EVALUATIONS_SUBMIT, invitation.scenario
            )
            still_invited = Invitation.objects.filter(
                scenario_id=invitation.scenario_id,
                accepted_by_id=invitation.accepted_by_id,
                revoked_at__isnull=True,
            ).exists()
            if not still_member and not still_invited:
                _release(invitation)
    return invitation


def _release(invitation: Invitation) -> None:
    open_ones = Assignment.objects.select_for_update().filter(
        scenario_id=invitation.scenario_id,
        evaluator_id=invitation.accepted_by_id,
        status=AssignmentStatus.RESERVED,
    )
    for assignment in open_ones:
        assignment.status = AssignmentStatus.EXPIRED
        assignment.save(update_fields=["status"])
        Task.objects.filter(pk=assignment.task_id, taken__gt=0).update(taken=F("taken") - 1)
