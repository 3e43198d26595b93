"""The memory store: memories, their searches, settings, traces and gateway keys in Redis.
Other layers ask the storage package; none holds a client.

Isolation is structural: every key carries the tenant and the user, every search carries an
exact, case-sensitive tag filter on both (values escaped by redisvl), and an empty tenant or
user is refused before a query is built (redisvl turns an empty tag value into a wildcard).
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import secrets
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import redis.asyncio as aredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.search import reducers
from redis.commands.search.aggregation import AggregateRequest
from redis.commands.search.field import NumericField
from redis.commands.search.index_definition import IndexDefinition, IndexType
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError, RedisError, ResponseError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redisvl.index import AsyncSearchIndex
from redisvl.query import CountQuery, FilterQuery, TextQuery, VectorQuery
from redisvl.query.filter import FilterExpression, Num, Tag
from redisvl.schema import IndexSchema

from gateway.memory.records import Memory, content_key

KEY_ROOT = "memgate"
# Each embedding model's memories: an index named and a key prefix started like this.
_MEMORY_INDEX = f"{KEY_ROOT}-mem-"
_MEMORY_KEYS = f"{KEY_ROOT}:mem:"
# How long start-up waits for Redis to index the memories it holds into a new index.
INDEX_BUILD_WAIT = 60.0
RECENT_TRACES = 50
_MAX_PAGE = 10_000
# Per user and day, how many memories recall injected and dropped (by reason): counts only,
# kept this long for the admin page's chart.
DAILY_DAYS = 31


class QueryEngineMissing(RuntimeError):
    pass


# Every tag value memgate writes (ids, names, hashes) fits this; anything else matches nothing.
_TAG_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+:-]{0,127}")


class NoMatch(Exception):
    """A filter value that no stored record can have: answer "nothing" without querying."""


def _need(value: str, what: str) -> str:
    if not value:
        raise ValueError(f"empty {what} would widen a query")
    if not _TAG_VALUE.fullmatch(value):
        raise NoMatch(what)
    return value


def user_key(kind: str, tenant: str, user: str, *rest: str) -> str:
    """A per-user key: ``memgate:<kind>:<tenant>:<user>[:<rest>...]``."""
    return ":".join((KEY_ROOT, kind, _need(tenant, "tenant"), _need(user, "user"), *rest))


def owner_filter(tenant: str, user: str) -> FilterExpression:
    return (Tag("tenant") == _need(tenant, "tenant")) & (Tag("user") == _need(user, "user"))


@functools.lru_cache(maxsize=4096)
def _scope_filter(
    tenant: str, user: str, project_id: str | None, task: str | None, applies: str | None
) -> str:
    """The owner's active memories in the scopes a request reaches (``Store.recall_filter``),
    rendered."""
    scope = Tag("scope") == "global"
    if project_id:
        scope = scope | ((Tag("scope") == "project") & (Tag("project_id") == project_id))
    if task:
        scope = scope | (Tag("scope") == f"task:{task}")
    expr = owner_filter(tenant, user) & (Tag("status") == "active") & scope
    if applies is not None:
        expr = expr & (Tag("applies") == applies)
    return str(expr)


# What recall reads of each memory it finds (searches RETURN these).
RECALL_FIELDS = [
    "id",
    "tenant",
    "user",
    "content",
    "type",
    "source",
    "scope",
    "project_id",
    "slot",
    "sensitivity",
    "status",
    "created_at",
    "updated_at",
    "confirmed_at",
    "expires_ts",
    "superseded_by",
    "inject_count",
    "last_injected_at",
    "confidence",
    "applies",
    "topics",
    "typicality",
    "says_change",
]
# Every field a Memory is built from (the embedding and search text stay in Redis).
_MEMORY_FIELDS = [
    *RECALL_FIELDS,
    "supersedes",
    "evidence_trace",
    "evidence_excerpt",
    "embedding_model",
]
# HMGET for many keys in one command: a redis-py pipeline of one HMGET per key costs far
# more client time per key than the script (``memgate bench recall`` compares the two).
_LOAD_SLICE = 200
_HMGET_MANY = """
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = redis.call('HMGET', key, unpack(ARGV))
end
return out
"""
# A derived field set only while the memory is as it was read (not deleted, not edited, the
# field not written meanwhile): ARGV = content key, field, the field's value as read, value.
_SET_IF_UNCHANGED = """
if redis.call('HGET', KEYS[1], 'content_key') == ARGV[1]
   and (redis.call('HGET', KEYS[1], ARGV[2]) or '') == ARGV[3] then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[4])
end
return 0
"""
_MARK_INJECTED = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'inject_count', 1)
  redis.call('HSET', KEYS[1], 'last_injected_at', ARGV[1])
end
return 0
"""


# A gateway key by the SHA-256 of its secret, and whether any key exists, in one round trip
# on every request. It reads the record whose id the lookup finds, a key it cannot declare
# up front (declaring it would cost a second round trip), hence no-cluster.
_GATEWAY_KEY_LOOKUP = """#!lua flags=no-writes,no-cluster
local n = redis.call('SCARD', KEYS[2])
local id = redis.call('GET', KEYS[1])
if not id then return {n} end
return {n, redis.call('HGETALL', ARGV[1] .. id)}
"""
_GKEY = f"{KEY_ROOT}:gkey:"
_GKEY_BY_HASH = f"{KEY_ROOT}:gkhash:"
_GKEYS = f"{KEY_ROOT}:gkeys"
_ADMIN_SESSION = f"{KEY_ROOT}:adminsess:"


@dataclass(slots=True)
class Hit:
    """A recall candidate with its raw scores (cosine similarity, BM25)."""

    memory: Memory
    vector: float = 0.0
    text: float = 0.0


@dataclass(frozen=True, slots=True)
class Neighbour:
    memory: Memory
    similarity: float


