"""The memory stages around a chat request: identity -> recall -> inject -> forward -> mine.

The proxy calls ``prepare`` before forwarding and ``finish`` after the answer has been relayed;
what happens in between those two calls is the only memory behaviour the proxy knows about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .identity import Identity


@dataclass(slots=True)
class Prepared:
    """What to forward: the client's bytes untouched, or a re-encoded dict with memories added."""

    content: bytes
    injected_ids: list[str] = field(default_factory=list)
    injected_tokens: int = 0


@dataclass(slots=True)
class Exchange:
    """One finished chat exchange, handed to the miner off the response path."""

    identity: Identity
    request: dict[str, Any]
    status: int
    injected_ids: list[str]


class MemoryPipeline(Protocol):
    async def prepare(self, identity: Identity, body: dict[str, Any], raw: bytes) -> Prepared: ...

    def finish(self, exchange: Exchange) -> None:
        """Called after the response is complete; must not block (schedule work instead)."""
        ...


class NoMemory:
    """Forwards every request unchanged: the pipeline when memory is not wired in."""

    async def prepare(self, identity: Identity, body: dict[str, Any], raw: bytes) -> Prepared:
        return Prepared(content=raw)

    def finish(self, exchange: Exchange) -> None:
        return None
