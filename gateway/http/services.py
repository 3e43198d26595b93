"""What the HTTP surface works with, typed, handed to every handler by litestar's dependency
injection as one parameter, ``services: Services`` (see ``gateway.app``).

One dependency rather than one per collaborator: litestar resolves a handler's independent
dependencies concurrently, in a task group per request, a cost paid on the proxy's hot path
for every request; a single dependency is awaited directly.

The HTTP surface does not import ``gateway.storage``: the store is seen through
``StoreView``, the few reads and writes the memory API and the admin page make directly;
the gateway keys are reached through the ``Gatekeeper`` that checks them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.clock import Clock
from gateway.config import Settings
from gateway.memory.access import Gatekeeper
from gateway.memory.background import Background
from gateway.memory.candidates import CandidateQueue
from gateway.memory.memories import Memories
from gateway.memory.pipeline import MemoryPipeline
from gateway.memory.policy import Policy
from gateway.memory.records import Memory
from gateway.observability.metrics import Metrics
from gateway.upstream import Upstream


class StoreView(Protocol):
    """The store's per-user settings, traces, history and admin sessions, as the HTTP surface
    uses them (memories themselves go through ``Memories``)."""

    async def readiness(self, within: float = 1.0) -> dict[str, Any]: ...

    async def get_settings(self, tenant: str, user: str) -> dict[str, str]: ...

    async def has_settings(self, tenant: str, user: str) -> bool: ...

    async def is_recall_paused(self, tenant: str, user: str) -> bool: ...

    async def set_recall_paused(self, tenant: str, user: str, paused: bool) -> None: ...

    async def get_trace(self, tenant: str, user: str, trace_id: str) -> dict[str, Any] | None: ...

    async def recent_traces(self, tenant: str, user: str) -> list[dict[str, Any]]: ...

    async def daily_recall(
        self, tenant: str, user: str, days: Sequence[str]
    ) -> dict[str, dict[str, int]]: ...

    async def history(self, tenant: str, user: str, memory_id: str) -> list[dict[str, Any]]: ...

    async def memories_by_id(self, tenant: str, user: str, ids: list[str]) -> dict[str, Memory]: ...

    async def put_admin_session(self, digest: str, ttl_seconds: int) -> None: ...

    async def admin_session_exists(self, digest: str) -> bool: ...

    async def delete_admin_session(self, digest: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Services:
    """The gateway's collaborators, opened once in the app's lifespan."""

    settings: Settings
    clock: Clock
    metrics: Metrics
    policy: Policy
    gate: Gatekeeper
    """Credential checks, and the gateway keys they check against."""
    store: StoreView
    memories: Memories
    candidates: CandidateQueue
    memory: MemoryPipeline
    """Recall before a chat request is forwarded, mining after it completed."""
    upstream: Upstream
    background: Background
