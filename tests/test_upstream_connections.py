"""Stale pooled upstream connections: retried once on a fresh connection, nothing else retried.

The double is a raw HTTP/1.1 server on loopback that scripts what happens on each kept-alive
connection, so the stale-connection race is reproduced deterministically: the server answers
a connection's first request and keeps it open without saying so, then closes it when the
next request arrives on it, without answering (what an upstream does when its keep-alive
timer fires just as the request is sent).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from gateway.config import Settings
from gateway.storage.redis_server import free_port
from gateway.upstream import Upstream
from tests.conftest import GatewayFactory


@dataclass
class Script:
    """``answers``: how many requests each connection answers before it closes on the next
    one (0: it closes on its very first request)."""

    answers: int = 1
    connections: int = 0
    requests: int = 0
    closed_unanswered: int = 0
    bodies: list[bytes] = field(default_factory=list)


class ClosingUpstream:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._conn, "127.0.0.1", self.port)
        )
        self.ready.set()
        self.loop.run_forever()
        # Stopped: close the server and finish every connection task on this loop, so none
        # is left pending for the garbage collector to destroy once the loop is gone.
        server.close()
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.run_until_complete(server.wait_closed())
        self.loop.close()

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        s = self.script
        s.connections += 1
        answered = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                s.requests += 1
                if answered >= s.answers:
                    s.closed_unanswered += 1
                    return
                s.bodies.append(body)
                payload = json.dumps(
                    {
                        "id": "chatcmpl-x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "ok"},
                                "finish_reason": "stop",
                            }
                        ],
                        "data": [],
                    }
                ).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
                await writer.drain()
                answered += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    def __enter__(self) -> ClosingUpstream:
        self.thread.start()
        self.ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def closing() -> Iterator[tuple[ClosingUpstream, Script]]:
    script = Script()
    with ClosingUpstream(script) as server:
        yield server, script


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_a_reused_connection_closed_by_the_upstream_is_retried_once(
    make_gateway: GatewayFactory, closing: tuple[ClosingUpstream, Script]
) -> None:
    server, script = closing
    gw = make_gateway(upstream_url=server.url)
    headers = {"x-memory-mode": "off"}
    for _ in range(4):  # every request after the first finds the previous one's connection
        resp = httpx.post(f"{gw.base_url}/chat/completions", json=CHAT, headers=headers)
        assert resp.status_code == 200, resp.text
    for _ in range(3):  # pass-through routes too (a small body is replayable)
        assert httpx.get(f"{gw.base_url}/models").status_code == 200
        assert httpx.post(f"{gw.base_url}/embeddings", json={"input": "x"}).status_code == 200
    assert script.closed_unanswered >= 1  # the fault really happened
    assert len(script.bodies) == 10  # and every request was answered exactly once


def test_a_fresh_connection_that_fails_is_not_retried(
    make_gateway: GatewayFactory, closing: tuple[ClosingUpstream, Script]
) -> None:
    server, script = closing
    script.answers = 0  # every connection closes on its first request
    gw = make_gateway(upstream_url=server.url)
    resp = httpx.post(
        f"{gw.base_url}/chat/completions", json=CHAT, headers={"x-memory-mode": "off"}
    )
    assert resp.status_code == 502 and resp.json()["error"]["code"] == "upstream_unreachable"
    assert script.requests == 1


def test_idle_connections_expire_after_the_configured_keepalive() -> None:
    settings = Settings(upstream_url="http://127.0.0.1:9/v1", upstream_keepalive_seconds=1.5)

    async def run() -> float | None:
        upstream = Upstream(settings)
        try:
            connector = upstream._session(True).connector
            assert connector is not None
            return connector._keepalive_timeout  # type: ignore[attr-defined, no-any-return]
        finally:
            await upstream.aclose()

    assert asyncio.run(run()) == 1.5
