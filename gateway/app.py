"""``create_app``: builds the litestar app from settings; clients open once in the lifespan."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import jinja2
import structlog
from litestar import Litestar, Request, Response, get
from litestar.di import NamedDependency, Provide
from litestar.exceptions import HTTPException
from litestar.openapi import OpenAPIConfig
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template import TemplateConfig
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from gateway import __version__
from gateway.clock import Clock, EvalAwareClock, SystemClock
from gateway.config import Settings
from gateway.errors import BackendUnavailable, MemgateError, error_body
from gateway.http import api_docs
from gateway.http.admin import ROUTER as ADMIN_ROUTER
from gateway.http.memory_api import ROUTES as MEMORY_ROUTES
from gateway.http.proxy import chat_completions, passthrough, responses_create
from gateway.http.services import Services
from gateway.loops import raise_if_cancelled
from gateway.memory.access import AdminThrottle, Gatekeeper, trusted_networks
from gateway.memory.background import Background
from gateway.memory.candidates import CandidateQueue
from gateway.memory.embed import Embedder, make_embedder
from gateway.memory.extract_llm import make_extractor
from gateway.memory.memories import Memories
from gateway.memory.pipeline import MemoryFlow, MemoryPipeline
from gateway.memory.policy import Policy, load_policy
from gateway.memory.recall import Recaller
from gateway.memory.reembed import keep_carrying_over
from gateway.memory.tokens import prepare_cache
from gateway.observability.metrics import UNUSED_AFTER_DAYS, Metrics
from gateway.storage.keys import KEY_CHECK_WITHIN, Keyring
from gateway.storage.redis_server import EmbeddedRedis, EmbeddedRedisError
from gateway.storage.store import Store, backend_unavailable
from gateway.upstream import Upstream

log = structlog.get_logger("memgate")


def _memgate_error(_: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    assert isinstance(exc, MemgateError)
    retry = exc.extra.get("retry_after")
    headers = {"retry-after": str(retry)} if retry else None
    return Response(exc.to_body(), status_code=exc.status_code, headers=headers)


def _http_error(_: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    kind = {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}.get(
        status, "invalid_request_error" if status < 500 else "server_error"
    )
    code = "request_too_large" if status == 413 else f"http_{status}"
    return Response(
        error_body(str(exc.detail), kind, None, code),
        status_code=status,
        headers=exc.headers,
    )


def _unexpected(metrics: Metrics) -> Callable[[Request[Any, Any, Any], Exception], Response[Any]]:
    """The handler of every other exception: a Redis outage is a 503 (and counted), anything
    else a 500 without details."""

    def handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
        if backend_unavailable(exc):
            log.warning(
                "memory_backend_unavailable", path=request.url.path, error=type(exc).__name__
            )
            metrics.backend_errors.labels("redis").inc()
            down = BackendUnavailable(
                "The memory backend is unavailable; try again shortly. Chat completions still "
                "work (without memories)."
            )
            return Response(
                down.to_body(), status_code=down.status_code, headers={"retry-after": "1"}
            )
        log.error("unhandled_error", path=request.url.path, error=type(exc).__name__, exc_info=exc)
        return Response(
            error_body(
                "memgate hit an internal error; the request was not completed.",
                "server_error",
                None,
                "internal_error",
            ),
            status_code=500,
        )

    return handler


_NO_STORE = {"cache-control": "no-store"}
# How long start-up waits for a remote embedder to embed the policy's example requests
# before serving without them (they go on being embedded in the background).
REMOTE_PREPARE_WAIT_S = 10.0


@get("/healthz", include_in_schema=False)
async def healthz() -> Response[dict[str, str]]:
    """Liveness: the process and its event loop answer. It touches no backend, so a Redis
    outage never gets a replica restarted (chat goes on without memory meanwhile)."""
    return Response({"status": "ok"}, headers=_NO_STORE)


@get("/readyz", include_in_schema=False)
async def readyz(services: NamedDependency[Services]) -> Response[dict[str, Any]]:
    """Readiness: Redis and the memory index answer within a second (a probe's own timeout
    must not be reached by a hung Redis); 503 with the reason otherwise."""
    report = await services.store.readiness(within=KEY_CHECK_WITHIN)
    ok = bool(report.get("redis")) and bool(report.get("index"))
    report["mining_buffered"] = services.background.buffered
    return Response(
        {"status": "ok" if ok else "unavailable", **report},
        status_code=200 if ok else 503,
        headers=_NO_STORE,
    )


async def _supervise_redis(embedded: EmbeddedRedis, metrics: Metrics, every: float) -> None:
    """Restart the embedded Redis when it dies (same port, same append-only file)."""
    while True:
        await asyncio.sleep(every)
        if embedded.alive():
            continue
        log.error("embedded_redis_died", port=embedded.port, exit_code=embedded.exit_code)
        try:
            await asyncio.to_thread(embedded.restart)
        except (EmbeddedRedisError, OSError) as exc:
            log.error("embedded_redis_restart_failed", port=embedded.port, error=str(exc))
            continue
        metrics.redis_restarts.inc()
        log.warning("embedded_redis_restarted", port=embedded.port)


async def _previous_indexes(store: Store, own_redis: bool) -> None:
    """Said once the index is made: whether Redis is still filling it, and what becomes of
    indexes of an earlier schema over the same memories. In a Redis this process started
    no replica of the previous release can be using them, so they are dropped (the
    memories stay); in a shared one they are kept for such replicas, and
    ``memgate drop-previous-indexes`` drops them once the rollout is done."""
    if not await store.index_built():
        log.warning(
            "memory_index_building",
            index=store.index.name,
            hint="recall misses memories Redis has not indexed yet; /readyz says so",
        )
    if own_redis:
        for name in await store.drop_previous_memory_indexes():
            log.info("previous_memory_index_dropped", index=name)
        return
    previous = await store.previous_memory_indexes()
    if previous:
        log.info(
            "previous_memory_index_kept",
            indexes=previous,
            hint="`memgate drop-previous-indexes` once the previous release stopped",
        )


def _log_loop_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Whatever asyncio reports (a task nobody awaited failing, ...) as a JSON line."""
    exc = context.get("exception")
    log.error(
        "event_loop_error",
        message=str(context.get("message", ""))[:200],
        error=type(exc).__name__ if exc is not None else None,
    )


