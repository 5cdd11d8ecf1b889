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
