"""A run's events, throttled: at most one message per ``interval`` for the group, however
fast cells finish or tokens stream.

Events keep their order. Streamed text is coalesced per key (a cell) into one
``token_event`` per message carrying its ``offset`` in the cell's text, so a client that got
a snapshot of the partial text applies only what is new. A key's pending text is sent before
any later event about that key. Only the latest progress event of a window is sent.

``add``/``text``/``progress`` may be called from any thread (the engine's event loop streams
tokens; its database thread records cells); ``run`` and ``close`` belong to the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async

from evalplatform.live.transport import asend

logger = logging.getLogger(__name__)
WATCH_CHECK_S = 2.0
CLOSE_TIMEOUT_S = 15.0


class ThrottledPublisher:
    def __init__(
        self,
        group: str,
        *,
        token_event: str,
        interval: float = 0.1,
        save_texts: Callable[[dict[int, str]], None] | None = None,
    ):
        self.group = group
        self.token_event = token_event
        self.interval = interval
        self.save_texts = save_texts
        self._lock = threading.Lock()
        self._events: list[dict[str, Any]] = []
        self._progress: dict[str, Any] | None = None
        self._texts: dict[int, str] = {}
        self._pending: dict[int, tuple[int, str]] = {}  # key -> (offset, unsent text)
        self._dirty: set[int] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None
        self._stopping: asyncio.Event | None = None
        self._signalled = False
        self._task: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None
        # Whether a client watches the group (checked every WATCH_CHECK_S): replies stream
        # only then.
        self.watching = False

    # --- recording (any thread) -----------------------------------------------------------------
    def add(self, event: str, data: dict[str, Any], *, key: int | None = None) -> None:
        """Queue an event; ``key`` names the text it follows (a cell). An event without a
        key (the whole run's) comes after the progress recorded before it."""
        with self._lock:
            if key is not None:
                self._take_pending(key)
            elif self._progress is not None:
                self._events.append(self._progress)
                self._progress = None
            self._events.append({"event": event, "data": data})
        self._signal()

    def progress(self, event: str, data: dict[str, Any]) -> None:
        with self._lock:
            self._progress = {"event": event, "data": data}
        self._signal()

    def begin_text(self, key: int) -> None:
        """A key's text starts (again) from empty."""
        with self._lock:
            self._pending.pop(key, None)
            self._texts[key] = ""
            self._dirty.discard(key)

    def text(self, key: int, delta: str) -> None:
        if not delta:
            return
        with self._lock:
            before = self._texts.get(key, "")
            self._texts[key] = before + delta
            offset, unsent = self._pending.get(key, (len(before), ""))
            self._pending[key] = (offset, unsent + delta)
            self._dirty.add(key)
        self._signal()

    def end_text(self, key: int) -> None:
        with self._lock:
            self._take_pending(key)
            self._texts.pop(key, None)
            self._dirty.discard(key)

    def _take_pending(self, key: int) -> None:
        pending = self._pending.pop(key, None)
        if pending is not None:
            offset, delta = pending
            self._events.append(
                {
                    "event": self.token_event,
                    "data": {"output_id": key, "offset": offset, "delta": delta},
                }
            )

    def _signal(self) -> None:
        with self._lock:
            if self._signalled or self._loop is None or self._wakeup is None:
                return
            self._signalled = True
        self._loop.call_soon_threadsafe(self._wakeup.set)

    # --- sending (the event loop) ---------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wakeup = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task = self._loop.create_task(self._run())
        self._watch_task = self._loop.create_task(self._watch())
        self._signal()

    async def check_watching(self) -> bool:
        from evalplatform.live.presence import watched

        try:
            self.watching = await sync_to_async(watched)(self.group)
        except Exception:
            logger.exception("could not tell whether %s is watched", self.group)
        return self.watching

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_CHECK_S)
            await self.check_watching()

    async def _run(self) -> None:
        assert self._wakeup is not None and self._stopping is not None
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            with self._lock:
                self._signalled = False
            try:
                await self.flush()
            except Exception:  # live events are best effort; the run must go on
                logger.exception("live events of %s could not be sent", self.group)
            if self._stopping.is_set():
                return
            # The throttle: wait out the window, unless the run ends meanwhile.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval)

    async def flush(self) -> None:
        with self._lock:
            events, self._events = self._events, []
            for key in list(self._pending):
                self._take_pending(key)
            events.extend(self._events)
            self._events = []
            if self._progress is not None:
                events.append(self._progress)
                self._progress = None
            texts = {key: self._texts[key] for key in self._dirty if key in self._texts}
            self._dirty.clear()
        save = self.save_texts
        write = (lambda: save(texts)) if texts and save is not None else None
        if events or write is not None:
            await asend(self.group, events, with_write=write)

    async def close(self) -> None:
        """Stop the sender once it has sent what is left. A send in progress is never
        cancelled: a connection (Redis, the database) interrupted mid-command may not be
        usable again."""
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch_task
        if self._task is not None and self._stopping is not None and self._wakeup is not None:
            self._stopping.set()
            self._wakeup.set()
            try:
                await asyncio.wait_for(asyncio.shield(self._task), CLOSE_TIMEOUT_S)
            except TimeoutError:
                logger.warning("live events of %s: the last send did not finish", self.group)
                self._task.cancel()
                self._task = self._watch_task = None
                return
        try:
            await self.flush()  # what was recorded while the sender sent its last message
        except Exception:  # best effort, as every send: the run's own outcome stands
            logger.exception("live events of %s could not be sent", self.group)
        self._task = self._watch_task = None
