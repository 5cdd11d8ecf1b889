"""When a job's failures are systematic: the job stops as ``failed`` instead of spending more.

Some errors will not pass by retrying other cells: the provider refused the API key or the
permission, the model or endpoint does not exist, the account's quota or billing limit is
reached, or (live calls) the provider cannot be reached at all after a cell's retries. One
such error fails the job. Other failures fail only their cell, unless
``GENERATION_FAIL_AFTER`` cells of one model configuration fail in a row (each after its
own retries) with no success between them: then the configuration is broken, and the job
fails too. Content-filter refusals and replies too large for a request are the prompt's,
not the configuration's, and errors of the platform itself are not the provider's: they never count.

A judge file is the exception: like a provider's batch, it reports each row's error in its
error file and completes, so its job never fails on its rows' errors (``stops_job``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from evalplatform.providers.llm.types import ProviderError

SYSTEMATIC = {
    "auth": "the provider refused the API key",
    "permission": "the provider refused permission for this model or request",
    "not_found": "the provider does not know the model or endpoint",
    "quota": "the provider account's quota or billing limit is reached",
    "internal_address": "the connection's address is on the platform's own network",
}
# Live calls only: a provider that cannot be reached after every retry of a cell. (A batch
# submission that drops its connection may have reached the provider; it is checked first.)
UNREACHABLE = {"connection": "the provider cannot be reached"}
NOT_COUNTED = {"content_filter", "too_large", "rejected", "internal"}


def message(kind: str, reasons: dict[str, str], error: ProviderError, label: str) -> str:
    return (
        f"Stopped: {reasons[kind]} ({label}: {error.message})"[:420]
        + ". Fix the connection or the model and resume; the cells not yet run are pending."
    )


@dataclass
class FailureWatch:
    """Watches one run's results, per model configuration; ``observe`` returns the reason
    to fail the job, or None."""

    live: bool = True
    stops_job: bool = True
    fail_after: int = field(default_factory=lambda: settings.GENERATION_FAIL_AFTER)
    streaks: dict[int, int] = field(default_factory=dict)

    def systematic(self, error: ProviderError) -> dict[str, str] | None:
        if not self.stops_job:
            return None
        if error.kind in SYSTEMATIC:
            return SYSTEMATIC
        if self.live and error.kind in UNREACHABLE:
            return UNREACHABLE
        return None

    def observe(self, config: int, label: str, error: ProviderError | None) -> str | None:
        if error is None:
            self.streaks[config] = 0
            return None
        if (reasons := self.systematic(error)) is not None:
            return message(error.kind, reasons, error, label)
        if error.kind in NOT_COUNTED or not self.stops_job:
            return None
        self.streaks[config] = streak = self.streaks.get(config, 0) + 1
        if self.fail_after and streak >= self.fail_after:
            return (
                f"Stopped: {streak} cells of {label} failed in a row, the last with "
                f"{error.kind}: {error.message}"
            )[:420] + ". Fix the configuration and resume; retry the failed cells."
        return None
