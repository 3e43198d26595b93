"""Switching embedding model: memories move to the new model's index, none are lost or mixed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np
import openai
import pytest
import structlog

from gateway.clock import SystemClock
from gateway.config import Settings
from gateway.memory import reembed as reembed_module
from gateway.memory.embed import LocalEmbedder, UpstreamEmbedder
from gateway.memory.identity import Identity, tenant_for_key
from gateway.memory.memories import Memories
from gateway.memory.policy import load_policy
from gateway.memory.records import Memory
from gateway.memory.reembed import carry_over, keep_carrying_over, reembed
from gateway.storage.redis_server import EmbeddedRedis
from gateway.storage.store import Store
from gateway.upstream import Upstream as UpstreamClient
from tests.conftest import GatewayFactory, Upstream

pytestmark = pytest.mark.anyio


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
        plan = await old.create(me, content="去上海出差", type="plan")
        await old_store.aclose()

        settings = Settings(
            upstream_url=upstream.url,
            embeddings="upstream",
            embeddings_model="text-embedding-3-small",
        )
        client = UpstreamClient(settings)
        embedder = UpstreamEmbedder(settings, client)
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
        await client.aclose()
        await new_store.aclose()


class EarlierLocal(LocalEmbedder):
    """The local embedder as an earlier release named its vectors (float weights)."""

    model_id = "usem3"


def test_an_earlier_local_models_memories_are_moved_at_start_and_recalled(
    tmp_path: Path, make_gateway: GatewayFactory, shared_embedder: LocalEmbedder
) -> None:
    """An upgrade that changes the local model loses no memory: the gateway moves them into
    the new index in the background and recall finds them, ids unchanged."""
    key = "sk-carry-over"
    me = Identity(
        tenant=tenant_for_key(key), user="bob", project_id=None, mode="on", trace_id="tr_y"
    )

    async def write_old(url: str) -> str:
        store = Store(url)
        old = Memories(store, EarlierLocal(), load_policy(), SystemClock())
        await old.ready()
        out = await old.create(me, content="I am allergic to peanuts", type="profile")
        await store.aclose()
        return out.memory.id

    with EmbeddedRedis(tmp_path / "redis") as server:
        old_id = asyncio.run(write_old(server.url))
        gw = make_gateway(redis_url=server.url)
        client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
        injected: list[str] = []
        for _ in range(100):  # the move runs beside serving
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "Can I eat peanut butter cookies?"}],
                extra_headers={"X-Memory-User": me.user},
            )
            injected = [i for i in raw.headers["x-memory-injected"].split(",") if i]
            if injected:
                break
            time.sleep(0.1)
        assert injected == [old_id]

        async def keys() -> list[bytes]:
            store = Store(server.url)
            found = [k async for k in store.redis.scan_iter(match="memgate:mem:*")]
            await store.aclose()
            return found

        assert all(f"usem3q8-512:{me.tenant}".encode() in k for k in asyncio.run(keys()))


async def test_a_move_skips_a_memory_changed_since_it_was_read(tmp_path: Path) -> None:
    policy, clock = load_policy(), SystemClock()
    me = Identity(tenant="t-race", user="eve", project_id=None, mode="on", trace_id="tr_z")
    with EmbeddedRedis(tmp_path) as server:
        old_store = Store(server.url)
        old = Memories(old_store, EarlierLocal(), policy, clock)
        await old.ready()
        made = await old.create(me, content="I live in Berlin", type="profile")
        store = Store(server.url)
        await store.ensure_memory_index("usem3q8", 512)
        [(key, raw, _)] = [found async for found in store.memories_elsewhere()]
        # an older replica edits the memory after it was read for the move
        await old.update(me, made.memory.id, {"content": "I live in Munich"})
        moved = await store.move_memory(
            key,
            raw,
            Memory.from_hash(raw),
            search_text="berlin",
            embedding=np.zeros(512, np.float32),
            ttl_ms=-1,
        )
        assert moved is False
        assert (await old.get(me, made.memory.id)).content == "I live in Munich"
        assert await store.get_memory(me.tenant, me.user, made.memory.id) is None
        await old_store.aclose()
        await store.aclose()


async def test_with_an_upstream_embedder_start_up_only_reports_other_models(
    tmp_path: Path, upstream: Upstream, shared_embedder: LocalEmbedder
) -> None:
    """Re-embedding through the upstream costs API calls: the operator decides."""
    me = Identity(tenant="t-report", user="ann", project_id=None, mode="on", trace_id="tr_w")
    with EmbeddedRedis(tmp_path) as server:
        old_store = Store(server.url)
        await Memories(old_store, shared_embedder, load_policy(), SystemClock()).ready()
        await Memories(old_store, shared_embedder, load_policy(), SystemClock()).create(
            me, content="I prefer tea", type="preference"
        )
        settings = Settings(
            upstream_url=upstream.url,
            embeddings="upstream",
            embeddings_model="text-embedding-3-small",
        )
        client = UpstreamClient(settings)
        embedder = UpstreamEmbedder(settings, client)
        store = Store(server.url)
        new = Memories(store, embedder, load_policy(), SystemClock())
        await store.ensure_memory_index(embedder.model_id, 3)
        with structlog.testing.capture_logs() as logs:
            assert await carry_over(new) == 0
        [event] = [e for e in logs if e["event"] == "memories_under_another_model"]
        assert event["indexes"] == {"memgate-mem-usem3q8-512-v2": 1}
        assert (
            len(await Memories(old_store, shared_embedder, load_policy(), SystemClock()).list(me))
            == 1
        )
        await client.aclose()
        await store.aclose()
        await old_store.aclose()


async def test_moving_repeats_for_memories_an_older_replica_writes_later(
    tmp_path: Path, shared_embedder: LocalEmbedder
) -> None:
    """During a rolling upgrade replicas of the previous release still write under the old
    model; the background move picks those up in a later round."""
    me = Identity(tenant="t-rolling", user="kim", project_id=None, mode="on", trace_id="tr_v")
    with EmbeddedRedis(tmp_path) as server:
        old_store, store = Store(server.url), Store(server.url)
        old = Memories(old_store, EarlierLocal(), load_policy(), SystemClock())
        await old.ready()
        first = await old.create(me, content="I live in Lisbon", type="profile")
        new = Memories(store, shared_embedder, load_policy(), SystemClock())
        await new.ready()
        mover = asyncio.ensure_future(keep_carrying_over(new, every=0.05))
        try:
            later = None
            for _ in range(200):
                ids = {m.id for m in await new.list(me)}
                if later is None and first.memory.id in ids:
                    later = await old.create(me, content="I work as a nurse", type="profile")
                if later is not None and later.memory.id in ids:
                    break
                await asyncio.sleep(0.05)
            assert later is not None and ids == {first.memory.id, later.memory.id}
            assert await old.list(me) == []
        finally:
            mover.cancel()
            await old_store.aclose()
            await store.aclose()


class _Settled:
    """Just what the background move needs of ``Memories`` besides ``carry_over``."""

    class embedder:
        paid = False

    class typicality:
        @staticmethod
        async def sample() -> None:
            return None

    async def settle(self) -> int:
        return 0

    async def follow_topic_rules(self) -> int:
        return 0


async def test_stored_topics_follow_the_rules_when_settling_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The two passes of a round stand apart: one that fails does not hold up the other."""
    followed = asyncio.Event()

    class Memories(_Settled):
        async def settle(self) -> int:
            raise RuntimeError("settling failed")

        async def follow_topic_rules(self) -> int:
            followed.set()
            return 0

    await _first_round_until(followed, Memories(), monkeypatch)


