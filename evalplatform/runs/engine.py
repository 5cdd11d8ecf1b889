"""The one execution engine for LLM calls: generation jobs, and judge runs (which are
generation jobs of the "judge" source).

It knows nothing of generation or evaluations: they plug in through ``Work``, which records
finished cells, says whether to go on, and claims pending cells (reserving budget for each).
The engine keeps up to ``concurrency`` cells in flight through one ``ProviderClient`` per
connection and retries by the platform schedule. With a publisher, and while someone
watches, replies stream and their text goes out as live events (throttled by the
publisher). All database work of one step (record what finished, read the job's state,
claim more) is one hop to the database thread, so its cost is shared by every cell it
records and claims; the claim re-checks the job's state in its transaction.

A step claims up to ``CLAIM_AHEAD`` of the concurrency beyond the calls in flight: a call
that finishes starts the next claimed cell at once, without waiting for a step, and the
steps (each one a transaction, four round trips on PostgreSQL) run once per several
replies instead of once per wave of them. A reply waits at most ``RECORD_WAIT_S`` to be
recorded; an error, a stop, or running out of claimed cells steps at once. Between steps
the heartbeat watches the job too, so pause, cancel and a failure abort the calls in flight
within one beat.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections, connections

from evalplatform.live.publish import ThrottledPublisher
from evalplatform.providers.llm.client import CallResult, ProviderClient
from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.providers.llm.types import LLMRequest, LLMResponse, ProviderError

logger = logging.getLogger(__name__)
# Cells a step claims beyond the calls in flight, as a share of the concurrency. They are
# the job's running cells as far as the database knows (a runner that dies leaves them to
# the next one, as it leaves its calls in flight), and they keep their budget reserved.
CLAIM_AHEAD = 0.5
# The longest a finished call's result waits, in memory, for the step that records it. A
# runner that dies loses the replies it holds (their cells run again).
RECORD_WAIT_S = 0.2


@dataclass
class Cell:
    id: int
    connection_id: int
    request: LLMRequest
    reserved_usd: Decimal
    meta: Any = None  # the work's own data about the cell


@dataclass
class Outcome:
    """A cell's reply or final error. ``total_s``: with a reply, the seconds across all its
    attempts and the waits between them (``response.latency_s`` is the last attempt's).
    ``started``: when its first attempt began (``time.time()``)."""

    cell: Cell
    attempts: int
    response: LLMResponse | None = None
    error: ProviderError | None = None
    total_s: float | None = None
    started: float | None = None


class Work(Protocol):
    concurrency: int
    retry: RetryPolicy

    @property
    def heartbeat_s(self) -> float:
        """Seconds between lease renewals."""

    def heartbeat(self) -> str:
        """Renew the lease of a running job: 'run', or why to stop ('paused', 'cancelled',
        'failed': the calls in flight are aborted; 'lost': another runner took the job)."""

    def begin(self) -> bool:
        """Take the job's lease (recovering cells a dead runner left); False if held."""

    def step(self, outcomes: Sequence[Outcome], limit: int) -> tuple[str, list[Cell], bool]:
        """Record ``outcomes``; then the job's state ('run', or why to stop: 'paused',
        'cancelled', 'failed', 'lost'), up to ``limit`` newly claimed cells (marked running, budget
        reserved) and whether the budget stopped the claim."""

    def started(self, cell: Cell) -> None:
        """A claimed cell's call begins (on the event loop's thread: no database work)."""

    def connection(self, connection_id: int) -> Any: ...

    def budget_exhausted(self) -> None: ...

    def end(self) -> bool:
        """Finish or release the job; True if the runner should keep going (resumed)."""

    @property
    def publisher(self) -> ThrottledPublisher | None:
        """Live events of the run; with one, replies stream and their text is published."""


@dataclass
class RunSummary:
    succeeded: int = 0
    failed: int = 0
    stopped_by: str = ""

    def count(self, outcomes: Sequence[Outcome]) -> None:
        for outcome in outcomes:
            if outcome.error is None:
                self.succeeded += 1
            else:
                self.failed += 1


class _Calls:
    """The provider calls of one run: one client (one pool) per connection, made when the
    first of its cells starts; with a publisher, replies stream while someone watches."""

    def __init__(
        self,
        work: Work,
        make_client: Callable[[Any], ProviderClient],
        publisher: ThrottledPublisher | None,
    ) -> None:
        self.work = work
        self.make_client = make_client
        self.publisher = publisher
        self.clients: dict[int, ProviderClient] = {}
        self.creating = asyncio.Lock()

    async def execute(self, cell: Cell) -> Outcome:
        """The cell's outcome; every failure is its own (it never stops the others)."""
        started = time.time()
        try:
            client = await self._client(cell.connection_id)
            result = await self._call(client, cell)
        except ProviderError as error:
            return Outcome(cell, error.attempts, error=error, started=started)
        except Exception as exc:  # a cell's own failure must not stop the others
            logger.exception("cell %s failed inside the platform", cell.id)
            internal = ProviderError(
                f"Internal error: {type(exc).__name__}", kind="internal", retryable=False
            )
            return Outcome(cell, 1, error=internal, started=started)
        return Outcome(
            cell,
            result.attempts,
            response=result.response,
            total_s=result.total_s,
            started=started,
        )

    async def _client(self, connection_id: int) -> ProviderClient:
        if connection_id not in self.clients:
            async with self.creating:  # one client (one pool) per connection
                if connection_id not in self.clients:
                    connection = await sync_to_async(self.work.connection)(connection_id)
                    self.clients[connection_id] = self.make_client(connection)
        return self.clients[connection_id]

    async def _call(self, client: ProviderClient, cell: Cell) -> CallResult:
        publisher = self.publisher
        # Replies stream only while someone watches the run.
        if publisher is None or not publisher.watching:
            return await client.complete(cell.request, retry=self.work.retry)
        try:
            return await client.complete_streaming(
                cell.request,
                lambda delta: publisher.text(cell.id, delta),
                on_attempt=lambda: publisher.begin_text(cell.id),
                retry=self.work.retry,
            )
        finally:
            publisher.end_text(cell.id)

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()


async def _heartbeat(
    work: Work, in_flight: set[asyncio.Task[Outcome]], halted: asyncio.Event, lost: asyncio.Event
) -> None:
    """Keeps the lease while calls are slow, and watches the job between steps: a runner
    that lost the lease stops at once (what it had in flight is no longer its to record),
    and a job that was paused, cancelled or failed aborts its calls (``halted``)."""
    while True:
        await asyncio.sleep(work.heartbeat_s)
        try:
            control = await sync_to_async(work.heartbeat)()
        except DatabaseError:
            # One missed beat is harmless (a lease lasts several). The next step meets
            # a lasting outage itself (and the runner starts again).
            logger.warning("the lease could not be renewed; trying again", exc_info=True)
            await sync_to_async(close_old_connections)()
            continue
        if control != "run":
            # Nothing more starts before a step has read the job (which may have been
            # resumed by then: the beats go on).
            halted.set()
            for task in in_flight:
                task.cancel()
            if control == "lost":
                lost.set()
                return


async def _abort(in_flight: set[asyncio.Task[Outcome]]) -> list[Outcome]:
    """Cancel the calls in flight (their cells go back to pending at ``end``); the outcomes
    that had already landed."""
    for task in in_flight:
        task.cancel()
    finished = [
        o
        for o in await asyncio.gather(*in_flight, return_exceptions=True)
        if isinstance(o, Outcome)
    ]
    in_flight.clear()
    return finished


class _Unrecorded:
    """Outcomes waiting, in memory, for the step that records them. The step is due once
    ``together`` of them wait, or the oldest has waited ``RECORD_WAIT_S``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, together: int) -> None:
        self.loop = loop
        self.together = together
        self.outcomes: list[Outcome] = []
        self.oldest = 0.0  # when the oldest of them came (the loop's clock)

    def add(self, done: set[asyncio.Task[Outcome]]) -> None:
        """The outcomes of calls that finished (a call the heartbeat aborted has none)."""
        if done and not self.outcomes:
            self.oldest = self.loop.time()
        for task in done:
            if not task.cancelled():  # (cancelled: the heartbeat aborted it)
                self.outcomes.append(task.result())

    def take(self) -> list[Outcome]:
        """All of them, for a step to record."""
        outcomes, self.outcomes = self.outcomes, []
        return outcomes

    @property
    def failed(self) -> bool:
        return any(o.error is not None for o in self.outcomes)

    def wait_s(self) -> float | None:
        """How long to wait for more: until the oldest is due (None: no limit)."""
        if not self.outcomes:
            return None
        return max(0.0, self.oldest + RECORD_WAIT_S - self.loop.time())

    def due(self) -> bool:
        return len(self.outcomes) >= self.together or (
            # (the loop's timers may wake a little early)
            bool(self.outcomes) and self.loop.time() - self.oldest >= RECORD_WAIT_S * 0.99
        )


async def run_live(
    work: Work, *, client_factory: Callable[[Any], ProviderClient] | None = None
) -> RunSummary:
    summary = RunSummary()
    if not await sync_to_async(work.begin)():
        summary.stopped_by = "held"
        return summary
    publisher = work.publisher
    calls = _Calls(
        work,
        client_factory or (lambda conn: ProviderClient.for_connection(conn, retry=work.retry)),
        publisher,
    )
    step = sync_to_async(work.step)
    in_flight: set[asyncio.Task[Outcome]] = set()
    lost = asyncio.Event()
    halted = asyncio.Event()  # the heartbeat found the job stopped
    beat = asyncio.create_task(_heartbeat(work, in_flight, halted, lost))
    if publisher is not None:
        publisher.start()
        await publisher.check_watching()
    ahead = int(work.concurrency * CLAIM_AHEAD)
    # Replies recorded together once claimed cells run low (half of those claimed ahead).
    together = max(1, ahead // 2)
    loop = asyncio.get_running_loop()
    claimed: collections.deque[Cell] = collections.deque()  # claimed, not started yet

    def start() -> None:
        while claimed and len(in_flight) < work.concurrency:
            cell = claimed.popleft()
            in_flight.add(asyncio.create_task(calls.execute(cell)))
            work.started(cell)

    try:
        while not lost.is_set():
            unrecorded = _Unrecorded(loop, together)
            claimed.clear()  # (the last window's were returned to pending by ``end``)
            blocked = exhausted = False
            due = True  # step before waiting again
            while not lost.is_set():
                if due:
                    free = (
                        0 if blocked else work.concurrency + ahead - len(in_flight) - len(claimed)
                    )
                    finished = unrecorded.take()
                    control, cells, blocked = await step(finished, free)
                    summary.count(finished)
                    if control != "run":
                        summary.stopped_by = control
                        break
                    halted.clear()  # resumed since the beat that found it stopped
                    # Nothing more to claim for now: step for the replies alone.
                    exhausted = len(cells) < free and not blocked
                    claimed.extend(cells)
                    start()
                if not in_flight:  # a step just ran: nothing was claimed
                    if blocked:
                        await sync_to_async(work.budget_exhausted)()
                        summary.stopped_by = "budget"
                    break
                done, _ = await asyncio.wait(
                    in_flight, timeout=unrecorded.wait_s(), return_when=asyncio.FIRST_COMPLETED
                )
                in_flight.difference_update(done)
                unrecorded.add(done)
                failed = unrecorded.failed
                if not failed and not halted.is_set():
                    start()  # the freed slots' successors, before any step
                blocked = False  # actual costs may have freed part of the reservations
                due = (
                    halted.is_set()
                    or failed
                    or not in_flight
                    or (not claimed and not exhausted)
                    or unrecorded.due()
                )
            if lost.is_set():
                summary.stopped_by = "lost"
                break
            if in_flight:
                # Stopping (paused, cancelled, failed): abort the calls in flight; record
                # what had already landed.
                finished = await _abort(in_flight)
                await step(finished, 0)
                summary.count(finished)
            if not await sync_to_async(work.end)():
                break
        return summary
    finally:
        beat.cancel()
        for task in in_flight:
            task.cancel()
        await calls.aclose()
        if publisher is not None:
            await publisher.close()
        # The database work ran in sync_to_async's thread: close its connections there.
        await sync_to_async(connections.close_all)()
