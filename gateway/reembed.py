"""``memgate reembed``: move memories written under another embedding model into the current one.

Each model has its own index and key prefix (``memgate:mem:<model>-<dims>``), so vectors of two
models never mix; this command re-embeds every memory found under another prefix with the
configured embedder, writes it under the current prefix with the same id, TTL and fields,
and only then deletes the old key.
"""

from __future__ import annotations

from .embed import Embedder
from .memories import Memories
from .records import Memory
from .store import KEY_ROOT
from .textsearch import search_text


async def reembed(memories: Memories, batch: int = 64) -> int:
    await memories.ready()
    store = memories.store
    current = store.memory_key("x", "x", "x").rsplit(":x:x:x", 1)[0]
    moved = 0
    pending: list[tuple[bytes, Memory, int]] = []
    async for key in store.redis.scan_iter(match=f"{KEY_ROOT}:mem:*", count=1000):
        if key.decode().startswith(current + ":"):
            continue
        raw = await store.redis.hgetall(key)
        if not raw or b"content" not in raw:
            continue
        ttl = int(await store.redis.pttl(key))
        pending.append((key, Memory.from_hash(raw), ttl))
        if len(pending) >= batch:
            moved += await _flush(pending, memories.embedder, memories)
    moved += await _flush(pending, memories.embedder, memories)
    return moved


async def _flush(pending: list[tuple[bytes, Memory, int]], embedder: Embedder,
                 memories: Memories) -> int:
    if not pending:
        return 0
    store = memories.store
    vectors = await embedder.embed([memory.content for _, memory, _ in pending])
    for (old_key, memory, ttl_ms), vector in zip(pending, vectors, strict=True):
        memory.embedding_model = embedder.model_id
        expire_at = None
        if ttl_ms > 0:
            expire_at = memories.clock.now().timestamp() + ttl_ms / 1000
        await store.put_memory(memory, search_text=search_text(memory.content),
                               embedding=vector, expire_at=expire_at)
        await store.redis.delete(old_key)
    count = len(pending)
    pending.clear()
    return count
