from __future__ import annotations

import asyncio

from evalplatform.providers.llm.client import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(round(seconds, 6))
        self.now += seconds


def test_requests_are_spaced_and_429_slows_down_then_recovers():
    clock = Clock()
    limiter = RateLimiter(120, clock=clock, sleep=clock.sleep)  # one every 0.5 s

    async def go():
        for _ in range(3):
            await limiter.acquire()
        limiter.rate_limited()
        await limiter.acquire()
        await limiter.acquire()

    asyncio.run(go())
    assert clock.waits == [0.5, 0.5, 0.5, 1.0]
    assert limiter.interval == 1.0
    for _ in range(100):
        limiter.succeeded()
    assert abs(limiter.interval - 0.5) < 1e-3
    for _ in range(10):
        limiter.rate_limited()
    assert limiter.interval == 0.5 * 16
