"""Tasks are referred to by function, never by a dotted path written by hand.

A task queued for a worker (django-q2, directly or through ``fairshare``) travels as the
dotted path of its function: ``path(fn)`` makes it. Where the caller cannot import the
task (``generation.lifecycle`` queues the runner, which imports the lifecycle), the path is
declared once with ``declared(path)``. The system check ``runs.E001`` / ``runs.E002``
(``evalplatform.runs.checks``) resolves every declared path, every stored schedule and every
task waiting in a team's queue: a renamed or moved task fails ``manage.py check`` instead of
every queued run of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils.module_loading import import_string

DECLARED: set[str] = set()


def path(task: Callable[..., Any]) -> str:
    """The dotted path a worker imports ``task`` by (a module-level function)."""
    if "<" in task.__qualname__ or "." in task.__qualname__:
        raise ValueError(
            f"{task.__qualname__} is no module-level function: a worker cannot find it"
        )
    return f"{task.__module__}.{task.__qualname__}"


def declared(dotted: str) -> str:
    """A task's path, for a caller that cannot import the task; checked to resolve."""
    DECLARED.add(dotted)
    return dotted


def resolves(dotted: str) -> bool:
    """Whether a worker can import ``dotted`` as a callable."""
    try:
        return callable(import_string(dotted))
    except ImportError:
        return False


def as_path(task: Callable[..., Any] | str) -> str:
    return task if isinstance(task, str) else path(task)
