"""The one execution engine for LLM calls: generation jobs, and judge runs (which are
generation jobs of the "judge" source).

It knows nothing of generation or evaluations: they plug in through ``Work``, which records
finished cells, says whether to go on, and claims pending cells (reserving budget for each).
The engine keeps up to ``concurrency`` cells in flight through one ``ProviderClient`` per
connection and retries by the platform schedule. With a publisher, and while someone
watches, replies stream and their text goes out as live events (throttled by the
publisher). All database work of one step (record what finished, read the job's state,
claim more) is one hop to the database thread, so its cost is shared by every cell that
finished together; the claim re-checks the job's state in its transaction. Between steps
the heartbeat watches the job too, so pause, cancel and a failure abort the calls in flight
within one beat.
"""

from __future__ import annotations

import asyncio
import logging
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
    attempts and the waits between them (``response.latency_s`` is the last attempt's)."""

    cell: Cell
    attempts: int
    response: LLMResponse | None = None
    error: ProviderError | None = None
    total_s: float | None = None


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


async def run_live(
    work: Work, *, client_factory: Callable[[Any], ProviderClient] | None = None
) -> RunSummary:
    summary = RunSummary()
    if not await sync_to_async(work.begin)():
        summary.stopped_by = "held"
        return summary
    clients: dict[int, ProviderClient] = {}
    make_client = client_factory or (
        lambda conn: ProviderClient.for_connection(conn, retry=work.retry)
    )
    step = sync_to_async(work.step)
    creating = asyncio.Lock()
    in_flight: set[asyncio.Task[Outcome]] = set()
    lost = asyncio.Event()

    publisher = work.publisher

    async def call(client: ProviderClient, cell: Cell) -> CallResult:
        # Replies stream only while someone watches the run.
        if publisher is None or not publisher.watching:
            return await client.complete(cell.request, retry=work.retry)
        try:
            return await client.complete_streaming(
                cell.request,
                lambda delta: publisher.text(cell.id, delta),
                on_attempt=lambda: publisher.begin_text(cell.id),
                retry=work.retry,
            )
        finally:
            publisher.end_text(cell.id)

    async def execute(cell: Cell) -> Outcome:
        try:
            if cell.connection_id not in clients:
                async with creating:  # one client (one pool) per connection
                    if cell.connection_id not in clients:
                        connection = await sync_to_async(work.connection)(cell.connection_id)
                        clients[cell.connection_id] = make_client(connection)
            result = await call(clients[cell.connection_id], cell)
        except ProviderError as error:
            return Outcome(cell, error.attempts, error=error)
        except Exception as exc:  # a cell's own failure must not stop the others
            logger.exception("cell %s failed inside the platform", cell.id)
            internal = ProviderError(
                f"Internal error: {type(exc).__name__}", kind="internal", retryable=False
            )
            return Outcome(cell, 1, error=internal)
        return Outcome(cell, result.attempts, response=result.response, total_s=result.total_s)

    async def heartbeat() -> None:
        # Keeps the lease while calls are slow, and watches the job between steps: a
        # runner that lost the lease stops at once (what it had in flight is no longer its
        # to record), and a job that was paused, cancelled or failed aborts its calls.
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
                if control == "lost":
                    lost.set()
                for task in in_flight:
                    task.cancel()
                return

    beat = asyncio.create_task(heartbeat())
    if publisher is not None:
        publisher.start()
        await publisher.check_watching()
    try:
        while not lost.is_set():
            finished: list[Outcome] = []
            blocked = False
            while not lost.is_set():
                free = 0 if blocked else work.concurrency - len(in_flight)
                control, cells, blocked = await step(finished, free)
                summary.count(finished)
                finished = []
                if control != "run":
                    summary.stopped_by = control
                    break
                in_flight.update(asyncio.create_task(execute(c)) for c in cells)
                if not in_flight:
                    if blocked:
                        await sync_to_async(work.budget_exhausted)()
                        summary.stopped_by = "budget"
                    break
                done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                in_flight.difference_update(done)
                finished = [task.result() for task in done if not task.cancelled()]
                blocked = False  # actual costs may have freed part of the reservations
            if lost.is_set():
                summary.stopped_by = "lost"
                break
            if in_flight:
                # Stopping (paused, cancelled, failed): abort the calls in flight (their
                # cells go back to pending at ``end``); record what had already landed.
                for task in in_flight:
                    task.cancel()
                finished = [
                    o
                    for o in await asyncio.gather(*in_flight, return_exceptions=True)
                    if isinstance(o, Outcome)
                ]
                in_flight.clear()
                await step(finished, 0)
                summary.count(finished)
            if not await sync_to_async(work.end)():
                break
        return summary
    finally:
        beat.cancel()
        for task in in_flight:
            task.cancel()
        for client in clients.values():
            await client.aclose()
        if publisher is not None:
            await publisher.close()
        # The database work ran in sync_to_async's thread: close its connections there.
        await sync_to_async(connections.close_all)()
