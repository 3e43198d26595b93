"""The memory stages around a chat request: identity -> recall -> inject -> forward -> mine.

The proxy calls ``prepare`` before forwarding and ``finish`` after the answer has been relayed;
what happens in between those two calls is the only memory behaviour the proxy knows about.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import msgspec
import structlog

from gateway import wire
from gateway.clock import Clock, to_iso
from gateway.memory import inject
from gateway.memory.background import Background
from gateway.memory.candidates import CandidateQueue
from gateway.memory.identity import Identity
from gateway.memory.recall import Recaller, RecallResult
from gateway.memory.records import Memory
from gateway.observability.metrics import Metrics
from gateway.storage import RedisError
from gateway.storage.store import Store

log = structlog.get_logger("memgate.memory")
_encoder = msgspec.json.Encoder()


@dataclass(slots=True)
class Prepared:
    """What to forward: the client's bytes untouched, or a re-encoded dict with memories added."""

    content: bytes
    injected: list[Memory] = field(default_factory=list)  # as injected (none in dry-run)
    injected_tokens: int = 0

    @property
    def injected_ids(self) -> list[str]:
        return [m.id for m in self.injected]


@dataclass(slots=True)
class Exchange:
    """One finished chat exchange, handed to the miner off the response path. ``injected``
    are the memories as the model saw them: the miner never proposes them again, without
    reading them back."""

    identity: Identity
    request: dict[str, Any]
    status: int
    injected: list[Memory]
    prompt_tokens: int | None = None  # the upstream's (or a local) count, memories included
    injected_tokens: int = 0


# Puts the rendered memory block into the body to forward: a chat request gets a system
# message (``inject.insert``), a Responses request its ``instructions``
# (``inject.with_instructions``).
Injector = Callable[[dict[str, Any], str], dict[str, Any]]


class MemoryPipeline(Protocol):
    async def prepare(
        self,
        identity: Identity,
        body: dict[str, Any],
        raw: bytes,
        inject_into: Injector = inject.insert,
    ) -> Prepared:
        """``body`` is read as a chat request (its ``messages``) for recall; ``inject_into``
        returns the body to forward with the memory block added."""
        ...

    def finish(self, exchange: Exchange) -> None:
        """Called after the response is complete; must not block (schedule work instead)."""
        ...


class _NoTurn(TimeoutError):
    """Recall's budget passed while it waited for a turn."""


