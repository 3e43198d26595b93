"""Switching embedding model: memories move to the new model's index, none are lost or mixed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.clock import SystemClock
from gateway.config import Settings
from gateway.embed import LocalEmbedder, UpstreamEmbedder
from gateway.identity import Identity
from gateway.memories import Memories
from gateway.policy import load_policy
from gateway.redis_server import EmbeddedRedis
from gateway.reembed import reembed
from gateway.store import Store
from tests.conftest import Upstream

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_reembed_moves_memories_to_the_upstream_model(
    tmp_path: Path, upstream: Upstream, shared_embedder: LocalEmbedder
) -> None:
    policy, clock = load_policy(), SystemClock()
    me = Identity(tenant="t-reembed", user="alice", project_id=None, mode="on", trace_id="tr_x")
    with EmbeddedRedis(tmp_path) as server:
        old_store = Store(server.url)
        old = Memories(old_store, shared_embedder, policy, clock)
        await old.ready()
        kept = await old.create(me, content="I prefer tea", type="preference")
        plan = await old.create(me, content="下周去上海出差", type="plan")
        await old_store.aclose()

        settings = Settings(upstream_url=upstream.url, embeddings="upstream",
                            embeddings_model="text-embedding-3-small")
        embedder = UpstreamEmbedder(settings)
        new_store = Store(server.url)
        new = Memories(new_store, embedder, policy, clock)
        assert await reembed(new) == 2
        assert embedder.dims == 3 and upstream.state.last("/embeddings")
        got = {m.id: m for m in await new.list(me)}
        assert set(got) == {kept.memory.id, plan.memory.id}
        assert got[kept.memory.id].embedding_model == "up-text-embedding-3-small"
        ttl = await new_store.redis.ttl(new_store.memory_key(me.tenant, me.user, plan.memory.id))
        assert 13 * 86400 < ttl <= 14 * 86400 + 2
        keys = [k async for k in new_store.redis.scan_iter(match="memgate:mem:*")]
        assert all(b"up-text-embedding-3-small-3" in k for k in keys), keys
        assert await reembed(new) == 0  # nothing left to move
        await embedder.aclose()
        await new_store.aclose()
