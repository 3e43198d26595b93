"""The one module that talks to the upstream LLM API.

Request bodies travel as bytes (or a byte stream) and are never re-encoded here; header
filtering and error mapping live here so every route forwards the same way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiohttp
import yarl
from multidict import CIMultiDict

from gateway.config import Settings
from gateway.errors import UpstreamTimeout, UpstreamUnreachable

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# Never sent upstream: hop-by-hop, what the client library sets itself, memgate's own headers.
_DROP_REQUEST = HOP_BY_HOP | {"host", "content-length"}
_MEMGATE_REQUEST_HEADERS = ("x-memory-", "x-project-id")
# Never copied back: hop-by-hop and framing that the ASGI server recomputes.
_DROP_RESPONSE = HOP_BY_HOP | {"content-length", "date", "server"}


_CREDENTIALS = ("authorization", "api-key")


def request_headers(
    raw: Iterable[tuple[bytes, bytes]],
    *,
    api_key: str | None,
    keep_length: bool = False,
    drop_credentials: bool = False,
) -> list[tuple[str, str]]:
    """The client's headers for the upstream. Its credentials are dropped when ``api_key``
    replaces them or when they are memgate's own (``drop_credentials``): the admin token
    and gateway keys never leave memgate."""
    out: list[tuple[str, str]] = []
    replace = bool(api_key) or drop_credentials
    for name_b, value_b in raw:
        name = name_b.decode("latin-1").lower()
        if name in _DROP_REQUEST and not (keep_length and name == "content-length"):
            continue
        if name.startswith(_MEMGATE_REQUEST_HEADERS):
            continue
        if replace and name in _CREDENTIALS:
            continue
        out.append((name, value_b.decode("latin-1")))
    if api_key:
        out.append(("authorization", f"Bearer {api_key}"))
    return out


def response_headers(
    raw: Iterable[tuple[bytes, bytes]], *, decoded: bool = False
) -> list[tuple[str, str]]:
    """Upstream headers worth returning (request ids, rate limits, retry-after, ...)."""
    out: list[tuple[str, str]] = []
    for name_b, value_b in raw:
        lowered = name_b.decode("latin-1").lower()
        if lowered in _DROP_RESPONSE or (decoded and lowered == "content-encoding"):
            continue
        out.append((lowered, value_b.decode("latin-1")))
    return out


class UpstreamStreamError(Exception):
    """The upstream failed after its headers arrived; ``kind`` is ``timeout`` or ``stream_cut``."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


DECODABLE = "gzip, deflate"
_TIMEOUTS = (TimeoutError, asyncio.TimeoutError, aiohttp.ServerTimeoutError)


class UpstreamResponse:
    """Status and headers of an upstream answer whose body has not been read yet."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status_code = response.status
        self.raw_headers: tuple[tuple[bytes, bytes], ...] = response.raw_headers

    @property
    def content_type(self) -> str:
        return self._response.headers.get("content-type", "")

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives (content-encoding removed when the session decodes)."""
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except _TIMEOUTS:
            raise UpstreamStreamError("timeout") from None
        except aiohttp.ClientError:
            raise UpstreamStreamError("stream_cut") from None

    async def read(self) -> bytes:
        """The whole body, with transport faults mapped to memgate's errors."""
        try:
            return await self._response.read()
        except _TIMEOUTS:
            raise UpstreamTimeout("The upstream stopped answering mid-response.") from None
        except aiohttp.ClientError as exc:
            raise UpstreamUnreachable(
                f"The upstream connection failed mid-response ({type(exc).__name__})."
            ) from None
        finally:
            self.close()

    def close(self) -> None:
        """Release the connection (closed, not reused, if the body was not read to the end)."""
        self._response.close()

    async def aclose(self) -> None:
        self.close()


class _Attempt:
    """What one request's connection was: reused from the pool or opened for it."""

    __slots__ = ("reused",)

    def __init__(self) -> None:
        self.reused = False


async def _on_reuse(_: aiohttp.ClientSession, ctx: Any, __: Any) -> None:
    attempt = ctx.trace_request_ctx
    if isinstance(attempt, _Attempt):
        attempt.reused = True


# A pooled connection the upstream closed while it sat idle fails like this when reused,
# before any answer byte; a failure to connect (ClientConnectorError) is not one of them.
_STALE = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)


def _stale(exc: BaseException, attempt: _Attempt) -> bool:
    return (
        attempt.reused
        and isinstance(exc, _STALE)
        and not isinstance(exc, aiohttp.ClientConnectorError)
    )


