"""What other apps do with a job's replies, through a registry filled by their
``AppConfig.ready`` (``register``; ``generation`` never imports them): a handler registered
for a job's ``source_kind`` sees every reply before it is recorded, may reject it (it is
then recorded as a failed cell, with its text, tokens and cost kept, and can be retried
alone), and derives its own rows from the recorded cells in the same transaction. LLM judge
runs use it to turn replies into judgments.

It is also the one way to hear that a job ended: the job lifecycle calls ``job_finished``
after every terminal transition commits (completed, failed, cancelled), which calls the
handler's ``finished`` and every listener registered with ``when_finished`` for the job's
source kind (the budget scheduler re-plans when a judge run completes; a judge file's batch
finalizes when its job ends).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

logger = logging.getLogger(__name__)

# The error kind of a reply its handler rejected.
REJECTED = "invalid_reply"


class ResultHandler(Protocol):
    def check(self, job_id: int, replies: Mapping[int, str]) -> dict[int, str]:
        """Replies about to be recorded as completed (output id → text): those to record as
        failed instead (output id → why)."""

    def recorded(self, job_id: int, output_ids: Sequence[int]) -> None:
        """In the recording transaction, after the cells were written (completed, or
        failed with a reply): derive rows from them."""

    def finished(self, job_id: int, status: str) -> None:
        """After the job's terminal transition (``status``: completed, failed or cancelled)
        committed."""


# A listener of a kind's finished jobs: (job id, its status).
Listener = Callable[[int, str], None]
HANDLERS: dict[str, ResultHandler] = {}
LISTENERS: defaultdict[str, list[Listener]] = defaultdict(list)


def register(source_kind: str, handler: ResultHandler) -> None:
    """Handle the replies of jobs of ``source_kind`` (call from the app's
    ``AppConfig.ready``)."""
    HANDLERS[source_kind] = handler


def handler_for(source_kind: str) -> ResultHandler | None:
    return HANDLERS.get(source_kind)


def when_finished(source_kind: str, listener: Listener) -> None:
    """Call ``listener(job_id, status)`` whenever a job of ``source_kind`` ends (from the
    app's ``AppConfig.ready``; registering the same function twice keeps one)."""
    if listener not in LISTENERS[source_kind]:
        LISTENERS[source_kind].append(listener)


def job_finished(job_id: int, source_kind: str, status: str) -> None:
    """Tell the kind's handler and listeners that a job ended (the lifecycle calls this on
    commit). One that fails is logged and the others still hear it: the job's end is
    committed whatever they do, and each recovers on its own schedule."""
    handler = HANDLERS.get(source_kind)
    hooks = [handler.finished] if handler is not None else []
    for hook in [*hooks, *LISTENERS.get(source_kind, [])]:
        try:
            hook(job_id, status)
        except Exception:
            logger.exception("job %s: a listener of its end failed", job_id)
