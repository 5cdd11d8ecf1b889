"""Who is watching: WebSocket consumers register while connected (renewed every
``RENEW_S``, expiring after ``TTL_S`` if their process died), runners ask ``watched``."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from evalplatform.live.models import LiveWatcher

TTL_S = 90
RENEW_S = 30


def watch(group: str, channel_name: str) -> None:
    LiveWatcher.objects.update_or_create(
        channel_name=channel_name,
        defaults={"group": group, "expires_at": timezone.now() + timedelta(seconds=TTL_S)},
    )


def unwatch(channel_name: str) -> None:
    LiveWatcher.objects.filter(channel_name=channel_name).delete()


def watched(group: str) -> bool:
    return LiveWatcher.objects.filter(group=group, expires_at__gt=timezone.now()).exists()


def prune() -> int:
    deleted, _ = LiveWatcher.objects.filter(expires_at__lt=timezone.now()).delete()
    return deleted
