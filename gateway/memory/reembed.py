"""Moving memories written under another embedding model into the current one.

Each model has its own index and key prefix (``memgate:mem:<model>-<dims>``), so vectors of two
models never mix. ``reembed`` re-embeds every memory found under another prefix with the
configured embedder and moves it under the current prefix with the same id, TTL and fields;
the write and the old key's deletion are one transaction, skipped if the old key changed or
went meanwhile (another replica moving it, or an older one editing it), so nothing is lost
or written twice; what was skipped is moved by the next run.

Memories written before a memory said how it applies (``applies``, ``topics``) are given
what the policy derives for them, when moved and, in the current index, by ``Memories.settle``
in each round of ``keep_carrying_over``; after a change of the topic rules every stored
memory's topics are derived again (``Memories.follow_topic_rules``, in the same rounds).

``keep_carrying_over`` runs beside the gateway: with an embedder that costs nothing per call
(the local one) it moves what an earlier model left, and again every few minutes, since
replicas of the previous release may still write there during a rolling upgrade; with a paid
one (upstream) it only warns, once, since re-embedding is then the operator's choice
(``memgate reembed``).
"""

from __future__ import annotations

import asyncio

import structlog

from gateway.loops import raise_if_cancelled
from gateway.memory.memories import Memories
from gateway.memory.records import Memory
from gateway.memory.textsearch import search_text

log = structlog.get_logger("memgate")


async def reembed(memories: Memories, batch: int = 64) -> int:
    """Memories moved from other models' prefixes into the current one."""
    await memories.ready()
    moved = 0
    pending: list[tuple[bytes, dict[bytes, bytes], int]] = []
    async for found in memories.store.memories_elsewhere():
        pending.append(found)
        if len(pending) >= batch:
            moved += await _flush(pending, memories)
    moved += await _flush(pending, memories)
    return moved


async def carry_over(memories: Memories) -> int:
    """Memories under another model: moved, or only reported when the embedder is paid."""
    elsewhere = {
        name: count for name, count in (await memories.store.other_model_indexes()).items() if count
    }
    if not elsewhere:
        return 0
    if memories.embedder.paid:
        log.warning(
            "memories_under_another_model",
            indexes=elsewhere,
            hint="recall does not see them until `memgate reembed` moves them",
        )
        return 0
    log.info("reembed_started", indexes=elsewhere)
    moved = await reembed(memories)
    log.info("reembed_finished", moved=moved)
    return moved


async def keep_carrying_over(memories: Memories, *, every: float = 300.0) -> None:
    """``carry_over`` in the background until cancelled (reporting only: once). Serving
    never waits for it; a failed round is logged and retried. When nothing is left, a round
    is an index listing and a count per other model's index."""
    while True:
        try:
            await carry_over(memories)
        except Exception as exc:
            log.error("reembed_failed", error=type(exc).__name__, detail=str(exc)[:200])
        # the request sample, so that recall can fill in typicality for memories from before
        # it existed without a write first (failures are logged there and tried again)
        await memories.typicality.sample()
        try:
            settled = await memories.settle()
            if settled:
                log.info("memories_settled", settled=settled)
        except Exception as exc:
            log.error("settle_failed", error=type(exc).__name__)
        # apart: a round that could not settle still brings stored topics up to the rules
        try:
            rederived = await memories.follow_topic_rules()
            if rederived:
                log.info("memory_topics_rederived", memories=rederived)
        except Exception as exc:
            log.error("topic_rules_follow_failed", error=type(exc).__name__)
        if memories.embedder.paid:
            return
        raise_if_cancelled()
        await asyncio.sleep(every)


async def _flush(pending: list[tuple[bytes, dict[bytes, bytes], int]], memories: Memories) -> int:
    if not pending:
        return 0
    embedder = memories.embedder
    found = [Memory.from_hash(raw) for _, raw, _ in pending]
    unsettled = {m.id for m in found if not m.applies}
    found = [memories.settled(memory) for memory in found]
    vectors = await embedder.embed([memory.content for memory in found])
    typical = await memories.typicality.encoded(vectors)
    like = memories.resemblance
    if unsettled:  # memories from before applies existed: settled as a write would be
        await like.prepare()
        for memory, vector in zip(found, vectors, strict=True):
            if memory.id in unsettled:
                memory.applies = like.applies(
                    vector, memory.type, memory.slot, memory.scope, memory.applies
                )
    moved = 0
    for (old_key, raw, ttl_ms), memory, vector, typicality in zip(
        pending, found, vectors, typical, strict=True
    ):
        memory.embedding_model = embedder.model_id
        memory.typicality = typicality
        moved += await memories.store.move_memory(
            old_key,
            raw,
            memory,
            search_text=search_text(memory.content),
            embedding=vector,
            ttl_ms=ttl_ms,
        )
    pending.clear()
    return moved
