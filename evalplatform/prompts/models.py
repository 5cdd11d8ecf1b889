from __future__ import annotations

from django.conf import settings
from django.db import models

from evalplatform.accounts.models import Team
from evalplatform.errors import Conflict
from evalplatform.prompts.rendering import Block


class PromptTemplate(models.Model):
    team_lookup = "team"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="prompt_templates")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "name"], name="prompt_template_team_name_unique"
            )
        ]

    def __str__(self) -> str:
        return self.name


class VersionLocked(Conflict):
    default_message = (
        "This prompt version is used by a job and can no longer change; create a new version."
    )


class PromptVersion(models.Model):
    """One immutable-once-used version of a template.

    A version can be edited while it is a draft. ``locked_at`` is set the first time something
    (a generation job, a judge) uses it; from then on the version and its blocks refuse edits
    and deletion, and editing means creating a new version.
    """

    team_lookup = "template__team"

    template = models.ForeignKey(PromptTemplate, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    note = models.CharField(max_length=300, blank=True, help_text="What changed in this version.")
    default_variables = models.JSONField(
        default=dict, blank=True, help_text="Values used when an item lacks a variable."
    )
    sample_item = models.JSONField(
        default=dict, blank=True, help_text="An example item for the rendered preview."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    locked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["template_id", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["template", "number"], name="prompt_version_template_number_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.template.name} v{self.number}"

    def save(self, *args, **kwargs):
        if self._locked_in_db():
            raise VersionLocked()
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self._locked_in_db():
            raise VersionLocked("This prompt version is used by a job and cannot be deleted.")
        return super().delete(*args, **kwargs)

    @property
    def is_locked(self) -> bool:
        return self.locked_at is not None

    def _locked_in_db(self) -> bool:
        return (
            self.pk is not None
            and PromptVersion.objects.filter(pk=self.pk, locked_at__isnull=False).exists()
        )

    def as_blocks(self) -> list[Block]:
        """The blocks for rendering; uses prefetched blocks when present."""
        return [Block(title=b.title, body=b.body) for b in self.blocks.all()]


class PromptBlock(models.Model):
    team_lookup = "version__template__team"

    version = models.ForeignKey(PromptVersion, on_delete=models.CASCADE, related_name="blocks")
    position = models.PositiveIntegerField(default=0)
    title = models.CharField(
        max_length=200, blank=True, help_text="'System' makes it the system prompt."
    )
    body = models.TextField(blank=True)

    class Meta:
        ordering = ["version_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["version", "position"], name="prompt_block_version_position_unique"
            )
        ]

    def __str__(self) -> str:
        return self.title or f"Block {self.position}"

    def save(self, *args, **kwargs):
        if self._version_locked():
            raise VersionLocked()
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self._version_locked():
            raise VersionLocked()
        return super().delete(*args, **kwargs)

    def _version_locked(self) -> bool:
        return PromptVersion.objects.filter(pk=self.version_id, locked_at__isnull=False).exists()