# The memory index's schema version, part of its name: a release that changes the schema
# builds a new index over the same key prefix (see ``Store.ensure_memory_index``).
SCHEMA_VERSION = 2
# Numeric attributes are declared under an alias (``created_at AS created_at_num``): FT.SEARCH
# RETURN of a hash field that is itself a NUMERIC attribute gives the indexed double printed
# to 12 significant digits (timestamps lose their sub-centisecond part), while RETURN of a
# field no attribute is named after reads the hash as written. Filters and sorts name the
# alias (``num``, ``numeric_attribute``); hash fields and RETURN keep the plain names.
NUMERIC_FIELDS = (
    "created_at",
    "updated_at",
    "confirmed_at",
    "expires_ts",
    "inject_count",
    "last_injected_at",
    "confidence",
)


def numeric_attribute(field: str) -> str:
    """The index attribute a numeric hash field is filtered and sorted by."""
    if field not in NUMERIC_FIELDS:
        raise ValueError(f"{field!r} is not a numeric attribute of the memory index")
    return f"{field}_num"


def num(field: str) -> Num:
    """A numeric filter on a memory hash field (through its alias)."""
    return Num(numeric_attribute(field))


def memory_index_name(model_id: str, dims: int) -> str:
    return f"{_MEMORY_INDEX}{model_id}-{dims}-v{SCHEMA_VERSION}"


def _schema_version(index_name: str) -> int:
    """The schema version a memory index's name carries (names of the first schema end
    with the dimensions, and carry none)."""
    found = re.search(r"-v(\d+)$", index_name)
    return int(found.group(1)) if found else 1


def memory_schema(name: str, prefix: str, dims: int) -> IndexSchema:
    """The memory index as redisvl sees it (queries, validation); numeric attributes appear
    under their aliases. ``create_memory_index`` maps them back to their hash fields."""
    tag = {"case_sensitive": True}
    return IndexSchema.from_dict(
        {
            "index": {"name": name, "prefix": prefix, "key_separator": ":", "storage_type": "hash"},
            "fields": [
                *(
                    {"name": n, "type": "tag", "attrs": tag}
                    for n in (
                        "id",
                        "tenant",
                        "user",
                        "type",
                        "source",
                        "scope",
                        "project_id",
                        "slot",
                        "sensitivity",
                        "status",
                        "content_key",
                        "applies",
                    )
                ),
                {"name": "topics", "type": "tag", "attrs": {"separator": ","}},
                {"name": "search_text", "type": "text"},
                *({"name": numeric_attribute(n), "type": "numeric"} for n in NUMERIC_FIELDS),
                {
                    "name": "embedding",
                    "type": "vector",
                    "attrs": {
                        "dims": dims,
                        "distance_metric": "cosine",
                        "algorithm": "hnsw",
                        "datatype": "float32",
                    },
                },
            ],
        }
    )


def _redis_fields(schema: IndexSchema) -> list[Any]:
    """The schema's FT.CREATE fields, each numeric one read from its hash field ``AS`` its
    alias (redisvl names a hash attribute only after its field)."""
    hash_field = {numeric_attribute(n): n for n in NUMERIC_FIELDS}
    return [
        NumericField(hash_field[f.name], as_name=f.name)
        if f.name in hash_field
        else f.as_redis_field()
        for f in schema.fields.values()
    ]


# Faults that mean "Redis is not answering" (down, hung, loading, pool exhausted, a lock not
# obtained in time), as opposed to a bad command: callers answer those with 503 or go on
# without memory.
_UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, LockError)


