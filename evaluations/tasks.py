"""The dotted path the django-q2 schedule stored in migration 0003
(``evaluations.tasks.expire_reservations``); the task is ``evaluations.workspace.tasks``."""

from __future__ import annotations

from evaluations.workspace.tasks import expire_reservations

__all__ = ["expire_reservations"]
