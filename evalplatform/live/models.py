from django.db import models


class LiveEvent(models.Model):
    """The embedded default's event outbox: workers append, each web process relays new rows
    to its WebSocket clients (``evalplatform.live.relay``). Rows are pruned after minutes."""

    group = models.CharField(max_length=120)
    events = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.group} #{self.pk}"


class LiveWatcher(models.Model):
    """A WebSocket client watching a group, renewed while it stays connected. Runners ask
    whether anyone watches before streaming replies: streaming costs CPU on every chunk,
    and nobody needs it when no one is looking."""

    group = models.CharField(max_length=120, db_index=True)
    channel_name = models.CharField(max_length=200, unique=True)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.channel_name} on {self.group}"
