"""The recaller's ordering on a real Redis: what reaches Redis before the query is embedded."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import numpy as np
import pytest
import redis

from gateway.clock import ManualClock, SystemClock
from gateway.embed import LocalEmbedder
from gateway.identity import Identity
from gateway.memories import Memories
from gateway.policy import load_policy
from gateway.recall import Recaller
from gateway.store import Store

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Watching:
    """The local embedder, noting how many script calls (the searches with their memories)
    Redis had run when a query embedding began. It looks from a second, blocking client, as
    the event loop is held meanwhile."""

    def __init__(self, inner: LocalEmbedder, redis_url: str) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.paid = inner.paid
        self.dims = inner.dims
        self.watcher = redis.Redis.from_url(redis_url)
        self.seen: list[int] = []

    def searches(self) -> int:
        stats = self.watcher.info("commandstats")
        return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self.inner.embed(texts)

    async def embed_query(self, text: str) -> np.ndarray:
        deadline = time.monotonic() + 2.0
        while self.searches() == 0 and time.monotonic() < deadline:
            time.sleep(0.005)  # noqa: ASYNC251 (held, as the inline embedding holds it)
        self.seen.append(self.searches())
        return await self.inner.embed_query(text)

    async def warm_up(self) -> None:
        return None


@pytest.fixture
async def recaller(
    redis_url: str, shared_embedder: LocalEmbedder
) -> AsyncIterator[tuple[Recaller, Memories, Watching]]:
    store = Store(redis_url)
    watching = Watching(shared_embedder, redis_url)
    policy = load_policy(None)
    clock = ManualClock(SystemClock().now())
    memories = Memories(store, watching, policy, clock)
    await memories.ready()
    yield Recaller(store, watching, policy, clock), memories, watching
    watching.watcher.close()
    await store.aclose()


@pytest.mark.parametrize("seen_before", [False, True])
async def test_the_keyword_search_reaches_redis_before_the_query_is_embedded(
    recaller: tuple[Recaller, Memories, Watching], seen_before: bool
) -> None:
    """Redis runs the keyword search while the query is embedded on the event loop; had the
    command not been written first, Redis would see no search until the embedding ended."""
    rec, memories, watching = recaller
    me = Identity(
        tenant="order", user=f"u{time.time_ns()}", project_id=None, mode="on", trace_id="t"
    )
    await memories.create(me, content="I drink green tea every morning", type="preference")
    body = {"messages": [{"role": "user", "content": "what should I drink this morning?"}]}
    if seen_before:  # the second recall starts its searches beside the settings read
        await rec.recall(me, body)
    watching.watcher.config_resetstat()
    result = await rec.recall(me, body)
    assert watching.seen[-1] >= 1
    assert [m.content for m in result.injected] == ["I drink green tea every morning"]
