"""Redis faults, injected deterministically: a stopped Redis, a paused (SIGSTOP) one, a
killed embedded one. Chat keeps answering; the memory API says 503; nothing waits forever.

Each test runs its own embedded Redis, so stopping it never touches the shared one. Waits
poll for a real signal under generous deadlines; no assertion is about how long anything took.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from gateway.app import create_app
from gateway.config import Settings
from gateway.memory.embed import LocalEmbedder
from gateway.storage.redis_server import EmbeddedRedis, free_port
from tests.conftest import Gateway, GatewayFactory, Upstream
from tests.test_mining_e2e import counter, wait_until
from tests.test_recall import User
from tests.upstream_stub import ServerThread


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "own-redis")
    server.start()
    try:
        yield server
    finally:
        if server._proc is not None and server._proc.poll() is None:
            os.kill(server._proc.pid, signal.SIGCONT)
        server.stop()


def pid_of(server: EmbeddedRedis) -> int:
    assert server._proc is not None
    return server._proc.pid


def assert_503(resp: httpx.Response) -> None:
    assert resp.status_code == 503, resp.text
    err = resp.json()["error"]
    assert err["code"] == "memory_backend_unavailable" and err["type"] == "server_error"
    assert "Traceback" not in resp.text


def test_memory_api_is_503_while_redis_is_down_and_chat_still_answers(
    make_gateway: GatewayFactory, own_redis: EmbeddedRedis
) -> None:
    gw = make_gateway(redis_url=own_redis.url, redis_timeout=2.0)
    me = User(gw)
    me.remember("I prefer answers in French")
    own_redis.stop()
    url = f"{gw.base_url}/memories"
    assert_503(httpx.get(url, headers=me.headers))
    assert_503(httpx.post(url, headers=me.headers, json={"content": "x y", "type": "profile"}))
    assert_503(httpx.get(f"{gw.base_url}/memory/candidates", headers=me.headers))
    assert_503(httpx.get(f"{gw.base_url}/memory/settings", headers=me.headers))
    raw = me.ask("What language do I like?")
    assert raw.http_response.status_code == 200 and me.injected(raw) == []
    # Liveness holds; readiness says why not, promptly.
    assert httpx.get(f"{gw.url}/healthz").status_code == 200
    ready = httpx.get(f"{gw.url}/readyz")
    assert ready.status_code == 503 and ready.json()["redis"] is False


@pytest.mark.long
def test_a_hung_redis_costs_chat_the_recall_budget_not_the_socket_timeout(
    make_gateway: GatewayFactory, own_redis: EmbeddedRedis
) -> None:
    # The Redis timeout is far longer than the policy's recall budget (1 s): the chat must
    # come back without memory because of the budget, which the counter shows, and before the
    # client's own deadline, which a gateway waiting out the Redis timeout would pass.
    gw = make_gateway(redis_url=own_redis.url, redis_timeout=300.0)
    me = User(gw)
    memory_id = me.remember("I prefer answers in French")
    assert me.injected(me.ask("Which language should you answer in?")) == [memory_id]
    before = counter(gw, "memgate_recall_over_budget_total")
    os.kill(pid_of(own_redis), signal.SIGSTOP)
    try:
        raw = me.ask("Which language should you answer in?", timeout=60)
        assert raw.http_response.status_code == 200
        assert me.injected(raw) == []
        assert counter(gw, "memgate_recall_over_budget_total") == before + 1
        # A probe gets its answer while Redis hangs, not after the Redis timeout.
        ready = httpx.get(f"{gw.url}/readyz", timeout=10)
        assert ready.status_code == 503 and ready.json()["redis"] is False
    finally:
        os.kill(pid_of(own_redis), signal.SIGCONT)
    assert me.injected(me.ask("Which language should you answer in?")) == [memory_id]


def test_memory_api_is_503_when_redis_hangs_past_the_redis_timeout(
    make_gateway: GatewayFactory, own_redis: EmbeddedRedis
) -> None:
    gw = make_gateway(redis_url=own_redis.url, redis_timeout=0.5)
    me = User(gw)
    me.remember("I prefer answers in Spanish")
    os.kill(pid_of(own_redis), signal.SIGSTOP)
    try:
        assert_503(httpx.get(f"{gw.base_url}/memories", headers=me.headers, timeout=30))
    finally:
        os.kill(pid_of(own_redis), signal.SIGCONT)
    resp = httpx.get(f"{gw.base_url}/memories", headers=me.headers)
    assert resp.status_code == 200 and len(resp.json()["data"]) == 1


def test_a_dead_embedded_redis_is_restarted_and_counted(
    tmp_path: Path, upstream: Upstream, shared_embedder: LocalEmbedder
) -> None:
    embedded = EmbeddedRedis(tmp_path / "supervised")
    embedded.start()
    settings = Settings(
        upstream_url=upstream.url,
        redis_url=embedded.url,
        data_dir=str(tmp_path / "data"),
        admin_token="test-admin-token",
    )
    app = create_app(
        settings,
        redis_url=embedded.url,
        embedder=shared_embedder,
        embedded=embedded,
        supervise_every=0.1,
    )
    server = ServerThread(app, free_port()).start()
    try:
        gw = Gateway(url=server.url, settings=settings)
        me = User(gw)
        me.remember("I prefer answers in German")
        # requests at once leave several connections in the gateway's pool
        with ThreadPoolExecutor(8) as pool:
            codes = list(
                pool.map(
                    lambda _: httpx.get(f"{gw.base_url}/memories", headers=me.headers).status_code,
                    range(16),
                )
            )
        assert codes == [200] * 16
        old_pid = pid_of(embedded)
        os.kill(old_pid, signal.SIGKILL)
        wait_until(
            "the embedded Redis restarted",
            lambda: True if counter(gw, "memgate_redis_restarts_total") == 1 else None,
        )
        assert pid_of(embedded) != old_pid and embedded.alive()
        wait_until(
            "readiness back",
            lambda: True if httpx.get(f"{gw.url}/readyz").status_code == 200 else None,
        )
        resp = httpx.get(f"{gw.base_url}/memories", headers=me.headers)
        assert resp.status_code == 200, resp.text
        assert me.remember("I prefer short answers")
        # every connection pooled before the restart is stale: none of them may surface as
        # a 503 once the gateway says it is ready
        for fact in (
            "I have a cat named Mochi",
            "I'm allergic to peanuts",
            "我在备考雅思",
            "I drive a hybrid Toyota Corolla",
            "我住在杭州",
            "I play bass in a covers band",
        ):
            resp = httpx.get(f"{gw.base_url}/memories", headers=me.headers)
            assert resp.status_code == 200, resp.text
            assert me.remember(fact, type="profile")
    finally:
        server.stop()
        embedded.stop()
