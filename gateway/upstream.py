"""The one module that talks to the upstream LLM API.

Request bodies travel as bytes (or a byte stream) and are never re-encoded here; header
filtering and error mapping live here so every route forwards the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import httpx

from .config import Settings
from .errors import UpstreamTimeout, UpstreamUnreachable

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
# Never sent upstream: hop-by-hop, what httpx sets itself, and memgate's own headers.
_DROP_REQUEST = HOP_BY_HOP | {"host", "content-length"}
_MEMGATE_REQUEST_HEADERS = ("x-memory-", "x-project-id")
# Never copied back: hop-by-hop and framing that the ASGI server recomputes.
_DROP_RESPONSE = HOP_BY_HOP | {"content-length", "date", "server"}


def request_headers(
    raw: Iterable[tuple[bytes, bytes]],
    *,
    api_key: str | None,
    keep_length: bool = False,
) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name_b, value_b in raw:
        name = name_b.decode("latin-1").lower()
        if name in _DROP_REQUEST and not (keep_length and name == "content-length"):
            continue
        if name.startswith(_MEMGATE_REQUEST_HEADERS):
            continue
        if api_key and name == "authorization":
            continue
        out.append((name, value_b.decode("latin-1")))
    if api_key:
        out.append(("authorization", f"Bearer {api_key}"))
    return out


def response_headers(headers: httpx.Headers, *, decoded: bool = False) -> list[tuple[str, str]]:
    """Upstream headers worth returning (request ids, rate limits, retry-after, ...)."""
    out: list[tuple[str, str]] = []
    for name, value in headers.multi_items():
        lowered = name.lower()
        if lowered in _DROP_RESPONSE or (decoded and lowered == "content-encoding"):
            continue
        out.append((lowered, value))
    return out


class Upstream:
    def __init__(self, settings: Settings, transport: httpx.AsyncBaseTransport | None = None):
        self.base_url = settings.upstream_url.rstrip("/")
        # The transport, not AsyncClient: a proxy needs none of the client's auth, redirect,
        # cookie-jar and event-hook layers, and skipping them is measurably cheaper per request.
        self._transport = transport or httpx.AsyncHTTPTransport(
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200)
        )
        self._timeouts = {
            stream: httpx.Timeout(
                connect=settings.connect_timeout,
                read=settings.stream_read_timeout if stream else settings.read_timeout,
                write=settings.read_timeout,
                pool=settings.connect_timeout,
            ).as_dict()
            for stream in (False, True)
        }

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
    ) -> httpx.Response:
        """Send and return once headers arrive; the caller reads (or relays) the body."""
        request = httpx.Request(
            method,
            url,
            headers=headers,
            content=content,
            extensions={"timeout": self._timeouts[stream]},
        )
        try:
            response = await self._transport.handle_async_request(request)
            response.request = request
            return response
        except httpx.TimeoutException as exc:
            raise UpstreamTimeout(
                f"The upstream did not answer in time ({type(exc).__name__})."
            ) from None
        except httpx.TransportError as exc:
            raise UpstreamUnreachable(
                f"The upstream could not be reached ({type(exc).__name__})."
            ) from None

    async def read(self, response: httpx.Response) -> bytes:
        """Read a whole (non-relayed) body, mapping transport faults to our errors."""
        try:
            return await response.aread()
        except httpx.TimeoutException:
            raise UpstreamTimeout("The upstream stopped answering mid-response.") from None
        except httpx.TransportError as exc:
            raise UpstreamUnreachable(
                f"The upstream connection failed mid-response ({type(exc).__name__})."
            ) from None
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self._transport.aclose()
