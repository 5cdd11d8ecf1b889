"""What other apps do with a job's replies, through a registry filled by their
``AppConfig.ready`` (``register``; ``generation`` never imports them): a handler registered
for a job's ``source_kind`` sees every reply before it is recorded, may reject it (it is
then recorded as a failed cell, with its text, tokens and cost kept, and can be retried
alone), and derives its own rows from the recorded cells in the same transaction. LLM judge
runs use it to turn replies into judgments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

# The error kind of a reply its handler rejected.
REJECTED = "invalid_reply"


class ResultHandler(Protocol):
    def check(self, job_id: int, replies: Mapping[int, str]) -> dict[int, str]:
        """Replies about to be recorded as completed (output id → text): those to record as
        failed instead (output id → why)."""

    def recorded(self, job_id: int, output_ids: Sequence[int]) -> None:
        """In the recording transaction, after the cells were written (completed, or
        failed with a reply): derive rows from them."""


HANDLERS: dict[str, ResultHandler] = {}


def register(source_kind: str, handler: ResultHandler) -> None:
    """Handle the replies of jobs of ``source_kind`` (call from the app's
    ``AppConfig.ready``)."""
    HANDLERS[source_kind] = handler


def handler_for(source_kind: str) -> ResultHandler | None:
    return HANDLERS.get(source_kind)
