"""``memgate bench proxy``: what memgate adds on top of a fast loopback upstream.

The same chat request goes directly to an upstream stub and through memgate, alternating
request by request, so the paired difference (gateway minus direct, same round) cancels most of
a shared machine's noise. Then each target takes ``seconds`` of load at ``concurrency``
requests in flight. The stub (raw ASGI under uvicorn), the gateway (``memgate serve``) and the
load generator (one asyncio process with httpx) each run in their own process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from gateway.processes import BenchError, _Server, http_body
from gateway.storage.redis_server import free_port

GOAL_P50_MS = 2.0
STREAM_CHUNKS = 20
_MODEL = "gpt-bench"
_START_TIMEOUT = 60.0

# --------------------------------------------------------------------------- upstream stub


def _chunk(index: int) -> bytes:
    last = index == STREAM_CHUNKS - 1
    delta: dict[str, Any] = {} if last else {"content": f"word{index} "}
    if index == 0:
        delta["role"] = "assistant"
    payload: dict[str, Any] = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": _MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": "stop" if last else None}],
    }
    if last:
        payload["usage"] = {"prompt_tokens": 12, "completion_tokens": 19, "total_tokens": 31}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


_COMPLETION = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1700000000,
        "model": _MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello from the bench stub."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
    }
).encode()
_STREAM = [*(_chunk(i) for i in range(STREAM_CHUNKS)), b"data: [DONE]\n\n"]


async def _respond(send: Any, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def stub_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Raw ASGI upstream: ``POST /v1/chat/completions`` answers a fixed completion, or for
    ``stream: true`` a 20-chunk SSE stream ending in ``data: [DONE]``."""
    body = await http_body(scope, receive, send)
    if body is None:
        return
    if scope["method"] != "POST" or scope["path"] != "/v1/chat/completions":
        await _respond(send, 404, b'{"error":{"message":"not found"}}', b"application/json")
        return
    try:
        stream = json.loads(body).get("stream") is True
    except (ValueError, AttributeError):
        await _respond(send, 400, b'{"error":{"message":"bad json"}}', b"application/json")
        return
    if not stream:
        await _respond(send, 200, _COMPLETION, b"application/json")
        return
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for chunk in _STREAM:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


def serve_stub(port: int, keep_alive: int = 5) -> None:
    """Entry point of the stub's own process; ``keep_alive``: seconds before it closes an
    idle connection."""
    import uvicorn

    uvicorn.run(
        stub_app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_keep_alive=keep_alive,
    )


# --------------------------------------------------------------------------- processes


def _start_stub(workdir: Path, keep_alive: int = 5) -> _Server:
    port = free_port()
    code = f"from benchmarks.bench import serve_stub; serve_stub({port}, {keep_alive})"
    env = dict(os.environ)
    # The benchmarks are not installed: the stub imports them from this checkout.
    checkout = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [checkout, env.get("PYTHONPATH")]))
    return _Server.spawn("stub", port, [sys.executable, "-c", code], env, workdir)


def _start_gateway(
    upstream_url: str, workdir: Path, log_level: str = "warning", workers: int = 1
) -> _Server:
    port = free_port()
    env = dict(os.environ)
    env.update(
        MEMGATE_UPSTREAM_URL=upstream_url + "/v1",
        MEMGATE_LOG_LEVEL=log_level,
        MEMGATE_DATA_DIR=str(workdir / "data"),  # embedded Redis and caches: thrown away after
        NO_PROXY=",".join(filter(None, [env.get("NO_PROXY"), "127.0.0.1"])),
    )
    args = [sys.executable, "-m", "gateway.cli", "serve", "--host", "127.0.0.1"]
    args += ["--workers", str(workers), "--port", str(port)]
    return _Server.spawn("gateway", port, args, env, workdir)


# --------------------------------------------------------------------------- load generator


class RequestFailed(RuntimeError):
    pass


_FAILURES = (httpx.HTTPError, RequestFailed)


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    headers: dict[str, str]
    via_gateway: bool


@dataclass(frozen=True)
class Sample:
    total: float
    """Seconds from sending to the last body byte."""
    ttfb: float | None = None
    """Seconds to the first body chunk (streams only)."""
    own_ms: float | None = None
    """memgate's own ``X-Memgate-Overhead-Ms``."""


