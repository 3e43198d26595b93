"""A gateway upgraded over memories an earlier release indexed: its new index holds them all
before it serves, the previous index stays for the previous release's replicas, and
dropping it later deletes no memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import redis
import structlog

from gateway.app import _previous_indexes
from gateway.cli import main
from gateway.clock import ManualClock, SystemClock
from gateway.memory.embed import LocalEmbedder
from gateway.memory.identity import Identity
from gateway.memory.memories import Memories
from gateway.memory.policy import load_policy
from gateway.memory.recall import Recaller
from gateway.memory.records import Memory, new_memory_id
from gateway.memory.textsearch import search_text
from gateway.storage.redis_server import EmbeddedRedis
from gateway.storage.store import Store, memory_index_name

FILLER = 1500  # enough that Redis is still indexing them when FT.CREATE returns


def _first_schema(name: str, prefix: str, dims: int) -> list[object]:
    """FT.CREATE of the index as the first schema declared it: numeric attributes named
    after their hash fields."""
    tags = ("id", "tenant", "user", "type", "source", "scope", "project_id", "slot")
    tags += ("sensitivity", "status", "content_key", "applies")
    numeric = ("created_at", "updated_at", "confirmed_at", "expires_ts", "inject_count")
    numeric += ("last_injected_at", "confidence")
    return [
        "FT.CREATE",
        name,
        "ON",
        "HASH",
        "PREFIX",
        1,
        prefix,
        "SCHEMA",
        *(part for tag in tags for part in (tag, "TAG", "CASESENSITIVE")),
        "topics",
        "TAG",
        "SEPARATOR",
        ",",
        "search_text",
        "TEXT",
        *(part for field in numeric for part in (field, "NUMERIC")),
        "embedding",
        "VECTOR",
        "HNSW",
        6,
        "TYPE",
        "FLOAT32",
        "DIM",
        dims,
        "DISTANCE_METRIC",
        "COSINE",
    ]


@pytest.mark.anyio
async def test_an_index_of_the_previous_schema_upgrades_without_losing_a_memory(
    tmp_path: Path, shared_embedder: LocalEmbedder
) -> None:
    embedder, policy, clock = shared_embedder, load_policy(), ManualClock(SystemClock().now())
    model, dims = embedder.model_id, embedder.dims or 512
    prefix = f"memgate:mem:{model}-{dims}"
    previous = f"memgate-mem-{model}-{dims}"
    me = Identity(tenant="t-upgrade", user="ann", project_id=None, mode="on", trace_id="tr_u")
    now = clock.now()
    with EmbeddedRedis(tmp_path) as server:
        old = Store(server.url)  # the previous release: its index, its memories
        await old.redis.execute_command(*_first_schema(previous, prefix, dims))
        rng = np.random.default_rng(7)
        texts = ["I drink green tea every morning", "Always answer me in English"]
        texts += [f"project note number {i}" for i in range(FILLER)]
        vectors = list(await embedder.embed(texts[:2]))
        vectors += [v / np.linalg.norm(v) for v in rng.normal(size=(FILLER, dims))]
        async with old.redis.pipeline(transaction=False) as pipe:
            for text, vector in zip(texts, vectors, strict=True):
                memory = Memory(
                    id=new_memory_id(),
                    tenant=me.tenant,
                    user=me.user,
                    content=text,
                    type="preference",
                    source="user_stated",
                    created_at=now,
                    updated_at=now,
                    confirmed_at=now,
                    embedding_model=model,
                    applies="always" if text.startswith("Always") else "relevant",
                )
                fields = memory.to_hash(
                    search_text=search_text(text),
                    embedding=np.asarray(vector, np.float32).tobytes(),
                )
                pipe.hset(f"{prefix}:{me.tenant}:{me.user}:{memory.id}", mapping=fields)
            await pipe.execute()
        await old.count_memories_written(me.tenant, me.user, len(texts), topical=len(texts) - 1)

        store = Store(server.url)
        memories = Memories(store, embedder, policy, clock)
        await memories.ready()  # builds this schema's index over the same memories
        assert store.index.name == memory_index_name(model, dims) != previous
        assert await store.index_built()
        assert (await store.readiness())["index"] is True
        assert len(await memories.list(me)) == len(texts)
        body = "Which tea do I drink?"
        result = await Recaller(store, embedder, policy, clock).recall(me, body)
        found = {c.memory.content for c in result.candidates}
        assert {"I drink green tea every morning", "Always answer me in English"} <= found

        # the previous release's replicas still search their own index meanwhile
        assert await store.previous_memory_indexes() == [previous]
        assert await store.other_model_indexes() == {}
        assert await store.drop_previous_memory_indexes() == [previous]
        listed = [_s(n) for n in await store.redis.execute_command("FT._LIST")]
        assert previous not in listed and store.index.name in listed
        assert len([k async for k in store.redis.scan_iter(match=f"{prefix}:*")]) == len(texts)
        assert await store.drop_previous_memory_indexes() == []
        await old.aclose()
        await store.aclose()


def _s(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@pytest.mark.anyio
async def test_start_up_keeps_the_previous_index_in_a_shared_redis_and_drops_it_in_its_own(
    tmp_path: Path,
) -> None:
    """A shared Redis may still serve replicas of the previous release; one the gateway
    started cannot."""
    prefix, previous = "memgate:mem:m1-4", "memgate-mem-m1-4"
    with EmbeddedRedis(tmp_path) as server:
        store = Store(server.url)
        await store.redis.execute_command(*_first_schema(previous, prefix, 4))
        await store.ensure_memory_index("m1", 4)
        with structlog.testing.capture_logs() as logs:
            await _previous_indexes(store, own_redis=False)
        [kept] = [e for e in logs if e["event"] == "previous_memory_index_kept"]
        assert kept["indexes"] == [previous]
        assert await store.previous_memory_indexes() == [previous]
        with structlog.testing.capture_logs() as logs:
            await _previous_indexes(store, own_redis=True)
        [dropped] = [e for e in logs if e["event"] == "previous_memory_index_dropped"]
        assert dropped["index"] == previous
        assert await store.previous_memory_indexes() == []
        await store.aclose()


def test_the_command_drops_only_indexes_a_current_one_replaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An earlier schema's index over memories no current index covers (a model this
    release never started with) stays: dropping it would hide those memories."""
    with EmbeddedRedis(tmp_path) as server:
        client = redis.Redis.from_url(server.url)
        client.execute_command(*_first_schema("memgate-mem-m1-4", "memgate:mem:m1-4", 4))
        client.execute_command(*_first_schema("memgate-mem-m2-4", "memgate:mem:m2-4", 4))

        async def current() -> None:
            store = Store(server.url)
            await store.ensure_memory_index("m1", 4)
            await store.aclose()

        asyncio.run(current())
        monkeypatch.setenv("MEMGATE_REDIS_URL", server.url)
        assert main(["drop-previous-indexes"]) == 0
        assert capsys.readouterr().out == "dropped memgate-mem-m1-4 (its memories stay)\n"
        left = sorted(_s(n) for n in client.execute_command("FT._LIST"))
        assert left == ["memgate-mem-m1-4-v2", "memgate-mem-m2-4"]
        client.close()