class MemoryFlow:
    """recall -> inject before forwarding; trace and use counts written off the response path.

    A memory backend fault never costs the user their answer: the request is forwarded
    without memories and the fault is counted.
    """

    def __init__(
        self,
        recaller: Recaller,
        store: Store,
        metrics: Metrics,
        clock: Clock,
        trace_ttl_days: int,
        candidates: CandidateQueue | None = None,
        *,
        time_budget_ms: int = 1000,
        background: Background | None = None,
        max_concurrent: int = 0,
    ) -> None:
        self.recaller = recaller
        self.store = store
        self.metrics = metrics
        self.clock = clock
        self.trace_ttl = trace_ttl_days * 86400
        self.candidates = candidates
        self.time_budget = time_budget_ms / 1000
        self.background = background or Background(metrics)
        # Recalls share the event loop and the cores: hundreds at once all progress slowly
        # and all miss the budget together, where a few at a time each finish quickly. A
        # recall waits at most the budget for its turn, then has the budget for its work.
        self._turns = asyncio.Semaphore(max_concurrent) if max_concurrent > 0 else None

    async def prepare(
        self,
        identity: Identity,
        body: dict[str, Any],
        raw: bytes,
        inject_into: Injector = inject.insert,
    ) -> Prepared:
        if identity.mode == "off":
            return Prepared(content=raw)
        now = self.clock.now()
        try:
            # The budget bounds everything recall waits for (its turn, a free pooled
            # connection, a hung Redis, a slow embedder): past it the answer goes on without
            # memory.
            result = await self._recall_in_turn(identity, body)
        except TimeoutError as exc:
            self.metrics.recall_over_budget.inc()
            log.warning(
                "recall_over_budget",
                trace_id=identity.trace_id,
                budget_ms=round(self.time_budget * 1000),
                waited_for="turn" if isinstance(exc, _NoTurn) else "recall",
            )
            self._spawn("trace", lambda: self._save_trace(identity, now, None, "time_budget"))
            return Prepared(content=raw)
        except Exception as exc:
            component = "redis" if isinstance(exc, RedisError) else "embedder"
            self.metrics.backend_errors.labels(component).inc()
            log.warning("recall_failed", trace_id=identity.trace_id, error=type(exc).__name__)
            error = type(exc).__name__
            self._spawn("trace", lambda: self._save_trace(identity, now, None, error))
            return Prepared(content=raw)
        self._observe(result)
        self._spawn("trace", lambda: self._save_trace(identity, now, result))
        if identity.mode == "dry-run" or not result.injected:
            return Prepared(content=raw)
        prepared = Prepared(
            content=_encoder.encode(inject_into(body, result.message)),
            injected=list(result.injected),
            injected_tokens=result.tokens,
        )
        self._spawn(
            "use_count",
            lambda: self.store.mark_injected(
                identity.tenant, identity.user, prepared.injected_ids, now.timestamp()
            ),
        )
        return prepared

    async def _recall_in_turn(self, identity: Identity, body: dict[str, Any]) -> RecallResult:
        text = wire.latest_user_text(wire.messages_of(body))
        model = wire.model_of(body)
        turns = self._turns
        if turns is None:
            async with asyncio.timeout(self.time_budget):
                return await self.recaller.recall(identity, text, model=model)
        try:
            async with asyncio.timeout(self.time_budget):
                await turns.acquire()
        except TimeoutError:
            raise _NoTurn from None
        try:
            async with asyncio.timeout(self.time_budget):
                return await self.recaller.recall(identity, text, model=model)
        finally:
            turns.release()

    def finish(self, exchange: Exchange) -> None:
        """Queue the exchange for mining; the miner works from a Redis stream, off this path.
        The user's token counts (the report's injected share of prompt tokens) are added too."""
        if not 200 <= exchange.status < 300:
            return
        ident = exchange.identity
        if exchange.prompt_tokens:
            prompt, injected = exchange.prompt_tokens, exchange.injected_tokens
            self._spawn(
                "tokens",
                lambda: self.store.count_tokens(ident.tenant, ident.user, prompt, injected),
            )
        if self.candidates is None:
            return
        candidates = self.candidates
        messages = wire.messages_of(exchange.request)
        injected_texts = [m.content for m in exchange.injected]

        async def submit() -> None:
            await candidates.submit(
                exchange.identity, messages, injected_texts, trace_id=exchange.identity.trace_id
            )

        self.background.submit_mining(submit)

    def _observe(self, result: RecallResult) -> None:
        m = self.metrics
        for stage, ms in result.timings_ms.items():
            m.recall_duration.labels(stage).observe(ms / 1000)
        m.memories_injected.observe(len(result.injected))
        # Injected tokens are counted by the proxy, which knows whether they were sent (not in
        # dry-run) and the model label.
        for cand in result.candidates:
            if cand.reason:
                m.recall_dropped.labels(cand.reason).inc()
        if result.conflicts:
            m.conflicts.inc(result.conflicts)

    async def _save_trace(
        self, ident: Identity, when: datetime, result: RecallResult | None, error: str | None = None
    ) -> None:
        trace: dict[str, Any] = {
            "object": "memory.trace",
            "id": ident.trace_id,
            "created_at": to_iso(when),
            "user": ident.user,
            "project_id": ident.project_id,
            "task": ident.task,
            "mode": ident.mode,
            "error": error,
        }
        if result is not None:
            injected = [m.id for m in result.injected]
            trace.update(
                {
                    "query_hash": result.query_hash,
                    "query_preview": result.query_preview,
                    "skipped": result.skipped,
                    "candidates": [c.to_trace() for c in result.candidates],
                    "injected": injected if ident.mode == "on" else [],
                    "would_inject": injected,
                    "injected_tokens": result.tokens,
                    "conflicts": result.conflicts,
                    "query_topics": result.query_topics,
                    "resembled_topics": result.resembled_topics,
                    "searches": result.searches,
                    "timings_ms": result.timings_ms,
                }
            )
        await self.store.put_trace(ident.tenant, ident.user, ident.trace_id, trace, self.trace_ttl)

    def _spawn(self, task: str, write: Callable[[], Awaitable[Any]]) -> None:
        self.background.spawn(task, write)

    async def drain(self) -> None:
        """Wait for background writes (shutdown, tests)."""
        await self.background.drain()
