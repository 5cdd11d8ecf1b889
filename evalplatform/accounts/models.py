from __future__ import annotations

from django.conf import settings
from django.db import models

from evalplatform.accounts.roles import Role


class Team(models.Model):
    name = models.CharField(max_length=120, unique=True)
    slug = models.SlugField(max_length=60, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team__name", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="membership_user_team_unique"),
            models.CheckConstraint(
                condition=models.Q(role__in=Role.values), name="membership_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} as {self.role}"


class TeamGroup(models.Model):
    """A named set of a team's members (e.g. "Linguists", "Night shift"), so that a scenario
    can be assigned to all of them at once. Only members of the team belong to it; a member
    who leaves the team leaves its groups too. Whoever is in the group when a task is asked
    for is in it: a scenario assigned to the group follows its changes."""

    team_lookup = "team"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="groups")
    name = models.CharField(max_length=100)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="team_groups"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name, verbose_name_plural = "evaluator group", "evaluator groups"
        ordering = ["team__name", "name", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="team_group_name_unique")
        ]

    def __str__(self) -> str:
        return self.name


class ApiToken(models.Model):
    """A personal API token. Only a SHA-256 of the key is stored; the key is shown once."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Whether requests made with this token may make more tokens: a token that leaks must
    # not be able to mint itself successors that outlive its revocation.
    can_mint_tokens = models.BooleanField(default=False)

    class Meta:
        verbose_name, verbose_name_plural = "API token", "API tokens"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class Notification(models.Model):
    """Something a user should see (a job paused by its budget, ...): listed on their home
    page and at ``/api/notifications`` until they dismiss it."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=60)
    message = models.CharField(max_length=500)
    link = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["user", "read_at"])]

    def __str__(self) -> str:
        return f"{self.user}: {self.message}"


class LoginFailure(models.Model):
    """A failed sign-in (web page or admin console), kept a day: too many for one username or
    from one address in ``accounts.throttle.WINDOW`` and sign-in is refused for a while. In
    the database, so every web process of a deployment counts the same failures."""

    username = models.CharField(max_length=150, db_index=True)
    address = models.CharField(max_length=45, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.username} from {self.address}"


class AuditEvent(models.Model):
    """Who did what, when: starting, pausing, cancelling and deleting jobs and judge runs,
    exports, invitations, membership and token changes (``accounts.audit.record``). Kept
    with the username as it was, so a deleted account's actions still read."""

    team_lookup = "team"

    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_events"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
    )
    username = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=60, db_index=True)
    target = models.CharField(max_length=300, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["team", "created_at"])]

    def __str__(self) -> str:
        return f"{self.username} {self.action} {self.target}"
