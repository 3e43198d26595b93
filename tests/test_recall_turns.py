"""Recalls take turns: at most ``recall_concurrency`` run at once, the others wait within the
recall time budget, so that overload does not make every recall miss the budget together.

The recaller here is a stand-in that only records how many recalls run at once (the real
recall is covered end to end elsewhere); nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.clock import SystemClock
from gateway.memory.background import Background
from gateway.memory.identity import Identity, new_trace_id
from gateway.memory.pipeline import MemoryFlow
from gateway.memory.recall import RecallResult
from gateway.observability.metrics import Metrics

pytestmark = pytest.mark.unit  # no Redis, servers or browsers


class CountingRecaller:
    """Counts recalls in flight; each yields to the loop a few times, as Redis calls do."""

    def __init__(self, hang: bool = False) -> None:
        self.running = 0
        self.peak = 0
        self.done = 0
        self.hang = hang

    async def recall(self, ident: Identity, text: str, *, model: str = "") -> RecallResult:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            if self.hang:
                await asyncio.Event().wait()
            for _ in range(3):
                await asyncio.sleep(0)
            self.done += 1
            return RecallResult(skipped="no_memories")
        finally:
            self.running -= 1


class TraceSink:
    async def put_trace(self, *args: Any) -> None:
        return None


def flow(recaller: CountingRecaller, metrics: Metrics, limit: int, budget_ms: int) -> MemoryFlow:
    return MemoryFlow(
        recaller,  # type: ignore[arg-type]
        TraceSink(),  # type: ignore[arg-type]
        metrics,
        SystemClock(),
        7,
        time_budget_ms=budget_ms,
        background=Background(metrics),
        max_concurrent=limit,
    )


def ident() -> Identity:
    return Identity("tenant", "user", None, "on", new_trace_id())


BODY = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


def test_at_most_the_configured_number_of_recalls_run_at_once() -> None:
    metrics = Metrics("t")
    recaller = CountingRecaller()

    async def run() -> None:
        memory = flow(recaller, metrics, limit=4, budget_ms=60_000)
        await asyncio.gather(*(memory.prepare(ident(), BODY, b"{}") for _ in range(40)))
        await memory.drain()

    asyncio.run(run())
    assert recaller.done == 40
    assert recaller.peak <= 4


def test_a_recall_waiting_for_its_turn_gives_up_within_the_budget() -> None:
    # Every turn is held by a recall that never finishes (a hung Redis): the ones waiting
    # for a turn go on without memory, counted, instead of waiting for ever.
    metrics = Metrics("t")
    recaller = CountingRecaller(hang=True)
    before = metrics.recall_over_budget._value.get()

    async def run() -> list[Any]:
        memory = flow(recaller, metrics, limit=1, budget_ms=50)
        out = await asyncio.gather(*(memory.prepare(ident(), BODY, b"{}") for _ in range(3)))
        await memory.drain()
        return out

    prepared = asyncio.run(run())
    assert [p.injected_ids for p in prepared] == [[], [], []]
    assert [p.content for p in prepared] == [b"{}"] * 3
    assert metrics.recall_over_budget._value.get() == before + 3
    assert recaller.peak == 1
