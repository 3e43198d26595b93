"""The candidate queue in Redis: per-user pending candidates and the durable mining stream.

Per tenant and user (``user_key``): ``cand:<id>`` a candidate's fields, ``candidx`` the
pending ids scored by their expiry time, ``candkeys`` content key -> pending id (the
duplicate check), ``candrej`` the content keys the user rejected, ``candlast`` the trace id
of the user's last answer, ``candclaim:<id>`` a decision in progress. The stream holds one
JSON job per finished exchange, read through a consumer group; an entry leaves it only once
acknowledged. What the candidates mean, and when they are written, is
``gateway.memory.candidates``' business.
"""

from __future__ import annotations

import json
from typing import Any, cast

from redis.exceptions import ResponseError

from gateway.storage.store import KEY_ROOT, Store, user_key

__all__ = ["GROUP", "STREAM", "CandidateStore", "Entry", "candidate_keys"]

STREAM = f"{KEY_ROOT}:mine"
GROUP = "miners"
_SCAN = 500  # stream entries read per XRANGE while looking for one user's jobs

Entry = tuple[str, Any]
"""A stream entry's id and its job as decoded JSON (None when it is not JSON)."""


def candidate_keys(tenant: str, user: str, cid: str) -> tuple[str, str, str]:
    """The keys one pending candidate is kept under (its fields, the owner's index of
    pending ids, the owner's content keys); they expire with it."""
    return (
        user_key("cand", tenant, user, cid),
        user_key("candidx", tenant, user),
        user_key("candkeys", tenant, user),
    )


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _decode(raw: dict[Any, Any]) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in raw.items()}


def _job(fields: dict[Any, Any]) -> Any:
    try:
        return json.loads(_s(fields.get(b"job") or fields.get("job") or b"{}"))
    except ValueError:
        return None


