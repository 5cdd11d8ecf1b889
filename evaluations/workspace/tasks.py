"""Scheduled work of the evaluator workspace (django-q2). The schedule names it by the path
``evaluations.tasks.expire_reservations``, which re-exports it."""

from __future__ import annotations

from evaluations.workspace import services


def expire_reservations() -> int:
    """Every few minutes: abandoned reservations of every scenario give their places back."""
    return services.expire_reservations()
