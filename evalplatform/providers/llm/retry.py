"""The platform's retry schedule: 1 s, 5 s, 15 s; a provider's own hint takes precedence."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from evalplatform.providers.llm.types import ProviderError

T = TypeVar("T")
SCHEDULE_S: tuple[float, ...] = (1.0, 5.0, 15.0)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    schedule: Sequence[float] = SCHEDULE_S
    # Injectable so tests never sleep: any ``async def sleep(seconds)``.
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def delay(self, retry_number: int, error: ProviderError) -> float:
        """Wait before retry ``retry_number`` (0-based): the provider's hint, else the schedule
        (its last step repeats when more retries are allowed than it has steps)."""
        if error.retry_after is not None:
            return error.retry_after
        return self.schedule[min(retry_number, len(self.schedule) - 1)]


@dataclass
class Attempts:
    """What happened: how many calls were made, the error of each failed one, the seconds
    the failed calls took and the seconds waited before retrying (the schedule's or the
    provider's, as asked of ``policy.sleep``: a test's instant sleep still counts them)."""

    count: int = 0
    errors: list[ProviderError] | None = None
    failed_s: float = 0.0
    waited_s: float = 0.0


async def with_retries(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    attempts: Attempts | None = None,
    on_retry: Callable[[ProviderError, float], Awaitable[None] | None] | None = None,
) -> T:
    """Run ``call``; retry retryable ``ProviderError``s up to ``policy.max_retries`` times.

    The last error is raised when retries run out or an error is permanent.
    """
    attempts = attempts if attempts is not None else Attempts()
    attempts.errors = attempts.errors if attempts.errors is not None else []
    retry_number = 0
    while True:
        attempts.count += 1
        started = time.perf_counter()
        try:
            return await call()
        except ProviderError as error:
            attempts.failed_s += time.perf_counter() - started
            attempts.errors.append(error)
            if not error.retryable or retry_number >= policy.max_retries:
                raise
            wait = policy.delay(retry_number, error)
            if on_retry is not None:
                maybe = on_retry(error, wait)
                if maybe is not None:
                    await maybe
            attempts.waited_s += wait
            await policy.sleep(wait)
            retry_number += 1
