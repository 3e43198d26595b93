"""Shared fixtures: a real Redis with the Query Engine, a loopback upstream, a running gateway."""

from __future__ import annotations

import functools
import os
import shutil
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import httpx._transports.default
import httpx2._transports.default
import openai
import pytest

from gateway.app import create_app
from gateway.clock import Clock, ManualClock, SystemClock
from gateway.config import Settings
from gateway.memory.embed import LocalEmbedder
from gateway.memory.memories import Memories
from gateway.memory.policy import Policy, load_policy
from gateway.memory.scenario_eval import Runner
from gateway.memory.tokens import prepare_cache
from gateway.storage.redis_server import EmbeddedRedis, free_port
from gateway.storage.store import Store
from tests.upstream_stub import ServerThread, StubState, UpstreamStub

if TYPE_CHECKING:  # Playwright loads only for the browser tests
    from playwright.sync_api import Browser, Page

# Fixtures that start Redis or a server: a test that uses one is not a unit test.
SERVICE_FIXTURES = frozenset(
    {
        "redis_url",
        "upstream_server",
        "upstream",
        "make_gateway",
        "fresh_gateway",
        "gateway",
        "browser",
        "page",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``unit`` (set per file or per test) means no Redis, servers or browsers, so that
    ``pytest -m unit`` runs without them: a unit test that asks for a service fails here.

    ``long`` tests run first (the order is otherwise kept): xdist hands tests out in this
    order, and a long one started last keeps the run going while the other worker idles."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
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


@pytest.fixture(autouse=True)
def _sdk_clients_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every openai SDK client a test makes is closed when the test ends, as an app closes
    its client: an unclosed one leaves its sockets to the garbage collector, and the
    ResourceWarning that raises there fails whichever test happens to be running."""
    made: list[openai.OpenAI] = []
    init = openai.OpenAI.__init__

    def remembered(self: openai.OpenAI, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(openai.OpenAI, "__init__", remembered)
    yield
    for client in made:
        client.close()


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (``pytest.mark.anyio``) run on asyncio, as the gateway does."""
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _one_tls_context() -> Iterator[None]:
    """The httpx clients tests make (``httpx.get`` and friends make one per call, the openai
    SDK one per client, through httpx2) share one verifying TLS context per setting instead
    of each reading the whole CA bundle again, the dearest part of making a client. Tests
    speak plain HTTP on loopback, and a shared context verifies as a fresh one would.
    Patched by name: a version of either library without that name fails here."""
    with pytest.MonkeyPatch.context() as patch:
        for transports in (httpx._transports.default, httpx2._transports.default):
            made = transports.create_ssl_context
            patch.setattr(transports, "create_ssl_context", functools.cache(made))
        yield


@pytest.fixture(scope="session", autouse=True)
def offline_tokens(tmp_path_factory: pytest.TempPathFactory) -> None:
    """tiktoken's files from the installed packages, as `memgate serve` prepares them, for
    tests that count tokens without starting a gateway first."""
    prepare_cache(tmp_path_factory.mktemp("tiktoken"))


@contextmanager
def _embedded_redis(data_dir: Path) -> Iterator[str]:
    server = EmbeddedRedis(data_dir)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``MEMGATE_REDIS_URL`` when given, else the embedded Redis in a temporary data dir."""
    external = os.environ.get("MEMGATE_REDIS_URL")
    if external:
        yield external
        return
    with _embedded_redis(tmp_path_factory.mktemp("redis")) as url:
        yield url


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


@pytest.fixture
async def service(
    redis_url: str, shared_embedder: LocalEmbedder, shipped_policy: Policy
) -> AsyncIterator[Memories]:
    """The memory write path (``Memories``) on the worker's Redis, with a clock of its own."""
    store = Store(redis_url)
    memories = Memories(store, shared_embedder, shipped_policy, ManualClock(SystemClock().now()))
    await memories.ready()
    yield memories
    await store.aclose()


@pytest.fixture
async def service_under(
    redis_url: str, shared_embedder: LocalEmbedder
) -> AsyncIterator[Callable[[Policy], Awaitable[Memories]]]:
    """The memory write path under a policy of the test's own (an overlay turning a rule
    off), on the worker's Redis; its stores close with the test."""
    stores: list[Store] = []

    async def under(policy: Policy) -> Memories:
        store = Store(redis_url)
        stores.append(store)
        memories = Memories(store, shared_embedder, policy, ManualClock(SystemClock().now()))
        await memories.ready()
        return memories

    yield under
    for store in stores:
        await store.aclose()


@pytest.fixture
async def runner(
    redis_url: str, shared_embedder: LocalEmbedder, shipped_policy: Policy
) -> AsyncIterator[Runner]:
    """The scenario runner (write path and recall under a throwaway tenant, simulated clock)
    on the worker's Redis; a test forgets the users it made."""
    store = Store(redis_url)
    made = Runner(store, shared_embedder, shipped_policy)
    await made.ready()
    yield made
    await store.aclose()


@pytest.fixture(scope="session")
def shipped_policy() -> Policy:
    """The shipped policy, loaded and validated once per session; a gateway whose settings
    name no policy file gets it instead of loading the same files again (the loader's own
    tests load it themselves)."""
    return load_policy()


def _start_gateway(
    defaults: dict[str, Any],
    embedder: LocalEmbedder,
    policy: Policy,
    *,
    clock: Clock | None = None,
    sock: socket.socket | None = None,
    **overrides: Any,
) -> Gateway:
    """A gateway on a free port, or on ``sock`` (a bound socket held for it):
    ``Settings`` from the test defaults and ``overrides``."""
    values: dict[str, Any] = {
        "admin_token": "test-admin-token",
        "read_timeout": 30.0,
        "stream_read_timeout": 30.0,
        **defaults,
        **overrides,
    }
    settings = Settings(**values)
    assert settings.redis_url is not None
    app = create_app(
        settings,
        redis_url=settings.redis_url,
        clock=clock,
        embedder=embedder,
        policy=policy if settings.policy is None else None,
    )
    port = free_port() if sock is None else int(sock.getsockname()[1])
    server = ServerThread(app, port, sock=sock).start()
    return Gateway(url=server.url, settings=settings, server=server)


@pytest.fixture
def make_gateway(
    redis_url: str,
    upstream: Upstream,
    tmp_path: Path,
    shared_embedder: LocalEmbedder,
    shipped_policy: Policy,
) -> Iterator[GatewayFactory]:
    """Start a gateway of the test's own on a free port (or on ``sock``, a bound socket
    held for it); other keyword arguments override ``Settings`` fields."""
    started: list[ServerThread] = []

    def factory(
        *, clock: Clock | None = None, sock: socket.socket | None = None, **overrides: Any
    ) -> Gateway:
        defaults = {
            "upstream_url": upstream.url,
            "redis_url": redis_url,
            "data_dir": str(tmp_path / "data"),
        }
        gw = _start_gateway(
            defaults, shared_embedder, shipped_policy, clock=clock, sock=sock, **overrides
        )
        assert gw.server is not None
        started.append(gw.server)
        return gw

    yield factory
    for server in started:
        server.stop()


@pytest.fixture
def fresh_gateway(make_gateway: GatewayFactory) -> Gateway:
    """A gateway with the default settings that only this test talks to: for tests that
    stop it, read its metrics as absolute values, throttle its admin sign-in or otherwise
    change what another test would observe."""
    return make_gateway()


@pytest.fixture(scope="session")
def _shared_gateway(
    upstream_server: tuple[ServerThread, UpstreamStub],
    tmp_path_factory: pytest.TempPathFactory,
    shared_embedder: LocalEmbedder,
    shipped_policy: Policy,
) -> Iterator[Gateway]:
    """A gateway with the default settings on a Redis of its own: no other gateway's miner
    takes its mining jobs (nor it theirs), and no test's gateway keys switch it to keys-only.
    That Redis is the embedded one even when ``MEMGATE_REDIS_URL`` names an external Redis
    for the other tests."""
    server, _ = upstream_server
    with _embedded_redis(tmp_path_factory.mktemp("shared-redis")) as url:
        defaults = {
            "upstream_url": server.url + "/v1",
            "redis_url": url,
            "data_dir": str(tmp_path_factory.mktemp("shared-gateway")),
        }
        gw = _start_gateway(defaults, shared_embedder, shipped_policy)
        try:
            yield gw
        finally:
            assert gw.server is not None
            gw.server.stop()


@pytest.fixture
def gateway(_shared_gateway: Gateway, upstream: Upstream) -> Iterator[Gateway]:
    """The gateway with the default settings, started once per test process (each xdist
    worker has its own) and shared by the tests that ask for it; its Redis is
    ``gateway.settings.redis_url``, not ``redis_url``.

    A test using it keeps to its own users, keys and labels, and reads a metric only as the
    change its own requests made. One that stops the gateway, reads absolute metric values
    or changes what later tests would observe takes ``fresh_gateway`` or ``make_gateway``.
    ``upstream`` resets the stub. Afterwards one correct admin-token check clears the
    peer's wrong-token count, so a test's refused tokens never lock out the next test's; it
    fails if the test left the admin sign-in locked or gateway keys behind."""
    yield _shared_gateway
    resp = httpx.get(
        f"{_shared_gateway.base_url}/memory/keys",
        headers={"Authorization": f"Bearer {_shared_gateway.settings.admin_token}"},
    )
    assert resp.status_code == 200, (
        "the test left the shared gateway's admin sign-in locked; give it fresh_gateway"
    )
    assert resp.json()["data"] == [], "the test left gateway keys in the shared gateway's Redis"


# --- a real browser --------------------------------------------------------------------------
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's headless Chromium driven by Playwright, once per test module: its headless
    shell (``chromium-headless-shell``), the same engine without the desktop browser around
    it, which renders the same pages with much less CPU. Each test opens contexts of its own
    (cookies, locale, viewport), so nothing carries over. Not once per session: while
    Playwright's sync API is started, its event loop counts as running in the main thread,
    and the other tests' ``asyncio.run`` refuses to start."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium-headless-shell")
    if chromium is None:
        pytest.fail(
            "Debian's chromium-headless-shell package is required (./scripts/test installs it)."
        )
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


Shoot = Callable[["Page", str], None]


@pytest.fixture
def shoot() -> Shoot:
    """``shoot(page, name)`` keeps a full-page screenshot as ``name.png`` in
    ``MEMGATE_SCREENSHOT_DIR`` for review by eye, and does nothing when that is not set:
    no assertion reads the picture, and rendering a whole page to PNG is among the dearest
    things a browser test does."""
    folder = os.environ.get("MEMGATE_SCREENSHOT_DIR")

    def take(page: Page, name: str) -> None:
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)

    return take


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()
