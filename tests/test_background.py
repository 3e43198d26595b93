"""Redis under load: a blocking pool that waits, supervised background writes, and a
finished exchange never silently dropped from mining.

Faults are injected deterministically (a write that fails a given number of times, a
stopped Redis); nothing here asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.memory.background import Background
from gateway.observability.metrics import Metrics
from gateway.storage.candidates import STREAM
from gateway.storage.redis_server import EmbeddedRedis
from gateway.storage.store import Store
from tests.conftest import GatewayFactory
from tests.test_mining_e2e import counter, wait_until
from tests.test_recall import User


def failures(metrics: Metrics, task: str, reason: str) -> float:
    return metrics.background_failures.labels(task, reason)._value.get()


class Flaky:
    """A write that fails with a Redis connection error ``times`` times, then succeeds."""

    def __init__(self, times: int, error: Exception | None = None) -> None:
        self.left = times
        self.calls = 0
        self.error = error or RedisConnectionError("down")

    async def __call__(self) -> None:
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            raise self.error


def test_background_writes_are_retried_then_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    metrics = Metrics("t")
    unretrieved: list[dict[str, Any]] = []

    async def run() -> tuple[Flaky, Flaky, Flaky]:
        asyncio.get_running_loop().set_exception_handler(lambda _l, ctx: unretrieved.append(ctx))
        bg = Background(metrics, attempts=3, backoff=0)
        recovers, never, bug = Flaky(2), Flaky(99), Flaky(1, ValueError("bug"))
        bg.spawn("trace", recovers)
        bg.spawn("use_count", never)
        bg.spawn("trace", bug)
        await bg.drain()
        return recovers, never, bug

    recovers, never, bug = asyncio.run(run())
    assert recovers.calls == 3 and never.calls == 3 and bug.calls == 1  # bugs are not retried
    assert failures(metrics, "use_count", "error") == 1
    assert failures(metrics, "trace", "error") == 1
    assert unretrieved == []


def test_background_writes_are_bounded() -> None:
    metrics = Metrics("t")

    async def run() -> None:
        bg = Background(metrics, max_in_flight=2)
        gate = asyncio.Event()

        async def held() -> None:
            await gate.wait()

        for _ in range(5):
            bg.spawn("trace", held)
        assert bg.in_flight == 2
        gate.set()
        await bg.drain()

    asyncio.run(run())
    assert failures(metrics, "trace", "overflow") == 3


def test_mining_jobs_wait_in_the_buffer_while_redis_is_away() -> None:
    metrics = Metrics("t")

    async def run() -> list[str]:
        bg = Background(metrics, buffer_size=2, retry_every=3600)
        done: list[str] = []
        down = True

        def job(name: str) -> Any:
            async def write() -> None:
                if down:
                    raise RedisConnectionError("down")
                done.append(name)

            return write

        for name in ("a", "b", "c"):
            bg.submit_mining(job(name))
        await bg.settle()
        assert bg.buffered == 2  # the third found the buffer full: counted, below
        assert metrics.mining_buffered._value.get() == 2
        assert not await bg.flush()  # still down: kept
        down = False
        assert await bg.flush()
        await bg.drain()
        return done

    assert asyncio.run(run()) == ["a", "b"]
    assert metrics.mining_queued._value.get() == 2
    assert failures(metrics, "mining", "overflow") == 1
    assert metrics.mining_buffered._value.get() == 0


def test_jobs_still_buffered_at_shutdown_are_counted_as_lost() -> None:
    metrics = Metrics("t")

    async def run() -> None:
        bg = Background(metrics, retry_every=3600)
        bg.submit_mining(Flaky(10**6))
        await bg.drain()

    asyncio.run(run())
    assert failures(metrics, "mining", "shutdown") == 1


def test_the_pool_waits_for_a_free_connection_instead_of_failing(redis_url: str) -> None:
    async def run() -> list[dict[str, str]]:
        store = Store(redis_url, max_connections=2, pool_timeout=60)
        try:
            return await asyncio.gather(*(store.get_settings("t-pool", "u") for _ in range(60)))
        finally:
            await store.aclose()

    assert len(asyncio.run(run())) == 60


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "own-redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_an_exchange_finished_while_redis_is_down_is_mined_once_it_is_back(
    make_gateway: GatewayFactory, own_redis: EmbeddedRedis
) -> None:
    gw = make_gateway(redis_url=own_redis.url, redis_timeout=2.0)
    me = User(gw)
    assert me.ask("hello").http_response.status_code == 200
    wait_until(
        "the first exchange queued", lambda: counter(gw, "memgate_mining_queued_total") or None
    )
    own_redis.stop()
    raw = me.ask("Remember that my favourite colour is teal.")
    assert raw.http_response.status_code == 200
    wait_until(
        "the exchange buffered",
        lambda: True if counter(gw, "memgate_mining_buffered") == 1 else None,
    )
    own_redis.start()
    wait_until(
        "the buffered exchange queued",
        lambda: True if counter(gw, "memgate_mining_queued_total") == 2 else None,
    )
    assert counter(gw, "memgate_mining_buffered") == 0
    client = redis.Redis.from_url(own_redis.url)
    try:
        # Mined by the worker (or still on the stream): either way the job reached Redis.
        def mined() -> bool | None:
            entries = client.xrange(STREAM)
            texts = [json.loads(fields[b"job"])["text"] for _, fields in entries]
            if any("teal" in t for t in texts):
                return True
            listed = httpx.get(f"{gw.base_url}/memory/candidates", headers=me.headers)
            return True if "teal" in listed.text else None

        wait_until("the job mined", mined)
    finally:
        client.close()


def test_concurrent_writes_for_one_user_never_500(make_gateway: GatewayFactory) -> None:
    gw = make_gateway(redis_max_connections=4)
    me = User(gw)

    async def run() -> list[int]:
        async with httpx.AsyncClient(timeout=120) as client:
            replies = await asyncio.gather(
                *(
                    client.post(
                        f"{gw.base_url}/memories",
                        headers=me.headers,
                        json={"content": f"My lucky number is {i}", "type": "profile"},
                    )
                    for i in range(40)
                )
            )
        return [r.status_code for r in replies]

    codes = asyncio.run(run())
    assert set(codes) <= {200, 201}, codes
