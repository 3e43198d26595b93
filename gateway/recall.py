"""Recall: the right few memories for one request, and the reason for every one left out.

Similar is not applicable. After hybrid retrieval (inside Redis, already filtered by owner,
status, scope and expiry) every candidate goes through the checks in a fixed order; the first
that fails is its recorded reason. Survivors are ranked, cut to the policy's count and then to
its token budget.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from . import inject, tokens
from .clock import Clock
from .embed import Embedder
from .identity import Identity
from .policy import Policy, RecallSpec
from .records import Memory
from .sensitivity import redact
from .store import Hit, Store, merge_hits
from .textsearch import search_text

LARGE_USER = 3000  # memories; above it the vector search walks HNSW in batches (measured)
_SEEN_CAPACITY = 100_000  # owners remembered as having memories
CHECKS = (
    "expired",
    "scope",
    "source",
    "threshold",
    "superseded",
    "conflict",
    "sensitivity",
    "paused",
)
# Every reason a candidate can be left out for: the checks, then the selection's cuts.
DROP_REASONS = (*CHECKS, "limit", "budget")


@dataclass(slots=True)
class Candidate:
    memory: Memory
    vector: float
    text: float
    fused: float
    text_norm: float = 0.0
    decision: str = "dropped"
    reason: str | None = None

    def to_trace(self) -> dict[str, Any]:
        m = self.memory
        return {
            "id": m.id,
            "type": m.type,
            "scope": m.scope,
            "project_id": m.project_id,
            "source": m.source,
            "slot": m.slot,
            "scores": {
                "vector": round(self.vector, 4),
                "text": round(self.text, 4),
                "fused": round(self.fused, 4),
            },
            "decision": self.decision,
            "reason": self.reason,
        }


@dataclass(slots=True)
class _Searches:
    """The two searches of one recall: keywords at once, the vector search as soon as the
    query is embedded."""

    keywords: asyncio.Future[tuple[dict[str, float], dict[str, Memory]]]
    vector: asyncio.Future[tuple[dict[str, float], dict[str, Memory]]]
    embedded_at: float

    def cancel(self) -> None:
        _abandon(self.keywords)
        _abandon(self.vector)


def _abandon(job: asyncio.Future[Any]) -> None:
    job.cancel()
    # an abandoned job's late failure is of no interest
    job.add_done_callback(lambda done: done.cancelled() or done.exception())


@dataclass(slots=True)
class RecallResult:
    query_hash: str | None = None
    candidates: list[Candidate] = field(default_factory=list)
    injected: list[Memory] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    tokens: int = 0
    conflicts: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)
    skipped: str | None = None


def latest_user_text(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content.strip()
        if isinstance(content, list):
            parts = [
                p.get("text", "")
                for p in content
                if isinstance(p, dict) and p.get("type") in ("text", "input_text")
            ]
            return " ".join(x for x in parts if isinstance(x, str)).strip()
        return ""
    return ""


class Recaller:
    def __init__(self, store: Store, embedder: Embedder, policy: Policy, clock: Clock) -> None:
        self.store = store
        self.embedder = embedder
        self.policy = policy
        self.clock = clock
        # Owners whose last settings read showed memories, with that count (insertion-ordered,
        # bounded): the count picks the vector search's plan before the read returns.
        self._with_memories: dict[tuple[str, str], int] = {}

    async def recall(self, ident: Identity, body: dict[str, Any]) -> RecallResult:
        clock = self.clock
        started = clock.monotonic()
        result = RecallResult()
        text = latest_user_text(body.get("messages"))
        if not text:
            result.skipped = "no_user_text"
            return result
        result.query_hash = hashlib.sha256(text.encode()).hexdigest()[:12]
        now = clock.now()
        store = self.store
        owner = (ident.tenant, ident.user)
        seen = self._with_memories.get(owner)
        # The settings read stays the authority, but for a user seen with memories before
        # the searches start beside it (saving its round trip); anyone else costs only that
        # read when the count says there is nothing to recall.
        settings_read = asyncio.ensure_future(store.get_settings(ident.tenant, ident.user))
        searches: _Searches | None = None
        try:
            if seen is not None:
                searches = await self._search(ident, text, now, large=seen > LARGE_USER)
            settings = await settings_read
        except BaseException:
            _abandon(settings_read)
            if searches:
                searches.cancel()
            raise
        count = int(settings.get("memory_count") or 0)  # kept beside the settings, never low
        if count <= 0:
            self._with_memories.pop(owner, None)
            if searches:
                searches.cancel()
            result.skipped = "no_memories"
            result.timings_ms = {"total": _ms(clock.monotonic() - started)}
            return result
        self._remember(owner, count)
        searches = searches or await self._search(ident, text, now, large=count > LARGE_USER)
        try:
            by_vector, near = await searches.vector
            by_text, worded = await searches.keywords
            hits = merge_hits(by_vector, by_text, near | worded)
        except BaseException:
            searches.cancel()
            raise
        t_embed = searches.embedded_at
        t_search = clock.monotonic()
        result.candidates = [score(hit, self.policy.recall) for hit in hits]
        result.candidates.sort(key=lambda c: c.fused, reverse=True)
        paused = store.recall_paused(settings)
        await self._check(result, ident, now, paused)
        self._select(result, str(body.get("model") or ""))
        t_filter = clock.monotonic()
        result.timings_ms = {
            "embed": _ms(t_embed - started),
            "search": _ms(t_search - t_embed),
            "filter": _ms(t_filter - t_search),
            "total": _ms(t_filter - started),
        }
        return result

    async def _search(self, ident: Identity, text: str, now: datetime, *, large: bool) -> _Searches:
        """Both searches under way: keywords first, so that Redis runs them while the query
        is embedded, then the vector search the moment the vector exists; the replies are
        read afterwards, while Redis works on the vector search."""
        # A secret the user typed means nothing to recall, and a query is a Redis command
        # (which Redis's slow log may keep): it is cut out before the query is built.
        text = redact(text[:2000], self.policy, "high", replacement=" ")
        expr = self.store.recall_filter(
            ident.tenant,
            ident.user,
            project_id=ident.project_id,
            task=ident.task,
            now_ts=now.timestamp(),
        )
        pool = self.policy.recall.candidate_pool
        keywords = asyncio.ensure_future(
            self.store.text_hits(expr, search_text(text), pool, load=True)
        )
        try:
            await self.store.sent()  # before a local embedder holds the loop
            vector = await self.embedder.embed_query(text)
        except BaseException:
            _abandon(keywords)
            raise
        return _Searches(
            keywords,
            asyncio.ensure_future(
                self.store.vector_hits(expr, vector, pool, large=large, load=True)
            ),
            self.clock.monotonic(),
        )

    def _remember(self, owner: tuple[str, str], count: int) -> None:
        seen = self._with_memories
        seen.pop(owner, None)  # most recent last
        seen[owner] = count
        if len(seen) > _SEEN_CAPACITY:
            del seen[next(iter(seen))]

    async def _check(
        self, result: RecallResult, ident: Identity, now: datetime, paused: bool
    ) -> None:
        alive: list[Candidate] = []
        for cand in result.candidates:
            cand.reason = self._first_failure(cand, ident, now)
            if cand.reason is None:
                alive.append(cand)
        result.conflicts = await self._resolve_conflicts(alive, ident)
        for cand in alive:
            if cand.reason is None and not self.policy.sensitivity.may_inject(
                cand.memory.sensitivity
            ):
                cand.reason = "sensitivity"
            if cand.reason is None and paused:
                cand.reason = "paused"

    def _first_failure(self, cand: Candidate, ident: Identity, now: datetime) -> str | None:
        m = cand.memory
        if m.expires_at is not None and m.expires_at <= now:
            return "expired"
        if not _in_scope(m, ident):
            return "scope"
        if not self.policy.has_source(m.source) or not self.policy.source(m.source).recall:
            return "source"
        if not self._relevant(cand):
            return "threshold"
        if m.status != "active" or m.superseded_by:
            return "superseded"
        return None

    def _relevant(self, cand: Candidate) -> bool:
        """Related in meaning, or a strong keyword match whose meaning is not unrelated.

        Decided apart from the ranking weights: keywords may dominate the order among
        relevant memories (they find names and details best) while a shared incidental
        word alone never makes a memory relevant, and a memory in another language (no
        shared words) is judged on its meaning.
        """
        bar = self.policy.recall.relevance
        if cand.vector >= bar.similarity:
            return True
        return cand.text_norm >= bar.keywords and cand.vector >= bar.keywords_min_similarity

    async def _resolve_conflicts(self, alive: list[Candidate], ident: Identity) -> int:
        """Two live memories about the same subject: the more recently confirmed one wins."""
        by_slot: dict[tuple[str, str, str], list[Candidate]] = {}
        for cand in alive:
            m = cand.memory
            if m.slot:
                by_slot.setdefault((m.slot, m.scope, m.project_id or ""), []).append(cand)
        conflicts = 0
        for group in by_slot.values():
            if len(group) < 2:
                continue
            group.sort(key=lambda c: _when(c.memory), reverse=True)
            vectors = await self.store.get_embeddings(
                ident.tenant, ident.user, [c.memory.id for c in group]
            )
            for i, newer in enumerate(group):
                if newer.reason is not None:
                    continue
                for older in group[i + 1 :]:
                    a, b = vectors.get(newer.memory.id), vectors.get(older.memory.id)
                    same_subject = (
                        a is None
                        or b is None
                        or float(np.dot(a, b)) >= self.policy.conflict.similarity
                    )
                    if older.reason is None and same_subject:
                        older.reason = "conflict"
                        conflicts += 1
        return conflicts

    def _select(self, result: RecallResult, model: str) -> None:
        limit = self.policy.recall.max_memories
        budget = self.policy.recall.token_budget
        used = tokens.count(inject.render([]), model)
        for cand in result.candidates:
            if cand.reason is not None:
                continue
            if len(result.injected) >= limit:
                cand.reason = "limit"
                continue
            line = inject.line_for(cand.memory)
            cost = tokens.count(line, model) + 1
            if used + cost > budget:
                cand.reason = "budget"
                continue
            used += cost
            cand.decision = "injected"
            result.injected.append(cand.memory)
            result.lines.append(line)
        result.tokens = used if result.injected else 0


def score(hit: Hit, spec: RecallSpec) -> Candidate:
    """The recaller's fused score (the benchmarks rank with it too)."""
    # BM25 s maps to s / (s + c): bounded like cosine and query-independent, so the
    # keyword bar keeps its meaning (c is recall.text_saturation in the policy).
    c = spec.text_saturation
    text_norm = hit.text / (hit.text + c) if hit.text > 0 else 0.0
    fused = spec.weights.vector * max(hit.vector, 0.0) + spec.weights.text * text_norm
    return Candidate(hit.memory, hit.vector, hit.text, fused, text_norm)


def _in_scope(memory: Memory, ident: Identity) -> bool:
    if memory.scope == "global":
        return True
    if memory.scope == "project":
        return bool(ident.project_id) and memory.project_id == ident.project_id
    if memory.scope.startswith("task:"):
        return ident.task is not None and memory.scope == f"task:{ident.task}"
    return False


def _when(memory: Memory) -> float:
    moment = memory.confirmed_at or memory.updated_at or memory.created_at
    return moment.timestamp() if moment else 0.0


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)