def _body(stream: bool) -> bytes:
    messages = [{"role": "user", "content": "Say hello in five words."}]
    payload: dict[str, Any] = {"model": _MODEL, "messages": messages}
    if stream:
        payload["stream"] = True
    return json.dumps(payload).encode()


_BODIES = {False: _body(False), True: _body(True)}


def _own_ms(resp: httpx.Response) -> float | None:
    value = resp.headers.get("x-memgate-overhead-ms")
    with contextlib.suppress(TypeError, ValueError):
        return float(value)
    return None


async def _request(client: httpx.AsyncClient, target: Target, stream: bool) -> Sample:
    body = _BODIES[stream]
    start = time.perf_counter()
    if not stream:
        resp = await client.post(target.url, content=body, headers=target.headers)
        total = time.perf_counter() - start
        if resp.status_code != 200 or b'"usage"' not in resp.content:
            raise RequestFailed(f"{target.name}: HTTP {resp.status_code} {resp.content[:200]!r}")
        return Sample(total, None, _own_ms(resp))
    ttfb: float | None = None
    tail = b""
    async with client.stream("POST", target.url, content=body, headers=target.headers) as resp:
        async for chunk in resp.aiter_raw():
            if ttfb is None:
                ttfb = time.perf_counter() - start
            tail = (tail + chunk)[-64:]
        total = time.perf_counter() - start
    if resp.status_code != 200 or not tail.rstrip().endswith(b"data: [DONE]"):
        raise RequestFailed(f"{target.name}: HTTP {resp.status_code}, stream ended {tail!r}")
    return Sample(total, ttfb, _own_ms(resp))


@dataclass
class Paired:
    """Sequential samples, one per target per complete round (rounds with a failure dropped)."""

    rounds: list[dict[str, Sample]] = field(default_factory=list)
    errors: int = 0


async def _sequential(
    client: httpx.AsyncClient, targets: Sequence[Target], rounds: int, stream: bool
) -> Paired:
    out = Paired()
    for r in range(rounds):
        shift = r % len(targets)  # rotate who goes first so no target always follows another
        row: dict[str, Sample] = {}
        for target in [*targets[shift:], *targets[:shift]]:
            try:
                row[target.name] = await _request(client, target, stream)
            except _FAILURES:
                out.errors += 1
        if len(row) == len(targets):
            out.rounds.append(row)
    return out


@dataclass(frozen=True)
class Load:
    target: Target
    stream: bool
    completed: int
    errors: int
    elapsed: float
    latencies: list[float]

    @property
    def rate(self) -> float:
        return self.completed / self.elapsed if self.elapsed > 0 else 0.0


async def _load(
    client: httpx.AsyncClient, target: Target, stream: bool, concurrency: int, seconds: float
) -> Load:
    # Open the connections first (not measured), as a long-running client would have them.
    warm = await asyncio.gather(
        *(_request(client, target, stream) for _ in range(concurrency)), return_exceptions=True
    )
    errors = sum(isinstance(item, BaseException) for item in warm)
    latencies: list[float] = []
    start = time.perf_counter()
    deadline = start + seconds

    async def worker() -> None:
        nonlocal errors
        while time.perf_counter() < deadline:
            try:
                latencies.append((await _request(client, target, stream)).total)
            except _FAILURES:
                errors += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    return Load(target, stream, len(latencies), errors, elapsed, latencies)


async def _warm_up(client: httpx.AsyncClient, targets: Sequence[Target], warmup: int) -> None:
    for target in targets:
        for stream in (False, True):
            for _ in range(max(warmup, 1)):
                try:
                    await _request(client, target, stream)
                except _FAILURES as exc:
                    kind = "streamed" if stream else "plain"
                    raise BenchError(f"{kind} warm-up request failed: {exc!r}") from None


@dataclass
class Results:
    paired: dict[bool, Paired]
    loads: list[Load]

    @property
    def errors(self) -> int:
        return sum(p.errors for p in self.paired.values()) + sum(x.errors for x in self.loads)


