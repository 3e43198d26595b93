"""Writes made off the response path (traces, use counts, mining jobs), supervised.

A chat answer never waits for them, so nobody awaits their tasks: everything that can go
wrong is handled here. Each write is retried a few times while Redis is briefly unavailable,
a failure is counted (``memgate_background_failures_total``) and logged as JSON, and the
number of writes in flight is bounded so a stalled Redis cannot pile up tasks without end.

Mining jobs get more: a finished exchange that cannot be queued is kept in a bounded
in-process buffer and queued again once Redis answers; only a full buffer (or a shutdown
while Redis is still away) loses one, and that is counted and logged.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from gateway.observability.metrics import Metrics
from gateway.storage.store import backend_unavailable

log = structlog.get_logger("memgate.background")

Write = Callable[[], Awaitable[Any]]


class Background:
    def __init__(
        self,
        metrics: Metrics,
        *,
        max_in_flight: int = 10_000,
        attempts: int = 3,
        backoff: float = 0.05,
        buffer_size: int = 10_000,
        retry_every: float = 0.5,
    ) -> None:
        self.metrics = metrics
        self.max_in_flight = max_in_flight
        self.attempts = attempts
        self.backoff = backoff
        self.retry_every = retry_every
        self._tasks: set[asyncio.Task[None]] = set()
        self._buffer: collections.deque[Write] = collections.deque()
        self._buffer_size = buffer_size
        self._flusher: asyncio.Task[None] | None = None

    # -- fire and forget, supervised --------------------------------------------------------

    def spawn(self, task: str, write: Write) -> None:
        """Run ``write()`` in the background: retried while Redis is unavailable, its
        failure counted under ``task``, never an unretrieved task exception."""
        if len(self._tasks) >= self.max_in_flight:
            self._failed(task, "overflow", None)
            return
        job = asyncio.get_running_loop().create_task(self._run(task, write))
        self._tasks.add(job)
        job.add_done_callback(self._tasks.discard)

    async def _run(self, task: str, write: Write) -> None:
        for attempt in range(1, self.attempts + 1):
            try:
                await write()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if attempt < self.attempts and backend_unavailable(exc):
                    await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
                    continue
                self._failed(task, "error", exc, attempts=attempt)
                return

    def _failed(
        self, task: str, reason: str, exc: BaseException | None, *, attempts: int = 0
    ) -> None:
        self.metrics.background_failures.labels(task, reason).inc()
        log.warning(
            "background_write_failed",
            task=task,
            reason=reason,
            attempts=attempts,
            error=type(exc).__name__ if exc is not None else None,
        )

    # -- mining jobs: never dropped silently -------------------------------------------------

    def submit_mining(self, write: Write) -> None:
        """Queue a finished exchange for mining; kept and retried while Redis is away."""
        self.spawn("mining", lambda: self._mine(write))

    async def _mine(self, write: Write) -> None:
        try:
            await write()
        except Exception as exc:
            if not backend_unavailable(exc):
                raise
            self._keep(write)
            return
        self.metrics.mining_queued.inc()

    def _keep(self, write: Write) -> None:
        if len(self._buffer) >= self._buffer_size:
            self._failed("mining", "overflow", None)
            return
        self._buffer.append(write)
        self.metrics.mining_buffered.set(len(self._buffer))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_forever())

    async def _flush_forever(self) -> None:
        while self._buffer:
            if not await self.flush():
                await asyncio.sleep(self.retry_every)

    async def flush(self) -> bool:
        """Queue what the buffer holds, oldest first; False when Redis is still away."""
        while self._buffer:
            write = self._buffer[0]
            try:
                await write()
            except Exception as exc:
                if backend_unavailable(exc):
                    return False
                self._buffer.popleft()
                self._failed("mining", "error", exc, attempts=1)
            else:
                self._buffer.popleft()
                self.metrics.mining_queued.inc()
            finally:
                self.metrics.mining_buffered.set(len(self._buffer))
        return True

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def settle(self) -> None:
        """Wait until no write is in flight (buffered mining jobs may remain)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def drain(self, *, give_up: bool = True) -> None:
        """Wait for background writes, then try the buffer once more (shutdown, tests);
        what Redis still refuses is counted as lost when ``give_up``."""
        await self.settle()
        if self._buffer and not await self.flush() and give_up:
            lost = len(self._buffer)
            self._buffer.clear()
            self.metrics.mining_buffered.set(0)
            self.metrics.background_failures.labels("mining", "shutdown").inc(lost)
            log.error("mining_jobs_lost_at_shutdown", jobs=lost)
        if self._flusher is not None and not self._buffer:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
            self._flusher = None