@get("/metrics", include_in_schema=False)
async def metrics_endpoint(services: NamedDependency[Services]) -> Response[bytes]:
    payload, content_type = services.metrics.render()
    return Response(payload, media_type=content_type)


async def _sample_gauges(store: Store, metrics: Metrics, clock: Clock, every: float = 15.0) -> None:
    """Memories by status and the pending queue are sampled from Redis, not counted per event."""
    while True:
        try:
            for status, count in (await store.count_by_status()).items():
                metrics.memories.labels(status).set(count)
            now = clock.now().timestamp()
            for days in UNUSED_AFTER_DAYS:
                aged, unused = await store.count_unused(now - days * 86400)
                metrics.memories_aged.labels(str(days)).set(aged)
                metrics.memories_never_injected.labels(str(days)).set(unused)
            pending = await store.count_pending_candidates(clock.now().timestamp())
            metrics.pending_candidates.set(pending)
        except Exception:
            metrics.backend_errors.labels("redis").inc()
        raise_if_cancelled()
        await asyncio.sleep(every)


def _count_api_requests(metrics: Metrics, clock: Clock) -> Callable[[ASGIApp], ASGIApp]:
    """Metrics and the summary log line for the memory API and admin page.

    The proxy routes account for themselves (they know upstream time); everything else
    passes straight through.
    """

    def factory(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            path = scope.get("path", "") if scope["type"] == "http" else ""
            if not path.startswith(("/v1/memor", "/admin")):
                await app(scope, receive, send)
                return
            route = "admin" if path.startswith("/admin") else "memory_api"
            started = clock.monotonic()
            status = 500

            async def capture(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                await app(scope, receive, capture)
            finally:
                total = clock.monotonic() - started
                metrics.requests.labels(route, str(status), "none").inc()
                metrics.request_duration.labels(route, "false").observe(total)
                log.info(
                    "request",
                    route=route,
                    method=scope.get("method"),
                    status=status,
                    total_ms=round(total * 1000, 2),
                )

        return middleware

    return factory


def _templates() -> jinja2.Environment:
    """Templates ship inside the package, so a wheel install finds them too."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("gateway", "templates"),
        autoescape=True,
    )


def create_app(
    settings: Settings,
    *,
    redis_url: str,
    clock: Clock | None = None,
    memory: MemoryPipeline | None = None,
    embedder: Embedder | None = None,
    policy: Policy | None = None,
    embedded: EmbeddedRedis | None = None,
    supervise_every: float = 1.0,
    freeze_heap: bool = False,
) -> Litestar:
    """Build the gateway. ``redis_url`` is resolved by the caller (external or embedded).

    The policy is loaded (and strictly validated) here, so a bad policy stops start-up.
    ``embedded``: the Redis this process started, watched and restarted if it dies.
    ``freeze_heap``: for a server process (``memgate serve``), whose start-up objects live
    as long as it does; never for an app among many in one process (they would outlive it).
    """
    the_clock = EvalAwareClock(clock or SystemClock())
    the_policy = policy or load_policy(settings.policy)
    # One upstream client for every upstream call (chat, embeddings, extraction), closed
    # when the app stops.
    upstream = Upstream(settings)
    the_embedder = embedder or make_embedder(settings, upstream)
    admin_logins = AdminThrottle()
    trusted_proxies = trusted_networks(settings.trusted_proxies)
    opened: Services | None = None

    def provide_services() -> Services:
        """Handlers' ``services`` parameter: what the lifespan opened (requests are served
        only once it has)."""
        assert opened is not None
        return opened

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        nonlocal opened
        store = Store(
            redis_url,
            max_connections=settings.redis_max_connections,
            pool_timeout=settings.redis_pool_timeout,
            timeout=settings.redis_timeout,
        )
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(_log_loop_errors)
        supervisor = (
            loop.create_task(_supervise_redis(embedded, metrics, supervise_every))
            if embedded is not None
            else None
        )
        background = Background(metrics)
        try:
            await store.check_query_engine()
            await the_embedder.warm_up()
            memories = Memories(store, the_embedder, the_policy, the_clock)
            carrying = None
            if the_embedder.dims is not None:
                await memories.ready()
                await _previous_indexes(store, embedded is not None)
                carrying = loop.create_task(keep_carrying_over(memories))
            queue = CandidateQueue(
                store,
                the_policy,
                the_clock,
                metrics=metrics,
                extractor=make_extractor(settings, upstream, metrics=metrics),
                resemblance=memories.resemblance,
            )
            await queue.ensure_group()
            recaller = Recaller(store, the_embedder, the_policy, the_clock)
            preparing = None
            # the example requests are embedded before the first request; a remote embedder
            # (which may hang) is waited for only briefly, and one that fails is asked again
            # in the background: recall goes on without them meanwhile
            if memory is None:
                first = loop.create_task(recaller.prepare())
                wait = REMOTE_PREPARE_WAIT_S if the_embedder.paid else None
                await asyncio.wait({first}, timeout=wait)
                if not (first.done() and first.result()):
                    preparing = loop.create_task(recaller.keep_preparing(first))
            flow = memory or MemoryFlow(
                recaller,
                store,
                metrics,
                the_clock,
                the_policy.recall.trace_ttl_days,
                candidates=queue,
                time_budget_ms=the_policy.recall.time_budget_ms,
                background=background,
                max_concurrent=settings.recall_concurrency,
            )
            opened = Services(
                settings=settings,
                clock=the_clock,
                metrics=metrics,
                policy=the_policy,
                gate=Gatekeeper(
                    settings,
                    the_clock,
                    Keyring(store, the_clock),
                    throttle=admin_logins,
                    trusted_proxies=trusted_proxies,
                ),
                store=store,
                memories=memories,
                candidates=queue,
                memory=flow,
                upstream=upstream,
                background=background,
            )
            sampler = loop.create_task(
                _sample_gauges(store, metrics, the_clock, settings.metrics_sample_seconds)
            )
            stop_miner = asyncio.Event()
            miner = loop.create_task(queue.run_worker(stop_miner))
            if freeze_heap:
                # What start-up loaded (the policy, the embedding model, its tokenizer) stays
                # until the process ends: kept out of the collector's full passes, each of
                # which would otherwise walk all of it while every request waits on the loop.
                gc.collect()
                gc.freeze()
            yield
            # cancelled and waited for: a task stopped mid-command must give its Redis
            # connection back before the pool closes, or the loop closes with it still open
            stopping = [task for task in (sampler, carrying, preparing) if task is not None]
            for task in stopping:
                task.cancel()
            stop_miner.set()
            await asyncio.wait([miner, *stopping], timeout=5)
            if isinstance(flow, MemoryFlow):
                await flow.drain()
        finally:
            if supervisor is not None:
                supervisor.cancel()
            await upstream.aclose()
            await store.aclose()

    prepare_cache(settings.data_path / "tiktoken")
    metrics = Metrics(__version__, models=settings.metrics_model_list)
    return Litestar(
        route_handlers=[
            chat_completions,
            responses_create,
            passthrough,
            healthz,
            readyz,
            metrics_endpoint,
            *MEMORY_ROUTES,
            ADMIN_ROUTER,
            api_docs.assets_router(),
        ],
        on_startup=[api_docs.install],
        template_config=TemplateConfig(engine=JinjaTemplateEngine.from_environment(_templates())),
        lifespan=[lifespan],
        dependencies={"services": Provide(provide_services, sync_to_thread=False)},
        exception_handlers={
            MemgateError: _memgate_error,
            HTTPException: _http_error,
            Exception: _unexpected(metrics),
        },
        openapi_config=OpenAPIConfig(
            title="memgate",
            version=__version__,
            path="/schema",
            render_plugins=[api_docs.render_plugin()],
        ),
        middleware=[_count_api_requests(metrics, the_clock)],
        request_max_body_size=settings.max_body_bytes,
        logging_config=None,  # memgate's structlog set-up owns logging (see logs.py)
        debug=False,
    )