def backend_unavailable(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from (redisvl re-raises its own types),
    says Redis is down, hung or out of connections."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, _UNAVAILABLE):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


class Store:
    """``max_connections`` bounds the pool: a call that finds no free connection waits up
    to ``pool_timeout`` seconds for one (redis-py's default pool fails at once instead).
    ``timeout`` bounds connecting and each reply, so a hung Redis fails calls instead of
    holding them."""

    def __init__(
        self,
        redis_url: str,
        *,
        max_connections: int = 256,
        pool_timeout: float = 5.0,
        timeout: float = 5.0,
    ) -> None:
        self.redis_url = redis_url
        pool = aredis.BlockingConnectionPool.from_url(
            redis_url,
            max_connections=max_connections,
            timeout=pool_timeout,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            decode_responses=False,
            health_check_interval=30,
            # A pooled connection from before a Redis restart fails on first use: it is
            # reconnected and the call sent once more, instead of answering 503 once per
            # stale connection. Not on a timeout: a hung Redis must fail within its bound.
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        )
        self.redis: aredis.Redis = aredis.Redis.from_pool(pool)
        self._index: AsyncSearchIndex | None = None
        self._prefix = ""
        self._built = False
        self._mark = self.redis.register_script(_MARK_INJECTED)
        self._set_if_unchanged = self.redis.register_script(_SET_IF_UNCHANGED)
        self._hmget_many = self.redis.register_script(_HMGET_MANY)
        self._gateway_key_lookup = self.redis.register_script(_GATEWAY_KEY_LOOKUP)

    # -- lifecycle -------------------------------------------------------------------------

    async def check_query_engine(self) -> None:
        """Fail fast at start-up when the Redis lacks the Query Engine (RediSearch)."""
        await self.redis.ping()
        try:
            await self.redis.execute_command("FT._LIST")
        except ResponseError as exc:
            raise QueryEngineMissing(
                f"The Redis at {_redact(self.redis_url)} has no Query Engine ({exc}). "
                "Use Redis 8 or Redis Stack 7.4+, or leave MEMGATE_REDIS_URL unset "
                "for the embedded one."
            ) from None

    async def ensure_memory_index(
        self, model_id: str, dims: int, *, build_wait: float = INDEX_BUILD_WAIT
    ) -> None:
        """One index per embedding model and size, so vectors of two models never mix.

        A new index over memories already stored (the first start of a release with a new
        ``SCHEMA_VERSION``, or a new model whose memories were moved in) is filled by Redis
        in the background; until that is done a search misses memories. So this waits up
        to ``build_wait`` seconds for it; past that the gateway serves, and ``readiness``
        reports the index not ready until Redis is done. An index of an earlier schema over
        the same prefix is left to replicas of the previous release
        (``previous_memory_indexes``).
        """
        name = memory_index_name(model_id, dims)
        if self._index is not None and self._index.name == name:
            return
        prefix = f"{_MEMORY_KEYS}{model_id}-{dims}"
        schema = memory_schema(name, prefix, dims)
        index = AsyncSearchIndex(schema, redis_client=self.redis)
        if not await index.exists():
            try:
                await self.redis.ft(name).create_index(
                    _redis_fields(schema),
                    definition=IndexDefinition(prefix=[prefix], index_type=IndexType.HASH),
                )
            except ResponseError as exc:  # another replica created it first
                if "already exists" not in str(exc):
                    raise
        self._prefix = prefix
        self._index = index
        self._built = False
        await self.wait_index_built(build_wait)

    async def wait_index_built(self, within: float) -> bool:
        """Whether Redis has indexed every memory it held when the index was created,
        waiting up to ``within`` seconds for it."""
        deadline = asyncio.get_running_loop().time() + within
        while not await self.index_built():
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def index_built(self) -> bool:
        """Whether Redis is done indexing the memories it held when the index was created
        (asked of Redis until it says so once)."""
        if not self._built:
            info = await self._info(self.index.name)
            self._built = _s(info.get("indexing", b"0")) in ("0", "0.0")
        return self._built

    async def _info(self, name: str) -> dict[str, Any]:
        """FT.INFO with its keys decoded, whichever protocol the connection speaks."""
        raw = await self.redis.execute_command("FT.INFO", name)
        pairs = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2], strict=False)
        return {_s(key): value for key, value in pairs}

    async def _memory_indexes(self) -> dict[str, str]:
        """Every memory index (of any model and schema) -> the key prefix it covers."""
        found: dict[str, str] = {}
        for raw in await self.redis.execute_command("FT._LIST"):
            name = _s(raw)
            if not name.startswith(_MEMORY_INDEX):
                continue
            try:
                info = await self._info(name)
            except ResponseError:  # dropped meanwhile
                continue
            definition = info.get("index_definition") or []
            if isinstance(definition, list):
                definition = dict(zip(definition[::2], definition[1::2], strict=False))
            prefixes = {_s(k): v for k, v in definition.items()}.get("prefixes") or [b""]
            found[name] = _s(prefixes[0]).rstrip(":")
        return found

    async def previous_memory_indexes(self) -> list[str]:
        """Indexes over the current model's memories made by an earlier schema: replicas of
        the previous release search them during a rolling upgrade; afterwards they only
        cost Redis memory and write time (``drop_previous_memory_indexes``)."""
        return sorted(
            name
            for name, prefix in (await self._memory_indexes()).items()
            if prefix == self._prefix and _schema_version(name) < SCHEMA_VERSION
        )

    async def drop_previous_memory_indexes(self) -> list[str]:
        """Drop every memory index of an earlier schema whose key prefix an index of this
        schema covers, whatever the model, keeping the memories themselves (FT.DROPINDEX
        without DD). Returns the names dropped."""
        indexes = await self._memory_indexes()
        covered = {p for n, p in indexes.items() if _schema_version(n) == SCHEMA_VERSION}
        dropped = []
        for name, prefix in sorted(indexes.items()):
            if prefix in covered and _schema_version(name) < SCHEMA_VERSION:
                try:
                    await self.redis.execute_command("FT.DROPINDEX", name)
                except ResponseError as exc:  # another process dropped it first
                    if "unknown index" not in str(exc).lower():
                        raise
                    continue
                dropped.append(name)
        return dropped

    @property
    def index_ready(self) -> bool:
        return self._index is not None

    @property
    def index(self) -> AsyncSearchIndex:
        if self._index is None:
            raise RuntimeError("memory index not initialised")
        return self._index

    async def readiness(self, within: float = 1.0) -> dict[str, Any]:
        """Redis answers and the index exists and holds every memory, decided within
        ``within`` seconds (a probe gives up after its own timeout: a hung Redis must not
        hang the answer)."""
        try:
            async with asyncio.timeout(within):
                await self.redis.ping()
                index_ok = bool(
                    self._index and await self._index.exists() and await self.index_built()
                )
        except Exception as exc:
            if not (isinstance(exc, RedisError | TimeoutError) or backend_unavailable(exc)):
                raise
            return {"redis": False, "index": False, "error": type(exc).__name__}
        return {"redis": True, "index": index_ok}

    async def aclose(self) -> None:
        await self.redis.aclose()

    # -- keys ------------------------------------------------------------------------------

    def memory_key(self, tenant: str, user: str, memory_id: str) -> str:
        return f"{self._prefix}:{_need(tenant, 'tenant')}:{_need(user, 'user')}:{memory_id}"

    async def get_memory(self, tenant: str, user: str, memory_id: str) -> Memory | None:
        try:
            key = self.memory_key(tenant, user, _need(memory_id, "id"))
        except NoMatch:
            return None
        raw = await self.redis.hgetall(key)
        return Memory.from_hash(raw) if raw else None

    @staticmethod
    def _key(kind: str, tenant: str, user: str, *rest: str) -> str:
        return user_key(kind, tenant, user, *rest)

    @asynccontextmanager
    async def user_lock(self, tenant: str, user: str) -> AsyncIterator[None]:
        """Serialises one user's writes across replicas, so dedup and supersede see each other."""
        lock = self.redis.lock(self._key("lock", tenant, user), timeout=30, blocking_timeout=30)
        async with lock:
            yield

    # -- memories --------------------------------------------------------------------------

    async def put_memory(
        self, memory: Memory, *, search_text: str, embedding: np.ndarray, expire_at: float | None
    ) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            self._queue_put(pipe, memory, search_text, embedding, expire_at)
            await pipe.execute()

    async def put_memories(self, rows: Iterable[tuple[Memory, str, np.ndarray]]) -> None:
        """Many (memory, search text, embedding) rows in one pipeline, written as
        ``put_memory`` writes them, expiring at each memory's ``expires_at`` (bulk loads)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for memory, text, embedding in rows:
                expire_at = memory.expires_at.timestamp() if memory.expires_at else None
                self._queue_put(pipe, memory, text, embedding, expire_at)
            await pipe.execute()

    def _queue_put(
        self,
        pipe: Any,
        memory: Memory,
        search_text: str,
        embedding: np.ndarray,
        expire_at: float | None,
    ) -> None:
        key = self.memory_key(memory.tenant, memory.user, memory.id)
        mapping: dict[Any, Any] = memory.to_hash(  # redis-py's stubs want its own key union
            search_text=search_text, embedding=np.asarray(embedding, np.float32).tobytes()
        )
        pipe.delete(key)
        pipe.hset(key, mapping=mapping)
        if expire_at is not None:
            pipe.expireat(key, int(expire_at) + 1)
        self._queue_new_version(pipe, memory.tenant, memory.user)

    def _queue_new_version(self, pipe: Any, tenant: str, user: str) -> None:
        """Every change to an owner's memories gives them a new version (random, so a deleted
        and re-created owner never repeats one): recall's cache of standing memories is good
        only while the version it was read at holds."""
        pipe.hset(self._key("settings", tenant, user), "version", secrets.token_hex(8))

    async def update_memory(
        self, memory: Memory, fields: dict[str, Any], *, expire_at: float | bool | None = False
    ) -> None:
        """Change some fields; ``expire_at``: False keeps the key's TTL, None removes it."""
        key = self.memory_key(memory.tenant, memory.user, memory.id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=cast("dict[Any, Any]", fields))
            if expire_at is None:
                pipe.persist(key)
            elif expire_at is not False:
                pipe.expireat(key, int(float(expire_at)) + 1)
            self._queue_new_version(pipe, memory.tenant, memory.user)
            await pipe.execute()

    async def get_embeddings(self, tenant: str, user: str, ids: list[str]) -> dict[str, np.ndarray]:
        async with self.redis.pipeline(transaction=False) as pipe:
            for memory_id in ids:
                pipe.hget(self.memory_key(tenant, user, memory_id), "embedding")
            rows = await pipe.execute()
        return {
            i: np.frombuffer(raw, dtype=np.float32)
            for i, raw in zip(ids, rows, strict=True)
            if raw is not None
        }

    async def delete_memory(self, tenant: str, user: str, memory_id: str) -> bool:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self.memory_key(tenant, user, memory_id))
            self._queue_new_version(pipe, tenant, user)
            deleted, _ = await pipe.execute()
        return bool(deleted)

    async def find_memories(
        self,
        tenant: str,
        user: str,
        *,
        status: str | None = None,
        type_: str | None = None,
        project_id: str | None = None,
        content_key: str | None = None,
        slot: str | None = None,
        limit: int = _MAX_PAGE,
    ) -> list[Memory]:
        try:
            expr = owner_filter(tenant, user)
            for field, value in (
                ("status", status),
                ("type", type_),
                ("project_id", project_id),
                ("content_key", content_key),
                ("slot", slot),
            ):
                if value is not None:
                    expr = expr & (Tag(field) == _need(value, field))
        except NoMatch:
            return []
        query = FilterQuery(filter_expression=expr, return_fields=[], num_results=limit)
        query.sort_by(numeric_attribute("updated_at"), asc=False)
        keys = [doc["id"] for doc in await self.index.query(query)]
        return await self._load(keys)

    async def unsettled_memories(self, limit: int) -> list[Memory]:
        """Memories written before ``applies`` existed (the field is empty or missing)."""
        query = FilterQuery(
            filter_expression="-@applies:{always|relevant}", return_fields=[], num_results=limit
        )
        keys = [doc["id"] for doc in await self.index.query(query)]
        return await self._load(keys)

    async def current_memories(self, batch: int) -> AsyncIterator[list[Memory]]:
        """Every memory of the current index, ``batch`` at a time: a full scan, for passes
        over all memories such as deriving topics again under new rules."""
        keys: list[str] = []
        async for key in self.redis.scan_iter(match=f"{self._prefix}:*", count=1000):
            keys.append(_s(key))
            if len(keys) >= batch:
                yield await self._load(keys)
                keys = []
        if keys:
            yield await self._load(keys)

    def _topics_basis_key(self) -> str:
        return f"{KEY_ROOT}:topics-basis:{self._prefix}"

    async def topics_basis(self) -> str | None:
        """The rules' basis the current index's topics were last derived on, if any."""
        raw = await self.redis.get(self._topics_basis_key())
        return _s(raw) if raw is not None else None

    async def set_topics_basis(self, basis: str) -> None:
        await self.redis.set(self._topics_basis_key(), basis)

    async def _load(self, keys: list[str]) -> list[Memory]:
        return list((await self.load_memories(keys, _MEMORY_FIELDS)).values())

    async def load_memories(
        self, keys: list[str], fields: list[str] = RECALL_FIELDS
    ) -> dict[str, Memory]:
        """Memories by key, in the keys' order, read in one round trip; a key deleted in
        the meantime is simply absent."""
        out: dict[str, Memory] = {}
        # In slices: a script holds Redis for its whole run, and a long listing must not
        # stall everyone else's recall (200 keys take a few ms of Redis time).
        for start in range(0, len(keys), _LOAD_SLICE):
            part = keys[start : start + _LOAD_SLICE]
            out.update(_memories(part, await self._hmget_many(keys=part, args=fields), fields))
        return out

    async def memories_by_id(self, tenant: str, user: str, ids: list[str]) -> dict[str, Memory]:
        """The owner's memories with these ids, by id, read in one round trip; an id that is
        no memory's (any more) is absent."""
        keys = []
        for memory_id in ids:
            try:
                keys.append(self.memory_key(tenant, user, _need(memory_id, "id")))
            except NoMatch:
                continue
        return {m.id: m for m in (await self.load_memories(keys)).values()}

    async def similar_memories(
        self,
        tenant: str,
        user: str,
        vector: np.ndarray,
        *,
        k: int,
        scope: str,
        project_id: str | None,
        status: str = "active",
    ) -> list[Neighbour]:
        expr = owner_filter(tenant, user) & (Tag("status") == status) & (Tag("scope") == scope)
        if project_id:
            expr = expr & (Tag("project_id") == project_id)
        query = VectorQuery(
            vector=np.asarray(vector, np.float32).tolist(),
            vector_field_name="embedding",
            return_fields=["id"],
            filter_expression=expr,
            num_results=k,
        )
        rows = await self.index.query(query)
        memories = {m.id: m for m in await self._load([r["id"] for r in rows])}
        out: list[Neighbour] = []
        for row in rows:
            memory = memories.get(_memory_id(row["id"]))
            if memory is not None and (project_id or not memory.project_id):
                out.append(Neighbour(memory, 1.0 - float(row["vector_distance"])))
        return out

    async def count_by_status(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for status in ("active", "superseded", "archived"):
            out[status] = int(await self.index.query(CountQuery(Tag("status") == status)))
        return out

    async def count_unused(self, saved_before_ts: float) -> tuple[int, int]:
        """Active memories saved before ``saved_before_ts``, and how many of them were never
        injected (two counts over the index, all tenants)."""
        aged = (Tag("status") == "active") & (num("created_at") < saved_before_ts)
        unused = aged & (num("inject_count") == 0)
        return (
            int(await self.index.query(CountQuery(aged))),
            int(await self.index.query(CountQuery(unused))),
        )

    async def owners(self, now_ts: float) -> list[dict[str, Any]]:
        """Every tenant and user that has memories or pending candidates, with counts by
        status, sorted by tenant then user; the caller pages and searches them.

        One FT.AGGREGATE over the index (its LIMIT sized to the document count, which bounds
        the groups, so none is cut off) plus a SCAN of the candidate index sets: an admin
        overview, not a request-path query.
        """
        found: dict[tuple[str, str], dict[str, Any]] = {}

        def row(tenant: str, user: str) -> dict[str, Any]:
            return found.setdefault(
                (tenant, user), {"tenant": tenant, "user": user, "statuses": {}, "pending": 0}
            )

        documents = int(await self.index.query(CountQuery(FilterExpression("*"))))
        request = (
            AggregateRequest("*")
            .group_by(["@tenant", "@user", "@status"], reducers.count().alias("n"))
            .limit(0, max(documents, 1))
        )
        result = await self.index.aggregate(request)
        for raw in result.rows:
            fields = dict(zip(raw[::2], raw[1::2], strict=True))
            tenant, user = _s(fields[b"tenant"]), _s(fields[b"user"])
            row(tenant, user)["statuses"][_s(fields[b"status"])] = int(fields[b"n"])
        async for key in self.redis.scan_iter(match=f"{KEY_ROOT}:candidx:*", count=1000):
            _, _, tenant, user = _s(key).split(":", 3)
            pending = int(await self.redis.zcount(key, f"({now_ts}", "+inf"))
            if pending:
                row(tenant, user)["pending"] = pending
        return sorted(found.values(), key=lambda r: (r["tenant"], r["user"]))

    async def count_pending_candidates(self, now_ts: float) -> int:
        """All users' unexpired candidates (index sets are scored by expiry time).

        A SCAN over the per-user index sets: fine for a sampler every few seconds; a very
        large deployment would keep a running counter instead.
        """
        total = 0
        async for key in self.redis.scan_iter(match=f"{KEY_ROOT}:candidx:*", count=1000):
            total += int(await self.redis.zcount(key, f"({now_ts}", "+inf"))
        return total

    # -- recall ----------------------------------------------------------------------------

    def recall_filter(
        self,
        tenant: str,
        user: str,
        *,
        project_id: str | None,
        task: str | None,
        now_ts: float,
        applies: str | None = None,
    ) -> FilterExpression:
        """The caller's active, unexpired, in-scope memories (of one recall lane when
        ``applies`` is given): every recall search uses it. All but the expiry is rendered
        once per owner and scope (``_scope_filter``): rendering costs more than a search's
        Python side, and the same owners ask again and again."""
        unexpired = num("expires_ts") > now_ts
        return FilterExpression(
            f"({_scope_filter(tenant, user, project_id, task, applies)} {unexpired})"
        )

    def standing_filter(self, tenant: str, user: str) -> FilterExpression:
        """The owner's active standing memories, in every scope (recall's cache holds them
        for whatever scope a request names)."""
        return (
            owner_filter(tenant, user) & (Tag("status") == "active") & (Tag("applies") == "always")
        )

    async def standing_hits(self, expr: FilterExpression, pool: int) -> dict[str, Memory]:
        """Up to ``pool`` memories a tag filter selects: the standing lane, which needs no
        vector and no keywords. Unsorted (a sort costs Redis more than the lane itself);
        the recaller orders them, and a user has far fewer standing memories than a pool."""
        query = FilterQuery(filter_expression=expr, return_fields=_returned(True), num_results=pool)
        _, memories = await self.search(query, load=True)
        return memories

    async def text_hits(
        self,
        expr: FilterExpression | str,
        query_text: str,
        pool: int,
        *,
        topics: Sequence[str] = (),
        load: bool = False,
    ) -> tuple[dict[str, float], dict[str, Memory]]:
        """BM25 over the filtered memories: document key -> score, and with ``load`` the
        memories found. With ``topics``, memories about any of them are found too (in the
        same search: an allergy for a dinner menu shares no word with it)."""
        if not query_text and not topics:
            return {}, {}
        if not topics:
            query = TextQuery(
                text=query_text,
                text_field_name="search_text",
                filter_expression=expr,
                return_fields=_returned(load),
                num_results=pool,
                stopwords=None,
            )
            rows, memories = await self.search(query, load=load)
        else:
            # query_text holds only letter/digit tokens (textsearch.search_text) and topics
            # are policy names ([a-z0-9_]): neither needs escaping
            parts = [f"@search_text:({' | '.join(query_text.split())})"] if query_text else []
            parts.append("@topics:{" + " | ".join(topics) + "}")
            args = [
                self.index.name,
                f"({' | '.join(parts)}) ({expr})",
                "SCORER",
                "BM25STD",
                "WITHSCORES",
                "RETURN",
                len(_returned(load)),
                *_returned(load),
                "DIALECT",
                2,
                "LIMIT",
                0,
                pool,
            ]
            rows, memories = await self._run(args, load)
        return {_s(row[b"id"]): float(row.get(b"score") or 0.0) for row in rows}, memories

    async def vector_hits(
        self,
        expr: FilterExpression | str,
        vector: np.ndarray,
        pool: int,
        *,
        large: bool = False,
        load: bool = False,
        embeddings: dict[str, np.ndarray] | None = None,
    ) -> tuple[dict[str, float], dict[str, Memory]]:
        """KNN over the filtered memories: document key -> cosine similarity, and with
        ``load`` the memories found. ``embeddings``, when given, is filled with the found
        memories' stored vectors by memory id, RETURNed by the same command (no round trip
        of its own)."""
        fields = _returned(load)
        if embeddings is not None:
            fields = [*fields, "embedding"]
        query = VectorQuery(
            vector=np.asarray(vector, np.float32).tobytes(),
            vector_field_name="embedding",
            return_fields=fields,
            filter_expression=expr,
            num_results=pool,
            # For a user with many memories, walking the HNSW graph in batches beats the
            # planner's default brute force over every memory that passes the filter.
            hybrid_policy="BATCHES" if large else None,
        )
        rows, memories = await self.search(query, load=load)
        scores = {
            _s(row[b"id"]): 1.0 - float(row[b"extra_attributes"][b"vector_distance"])
            for row in rows
        }
        if embeddings is not None:
            for row in rows:
                raw = row[b"extra_attributes"].get(b"embedding")
                if raw is not None:
                    embeddings[_memory_id(_s(row[b"id"]))] = np.frombuffer(raw, dtype=np.float32)
        return scores, memories

    async def search(
        self, query: TextQuery | VectorQuery | FilterQuery, *, load: bool = False
    ) -> tuple[list[dict[bytes, Any]], dict[str, Memory]]:
        """FT.SEARCH for a query redisvl built, the reply read here (redisvl's own result
        handling costs the recall path more than the parsing it needs), and with ``load``
        the found memories by key, built from the fields the query RETURNs
        (``_returned(True)``): one command, which a clustered Query Engine runs too."""
        params = [part for pair in query.params.items() for part in pair]
        args = [
            self.index.name,
            *query.get_args(),
            *(["PARAMS", len(params), *params] if params else []),
        ]
        return await self._run(args, load)

    async def _run(
        self, args: list[Any], load: bool
    ) -> tuple[list[dict[bytes, Any]], dict[str, Memory]]:
        reply = await self.redis.execute_command("FT.SEARCH", *args)
        results = search_results(reply, with_scores="WITHSCORES" in args)
        return results, (_found_memories(results) if load else {})

    @staticmethod
    async def sent() -> None:
        """Returns once the commands started so far are written to Redis, for a caller about
        to hold the event loop: redis-py writes through ``asyncio.wait_for``, which on Python
        3.11 runs the write as a task of its own a loop turn after the command's task starts
        (two turns suffice there; a third covers a write that takes another hop). Only the
        overlap depends on it, never a result: ``memgate bench recall`` shows the overlap."""
        for _ in range(3):
            await asyncio.sleep(0)

    async def mark_injected(self, tenant: str, user: str, ids: list[str], now_ts: float) -> None:
        """Count a use without resurrecting a memory deleted in the meantime."""
        for memory_id in ids:
            await self._mark(keys=[self.memory_key(tenant, user, memory_id)], args=[now_ts])

    async def keep_typicality(
        self, tenant: str, user: str, values: dict[str, tuple[str, str, str]]
    ) -> bool:
        """Keep typicality worked out by recall (memory id -> the content and the value it
        had when read, the value to keep) in one pipeline, only where the memory is still as
        read: one deleted, edited or given a value meanwhile is left alone. Nothing recall
        caches depends on it, so the owner's memory version stays. A failure is no fault of
        the request (recall works the value out again next time): False, not an error."""
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for memory_id, (content, was, value) in values.items():
                    await self._set_if_unchanged(
                        keys=[self.memory_key(tenant, user, memory_id)],
                        args=[content_key(content), "typicality", was, value],
                        client=pipe,
                    )
                await pipe.execute()
        except RedisError:
            return False
        return True

    # -- per-user settings and traces ------------------------------------------------------

    async def get_settings(self, tenant: str, user: str) -> dict[str, str]:
        raw = await self.redis.hgetall(self._key("settings", tenant, user))
        return {_s(k): _s(v) for k, v in raw.items()}

    async def count_memories_written(
        self, tenant: str, user: str, delta: int, topical: int = 0
    ) -> None:
        """Rough per-user sizes (expiry is not subtracted, so never low) that pick the search
        strategy: all memories, and the topical ones (a user with none skips the searches)."""
        key = self._key("settings", tenant, user)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hincrby(key, "memory_count", delta)
            # always written, so that a missing count means "written before it was kept"
            pipe.hincrby(key, "topical_count", topical)
            await pipe.execute()

    async def count_tokens(self, tenant: str, user: str, prompt: int, injected: int) -> None:
        """One answered request's prompt tokens and the memory tokens among them, added to
        the user's running totals (kept beside the settings; deleted with the user)."""
        key = self._key("settings", tenant, user)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hincrby(key, "prompt_tokens", prompt)
            pipe.hincrby(key, "injected_tokens", injected)
            await pipe.execute()

    async def set_settings(self, tenant: str, user: str, values: dict[str, str]) -> None:
        await self.redis.hset(
            self._key("settings", tenant, user), mapping=cast("dict[Any, Any]", values)
        )

    @staticmethod
    def recall_paused(settings: dict[str, str]) -> bool:
        """Read from ``get_settings``' answer (recall already holds it)."""
        return settings.get("recall_paused") == "true"

    async def is_recall_paused(self, tenant: str, user: str) -> bool:
        return self.recall_paused(await self.get_settings(tenant, user))

    async def set_recall_paused(self, tenant: str, user: str, paused: bool) -> None:
        await self.set_settings(tenant, user, {"recall_paused": "true" if paused else "false"})

    async def put_trace(
        self, tenant: str, user: str, trace_id: str, trace: dict[str, Any], ttl_seconds: int
    ) -> None:
        """The trace, plus its id at the head of the user's short list of recent answers."""
        recent = self._key("traces", tenant, user)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(
                self._key("trace", tenant, user, _need(trace_id, "trace")),
                json.dumps(trace, ensure_ascii=False),
                ex=ttl_seconds,
            )
            pipe.lpush(recent, trace_id)
            pipe.ltrim(recent, 0, RECENT_TRACES - 1)
            pipe.expire(recent, ttl_seconds)
            day = str(trace.get("created_at") or "")[:10]
            if len(day) == 10:
                daily = self._key("daily", tenant, user, day)
                for field, count in _daily_counts(trace).items():
                    pipe.hincrby(daily, field, count)
                pipe.expire(daily, DAILY_DAYS * 86400)
            await pipe.execute()

    async def daily_recall(
        self, tenant: str, user: str, days: Sequence[str]
    ) -> dict[str, dict[str, int]]:
        """Per day (YYYY-MM-DD, as given): answers traced, memories injected, and memories
        dropped as ``dropped:<reason>``; a day without answers is an empty dict."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for day in days:
                pipe.hgetall(self._key("daily", tenant, user, day))
            rows = await pipe.execute()
        return {
            day: {_s(k): int(v) for k, v in row.items()}
            for day, row in zip(days, rows, strict=True)
        }

    async def has_settings(self, tenant: str, user: str) -> bool:
        return bool(await self.redis.exists(self._key("settings", tenant, user)))

    async def recent_traces(self, tenant: str, user: str) -> list[dict[str, Any]]:
        """The user's latest traces that have not expired, newest first."""
        ids = [_s(i) for i in await self.redis.lrange(self._key("traces", tenant, user), 0, -1)]
        if not ids:
            return []
        raw = await self.redis.mget([self._key("trace", tenant, user, i) for i in ids])
        return [json.loads(r) for r in raw if r]

    async def get_trace(self, tenant: str, user: str, trace_id: str) -> dict[str, Any] | None:
        try:
            key = self._key("trace", tenant, user, _need(trace_id, "trace"))
        except NoMatch:
            return None
        raw = await self.redis.get(key)
        return json.loads(raw) if raw else None

    async def forget_user(self, tenant: str, user: str, *, keep: Iterable[str] = ()) -> int:
        """Delete every per-user key but the memories' history and the ``keep`` kinds:
        candidates, rejected content keys, traces, settings. Returns how many went."""
        kinds = ("cand", "trace", "daily")
        singles = ("candidx", "candkeys", "candrej", "candlast", "traces", "settings")
        doomed = [self._key(k, tenant, user) for k in singles if k not in set(keep)]
        for kind in kinds:
            pattern = self._key(kind, tenant, user) + ":*"
            doomed += [_s(k) async for k in self.redis.scan_iter(match=pattern, count=1000)]
        return int(await self.redis.delete(*doomed)) if doomed else 0

    # -- gateway keys ----------------------------------------------------------------------

    async def gateway_key(self, digest: str) -> tuple[int, dict[str, str] | None]:
        """(how many gateway keys exist, the key whose secret hashes to ``digest`` or None)."""
        reply = await self._gateway_key_lookup(keys=[_GKEY_BY_HASH + digest, _GKEYS], args=[_GKEY])
        count = int(reply[0])
        if len(reply) < 2 or not reply[1]:
            return count, None
        flat = [_s(v) for v in reply[1]]
        return count, dict(zip(flat[::2], flat[1::2], strict=True))

    async def put_gateway_key(self, record: dict[str, str], digest: str) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(_GKEY + record["id"], mapping=cast("dict[Any, Any]", record))
            pipe.set(_GKEY_BY_HASH + digest, record["id"])
            pipe.sadd(_GKEYS, record["id"])
            await pipe.execute()

    async def gateway_key_record(self, key_id: str) -> dict[str, str] | None:
        raw = await self.redis.hgetall(_GKEY + key_id)
        return {_s(k): _s(v) for k, v in raw.items()} if raw else None

    async def gateway_keys(self) -> list[dict[str, str]]:
        ids = sorted(_s(i) for i in await self.redis.smembers(_GKEYS))
        async with self.redis.pipeline(transaction=False) as pipe:
            for key_id in ids:
                pipe.hgetall(_GKEY + key_id)
            rows = await pipe.execute()
        return [{_s(k): _s(v) for k, v in row.items()} for row in rows if row]

    async def replace_gateway_key_secret(
        self, key_id: str, old_digest: str, new_digest: str, fields: dict[str, str]
    ) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(_GKEY_BY_HASH + old_digest)
            pipe.set(_GKEY_BY_HASH + new_digest, key_id)
            pipe.hset(_GKEY + key_id, mapping=cast("dict[Any, Any]", fields))
            await pipe.execute()

    async def delete_gateway_key(self, key_id: str, digest: str) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(_GKEY_BY_HASH + digest, _GKEY + key_id)
            pipe.srem(_GKEYS, key_id)
            await pipe.execute()

    # -- admin sessions --------------------------------------------------------------------

    async def put_admin_session(self, digest: str, ttl_seconds: int) -> None:
        await self.redis.set(_ADMIN_SESSION + digest, "1", ex=ttl_seconds)

    async def admin_session_exists(self, digest: str) -> bool:
        return bool(await self.redis.exists(_ADMIN_SESSION + digest))

    async def delete_admin_session(self, digest: str) -> None:
        await self.redis.delete(_ADMIN_SESSION + digest)

    # -- history ---------------------------------------------------------------------------

    async def append_history(
        self,
        tenant: str,
        user: str,
        memory_id: str,
        entry: dict[str, Any],
        *,
        expire_at: float | None = None,
        replace: bool = False,
    ) -> None:
        key = self._key("hist", tenant, user, memory_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            if replace:
                pipe.delete(key)
            pipe.rpush(key, json.dumps(entry, ensure_ascii=False))
            if expire_at is not None:
                pipe.expireat(key, int(expire_at) + 1)
            else:
                pipe.persist(key)
            await pipe.execute()

    async def history(self, tenant: str, user: str, memory_id: str) -> list[dict[str, Any]]:
        rows = await self.redis.lrange(self._key("hist", tenant, user, memory_id), 0, -1)
        return [json.loads(row) for row in rows]

    # -- another embedding model's memories ---------------------------------------------------

    async def other_model_indexes(self) -> dict[str, int]:
        """Memory indexes of other embedding models (name -> documents), left from before
        a model change: one per key prefix, of the newest schema there."""
        newest: dict[str, str] = {}
        for name, prefix in (await self._memory_indexes()).items():
            if prefix != self._prefix and (
                prefix not in newest or _schema_version(name) > _schema_version(newest[prefix])
            ):
                newest[prefix] = name
        found: dict[str, int] = {}
        for name in newest.values():
            info = await self._info(name)
            found[name] = int(float(_s(info.get("num_docs", 0))))
        return found

    async def memories_elsewhere(self) -> AsyncIterator[tuple[bytes, dict[bytes, bytes], int]]:
        """Memory hashes stored under another model's key prefix: (key, hash, TTL in ms)."""
        async for key in self.redis.scan_iter(match=f"{_MEMORY_KEYS}*", count=1000):
            if key.decode().startswith(self._prefix + ":"):
                continue
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hgetall(key)
                pipe.pttl(key)
                raw, ttl = await pipe.execute()
            if raw and b"content" in raw:
                yield key, raw, int(ttl)

    async def move_memory(
        self,
        old_key: bytes,
        read: dict[bytes, bytes],
        memory: Memory,
        *,
        search_text: str,
        embedding: np.ndarray,
        ttl_ms: int,
    ) -> bool:
        """Write ``memory`` under the current model, with the old key's remaining TTL (Redis
        time, whatever clock the gateway runs on), and delete ``old_key``, in one transaction,
        only while the old hash is still what was ``read`` (a replica of the previous version
        may edit it, another may be moving it); False when it was not."""
        async with self.redis.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(old_key)
                if await pipe.hgetall(old_key) != read:
                    return False
                pipe.multi()
                self._queue_put(pipe, memory, search_text, embedding, None)
                if ttl_ms > 0:
                    pipe.pexpire(self.memory_key(memory.tenant, memory.user, memory.id), ttl_ms)
                pipe.delete(old_key)
                await pipe.execute()
            except WatchError:
                return False
        return True

    async def all_keys(self) -> AsyncIterator[bytes]:
        """Every memgate key (tests scan them for leaked secrets)."""
        async for key in self.redis.scan_iter(match=f"{KEY_ROOT}:*", count=1000):
            yield key


def merge_hits(
    vector: dict[str, float], text: dict[str, float], memories: dict[str, Memory]
) -> list[Hit]:
    """Both searches' keys as hits with both scores, in search order; a key whose memory was
    deleted before it was read is simply gone."""
    keys = dict.fromkeys([*vector, *text])
    return [
        Hit(memories[key], vector.get(key, 0.0), text.get(key, 0.0))
        for key in keys
        if key in memories
    ]


def _memories(keys: list[str], rows: list[Any], fields: list[str]) -> dict[str, Memory]:
    """HMGET rows as memories by key; a key deleted in the meantime has no content."""
    out: dict[str, Memory] = {}
    for key, values in zip(keys, rows, strict=True):
        # decoded here in one pass: the reply holds only bytes or None (one memory's
        # fields per row), so from_hash's per-field type checks are not needed
        raw = {f: v.decode() for f, v in zip(fields, values, strict=True) if v is not None}
        if "content" in raw:
            raw["id"] = _memory_id(key)
            out[key] = Memory.from_fields(raw)
    return out


def _returned(load: bool) -> list[str]:
    """What a search RETURNs: the key alone, or with ``load`` every field recall reads."""
    return RECALL_FIELDS if load else ["id"]


_RECALL_BYTES = [(field, field.encode()) for field in RECALL_FIELDS]


def _found_memories(results: list[dict[bytes, Any]]) -> dict[str, Memory]:
    """Search rows that RETURNed the recall fields as memories by key; a row without
    content (its key expired as it was read) is left out."""
    out: dict[str, Memory] = {}
    for row in results:
        values = row[b"extra_attributes"]
        raw = {f: v.decode() for f, b in _RECALL_BYTES if (v := values.get(b)) is not None}
        if "content" in raw:
            key = _s(row[b"id"])
            raw["id"] = _memory_id(key)
            out[key] = Memory.from_fields(raw)
    return out


def search_results(reply: Any, *, with_scores: bool) -> list[dict[bytes, Any]]:
    """FT.SEARCH rows as RESP3 shapes them (``id``, ``score``, ``extra_attributes``),
    whichever protocol the connection speaks."""
    if isinstance(reply, dict):
        return list(reply[b"results"])
    rows: list[dict[bytes, Any]] = []
    step = 3 if with_scores else 2
    for i in range(1, len(reply), step):
        fields = reply[i + step - 1] or []
        row: dict[bytes, Any] = {
            b"id": reply[i],
            b"extra_attributes": dict(zip(fields[::2], fields[1::2], strict=True)),
        }
        if with_scores:
            row[b"score"] = float(reply[i + 1])
        rows.append(row)
    return rows


def _daily_counts(trace: dict[str, Any]) -> dict[str, int]:
    """What one traced answer adds to its day: the answer, what was injected (sent, so not
    in dry-run), and every dropped candidate under its reason."""
    counts = {"answers": 1, "injected": len(trace.get("injected") or [])}
    for cand in trace.get("candidates") or []:
        reason = cand.get("reason")
        if reason and _TAG_VALUE.fullmatch(str(reason)):
            key = f"dropped:{reason}"
            counts[key] = counts.get(key, 0) + 1
    return counts


def _memory_id(key: str) -> str:
    """The memory id a memory's key ends with (``Store._key``)."""
    return key.rsplit(":", 1)[-1]


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _redact(url: str) -> str:
    """Never print a password that sits in a Redis URL."""
    if "@" in url:
        scheme, _, rest = url.partition("://")
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url