async def _first_round_until(
    done: asyncio.Event, memories: _Settled, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs the background loop (with nothing to move) until ``done`` is set in its first
    round, then stops it."""

    async def nothing(memories: object) -> int:
        return 0

    monkeypatch.setattr(reembed_module, "carry_over", nothing)
    mover = asyncio.ensure_future(
        reembed_module.keep_carrying_over(memories, every=300)  # type: ignore[arg-type]
    )
    try:
        await asyncio.wait_for(done.wait(), timeout=60)
    finally:
        mover.cancel()
        with pytest.raises(asyncio.CancelledError):
            await mover


async def test_a_swallowed_cancellation_still_ends_the_background_move(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A library may turn a cancellation into an ordinary return (``asyncio.wait_for`` on
    Python 3.11 does when its inner call completes at the same moment): the loop still
    stops instead of going round for ever."""
    entered = asyncio.Event()

    async def swallowing(memories: object) -> int:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass  # dropped, as such a library would
        return 0

    monkeypatch.setattr(reembed_module, "carry_over", swallowing)
    mover = asyncio.ensure_future(
        reembed_module.keep_carrying_over(_Settled(), every=0.01)  # type: ignore[arg-type]
    )
    await entered.wait()
    mover.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(mover, timeout=60)


async def test_the_background_loop_embeds_the_request_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Recall fills in typicality for memories from before it only with the request sample
    at hand; the loop beside the gateway gets it, so no write has to come first."""
    asked = asyncio.Event()

    class Memories(_Settled):
        class typicality:
            @staticmethod
            async def sample() -> None:
                asked.set()

    await _first_round_until(asked, Memories(), monkeypatch)
