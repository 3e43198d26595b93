"""Forget me means everything: after "delete all", a scan of Redis finds nothing of the user's
words (only the content-free history entries the audit keeps)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
import redis

from gateway.memory.identity import tenant_for_key
from tests.conftest import Gateway
from tests.test_mining_e2e import memories, pending, wait_until
from tests.test_recall import User


@pytest.fixture
def rdb(gateway: Gateway) -> Iterator[redis.Redis]:
    """A plain client on the gateway's Redis."""
    assert gateway.settings.redis_url is not None
    client = redis.Redis.from_url(gateway.settings.redis_url)
    try:
        yield client
    finally:
        client.close()


def _everything(rdb: redis.Redis) -> dict[str, str]:
    """Every key in Redis with its whole value as text."""
    out: dict[str, str] = {}
    for raw in rdb.scan_iter(count=1000):
        key = raw.decode(errors="replace")
        kind = rdb.type(raw).decode()
        value: object
        if kind == "string":
            value = rdb.get(raw)
        elif kind == "hash":
            value = rdb.hgetall(raw)
        elif kind == "list":
            value = rdb.lrange(raw, 0, -1)
        elif kind == "set":
            value = rdb.smembers(raw)
        elif kind == "zset":
            value = rdb.zrange(raw, 0, -1)
        elif kind == "stream":
            value = rdb.xrange(raw)
        else:
            value = kind
        out[key] = _text(value)
    return out


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, dict):
        return " ".join(_text(k) + " " + _text(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        return " ".join(_text(v) for v in value)
    return str(value)


def test_delete_all_leaves_nothing_of_the_user_in_redis(gateway: Gateway, rdb: redis.Redis) -> None:
    me = User(gateway)
    tenant, user = tenant_for_key(me.key), me.headers["x-memory-user"]
    said = "记住我最喜欢的城市是亚特兰蒂斯"  # mined into a pending candidate
    stated = "I prefer the Zanzibarian notation for dates"
    me.remember(stated)
    me.ask(said)
    pending(me, 1)
    me.ask("Which notation do I prefer for dates? Zanzibarian")  # a trace, an injection
    edited = me.remember("I like the Quetzalcoatl theme", type="preference")
    httpx.patch(
        f"{gateway.base_url}/memories/{edited}",
        headers=me.headers,
        json={"content": "I like the Quetzalcoatl dark theme"},
    )
    httpx.patch(
        f"{gateway.base_url}/memory/settings", headers=me.headers, json={"recall_paused": True}
    )
    before = _everything(rdb)
    assert any("Zanzibarian" in v for v in before.values())
    assert any("亚特兰蒂斯" in v for v in before.values())

    resp = httpx.delete(f"{gateway.base_url}/memories", headers=me.headers, params={"all": "true"})
    assert resp.status_code == 200 and resp.json()["deleted"] == 2
    wait_until("the mining stream to drain", lambda: True if not rdb.xlen("memgate:mine") else None)

    assert memories(me) == [] and pending(me, 0) == []
    after = _everything(rdb)
    for words in ("Zanzibarian", "亚特兰蒂斯", "Quetzalcoatl", "notation"):
        assert not [k for k, v in after.items() if words in v or words in k], words
    mine = [k for k in after if f":{tenant}:{user}" in k]
    assert mine and all(k.startswith(f"memgate:hist:{tenant}:{user}:") for k in mine)
    for key in mine:  # the audit keeps who deleted what when, without content
        [entry] = [json.loads(e) for e in rdb.lrange(key, 0, -1)]
        assert entry["action"] == "deleted" and entry["changes"] == {}


def test_deleting_a_project_removes_its_candidates_too(gateway: Gateway) -> None:
    me = User(gateway)
    me.ask("This project uses PostgreSQL as its database", project="alpha")
    me.ask("This project uses MySQL as its database", project="beta")
    both = pending(me, 2)
    assert {c["project_id"] for c in both} == {"alpha", "beta"}
    resp = httpx.delete(
        f"{gateway.base_url}/memories", headers=me.headers, params={"project_id": "alpha"}
    )
    assert resp.status_code == 200
    assert [c["project_id"] for c in pending(me, 0)] == ["beta"]
