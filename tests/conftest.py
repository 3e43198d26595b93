"""Shared fixtures: a real Redis with the Query Engine, a loopback upstream, a running gateway."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.app import create_app
from gateway.clock import Clock
from gateway.config import Settings
from gateway.memory.embed import LocalEmbedder
from gateway.memory.policy import Policy, load_policy
from gateway.memory.tokens import prepare_cache
from gateway.storage.redis_server import EmbeddedRedis, free_port
from tests.upstream_stub import ServerThread, StubState, UpstreamStub

# Fixtures that start Redis or a server: a test that uses one is not a unit test.
SERVICE_FIXTURES = frozenset(
    {"redis_url", "upstream_server", "upstream", "make_gateway", "gateway"}
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``unit`` (set per file or per test) means no Redis, servers or browsers, so that
    ``pytest -m unit`` runs without them: a unit test that asks for a service fails here."""
    wrong = [
        item.nodeid
        for item in items
        if item.get_closest_marker("unit")
        and SERVICE_FIXTURES & set(getattr(item, "fixturenames", ()))
    ]
    if wrong:
        raise pytest.UsageError(
            "marked unit but uses Redis or a server: " + ", ".join(sorted(wrong)[:10])
        )


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (``pytest.mark.anyio``) run on asyncio, as the gateway does."""
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def offline_tokens(tmp_path_factory: pytest.TempPathFactory) -> None:
    """tiktoken's files from the installed packages, as `memgate serve` prepares them, for
    tests that count tokens without starting a gateway first."""
    prepare_cache(tmp_path_factory.mktemp("tiktoken"))


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``MEMGATE_REDIS_URL`` when given, else the embedded Redis in a temporary data dir."""
    external = os.environ.get("MEMGATE_REDIS_URL")
    if external:
        yield external
        return
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def upstream_server() -> Iterator[tuple[ServerThread, UpstreamStub]]:
    stub = UpstreamStub()
    server = ServerThread(stub, free_port()).start()
    try:
        yield server, stub
    finally:
        server.stop()


@dataclass
class Upstream:
    url: str
    """Base URL including /v1, as a client or memgate would configure it."""
    state: StubState


@pytest.fixture
def upstream(upstream_server: tuple[ServerThread, UpstreamStub]) -> Upstream:
    server, stub = upstream_server
    stub.state.reset()
    return Upstream(url=server.url + "/v1", state=stub.state)


@dataclass
class Gateway:
    url: str
    settings: Settings
    server: ServerThread | None = None
    """The server thread (a test may stop the gateway early; stopping twice is harmless)."""

    @property
    def base_url(self) -> str:
        """What an app puts in the openai SDK's ``base_url``."""
        return self.url + "/v1"


GatewayFactory = Callable[..., Gateway]


@pytest.fixture(scope="session")
def shared_embedder() -> LocalEmbedder:
    """The local embedder loads its weights once per test session."""
    return LocalEmbedder()


@pytest.fixture(scope="session")
def shipped_policy() -> Policy:
    """The shipped policy, loaded and validated once per session; a gateway whose settings
    name no policy file gets it instead of loading the same files again (the loader's own
    tests load it themselves)."""
    return load_policy()


@pytest.fixture
def make_gateway(
    redis_url: str,
    upstream: Upstream,
    tmp_path: Path,
    shared_embedder: LocalEmbedder,
    shipped_policy: Policy,
) -> Iterator[GatewayFactory]:
    """Start a gateway on a free port; keyword arguments override ``Settings`` fields."""
    started: list[ServerThread] = []

    def factory(*, clock: Clock | None = None, **overrides: Any) -> Gateway:
        values: dict[str, Any] = {
            "upstream_url": upstream.url,
            "redis_url": redis_url,
            "data_dir": str(tmp_path / "data"),
            "admin_token": "test-admin-token",
            "read_timeout": 30.0,
            "stream_read_timeout": 30.0,
        }
        values.update(overrides)
        settings = Settings(**values)
        app = create_app(
            settings,
            redis_url=settings.redis_url or redis_url,
            clock=clock,
            embedder=shared_embedder,
            policy=shipped_policy if settings.policy is None else None,
        )
        server = ServerThread(app, free_port()).start()
        started.append(server)
        return Gateway(url=server.url, settings=settings, server=server)

    yield factory
    for server in started:
        server.stop()


@pytest.fixture
def gateway(make_gateway: GatewayFactory) -> Gateway:
    return make_gateway()