class CandidateStore:
    """One queue's Redis calls, through the store's connection pool: ``stream`` and its
    consumer ``group`` default to the gateway's (``STREAM``, ``GROUP``)."""

    def __init__(
        self, store: Store, *, stream: str | None = None, group: str | None = None
    ) -> None:
        self._redis = store.redis
        self.stream = stream or STREAM
        self.group = group or GROUP

    # -- candidates ------------------------------------------------------------------------

    async def is_rejected(self, tenant: str, user: str, content_key: str) -> bool:
        return bool(await self._redis.sismember(user_key("candrej", tenant, user), content_key))

    async def has_pending(self, tenant: str, user: str, content_key: str) -> bool:
        """A pending candidate with this content (not one whose key expired meanwhile)."""
        cid = await self._redis.hget(user_key("candkeys", tenant, user), content_key)
        return bool(cid) and bool(await self._redis.exists(user_key("cand", tenant, user, _s(cid))))

    async def add(self, tenant: str, user: str, fields: dict[str, str], expires: float) -> None:
        """A candidate (``fields`` hold its ``id`` and ``content_key``), pending until the
        ``expires`` timestamp, written in one transaction with the owner's index entries."""
        cid = fields["id"]
        cand, index, keys = candidate_keys(tenant, user, cid)
        at = int(expires) + 1
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(cand, mapping=cast("dict[Any, Any]", fields))
            pipe.expireat(cand, at)
            pipe.zadd(index, {cid: expires})
            pipe.expireat(index, at)
            pipe.hset(keys, fields["content_key"], cid)
            pipe.expireat(keys, at)
            await pipe.execute()

    async def pending(self, tenant: str, user: str, now_ts: float) -> list[dict[str, str]]:
        """The owner's unexpired candidates' fields, oldest first; ids left in the index by
        a candidate that expired on its own are cleared out."""
        index = user_key("candidx", tenant, user)
        await self._redis.zremrangebyscore(index, "-inf", now_ts)
        ids = [_s(c) for c in await self._redis.zrange(index, 0, -1)]
        if not ids:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for cid in ids:
                pipe.hgetall(user_key("cand", tenant, user, cid))
            rows = await pipe.execute()
        found, gone = [], []
        for cid, raw in zip(ids, rows, strict=True):
            if raw:
                found.append(_decode(raw))
            else:
                gone.append(cid)
        if gone:
            await self._redis.zrem(index, *gone)
        return found

    async def get(self, tenant: str, user: str, cid: str) -> dict[str, str] | None:
        raw = await self._redis.hgetall(user_key("cand", tenant, user, cid))
        return _decode(raw) if raw else None

    async def exists(self, tenant: str, user: str, cid: str) -> bool:
        return bool(await self._redis.exists(user_key("cand", tenant, user, cid)))

    async def remove(self, tenant: str, user: str, cid: str, content_key: str) -> None:
        """The candidate and its index entry; its content key's entry too, unless a newer
        candidate with the same content holds it."""
        cand, index, keys = candidate_keys(tenant, user, cid)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(cand)
            pipe.zrem(index, cid)
            await pipe.execute()
        if _s(await self._redis.hget(keys, content_key) or b"") == cid:
            await self._redis.hdel(keys, content_key)

    async def reject(self, tenant: str, user: str, content_key: str) -> None:
        """Never propose this content to the owner again."""
        await self._redis.sadd(user_key("candrej", tenant, user), content_key)

    async def count(self, tenant: str, user: str, now_ts: float) -> int:
        """The owner's candidates not yet expired."""
        index = user_key("candidx", tenant, user)
        return int(await self._redis.zcount(index, f"({now_ts}", "+inf"))

    async def claim(self, tenant: str, user: str, cid: str, token: str, ttl: int) -> bool:
        """Whether this caller (``token``) now holds the decision on ``cid``; the claim
        expires after ``ttl`` seconds if it is never released."""
        key = user_key("candclaim", tenant, user, cid)
        return bool(await self._redis.set(key, token, nx=True, ex=ttl))

    async def release(self, tenant: str, user: str, cid: str, token: str) -> None:
        """Give up the claim, if it is still this caller's."""
        key = user_key("candclaim", tenant, user, cid)
        if _s(await self._redis.get(key) or b"") == token:
            await self._redis.delete(key)

    async def swap_last_trace(self, tenant: str, user: str, trace_id: str, ttl: int) -> str | None:
        """Remember the owner's latest answer; returns the one remembered before."""
        key = user_key("candlast", tenant, user)
        prev = await self._redis.set(key, trace_id, ex=ttl, get=True)
        return _s(prev) if prev else None

    # -- the mining stream -----------------------------------------------------------------

    async def submit(self, job: dict[str, Any]) -> str:
        """Append a job; returns its entry id."""
        fields: Any = {"job": json.dumps(job, ensure_ascii=False)}
        return _s(await self._redis.xadd(self.stream, fields))

    async def ensure_group(self) -> None:
        try:
            await self._redis.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def read(
        self, consumer: str, start: str, count: int, block_ms: int | None
    ) -> list[Entry]:
        """XREADGROUP from ``start``: "0" for the consumer's own unacknowledged entries,
        ">" for new ones (waiting up to ``block_ms`` for one)."""
        reply: Any = await self._redis.xreadgroup(
            self.group, consumer, {self.stream: start}, count=count, block=block_ms
        )
        entries: list[Entry] = []
        for _stream, rows in reply or []:
            entries += [(_s(eid), _job(fields)) for eid, fields in rows if fields]
        return entries

    async def claim_idle(self, consumer: str, min_idle_ms: int, count: int) -> list[Entry]:
        """Entries other consumers read but left unacknowledged for ``min_idle_ms``."""
        claimed: Any = await self._redis.xautoclaim(
            self.stream,
            self.group,
            consumer,
            min_idle_time=min_idle_ms,
            start_id="0-0",
            count=count,
        )
        return [(_s(eid), _job(fields)) for eid, fields in claimed[1] if fields]

    async def ack(self, *entry_ids: str) -> None:
        """Done with these entries: acknowledged and deleted, in one transaction."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xack(self.stream, self.group, *entry_ids)
            pipe.xdel(self.stream, *entry_ids)
            await pipe.execute()

    async def drop_jobs(self, tenant: str, user: str) -> int:
        """Delete the owner's queued jobs (they carry the owner's latest message)."""
        doomed: list[str] = []
        start = "-"
        while True:
            rows: Any = await self._redis.xrange(self.stream, min=start, count=_SCAN)
            for entry_id, fields in rows:
                job = _job(fields)
                if isinstance(job, dict) and (job.get("tenant"), job.get("user")) == (
                    tenant,
                    user,
                ):
                    doomed.append(_s(entry_id))
            if len(rows) < _SCAN:
                break
            start = "(" + _s(rows[-1][0])
        if doomed:
            await self.ack(*doomed)
        return len(doomed)