class Upstream:
    """aiohttp underneath, chosen over httpx for its lower cost per proxied request (a
    comparison made when the client was chosen; ``memgate bench proxy`` times only the
    gateway against a direct call). Two sessions share one connection pool: one decodes
    content-encoding (memgate reads chat bodies), one relays bytes untouched.

    Idle pooled connections are dropped after ``upstream_keepalive_seconds``, before a
    typical upstream closes them. If a reused connection still turns out closed before any
    answer byte (the upstream never saw the request), the request is sent once more on a
    connection opened for it; nothing else is retried (clients retry on their own terms).
    """

    def __init__(self, settings: Settings) -> None:
        self.base_url = settings.upstream_url.rstrip("/")
        self._settings = settings
        self._sessions: dict[bool, aiohttp.ClientSession] = {}
        self._fresh: dict[bool, aiohttp.ClientSession] = {}
        self._trace = aiohttp.TraceConfig()
        self._trace.on_connection_reuseconn.append(_on_reuse)
        self._trace.freeze()
        self._timeouts = {
            stream: aiohttp.ClientTimeout(
                total=None,
                connect=settings.connect_timeout,
                sock_read=settings.stream_read_timeout if stream else settings.read_timeout,
            )
            for stream in (False, True)
        }

    def _session(self, decode: bool, *, fresh: bool = False) -> aiohttp.ClientSession:
        """Sessions are made on first use, inside the running event loop. ``fresh``: the
        session whose every request opens its own connection (the one retry)."""
        sessions = self._fresh if fresh else self._sessions
        session = sessions.get(decode)
        if session is None:
            shared = next(iter(sessions.values()), None)
            connector = shared.connector if shared else None
            if connector is None:
                connector = aiohttp.TCPConnector(
                    limit=1000,
                    limit_per_host=0,
                    keepalive_timeout=None if fresh else self._settings.upstream_keepalive_seconds,
                    force_close=fresh,
                    ttl_dns_cache=60,
                )
            session = aiohttp.ClientSession(
                connector=connector,
                connector_owner=shared is None,
                auto_decompress=decode,
                # Nothing the client did not send: no User-Agent, Accept or Accept-Encoding.
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                trace_configs=[self._trace],
            )
            sessions[decode] = session
        return session

    def url(self, subpath: str, query: bytes | str = b"") -> str:
        if isinstance(query, bytes):
            query = query.decode("latin-1")
        url = f"{self.base_url}/{subpath.lstrip('/')}"
        return f"{url}?{query}" if query else url

    async def send(
        self,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        content: bytes | AsyncIterator[bytes] | None,
        *,
        stream: bool,
        decode: bool = True,
    ) -> UpstreamResponse:
        """Send and return once headers arrive; the caller reads (or relays) the body.

        ``decode``: memgate reads the body, so it offers only the codings it can decode
        (the client then receives the body unencoded); otherwise bytes pass as they come.
        """
        if decode and any(name == "accept-encoding" for name, _ in headers):
            headers = [(n, v) for n, v in headers if n != "accept-encoding"]
            headers.append(("accept-encoding", DECODABLE))
        replayable = content is None or isinstance(content, bytes)
        attempt = _Attempt()
        try:
            try:
                response = await self._request(
                    decode, False, method, url, headers, content, stream, attempt
                )
            except _STALE as exc:
                if not (replayable and _stale(exc, attempt)):
                    raise
                response = await self._request(
                    decode, True, method, url, headers, content, stream, _Attempt()
                )
        except _TIMEOUTS as exc:
            raise UpstreamTimeout(
                f"The upstream did not answer in time ({type(exc).__name__})."
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise UpstreamUnreachable(
                f"The upstream could not be reached ({type(exc).__name__})."
            ) from None
        return UpstreamResponse(response)

    async def _request(
        self,
        decode: bool,
        fresh: bool,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        content: bytes | AsyncIterator[bytes] | None,
        stream: bool,
        attempt: _Attempt,
    ) -> aiohttp.ClientResponse:
        return await self._session(decode, fresh=fresh).request(
            method,
            yarl.URL(url, encoded=True),
            headers=CIMultiDict(headers),
            data=content,
            timeout=self._timeouts[stream],
            allow_redirects=False,
            compress=None,
            trace_request_ctx=attempt,
        )

    async def read(self, response: UpstreamResponse) -> bytes:
        return await response.read()

    async def post_json(
        self, subpath: str, payload: Any, *, api_key: str | None
    ) -> tuple[int, bytes]:
        """memgate's own call to the upstream (embeddings, LLM extraction): ``payload`` as
        JSON, with ``api_key`` (memgate's, never a client's) when there is one. Returns the
        status and the whole body; transport faults raise ``UpstreamTimeout`` or
        ``UpstreamUnreachable`` as for every forwarded request."""
        body = json.dumps(payload, ensure_ascii=False).encode()
        headers = [("content-type", "application/json"), ("accept", "application/json")]
        if api_key:
            headers.append(("authorization", f"Bearer {api_key}"))
        response = await self.send("POST", self.url(subpath), headers, body, stream=False)
        return response.status_code, await self.read(response)

    async def aclose(self) -> None:
        """Close the connection pool; a later request opens a new one."""
        sessions = [*self._sessions.values(), *self._fresh.values()]
        self._sessions.clear()
        self._fresh.clear()
        for session in sessions:
            await session.close()
