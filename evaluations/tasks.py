"""Scheduled work of the evaluations app (django-q2)."""

from __future__ import annotations

from evaluations import services


def expire_reservations() -> int:
    """Every few minutes: abandoned reservations of every scenario give their places back."""
    return services.expire_reservations()