async def _measure(
    targets: Sequence[Target], *, rounds: int, warmup: int, concurrency: int, seconds: float
) -> Results:
    limits = httpx.Limits(
        max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4
    )
    async with httpx.AsyncClient(timeout=30.0, limits=limits, trust_env=False) as client:
        await _warm_up(client, targets, warmup)
        _progress(
            f"sequential phase: {rounds} rounds x {len(targets)} targets, plain then streamed"
        )
        paired = {s: await _sequential(client, targets, rounds, s) for s in (False, True)}
        _progress(f"concurrent phase: {seconds:g} s at {concurrency} in flight per target and kind")
        loads = [
            await _load(client, target, stream, concurrency, seconds)
            for stream in (False, True)
            for target in targets
        ]
    return Results(paired, loads)


# --------------------------------------------------------------------------- report


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks; ``q`` in [0, 1]."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _ms(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "-"
    return f"{seconds * 1000:.2f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 2) -> str:
    """Plain aligned text: the first ``left`` columns left-aligned, the rest right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  " + "  ".join(parts).rstrip()

    rule = "  " + "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def _kind(stream: bool) -> str:
    return "streamed" if stream else "plain"


def _sequential_table(targets: Sequence[Target], paired: dict[bool, Paired]) -> str:
    header = [
        "kind", "target", "p50 ms", "p99 ms", "added p50", "added p99",
        "TTFB p50", "TTFB added p50", "TTFB added p99", "own p50",
    ]  # fmt: skip
    direct = targets[0].name
    rows: list[list[str]] = []
    for stream, result in paired.items():
        for target in targets:
            samples = [row[target.name] for row in result.rounds]
            total = [s.total for s in samples]
            cells = [_kind(stream), target.name, _ms(percentile(total, 0.5))]
            cells.append(_ms(percentile(total, 0.99)))
            if target.via_gateway:
                added = [row[target.name].total - row[direct].total for row in result.rounds]
                cells += [_ms(percentile(added, 0.5)), _ms(percentile(added, 0.99))]
            else:
                cells += ["-", "-"]
            if stream:
                ttfb = [s.ttfb for s in samples if s.ttfb is not None]
                cells.append(_ms(percentile(ttfb, 0.5)))
                if target.via_gateway:
                    added_ttfb = [
                        row[target.name].ttfb - row[direct].ttfb  # type: ignore[operator]
                        for row in result.rounds
                        if row[target.name].ttfb is not None and row[direct].ttfb is not None
                    ]
                    cells += [_ms(percentile(added_ttfb, 0.5)), _ms(percentile(added_ttfb, 0.99))]
                else:
                    cells += ["-", "-"]
            else:
                cells += ["-", "-", "-"]
            own = [s.own_ms / 1000 for s in samples if s.own_ms is not None]
            cells.append(_ms(percentile(own, 0.5)) if own else "-")
            rows.append(cells)
    return _table(header, rows)


def _load_table(loads: Sequence[Load]) -> str:
    header = ["kind", "target", "req/s", "vs direct", "p50 ms", "p99 ms", "errors"]
    direct_rate = {x.stream: x.rate for x in loads if not x.target.via_gateway}
    rows = []
    for x in loads:
        base = direct_rate.get(x.stream, 0.0)
        ratio = f"{x.rate / base:.2f}x" if x.target.via_gateway and base else "-"
        rows.append(
            [
                _kind(x.stream),
                x.target.name,
                f"{x.rate:.0f}",
                ratio,
                _ms(percentile(x.latencies, 0.5)),
                _ms(percentile(x.latencies, 0.99)),
                str(x.errors),
            ]
        )
    return _table(header, rows)


def _verdict(targets: Sequence[Target], paired: Paired) -> str:
    direct, gateway = targets[0].name, targets[1].name
    added = [row[gateway].total - row[direct].total for row in paired.rounds]
    p50_ms = percentile(added, 0.5) * 1000
    if math.isnan(p50_ms):
        return "verdict: no complete rounds, no figure."
    ok = p50_ms <= GOAL_P50_MS
    where = "within" if ok else "ABOVE"
    return (
        f"verdict: memgate (memory off) adds {p50_ms:.2f} ms p50 at concurrency 1, non-streamed: "
        f"{where} the {GOAL_P50_MS:g} ms goal (loopback figures published elsewhere: "
        "LiteLLM ~4 ms, Portkey 2.4 ms, Bifrost 0.4 ms)."
    )


def _report(
    results: Results,
    targets: Sequence[Target],
    *,
    rounds: int,
    warmup: int,
    concurrency: int,
    seconds: float,
    redis: str,
) -> str:
    cores = os.cpu_count() or 0
    complete = {s: len(p.rounds) for s, p in results.paired.items()}
    lines = [
        "",
        "memgate bench proxy",
        f"  upstream stub: raw ASGI under uvicorn; gateway: memgate serve, {redis}; "
        "client: httpx, HTTP/1.1 keep-alive",
        f"  warm-up: {warmup} requests per target and kind; the memory rows send X-Memory-Mode "
        "off (plain proxy) or on for a user with no memories yet (recall stops after one "
        "settings read; `memgate bench recall` times recall over 1k-100k memories)",
        "",
        f"Concurrency 1: {rounds} rounds, targets alternating request by request "
        f"(complete rounds: plain {complete[False]}, streamed {complete[True]}).",
        "  added = gateway minus direct in the same round; TTFB = first body chunk; "
        "own = memgate's X-Memgate-Overhead-Ms",
        _sequential_table(targets, results.paired),
        "",
        f"Concurrency {concurrency}: {seconds:g} s per target and kind, one after another.",
        f"  Load generator, upstream stub and gateway share this machine's {cores} cores: "
        "req/s is for the whole set-up, not the gateway alone.",
        _load_table(results.loads),
        "",
        _verdict(targets, results.paired[False]),
    ]
    if results.errors:
        lines.append(f"FAILED requests: {results.errors} (see the errors column and counts above)")
    return "\n".join(lines)


def _progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- entry point


def _targets(stub: _Server, gateway: _Server) -> list[Target]:
    base = {
        "authorization": "Bearer sk-bench",
        "content-type": "application/json",
        "x-memory-user": "bench",
    }
    path = "/v1/chat/completions"
    return [
        Target("direct", stub.url + path, base, via_gateway=False),
        Target("memgate, memory off", gateway.url + path, {**base, "x-memory-mode": "off"}, True),
        Target("memgate, memory on", gateway.url + path, {**base, "x-memory-mode": "on"}, True),
    ]


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the bench like Ctrl-C does: children stopped, temporary files removed."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_proxy_bench(
    *,
    rounds: int = 300,
    warmup: int = 20,
    concurrency: int = 32,
    seconds: float = 3.0,
    workers: int = 1,
) -> int:
    """Run the benchmark and print its report; 0 when every target started and answered."""
    if rounds < 1 or warmup < 0 or concurrency < 1 or seconds <= 0:
        print("memgate bench: need rounds >= 1, warmup >= 0, concurrency >= 1, seconds > 0")
        return 2
    external = bool(os.environ.get("MEMGATE_REDIS_URL"))
    redis = "external Redis (MEMGATE_REDIS_URL)" if external else "embedded Redis"
    with contextlib.ExitStack() as stack:
        stack.enter_context(_sigterm_as_interrupt())
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memgate-bench-")))
        try:
            _progress("starting the upstream stub")
            stub = _start_stub(workdir)
            stack.callback(stub.stop)
            stub.wait_ready("/", expect=404)
            _progress(f"starting memgate ({redis}, {workers} worker(s))")
            gateway = _start_gateway(stub.url, workdir, workers=workers)
            stack.callback(gateway.stop)
            gateway.wait_ready("/readyz", expect=200)
            targets = _targets(stub, gateway)
            _progress(f"warming up: {warmup} requests per target and kind")
            results = asyncio.run(
                _measure(
                    targets, rounds=rounds, warmup=warmup, concurrency=concurrency, seconds=seconds
                )
            )
        except BenchError as exc:
            print(f"memgate bench: {exc}", flush=True)
            return 1
        except KeyboardInterrupt:
            print("memgate bench: interrupted; stopping the stub and the gateway", flush=True)
            return 130
        print(
            _report(
                results,
                targets,
                rounds=rounds,
                warmup=warmup,
                concurrency=concurrency,
                seconds=seconds,
                redis=f"{redis}, {workers} worker process(es)",
            ),
            flush=True,
        )
        return 1 if results.errors else 0
