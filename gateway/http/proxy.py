"""The OpenAI-compatible surface: chat completions with memory, every other /v1 route untouched."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog
from litestar import Request, Response, post, route
from litestar.di import NamedDependency
from litestar.enums import HttpMethod
from litestar.params import FromPath
from litestar.response import Stream

from gateway import wire
from gateway.clock import Clock
from gateway.errors import (
    BadRequest,
    InvalidJSON,
    MissingField,
    RequestTooLarge,
    UpstreamError,
    error_body,
)
from gateway.http.services import Services
from gateway.memory import identity as identity_mod
from gateway.memory import inject, tokens
from gateway.memory.identity import Access
from gateway.memory.pipeline import Exchange, Prepared
from gateway.upstream import UpstreamStreamError, request_headers, response_headers

log = structlog.get_logger("memgate.request")

TRACE_HEADER = "x-memory-trace-id"
INJECTED_HEADER = "x-memory-injected"
OVERHEAD_HEADER = "x-memgate-overhead-ms"
_TAIL_BYTES = 8192


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _WithUsage(msgspec.Struct):
    usage: _Usage | None = None


_usage_decoder = msgspec.json.Decoder(_WithUsage)
_body_decoder = msgspec.json.Decoder()
_body_encoder = msgspec.json.Encoder()
_USAGE_OPTION = b'"stream_options":{"include_usage":true},'
_EVENT_END = re.compile(rb"\r?\n\r?\n")


@dataclass(slots=True)
class _Record:
    """What one request's summary log line and metrics are made of."""

    route: str
    started: float
    path: str = ""
    mode: str = "none"
    stream: bool = False
    status: int = 0
    trace_id: str | None = None
    model: str | None = None
    upstream_started: float | None = None
    upstream_s: float = 0.0
    ttfb_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_source: str | None = None
    injected: int = 0
    injected_tokens: int = 0
    error_kind: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def parse_chat_body(raw: bytes) -> dict[str, Any]:
    try:
        body = _body_decoder.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise InvalidJSON(
            "The request body is not valid JSON. Send a JSON object with 'model' and 'messages'."
        ) from None
    except RecursionError:
        raise InvalidJSON("The request body nests JSON too deeply.") from None
    if not isinstance(body, dict):
        raise InvalidJSON("The request body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise MissingField("Missing required parameter: 'model'.", param="model")
    if not isinstance(body.get("messages"), list):
        raise MissingField("Missing required parameter: 'messages'.", param="messages")
    return body


def _usage_from(payload: bytes) -> _Usage | None:
    try:
        return _usage_decoder.decode(payload).usage
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _usage_from_sse_tail(tail: bytes) -> _Usage | None:
    """The usage chunk (``stream_options.include_usage``) is the last data event before [DONE]."""
    for line in reversed(tail.split(b"\n")):
        if line.startswith(b"data:") and b'"usage"' in line:
            return _usage_from(line[5:].strip())
    return None


def _sse_error(failure: UpstreamStreamError) -> bytes:
    kind = "upstream_timeout" if failure.kind == "timeout" else "upstream_stream_cut"
    body = error_body(
        "The upstream stream ended unexpectedly; the answer is incomplete.",
        "upstream_error",
        None,
        kind,
    )
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _finish(services: Services, rec: _Record) -> None:
    total = services.clock.monotonic() - rec.started
    metrics = services.metrics
    stream = "true" if rec.stream else "false"
    model = metrics.model_label(rec.model, accepted=200 <= rec.status < 300)
    metrics.requests.labels(rec.route, str(rec.status), rec.mode).inc()
    metrics.request_duration.labels(rec.route, stream).observe(total)
    if rec.upstream_started is not None:
        metrics.upstream_duration.labels(rec.route, stream, model).observe(rec.upstream_s)
        metrics.overhead_duration.labels(rec.route).observe(max(total - rec.upstream_s, 0.0))
    if rec.ttfb_s is not None:
        metrics.ttfb.labels(rec.route, model).observe(rec.ttfb_s)
    metrics.count_tokens(rec.prompt_tokens, rec.completion_tokens, rec.injected_tokens, model=model)
    if rec.error_kind:
        metrics.upstream_errors.labels(rec.error_kind).inc()
    # An upstream that failed (5xx, unreachable, timeout, cut stream) is worth a warning; a
    # client's own 4xx is not.
    failed = rec.status >= 500 or (rec.error_kind is not None and rec.error_kind != "http_4xx")
    (log.warning if failed else log.info)(
        "request",
        route=rec.route,
        path=rec.path,
        status=rec.status,
        trace_id=rec.trace_id,
        memory_mode=rec.mode,
        stream=rec.stream,
        model=rec.model,
        upstream_ms=round(rec.upstream_s * 1000, 2) if rec.upstream_started else None,
        total_ms=round(total * 1000, 2),
        ttfb_ms=round(rec.ttfb_s * 1000, 2) if rec.ttfb_s is not None else None,
        prompt_tokens=rec.prompt_tokens,
        prompt_tokens_source=rec.prompt_tokens_source,
        completion_tokens=rec.completion_tokens,
        injected=rec.injected,
        injected_tokens=rec.injected_tokens,
        error=rec.error_kind,
        **rec.extra,
    )


def _bind_request(request: Request[Any, Any, Any]) -> str:
    """Every log line of this request (recall, trace writes, the summary) carries its path."""
    path = request.url.path
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(path=path)
    return path


def _wants_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _ask_for_usage(content: bytes, body: dict[str, Any]) -> bytes:
    """The forwarded body with ``stream_options.include_usage`` set, so the upstream reports
    the stream's token usage. Without other stream options the member is spliced in front and
    the client's bytes follow untouched."""
    if "stream_options" in body:
        forwarded = _body_decoder.decode(content)
        options = forwarded.get("stream_options")
        forwarded["stream_options"] = {
            **(options if isinstance(options, dict) else {}),
            "include_usage": True,
        }
        return _body_encoder.encode(forwarded)
    start = content.index(b"{") + 1
    return content[:start] + _USAGE_OPTION + content[start:]


def _usage_only_event(event: bytes) -> _Usage | None:
    """The usage of a usage-only chunk (``choices`` empty, ``usage`` set), else None."""
    if b'"usage"' not in event:
        return None
    for line in event.splitlines():
        if not line.startswith(b"data:"):
            continue
        try:
            data = _body_decoder.decode(line[5:].strip())
        except msgspec.DecodeError:
            return None
        if isinstance(data, dict) and data.get("choices") == [] and data.get("usage"):
            return _usage_from(line[5:].strip())
    return None


async def _drop_usage_event(chunks: AsyncIterator[bytes], rec: _Record) -> AsyncIterator[bytes]:
    """Relay whole SSE events, keeping back the usage-only chunk memgate asked for (the
    client did not) and recording its usage."""
    buffer = b""
    async for chunk in chunks:
        buffer += chunk
        out: list[bytes] = []
        while match := _EVENT_END.search(buffer):
            event, buffer = buffer[: match.end()], buffer[match.end() :]
            usage = _usage_only_event(event)
            if usage is None:
                out.append(event)
            else:
                _take_usage(rec, usage)
        if out:
            yield b"".join(out)
    if buffer:
        yield buffer


def _take_usage(rec: _Record, usage: _Usage) -> None:
    rec.prompt_tokens, rec.completion_tokens = usage.prompt_tokens, usage.completion_tokens
    if usage.prompt_tokens is not None:
        rec.prompt_tokens_source = "upstream"


def _count_prompt_locally(rec: _Record, messages: Any) -> None:
    """An upstream that reports no usage still gets its prompt tokens counted (tiktoken,
    offline): the client's messages plus what memgate injected."""
    if rec.prompt_tokens is None and 200 <= rec.status < 300 and isinstance(rec.model, str):
        rec.prompt_tokens = tokens.count_messages(messages, rec.model) + rec.injected_tokens
        rec.prompt_tokens_source = "local"


def _error_kind_for_status(status: int) -> str | None:
    if status >= 500:
        return "http_5xx"
    if status >= 400:
        return "http_4xx"
    return None


def _overhead_ms(clock: Clock, rec: _Record) -> str:
    now = clock.monotonic()
    upstream = (now - rec.upstream_started) if rec.upstream_started is not None else 0.0
    return f"{max(now - rec.started - upstream, 0.0) * 1000:.2f}"


@post(["/v1/chat/completions", "/chat/completions"], status_code=200, include_in_schema=True)
async def chat_completions(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Response[Any]:
    """Create a chat completion, with the caller's memories recalled and injected."""
    rec = _Record(route="chat", started=services.clock.monotonic(), path=_bind_request(request))
    try:
        return await _chat(request, services, rec)
    except UpstreamError as exc:
        rec.status = exc.status_code
        rec.error_kind = "timeout" if exc.status_code == 504 else "connect"
        rec.upstream_s = services.clock.monotonic() - (rec.upstream_started or rec.started)
        _finish(services, rec)
        raise
    except Exception as exc:
        rec.status = getattr(exc, "status_code", 500)
        _finish(services, rec)
        raise


async def _chat(request: Request[Any, Any, Any], services: Services, rec: _Record) -> Response[Any]:
    access = await services.gate.authorize(request)
    raw = await request.body()
    body = parse_chat_body(raw)
    ident = identity_mod.resolve(request.headers, body, access=access)
    rec.trace_id, rec.mode, rec.model = ident.trace_id, ident.mode, body["model"]
    rec.stream = body.get("stream") is True
    remembers = bool(ident.tenant)  # a caller without a key gets a plain proxy

    prepared = await services.memory.prepare(ident, body, raw) if remembers else Prepared(raw)
    rec.injected, rec.injected_tokens = len(prepared.injected_ids), prepared.injected_tokens
    memory_headers = [
        (TRACE_HEADER, ident.trace_id),
        (INJECTED_HEADER, ",".join(prepared.injected_ids)),
    ]

    content = prepared.content
    # The client did not ask for the stream's usage: memgate asks (and keeps the extra chunk).
    ask_usage = rec.stream and not _wants_usage(body)
    if ask_usage:
        content = _ask_for_usage(content, body)
    upstream = services.upstream
    headers = _upstream_headers(request, access)
    url = upstream.url("chat/completions", request.scope.get("query_string", b""))
    rec.upstream_started = services.clock.monotonic()
    resp = await upstream.send("POST", url, headers, content, stream=rec.stream)

    def exchange() -> Exchange:
        return Exchange(
            ident, body, rec.status, prepared.injected, rec.prompt_tokens, rec.injected_tokens
        )

    is_sse = resp.content_type.startswith("text/event-stream")
    if not (rec.stream and is_sse and resp.status_code < 400):
        payload = await upstream.read(resp)  # errors pass through as they came
        rec.upstream_s = services.clock.monotonic() - rec.upstream_started
        rec.status = resp.status_code
        rec.error_kind = _error_kind_for_status(resp.status_code)
        if resp.status_code == 200:
            usage = _usage_from(payload)
            if usage:
                _take_usage(rec, usage)
            _count_prompt_locally(rec, wire.messages_of(body))
        out_headers = response_headers(resp.raw_headers, decoded=True)
        out_headers += [*memory_headers, (OVERHEAD_HEADER, _overhead_ms(services.clock, rec))]
        _finish(services, rec)
        if remembers:
            services.memory.finish(exchange())
        return Response(
            payload,
            status_code=resp.status_code,
            headers=_as_header_map(out_headers),
            media_type=resp.content_type or "application/json",
        )

    rec.status = resp.status_code
    out_headers = response_headers(resp.raw_headers, decoded=True)
    out_headers += [*memory_headers, (OVERHEAD_HEADER, _overhead_ms(services.clock, rec))]

    async def relay() -> AsyncIterator[bytes]:
        tail = b""
        completed = False
        chunks = _drop_usage_event(resp.chunks(), rec) if ask_usage else resp.chunks()
        try:
            async for chunk in chunks:
                if rec.ttfb_s is None:
                    rec.ttfb_s = services.clock.monotonic() - rec.started
                tail = (tail + chunk)[-_TAIL_BYTES:]
                yield chunk
                # A client may hang up right after [DONE]: the exchange is still complete.
                completed = tail.rstrip().endswith(b"data: [DONE]")
            completed = True
        except UpstreamStreamError as exc:
            rec.error_kind = exc.kind
            yield _sse_error(exc)
        finally:
            await resp.aclose()
            rec.upstream_s = services.clock.monotonic() - (rec.upstream_started or rec.started)
            if not completed and rec.error_kind is None:
                rec.extra["client_disconnected"] = True
            usage = None if ask_usage else _usage_from_sse_tail(tail)
            if usage:
                _take_usage(rec, usage)
            if completed:
                _count_prompt_locally(rec, wire.messages_of(body))
            _finish(services, rec)
            if completed and remembers:
                services.memory.finish(exchange())

    return Stream(
        relay(),
        status_code=resp.status_code,
        headers=_as_header_map(out_headers),
        media_type=resp.content_type or "text/event-stream",
    )


def _upstream_headers(
    request: Request[Any, Any, Any], access: Access, *, keep_length: bool = False
) -> list[tuple[str, str]]:
    return request_headers(
        request.scope["headers"],
        api_key=access.upstream_key,
        keep_length=keep_length,
        drop_credentials=access.own_credential,
    )


def _as_header_map(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Litestar takes a mapping; repeated upstream headers (rare) are joined per RFC 9110.

    The upstream's own content-type is kept as it came (litestar would add a charset).
    """
    out: dict[str, str] = {}
    for name, value in pairs:
        out[name] = f"{out[name]}, {value}" if name in out and name != "set-cookie" else value
    return out


def _check_path(raw_path: bytes, path: str) -> None:
    """An upstream that normalises paths would turn ``/v1/../x`` into ``/x``: refuse dot
    segments (percent-encoded too) and encoded slashes or backslashes."""
    lowered = raw_path.lower()
    segments = [*path.split("/"), *lowered.decode("latin-1").split("/")]
    if (
        any(seg in (".", "..", "%2e", "%2e%2e", ".%2e", "%2e.") for seg in segments)
        or b"%2f" in lowered
        or b"%5c" in lowered
        or "\\" in path
    ):
        raise BadRequest(
            "The path may not contain dot segments or encoded slashes.",
            param="path",
            code="invalid_path",
        )


_PASS_METHODS = [
    HttpMethod.GET,
    HttpMethod.POST,
    HttpMethod.PUT,
    HttpMethod.PATCH,
    HttpMethod.DELETE,
]


# Pass-through bodies up to this size are read before sending, so that a stale pooled
# connection can be retried with the same bytes; larger ones stream as they arrive.
_BUFFERED_BODY = 1 << 20


class _Limited:
    """The client's body as it arrives, failing once it passes ``limit`` bytes (0: none)."""

    def __init__(self, source: AsyncIterator[bytes], limit: int) -> None:
        self.source = source
        self.limit = limit
        self.exceeded = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.source:
            seen += len(chunk)
            if self.limit and seen > self.limit:
                self.exceeded = True
                raise _too_large(self.limit)
            yield chunk


def _too_large(limit: int) -> RequestTooLarge:
    return RequestTooLarge(
        f"The request body is larger than this gateway accepts ({limit} bytes); "
        "see MEMGATE_PASSTHROUGH_MAX_BODY_BYTES."
    )


# No framework body limit here: uploads stream to the upstream, limited by
# ``passthrough_max_body_bytes`` below (the framework's limit would fire inside the
# upstream writer and look like an unreachable upstream).
@route(
    "/v1/{path:path}",
    http_method=_PASS_METHODS,
    include_in_schema=False,
    request_max_body_size=None,
)
async def passthrough(
    request: Request[Any, Any, Any], services: NamedDependency[Services], path: FromPath[str]
) -> Response[Any]:
    """Every other /v1 route goes upstream as it came, bodies streamed both ways."""
    rec = _Record(
        route="passthrough", started=services.clock.monotonic(), path=_bind_request(request)
    )
    try:
        _check_path(request.scope.get("raw_path") or b"", path)
        access = await services.gate.authorize(request)
    except Exception as exc:
        rec.status = getattr(exc, "status_code", 500)
        _finish(services, rec)
        raise
    upstream = services.upstream
    limit = services.settings.passthrough_max_body_bytes
    length_header = request.headers.get("content-length")
    has_length = length_header is not None
    has_body = has_length or "transfer-encoding" in request.headers
    try:
        length = int(length_header) if length_header is not None else None
    except ValueError:
        length = None
    headers = _upstream_headers(request, access, keep_length=has_length)
    url = upstream.url(path, request.scope.get("query_string", b""))
    content: bytes | _Limited | None = None
    try:
        if limit and length is not None and length > limit:
            raise _too_large(limit)
        if has_body:
            content = _Limited(request.stream(), limit)
            if length is not None and length <= _BUFFERED_BODY:
                content = b"".join([chunk async for chunk in content])
        rec.upstream_started = services.clock.monotonic()
        resp = await upstream.send(
            request.method,
            url,
            headers,
            content.__aiter__() if isinstance(content, _Limited) else content,
            stream=True,
            decode=False,
        )
    except RequestTooLarge as exc:
        rec.status = exc.status_code
        _finish(services, rec)
        raise
    except UpstreamError as exc:
        if isinstance(content, _Limited) and content.exceeded:
            rec.status = 413
            _finish(services, rec)
            raise _too_large(limit) from None
        rec.status = exc.status_code
        rec.error_kind = "timeout" if exc.status_code == 504 else "connect"
        _finish(services, rec)
        raise
    rec.status = resp.status_code
    rec.error_kind = _error_kind_for_status(resp.status_code)
    rec.stream = resp.content_type.startswith("text/event-stream")

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in resp.chunks():
                if rec.ttfb_s is None and rec.stream:
                    rec.ttfb_s = services.clock.monotonic() - rec.started
                yield chunk
        except UpstreamStreamError:
            rec.error_kind = "stream_cut"
        finally:
            await resp.aclose()
            rec.upstream_s = services.clock.monotonic() - (rec.upstream_started or rec.started)
            _finish(services, rec)

    return Stream(
        relay(),
        status_code=resp.status_code,
        headers=_as_header_map(response_headers(resp.raw_headers)),
        media_type=resp.content_type or "application/octet-stream",
    )


# --- the Responses API ---------------------------------------------------------------------


class _ResponsesUsage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None


class _ResponseWithUsage(msgspec.Struct):
    usage: _ResponsesUsage | None = None


class _CompletedEvent(msgspec.Struct):
    type: str = ""
    response: _ResponseWithUsage | None = None


_responses_usage_decoder = msgspec.json.Decoder(_ResponseWithUsage)
_completed_decoder = msgspec.json.Decoder(_CompletedEvent)
# The events that end a Responses stream: the exchange is over (mined only when completed).
_FINAL_EVENTS = (b'"response.completed"', b'"response.failed"', b'"response.incomplete"')


def parse_responses_body(raw: bytes) -> dict[str, Any]:
    try:
        body = _body_decoder.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise InvalidJSON(
            "The request body is not valid JSON. Send a JSON object with 'model' and 'input'."
        ) from None
    if not isinstance(body, dict):
        raise InvalidJSON("The request body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise MissingField("Missing required parameter: 'model'.", param="model")
    return body


class _ResponsesStream:
    """Watches a Responses event stream as it is relayed, one event at a time: the final
    event says whether the exchange completed and carries its usage."""

    def __init__(self) -> None:
        self._event = b""
        self.finished = False
        self.completed = False
        self.usage: _ResponsesUsage | None = None

    def feed(self, chunk: bytes) -> None:
        self._event += chunk
        while match := _EVENT_END.search(self._event):
            event, self._event = self._event[: match.end()], self._event[match.end() :]
            if any(final in event for final in _FINAL_EVENTS):
                self._final(event)

    def _final(self, event: bytes) -> None:
        for line in event.splitlines():
            if not line.startswith(b"data:"):
                continue
            try:
                data = _completed_decoder.decode(line[5:].strip())
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            self.finished = True
            self.completed = data.type == "response.completed"
            if data.response is not None:
                self.usage = data.response.usage


def _take_responses_usage(rec: _Record, usage: _ResponsesUsage | None) -> None:
    if usage is not None:
        rec.prompt_tokens, rec.completion_tokens = usage.input_tokens, usage.output_tokens
        if usage.input_tokens is not None:
            rec.prompt_tokens_source = "upstream"


@post(["/v1/responses", "/responses"], status_code=200, include_in_schema=True)
async def responses_create(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Response[Any]:
    """Create a model response (the Responses API), with the caller's memories recalled and
    added to its instructions."""
    rec = _Record(
        route="responses", started=services.clock.monotonic(), path=_bind_request(request)
    )
    try:
        return await _responses(request, services, rec)
    except UpstreamError as exc:
        rec.status = exc.status_code
        rec.error_kind = "timeout" if exc.status_code == 504 else "connect"
        rec.upstream_s = services.clock.monotonic() - (rec.upstream_started or rec.started)
        _finish(services, rec)
        raise
    except Exception as exc:
        rec.status = getattr(exc, "status_code", 500)
        _finish(services, rec)
        raise


async def _responses(
    request: Request[Any, Any, Any], services: Services, rec: _Record
) -> Response[Any]:
    access = await services.gate.authorize(request)
    raw = await request.body()
    body = parse_responses_body(raw)
    ident = identity_mod.resolve(request.headers, body, access=access)
    rec.trace_id, rec.mode, rec.model = ident.trace_id, ident.mode, body["model"]
    rec.stream = body.get("stream") is True
    # What recall and mining read: the input as chat messages.
    view = {"model": body["model"], "messages": wire.input_as_messages(body.get("input"))}
    remembers = bool(ident.tenant)  # a caller without a key gets a plain proxy

    prepared = (
        await services.memory.prepare(
            ident, view, raw, inject_into=lambda _view, block: inject.with_instructions(body, block)
        )
        if remembers
        else Prepared(raw)
    )
    rec.injected, rec.injected_tokens = len(prepared.injected_ids), prepared.injected_tokens
    memory_headers = [
        (TRACE_HEADER, ident.trace_id),
        (INJECTED_HEADER, ",".join(prepared.injected_ids)),
    ]
    upstream = services.upstream
    headers = _upstream_headers(request, access)
    url = upstream.url("responses", request.scope.get("query_string", b""))
    rec.upstream_started = services.clock.monotonic()
    resp = await upstream.send("POST", url, headers, prepared.content, stream=rec.stream)

    def exchange() -> Exchange:
        return Exchange(
            ident, view, rec.status, prepared.injected, rec.prompt_tokens, rec.injected_tokens
        )

    is_sse = resp.content_type.startswith("text/event-stream")
    if not (rec.stream and is_sse and resp.status_code < 400):
        payload = await upstream.read(resp)
        rec.upstream_s = services.clock.monotonic() - rec.upstream_started
        rec.status = resp.status_code
        rec.error_kind = _error_kind_for_status(resp.status_code)
        if resp.status_code == 200:
            try:
                _take_responses_usage(rec, _responses_usage_decoder.decode(payload).usage)
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass
            _count_prompt_locally(rec, view["messages"])
        out_headers = response_headers(resp.raw_headers, decoded=True)
        out_headers += [*memory_headers, (OVERHEAD_HEADER, _overhead_ms(services.clock, rec))]
        _finish(services, rec)
        if remembers:
            services.memory.finish(exchange())
        return Response(
            payload,
            status_code=resp.status_code,
            headers=_as_header_map(out_headers),
            media_type=resp.content_type or "application/json",
        )

    rec.status = resp.status_code
    out_headers = response_headers(resp.raw_headers, decoded=True)
    out_headers += [*memory_headers, (OVERHEAD_HEADER, _overhead_ms(services.clock, rec))]

    async def relay() -> AsyncIterator[bytes]:
        watch = _ResponsesStream()
        try:
            async for chunk in resp.chunks():
                if rec.ttfb_s is None:
                    rec.ttfb_s = services.clock.monotonic() - rec.started
                watch.feed(chunk)
                yield chunk
        except UpstreamStreamError as exc:
            rec.error_kind = exc.kind
            yield _sse_error(exc)
        finally:
            await resp.aclose()
            rec.upstream_s = services.clock.monotonic() - (rec.upstream_started or rec.started)
            if not watch.finished and rec.error_kind is None:
                rec.extra["client_disconnected"] = True
            _take_responses_usage(rec, watch.usage)
            if watch.completed:
                _count_prompt_locally(rec, view["messages"])
            _finish(services, rec)
            if watch.completed and remembers:
                services.memory.finish(exchange())

    return Stream(
        relay(),
        status_code=resp.status_code,
        headers=_as_header_map(out_headers),
        media_type=resp.content_type or "text/event-stream",
    )
