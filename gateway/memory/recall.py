"""Recall: the right few memories for one request, and the reason for every one left out.

Two lanes share one selection. Standing memories (``applies: always``: answer language,
format, accessibility, a project's stack) shape every request in their scope although they
share no words with it: a tag query fetches them, no vector search. Topical memories
(``applies: relevant``: an allergy, a pet, a plan) must also be relevant to the latest user
message: hybrid retrieval plus a topic query find them inside Redis, already filtered by owner,
status, scope, expiry and lane. Every candidate goes through the checks in a fixed order; the
first that fails is its recorded reason. Topical survivors take their places first, so
standing ones never crowd them out; all fit the policy's counts and token budget.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import structlog

from gateway.clock import Clock
from gateway.memory import inject
from gateway.memory.embed import Embedder
from gateway.memory.fitted import FittedRelevance
from gateway.memory.identity import Identity
from gateway.memory.policy import (
    Policy,
    asks_for_writing,
    change_may_replace,
    change_names,
    change_subjects,
    general_question,
    says_change,
    topics_of,
)
from gateway.memory.records import Memory
from gateway.memory.reference import RETRY_AFTER
from gateway.memory.resemblance import ResembledTopics
from gateway.memory.selection import (
    STANDING,
    TOPICAL,
    Candidate,
    first_failure,
    in_scope,
    score,
    select,
    specificity,
    when,
)
from gateway.memory.sensitivity import Scan, redact, scan
from gateway.memory.textsearch import Names, mostly_han, name_words, names_in_han, search_text
from gateway.memory.typicality import Typicality
from gateway.storage.store import Hit, Store, merge_hits

log = structlog.get_logger("memgate")

# What a user pastes to be worked on (code, an essay, a quoted email) is the object of the
# request, not a subject of the user's life: its words ("kitchen", "coffee" in a story;
# "index" in SQL) must not pull memories of those topics in.
_PASTED = re.compile(
    r"```.*?(?:```|\Z)"  # fenced code
    # anything quoted (a phrase to explain, a title, a story), not inch marks after a number
    r"|(?<!\d)[\"“「『][^\"”」』\n]+[\"”」』]"
    r"|^>[^\n]*"  # quoted lines of an email
    # what follows "translate / rewrite ...:" is the text to work on
    # (the instruction stays); not a time ("6:30") nor a word like "edit" or "improve"
    r"|(?P<ask>(?i:(?<![a-z])(?:rewrite|rephrase|paraphrase|translate|proofread|summari[sz]e|"
    r"polish)(?![a-z])[^:：\n.?!。？！]{0,60}(?<!\d)[:：](?!\d))"
    r"|(?:翻译|翻成|译成|改写|润色|校对|概括)[^:：\n。？！]{0,30}[:：])"
    # ... the rest of its line, or the paragraph that starts on the next line
    r"(?:[ \t]*[^\s][^\n]*|[ \t]*\n(?:[^\n]|\n(?![ \t]*\n))*)",
    re.DOTALL | re.MULTILINE,
)


def own_words(text: str) -> str:
    """The request without fenced code, quoted text, quoted lines and the text after "rewrite
    / translate ...:": the words whose topics say what the request is about."""
    return read_own_words(text)[0]


def works_on_given_text(text: str) -> bool:
    """Whether the request asks to translate, rewrite, proofread or summarise a text it
    carries after a colon ("帮我翻译这句话：..."): then its own words are the instruction alone."""
    return read_own_words(text)[1]


def meaning_text(text: str, own: str) -> str:
    """What recall embeds for a request: its own words (``own_words``), since a sentence to
    translate or a story to proofread says nothing of what the user needs from their
    memories; the whole request when it has none of its own (a bare quote)."""
    return own if own.strip() else text


def read_own_words(text: str) -> tuple[str, bool]:
    """``own_words`` and ``works_on_given_text`` in one pass over the request (recall reads
    both on every request)."""
    asked = False

    def kept(m: re.Match[str]) -> str:
        nonlocal asked
        ask: str | None = m.group("ask")
        asked = asked or bool(ask)
        return ask or " "

    return _PASTED.sub(kept, text), asked


