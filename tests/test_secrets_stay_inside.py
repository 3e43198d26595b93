"""memgate's own secrets never leave it: not upstream, not into a log line (tracebacks too).

The log test runs a gateway with the logging ``memgate serve`` sets up (uvicorn's loggers
included), forces each kind of 500 with a fault whose frames hold the key, the admin token,
the session cookie and the message, and then reads every line written.
"""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from gateway.app import create_app
from gateway.config import Settings
from gateway.memory.embed import LocalEmbedder
from gateway.memory.memories import Memories
from gateway.observability.logs import configure_logging
from gateway.storage.redis_server import free_port
from gateway.storage.store import Store
from gateway.upstream import Upstream as UpstreamClient
from gateway.upstream import UpstreamResponse
from tests.conftest import Gateway, GatewayFactory, Upstream
from tests.upstream_stub import ServerThread

ADMIN = "test-admin-token"
KEY = "sk-client-key-that-must-stay-out-of-logs-7f3a"
MESSAGE = "my grandmother's secret recipe uses saffron-9c1e"


@pytest.fixture
def log_text() -> Iterator[io.StringIO]:
    """Everything logged while the test runs, as ``memgate serve`` configures logging."""
    buf = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    configure_logging("info", stream=buf, cache=False)
    try:
        yield buf
    finally:
        structlog.reset_defaults()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


@pytest.fixture
def served(
    redis_url: str, upstream: Upstream, tmp_path: Path, shared_embedder: LocalEmbedder
) -> Iterator[Gateway]:
    settings = Settings(
        upstream_url=upstream.url,
        redis_url=redis_url,
        data_dir=str(tmp_path / "data"),
        admin_token=ADMIN,
    )
    app = create_app(settings, redis_url=redis_url, embedder=shared_embedder)
    server = ServerThread(app, free_port(), uvicorn_logging=False).start()
    try:
        yield Gateway(url=server.url, settings=settings)
    finally:
        server.stop()


def _fail(*_: Any, **__: Any) -> Any:
    # A library error that quotes its input, as decoders and lookups do.
    raise RuntimeError(f"could not handle {MESSAGE!r} for {KEY}")


def test_forced_500s_leave_no_key_token_cookie_or_message_in_the_log(
    served: Gateway, log_text: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = {"authorization": f"Bearer {KEY}", "x-memory-user": "log-u1"}
    admin = {"authorization": f"Bearer {ADMIN}", "x-memory-tenant": "t-logs", "x-memory-user": "u"}
    chat = {"model": "gpt-test", "messages": [{"role": "user", "content": MESSAGE}]}
    with httpx.Client(base_url=served.url, timeout=30) as client:
        login = client.post("/admin/login", data={"token": ADMIN})
        assert login.status_code == 303
        cookie = client.cookies["memgate_admin"]

        # 1. the memory API: a storage fault with the content and the key in its frames
        monkeypatch.setattr(Store, "put_memory", _fail)
        for headers in (user, admin):
            resp = client.post(
                "/v1/memories", headers=headers, json={"content": MESSAGE, "type": "preference"}
            )
            assert resp.status_code == 500 and resp.json()["error"]["code"] == "internal_error"
        monkeypatch.undo()

        # 2. chat, before the answer starts
        monkeypatch.setattr(UpstreamClient, "send", _fail)
        assert client.post("/v1/chat/completions", headers=user, json=chat).status_code == 500
        assert client.post("/v1/chat/completions", headers=admin, json=chat).status_code == 500
        monkeypatch.undo()

        # 3. chat, after the answer started streaming (the fault escapes to the ASGI server)
        async def cut(self: UpstreamResponse) -> AsyncIterator[bytes]:
            yield b'data: {"choices": []}\n\n'
            _fail(self)

        monkeypatch.setattr(UpstreamResponse, "chunks", cut)
        try:
            with client.stream(
                "POST", "/v1/chat/completions", headers=user, json={**chat, "stream": True}
            ) as resp:
                for _ in resp.iter_bytes():
                    pass
        except httpx.HTTPError:
            pass  # the connection is cut: what matters is what was logged
        monkeypatch.undo()

        # 4. the admin page, signed in with the session cookie
        monkeypatch.setattr(Memories, "owners", _fail)
        assert client.get("/admin").status_code == 500
        monkeypatch.undo()

    text = log_text.getvalue()
    assert text.count('"unhandled_error"') >= 5, text  # the faults were logged ...
    assert "Exception in ASGI application" in text or '"exc_type"' in text
    for secret in (KEY, ADMIN, cookie, MESSAGE, "saffron"):
        assert secret not in text  # ... without any secret or content


def test_admin_token_is_never_forwarded_upstream(
    make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    for upstream_key in (None, "sk-operator"):
        gw = make_gateway(upstream_api_key=upstream_key)
        chat = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
        for headers in (
            {"authorization": f"Bearer {ADMIN}"},
            {"authorization": f"Bearer {ADMIN}", "x-memory-tenant": "t-a", "x-memory-user": "u"},
            {"api-key": ADMIN},
        ):
            resp = httpx.post(f"{gw.base_url}/chat/completions", headers=headers, json=chat)
            assert resp.status_code == 200, resp.text
            seen = upstream.state.last("/chat/completions").headers
            assert ADMIN not in " ".join(seen.values())
            assert seen.get("authorization") == (f"Bearer {upstream_key}" if upstream_key else None)
            resp = httpx.get(f"{gw.base_url}/models", headers=headers)
            assert ADMIN not in " ".join(upstream.state.last("/models").headers.values())
