"""The one execution engine for LLM calls (generation jobs now, judge runs later).

It knows nothing of generation or evaluations: they plug in through ``Work``, which claims
pending cells (reserving budget for each), builds their requests, and records outcomes.
The engine keeps up to ``concurrency`` cells in flight through one ``ProviderClient`` per
connection, retries by the platform schedule, and checks the job's control state between
requests, so pause and cancel take effect within one in-flight window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.db import connections

from evalplatform.providers.llm.client import ProviderClient
from evalplatform.providers.llm.retry import RetryPolicy
from evalplatform.providers.llm.types import LLMRequest, LLMResponse, ProviderError


@dataclass
class Cell:
    id: int
    connection_id: int
    request: LLMRequest
    reserved_usd: Decimal
    meta: Any = None  # the work's own data about the cell


class Work(Protocol):
    concurrency: int
    retry: RetryPolicy

    def begin(self) -> bool:
        """Take the job's lease (recovering cells a dead runner left); False if held."""

    def control(self) -> str:
        """'run', or why to stop ('paused', 'cancelled', 'lost')."""

    def claim(self, limit: int) -> tuple[list[Cell], bool]:
        """Up to ``limit`` pending cells, marked running with budget reserved; and whether
        the budget stopped the claim."""

    def connection(self, connection_id: int) -> Any: ...

    def record_success(self, cell: Cell, response: LLMResponse, attempts: int) -> None: ...

    def record_failure(self, cell: Cell, error: ProviderError, attempts: int) -> None: ...

    def budget_exhausted(self) -> None: ...

    def end(self) -> bool:
        """Finish or release the job; True if the runner should keep going (resumed)."""


@dataclass
class RunSummary:
    succeeded: int = 0
    failed: int = 0
    stopped_by: str = ""


async def run_live(
    work: Work,
    *,
    client_factory: Callable[[Any], ProviderClient] | None = None,
    on_cell: Callable[[Cell], Awaitable[None]] | None = None,
) -> RunSummary:
    summary = RunSummary()
    if not await sync_to_async(work.begin)():
        summary.stopped_by = "held"
        return summary
    clients: dict[int, ProviderClient] = {}
    make_client = client_factory or (
        lambda conn: ProviderClient.for_connection(conn, retry=work.retry)
    )

    async def client_for(connection_id: int) -> ProviderClient:
        if connection_id not in clients:
            connection = await sync_to_async(work.connection)(connection_id)
            clients[connection_id] = make_client(connection)
        return clients[connection_id]

    async def execute(cell: Cell) -> None:
        client = await client_for(cell.connection_id)
        try:
            result = await client.complete(cell.request, retry=work.retry)
        except ProviderError as error:
            await sync_to_async(work.record_failure)(cell, error, error.attempts)
            summary.failed += 1
            return
        await sync_to_async(work.record_success)(cell, result.response, result.attempts)
        summary.succeeded += 1
        if on_cell is not None:
            await on_cell(cell)

    try:
        while True:
            in_flight: set[asyncio.Task[None]] = set()
            budget_blocked = False
            while True:
                control = await sync_to_async(work.control)()
                if control != "run":
                    summary.stopped_by = control
                    break
                free = work.concurrency - len(in_flight)
                if free > 0 and not budget_blocked:
                    cells, budget_blocked = await sync_to_async(work.claim)(free)
                    in_flight.update(asyncio.create_task(execute(c)) for c in cells)
                if not in_flight:
                    if budget_blocked:
                        await sync_to_async(work.budget_exhausted)()
                        summary.stopped_by = "budget"
                    break
                done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                in_flight -= done
                budget_blocked = False  # actual costs may have freed part of the reservation
                for task in done:
                    task.result()  # a bug in recording must not pass silently
            if in_flight:  # stopping: let what is in flight land and be recorded
                await asyncio.gather(*in_flight)
            if not await sync_to_async(work.end)():
                return summary
    finally:
        for client in clients.values():
            await client.aclose()
        # The database work ran in sync_to_async's thread: close its connections there.
        await sync_to_async(connections.close_all)()