# Memories of one user above which recall switches to its large-user searches: the vector
# search walks HNSW in batches, and the keyword search leaves out the topic clause (see
# ``Recaller._search``). ``memgate bench recall`` times both sides of it.
LARGE_USER = 3000
_QUERY_CHARS = 2000  # of the question, searched for (a question, not a document)
_SEEN_CAPACITY = 100_000  # owners remembered as having memories
# Owners whose standing memories are cached (each up to recall.standing_pool memories, so
# this bounds the cache's memory use); the least recently recalled are dropped first.
_STANDING_CAPACITY = 10_000
# Memory texts whose change reading is kept (each at most limits.max_content_chars; most
# are a sentence), cleared when full.
_CHANGES_CAPACITY = 20_000


@dataclass(slots=True)
class _Searches:
    """One recall's topical searches: the keyword-or-topic query at once, the vector search
    once the query is embedded."""

    keywords: asyncio.Future[tuple[dict[str, float], dict[str, Memory]]]
    vector: asyncio.Future[tuple[dict[str, float], dict[str, Memory]]]
    query_topics: list[str]
    memory_topics: frozenset[str]  # memory topics that matter to the request's topics
    # ... and those its subject reaches, linking or not: a memory about the subject of a
    # text to write is not about other things (no off-topic bar), though not linked by it
    subject_topics: frozenset[str]
    query_terms: frozenset[str]
    query_names: frozenset[str]  # names inside the request's sentences (name_words)
    # capitalised words opening the request's sentences: names only if a memory writes them
    # capitalised inside a sentence ("Leo has a book report" and "My son Leo is dyslexic")
    query_leading: frozenset[str]
    embedded_at: float
    # memory topics the request calls for by resemblance (ResembledTopics), worked out
    # while Redis runs the searches
    resembled: frozenset[str]
    query_vector: np.ndarray  # the request's own words' embedding
    # the stored vectors of the memories the vector search finds, by memory id, once it has
    # answered (for FittedRelevance; empty when that is off)
    memory_vectors: dict[str, np.ndarray]
    topic_clause: bool  # whether the keyword search also found memories by topic
    scanned: tuple[str, Scan]  # the text searched for and its sensitivity scan
    # asks how the world is, not about the user (policy.general_question), or only works on
    # a text it carries with an instruction that names no topic (Recaller._about)
    general: bool

    @property
    def names(self) -> list[str]:
        return ["keywords", *(["topics"] if self.topic_clause else []), "vector"]

    def cancel(self) -> None:
        _abandon(self.keywords)
        _abandon(self.vector)


@dataclass(slots=True)
class _About:
    query_topics: list[str]
    memory_topics: list[str]  # memory topics that matter to the request's topics
    subject_topics: frozenset[str]
    names: Names
    general: bool
    writing: bool  # a text to write for someone to read (``WritingSpec``)


@dataclass(slots=True)
class _Standing:
    memories: list[Memory]
    queried: bool


def _abandon(job: asyncio.Future[Any]) -> None:
    job.cancel()
    # an abandoned job's late failure is of no interest
    job.add_done_callback(lambda done: done.cancelled() or done.exception())


@dataclass(slots=True)
class _Owner:
    """What the last settings read said of one owner, to plan the next recall before the
    read returns: how many memories, how many topical (None: not known), paused."""

    count: int
    topical: int | None
    paused: bool


@dataclass(slots=True)
class RecallResult:
    query_hash: str | None = None
    query_preview: str | None = None  # the question's start, redacted (policy: trace_preview_chars)
    candidates: list[Candidate] = field(default_factory=list)
    injected: list[Memory] = field(default_factory=list)
    standing_lines: list[str] = field(default_factory=list)
    fact_lines: list[str] = field(default_factory=list)
    tokens: int = 0
    conflicts: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)
    skipped: str | None = None
    query_topics: list[str] = field(default_factory=list)
    # memory topics the request takes from the example requests it reads like
    resembled_topics: list[str] = field(default_factory=list)
    searches: list[str] = field(default_factory=list)  # which searches Redis ran

    @property
    def message(self) -> str:
        """The memory message for what was selected."""
        return inject.render(self.standing_lines, self.fact_lines)


class Recaller:
    def __init__(self, store: Store, embedder: Embedder, policy: Policy, clock: Clock) -> None:
        self.store = store
        self.embedder = embedder
        self.policy = policy
        self.clock = clock
        self.typicality = Typicality(embedder, policy)
        self.resembled = ResembledTopics(embedder, policy)
        self.fitted = FittedRelevance(policy.recall.relevance.fitted, embedder)
        # Owners seen at their last settings read (insertion-ordered, bounded).
        self._owners: dict[tuple[str, str], _Owner] = {}
        # Owners' standing memories, with the memory version they were read at (bounded).
        self._standing_cache: dict[tuple[str, str], tuple[str, list[Memory]]] = {}
        # whether a memory's text says something changed, by text (``_says_change``)
        self._changes: dict[str, bool] = {}

    async def recall(self, ident: Identity, text: str, *, model: str = "") -> RecallResult:
        """The memories to inject for ``text`` (the latest user message, ``wire.latest_user_text``);
        ``model`` picks the tokenizer that counts them against the token budget."""
        clock = self.clock
        started = clock.monotonic()
        result = RecallResult()
        if not text:
            result.skipped = "no_user_text"
            return result
        result.query_hash = hashlib.sha256(text.encode()).hexdigest()[:12]
        now = clock.now()
        store = self.store
        owner = (ident.tenant, ident.user)
        seen = self._owners.get(owner)
        # The settings read stays the authority, but for a user seen with topical memories
        # (and not paused) the topical searches start beside it, saving its round trip;
        # anyone else costs only that read when it says there is nothing to recall.
        settings_read = asyncio.ensure_future(store.get_settings(ident.tenant, ident.user))
        searches: _Searches | None = None
        try:
            if seen is not None and not seen.paused and _searches_topical(seen):
                searches = await self._search(ident, text, None, now, seen)
            settings = await settings_read
            # for the trace, once the searches (if any) are on their way
            result.query_preview, scanned = self._preview(
                text, searches.scanned if searches else None
            )
        except BaseException:
            _abandon(settings_read)
            if searches:
                searches.cancel()
            raise
        count = int(settings.get("memory_count") or 0)  # kept beside the settings, never low
        topical_raw = settings.get("topical_count")
        known = _Owner(
            count,
            int(topical_raw) if topical_raw is not None else None,
            store.recall_paused(settings),
        )
        if count <= 0 or known.paused:
            if count <= 0:
                self._owners.pop(owner, None)
            else:
                self._remember(owner, known)
            if searches:
                searches.cancel()
            result.skipped = "paused" if count > 0 else "no_memories"
            result.timings_ms = {"total": _ms(clock.monotonic() - started)}
            return result
        self._remember(owner, known)
        if searches is None and _searches_topical(known):
            searches = await self._search(ident, text, scanned, now, known)
        elif searches is not None and not _searches_topical(known):
            searches.cancel()
            searches = None
        try:
            standing = await self._standing(ident, settings.get("version") or "")
            hits = await self._gather(searches) if searches else []
        except BaseException:
            if searches:
                searches.cancel()
            raise
        typical = await self._typicality(ident, hits) if hits else {}
        resembled = searches.resembled if searches else frozenset()
        t_embed = searches.embedded_at if searches else clock.monotonic()
        t_search = clock.monotonic()
        spec = self.policy.recall
        result.searches = [STANDING if standing.queried else "standing_cached"]
        if searches:
            result.query_topics = searches.query_topics
            result.resembled_topics = sorted(resembled)
            result.searches += searches.names
        held = self.policy.held_topics
        # the question as it was searched for (a pasted traceback past it says nothing)
        asked_in_han = mostly_han(text[:_QUERY_CHARS])
        for hit in hits:
            cand = score(hit, spec, typical.get(hit.memory.id, 0.0))
            if asked_in_han is not None:
                written_in_han = mostly_han(hit.memory.content)
                cand.other_language = written_in_han is not None and written_in_han != asked_in_han
            cand.topics = tuple(t for t in hit.memory.topics if t in searches.memory_topics)  # type: ignore[union-attr]
            if cand.topics:
                cand.fused += spec.topic_bonus
            else:
                # about other things than the request: by its words' topics (a plan is on
                # the agenda by its type alone, which says nothing of what it is about)
                worded = set(hit.memory.topics) - held
                cand.off_topic = bool(
                    worded and searches.query_topics and not worded & searches.subject_topics  # type: ignore[union-attr]
                )
                # ... though maybe about one the request calls for by resemblance, which
                # links it at a closer meaning (``selection.relevant``); every other test
                # still sees it as about other topics
                cand.resembled = tuple(sorted(resembled.intersection(hit.memory.topics)))
            result.candidates.append(cand)
        result.candidates.sort(key=lambda c: c.fused, reverse=True)
        # the cache holds every scope and expiry: the request sees what Redis's filter would
        result.candidates += [
            Candidate(m, 0.0, 0.0, 0.0, lane=STANDING)
            for m in standing.memories
            if in_scope(m, ident) and (m.expires_at is None or m.expires_at > now)
        ]
        if searches and not searches.general:
            self._fitted(searches, result.candidates)
        terms = searches.query_terms if searches else frozenset()
        names = searches.query_names if searches else frozenset()
        leading = searches.query_leading if searches else frozenset()
        general = searches.general if searches else False
        await self._check(result, ident, now, terms, names, leading, general)
        self._select(result, model)
        t_filter = clock.monotonic()
        result.timings_ms = {
            "embed": _ms(t_embed - started),
            "search": _ms(t_search - t_embed),
            "filter": _ms(t_filter - t_search),
            "total": _ms(t_filter - started),
        }
        return result

    def _preview(
        self, text: str, scanned: tuple[str, Scan] | None
    ) -> tuple[str | None, tuple[str, Scan] | None]:
        """The question's first characters for the trace, with secrets and personal
        identifiers (contact details included) cut out first (None when the policy keeps
        no preview), and the text scanned with its scan. Either scan serves the other when
        both are of the same text (a question is usually shorter than either's cut):
        ``scanned`` is the search query's, if it ran first."""
        chars = self.policy.recall.trace_preview_chars
        if not chars:
            return None, None
        head = text[: chars * 4]
        found = (
            scanned[1] if scanned is not None and scanned[0] == head else scan(head, self.policy)
        )
        clean = " ".join(redact(head, self.policy, "medium", scanned=found).split())
        preview = clean if len(clean) <= chars else clean[: chars - 1].rstrip() + "…"
        return preview, (head, found)

    async def _standing(self, ident: Identity, version: str) -> _Standing:
        """The owner's standing memories (every scope; checks pick the request's): from
        this process's cache while the owner's memory version is the one it was read at,
        else from a tag query, run after the settings read so that a write after that read
        always changes the version the next recall sees."""
        owner = (ident.tenant, ident.user)
        cache = self._standing_cache
        cached = cache.pop(owner, None)
        if cached is not None and version and cached[0] == version:
            cache[owner] = cached  # most recently recalled last
            return _Standing(cached[1], queried=False)
        expr = self.store.standing_filter(ident.tenant, ident.user)
        found = list(
            (await self.store.standing_hits(expr, self.policy.recall.standing_pool)).values()
        )
        if version:
            cache[owner] = (version, found)
            if len(cache) > _STANDING_CAPACITY:
                del cache[next(iter(cache))]
        return _Standing(found, queried=True)

    async def _search(
        self,
        ident: Identity,
        question: str,
        scanned: tuple[str, Scan] | None,
        now: datetime,
        plan: _Owner,
    ) -> _Searches:
        """The topical searches for ``question`` under way: the keyword-or-topic query
        first, so that Redis runs it while the query is embedded, then the vector search
        the moment the vector exists. The replies are read afterwards. ``scanned``: a
        text and its sensitivity scan, reused if the query is that text."""
        # A secret the user typed means nothing to recall, and a query is a Redis command
        # (which Redis's slow log may keep): it is cut out before the query is built.
        head = question[:_QUERY_CHARS]
        if scanned is None or scanned[0] != head:
            scanned = (head, scan(head, self.policy))
        text = redact(head, self.policy, "high", replacement=" ", scanned=scanned[1])
        store = self.store
        # rendered once: both searches use it, and rendering is not free
        expr = str(
            store.recall_filter(
                ident.tenant,
                ident.user,
                project_id=ident.project_id,
                task=ident.task,
                now_ts=now.timestamp(),
                applies="relevant",
            )
        )
        spec = self.policy.recall
        own, given = read_own_words(text)
        words = search_text(text)
        pool = spec.candidate_pool
        large = plan.count > LARGE_USER
        # For a large user a topic the request shares selects thousands of memories that the
        # tag match gives no order: Redis would score every one of them to hand back an
        # arbitrary few. There, topical memories are found by their words and their meaning
        # (the vector search), and a shared topic still counts towards relevance: the
        # request's topics are then read while Redis runs both searches, not before.
        about = None if large else self._about(own, given)
        by_topic = about.memory_topics if about is not None else []
        keywords = asyncio.ensure_future(
            store.text_hits(
                expr,
                words,
                max(spec.topic_pool or 0, pool) if by_topic else pool,
                topics=by_topic,
                load=True,
            )
        )
        vector_search: asyncio.Future[tuple[dict[str, float], dict[str, Memory]]] | None = None
        found: dict[str, np.ndarray] = {}
        try:
            await store.sent()  # before a local embedder holds the loop
            vector = await self.embedder.embed_query(meaning_text(text, own))
            vector_search = asyncio.ensure_future(
                store.vector_hits(
                    expr,
                    vector,
                    pool,
                    large=large,
                    load=True,
                    embeddings=found if self.fitted.enabled else None,
                )
            )
            embedded_at = self.clock.monotonic()
            await store.sent()  # before the topics or the caller's preview hold the loop
            if about is None:
                about = self._about(own, given)
            # a request asking how the world is links nothing of the user's life by topics, a text
            # to write only through who writes or reads it (``WritingSpec``), as its words do
            resembled = frozenset() if about.general else self.resembled.topics(vector)
            if about.writing:
                resembled = resembled.intersection(self.policy.recall.relevance.writing.links)
        except BaseException:
            _abandon(keywords)
            if vector_search is not None:
                _abandon(vector_search)
            raise
        return _Searches(
            keywords,
            vector_search,
            about.query_topics,
            frozenset(about.memory_topics),
            about.subject_topics,
            # the words shared with a memory are the request's own: a sentence to translate
            # or a story to proofread is not what the user asks about
            frozenset((words if own == text else search_text(own)).split()),
            about.names.inside - self.policy.vocabulary,
            about.names.opening - self.policy.vocabulary,
            embedded_at,
            resembled,
            vector,
            found,
            bool(by_topic),
            scanned,
            about.general,
        )

    def _about(self, own: str, given: bool) -> _About:
        """What the request's own words are about: its topics, the memory topics they
        reach (found by keywords) and the names it holds. ``given``: the request works on a
        text it carries (``works_on_given_text``); when its instruction names no topic, the
        user's life is no part of it ("帮我翻译这句话：..."), and the meaning of a bare
        instruction says nothing, so only a name both write links a memory, as for a
        question about how the world is. A request to write a text for someone to read
        (``WritingSpec``) reaches a memory only through the topics of who and when: what the
        text is about is the readers' business."""
        policy = self.policy
        query_topics = topics_of(own, policy)
        names = Names(frozenset(), frozenset())
        if policy.recall.relevance.shared_name:
            # a capitalised word written against Chinese is a name (names_in_han), also
            # where it opens a sentence ("Pepper 最近不爱吃饭"), which name_words reads as
            # opening one only
            read, han = name_words(own), names_in_han(own)
            names = Names(read.inside | han, read.opening - han)
        subject = policy.topics_reaching(query_topics)
        reached = subject
        writing = asks_for_writing(own, policy)
        if reached and writing:
            reached = reached.intersection(policy.recall.relevance.writing.links)
        return _About(
            query_topics,
            sorted(reached),
            subject,
            names,
            general_question(own, policy) or (given and not query_topics),
            writing,
        )

    async def prepare(self) -> bool:
        """Embed the policy's example requests (``ResembledTopics``), which recall never
        does; whether they are at hand. Until they are, no request takes a topic by
        resemblance."""
        return await self.resembled.prepare()

    async def keep_preparing(
        self, first: asyncio.Future[bool] | None = None, every: float = RETRY_AFTER + 1.0
    ) -> None:
        """``prepare`` until the examples are at hand, after the ``first`` try still under
        way or failed (an embedder down or slow at start-up); each try after the texts' own
        pause following a failure (``RETRY_AFTER``)."""
        if first is not None and await first:
            return
        while True:
            await asyncio.sleep(every)
            if await self.prepare():
                return

    async def _typicality(self, ident: Identity, hits: list[Hit]) -> dict[str, float]:
        """Each found memory's typicality (none when the policy turns it off). Missing ones
        (memories from before it existed, or from another basis) are worked out from the
        stored embeddings and kept, once the request sample's vectors are at hand; until
        then they count as 0."""
        typicality = self.typicality
        if not typicality.enabled:
            return {}
        values: dict[str, float] = {}
        missing: list[Memory] = []
        for hit in hits:
            value = typicality.value(hit.memory)
            if value is None:
                missing.append(hit.memory)
            else:
                values[hit.memory.id] = value
        if not missing or not typicality.ready:
            return values
        vectors = await self.store.get_embeddings(ident.tenant, ident.user, [m.id for m in missing])
        known = [m for m in missing if m.id in vectors]
        if not known:
            return values
        encoded = typicality.encoded_now(np.stack([vectors[m.id] for m in known]))
        kept: dict[str, tuple[str, str, str]] = {}
        for memory, code in zip(known, encoded, strict=True):
            kept[memory.id] = (memory.content, memory.typicality, code)
            memory.typicality = code
            values[memory.id] = typicality.value(memory) or 0.0
        if kept and not await self.store.keep_typicality(ident.tenant, ident.user, kept):
            log.warning("typicality_not_kept", memories=len(kept))
        return values

    def _fitted(self, searches: _Searches, candidates: list[Candidate]) -> None:
        """How likely the request needs each topical candidate (``FittedRelevance``), from
        the stored vectors the vector search RETURNed with its hits: a memory found by its
        words or topic alone, beyond the nearest by meaning (a large user's), is judged
        without it, as is every memory when the weights are not for this embedder."""
        if not self.fitted.enabled:
            return
        vectors = searches.memory_vectors
        known = [c for c in candidates if c.lane == TOPICAL and c.memory.id in vectors]
        if not known:
            return
        likely = self.fitted.likelihoods(
            searches.query_vector, np.stack([vectors[c.memory.id] for c in known])
        )
        if likely is None:
            return
        for cand, value in zip(known, likely, strict=True):
            cand.fitted = float(value)

    async def _gather(self, searches: _Searches) -> list[Hit]:
        """The topical searches' hits, each memory once."""
        by_vector, near = await searches.vector
        by_text, worded = await searches.keywords
        return merge_hits(by_vector, by_text, near | worded)

    def _remember(self, owner: tuple[str, str], known: _Owner) -> None:
        seen = self._owners
        seen.pop(owner, None)  # most recent last
        seen[owner] = known
        if len(seen) > _SEEN_CAPACITY:
            del seen[next(iter(seen))]

    async def _check(
        self,
        result: RecallResult,
        ident: Identity,
        now: datetime,
        terms: frozenset[str],
        names: frozenset[str],
        leading: frozenset[str],
        general: bool = False,
    ) -> None:
        alive: list[Candidate] = []
        # about someone close to the user: a memory about someone the user names may be
        # about them (SomeoneCloseSpec)
        close = not self.policy.recall.relevance.fitted.someone_close.topics.isdisjoint(
            result.query_topics
        )
        for cand in result.candidates:
            cand.reason = first_failure(
                cand, self.policy, ident, now, terms, names, leading, general=general, close=close
            )
            if cand.reason is None:
                alive.append(cand)
        result.conflicts = await self._resolve_conflicts(alive, ident)
        for cand in alive:
            if cand.reason is None and not self.policy.sensitivity.may_inject(
                cand.memory.sensitivity
            ):
                cand.reason = "sensitivity"

    async def _resolve_conflicts(self, alive: list[Candidate], ident: Identity) -> int:
        """Two live memories about the same subject: in a one-valued slot (answer language,
        a project's framework) the narrowest scope wins, then the most recently confirmed,
        however they are worded; in a many-valued slot only memories saying nearly the same
        thing conflict, or a newer one saying it changed what the older names ("别用表格了，
        改成分点列表" after "对比类的问题用表格回答"), and the newer wins."""
        one = self.policy.one_valued_slots
        by_slot: dict[tuple[str, str, str], list[Candidate]] = {}
        for cand in alive:
            m = cand.memory
            if m.slot:
                # a one-valued slot is one group across scopes; "" marks it
                key = (m.slot, "", "") if m.slot in one else (m.slot, m.scope, m.project_id or "")
                by_slot.setdefault(key, []).append(cand)
        conflicts = 0
        for key, group in by_slot.items():
            if len(group) < 2:
                continue
            group.sort(key=lambda c: (specificity(c.memory), when(c.memory)), reverse=True)
            if key[0] in one:
                # each against every newer one still standing: with aspects the newest may
                # be about another part of a project than an older pair
                for i, older in enumerate(group[1:], start=1):
                    if any(
                        newer.reason is None
                        and not self.policy.both_stand(
                            key[0], older.memory.content, newer.memory.content
                        )
                        for newer in group[:i]
                    ):
                        older.reason = "conflict"
                        conflicts += 1
                continue
            known = any(s.name == key[0] for s in self.policy.slots)
            bar = self.policy.conflict.similarity_many if known else self.policy.conflict.similarity
            vectors = await self.store.get_embeddings(
                ident.tenant, ident.user, [c.memory.id for c in group]
            )
            for i, newer in enumerate(group):
                if newer.reason is not None:
                    continue
                said = newer.memory.says_change
                changed = said if said is not None else self._says_change(newer.memory.content)
                for older in group[i + 1 :]:
                    a, b = vectors.get(newer.memory.id), vectors.get(older.memory.id)
                    same_subject = (
                        a is None
                        or b is None
                        or float(np.dot(a, b)) >= bar
                        or (changed and change_names(newer.memory.content, older.memory.content))
                    )
                    if older.reason is None and same_subject:
                        older.reason = "conflict"
                        conflicts += 1
        return conflicts + self._resolve_changes(alive)

    def _says_change(self, content: str) -> bool:
        """``says_change`` of the text of a memory stored before it was read at write time,
        remembered (bounded): the same memories come back request after request."""
        known = self._changes
        found = known.get(content)
        if found is None:
            if len(known) >= _CHANGES_CAPACITY:
                known.clear()
            found = known[content] = says_change(content, self.policy)
        return found

    def _resolve_changes(self, alive: list[Candidate]) -> int:
        """A topical memory saying something changed ("moved the accounts over to Xero"),
        recalled beside an older one it may replace ("we do the books in MYOB"), as
        ``change_may_replace`` says, about a topic of this request: the older one is left
        out. When written, a change replaces an older memory only if the two are close in
        meaning, which two wordings of one subject, or two languages, often are not; here
        the request they both answer is the evidence that they speak of the same thing."""
        policy = self.policy
        topical = [c for c in alive if c.reason is None and c.lane == TOPICAL]
        # the changes among them, each with the request's topics it is about; most requests
        # recall none, and then nothing else is worked out. A change of a slot's value
        # ("gave up on keto, vegetarian now") ends that slot's older value by the slot
        # rules, and no other memory of its topic ("I hate cooking on weeknights").
        changes: list[tuple[Candidate, frozenset[str]]] = []
        for cand in topical:
            if cand.memory.slot:
                continue
            subjects = change_subjects(cand.memory.topics, policy).intersection(cand.topics)
            said = cand.memory.says_change
            if subjects and (said if said is not None else self._says_change(cand.memory.content)):
                changes.append((cand, subjects))
        if not changes or len(topical) < 2:
            return 0
        moment = {id(c): when(c.memory) for c in topical}
        conflicts = 0
        for newer, subjects in sorted(changes, key=lambda c: moment[id(c[0])], reverse=True):
            m = newer.memory
            if newer.reason is not None:
                continue
            at = moment[id(newer)]
            older = [
                c
                for c in topical
                if c.reason is None
                and not subjects.isdisjoint(c.topics)
                and moment[id(c)] < at
                and change_may_replace(
                    subjects & set(c.topics),
                    m.type,
                    c.memory.type,
                    c.memory.slot,
                    c.memory.applies,
                    c.memory.topics,
                    policy,
                )
            ]
            if not older:
                continue
            # of several, the one most about the change's subjects, then the most relevant
            # to the request: no round trip to Redis for their vectors
            gone = max(older, key=lambda c: (len(subjects.intersection(c.topics)), c.fused))
            gone.reason = "conflict"
            conflicts += 1
        return conflicts

    def _select(self, result: RecallResult, model: str) -> None:
        chosen = select(result.candidates, self.policy.recall, model)
        result.injected = chosen.injected
        result.standing_lines = chosen.standing_lines
        result.fact_lines = chosen.fact_lines
        result.tokens = (
            inject.token_count(result.standing_lines, result.fact_lines, model)
            if result.injected
            else 0
        )


def _searches_topical(plan: _Owner) -> bool:
    """Whether a user may have topical memories (a missing count is not known to be 0)."""
    return plan.topical is None or plan.topical > 0


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)
