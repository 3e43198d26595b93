"""Who may do what: the caller's credential turned into an ``Access`` for ``identity``.

- A gateway key (when any is configured, every request needs one) grants its tenant and
  sends its upstream key (or ``MEMGATE_UPSTREAM_API_KEY``) upstream.
- Without gateway keys the client's own key (``Authorization: Bearer`` or ``api-key``)
  decides the tenant; a caller without a key gets no memory.
- The admin token counts only together with ``X-Memory-Tenant`` (or on admin routes).
  Every admin-token check goes through one throttle per peer, made before anything else of
  the request is looked at, so a wrong token gets the same answer whatever else was sent.
- memgate's own credentials (admin token, gateway keys) are never forwarded upstream.
"""

from __future__ import annotations

import hmac
import ipaddress
import math
from collections.abc import Mapping
from typing import Any

from litestar.connection import ASGIConnection

from gateway.clock import Clock, from_iso, set_eval_now
from gateway.config import Settings
from gateway.errors import BadRequest, TooManyAttempts, Unauthorized
from gateway.memory.identity import TENANT_HEADER, Access, check_tenant, client_key, tenant_for_key
from gateway.storage.keys import Keyring

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class AdminThrottle:
    """Wrong admin tokens from one peer lock that peer out for a while, so the token cannot
    be guessed at network speed. Keyed on the real peer, so nobody else's failures lock the
    holder of the token out. Per process (each replica counts its own)."""

    def __init__(
        self, failures: int = 5, window: float = 60.0, lockout: float = 60.0, capacity: int = 10_000
    ) -> None:
        self.failures, self.window, self.lockout = failures, window, lockout
        self.capacity = capacity
        self._seen: dict[str, list[float]] = {}

    def wait(self, who: str, now: float) -> float:
        """Seconds this peer must still wait before a token of theirs is checked."""
        recent = [t for t in self._seen.get(who, []) if now - t < self.window + self.lockout]
        if len(recent) < self.failures:
            return 0.0
        return max(0.0, recent[-1] + self.lockout - now)

    def failed(self, who: str, now: float) -> None:
        if who not in self._seen and len(self._seen) >= self.capacity:
            self._seen.pop(next(iter(self._seen)))  # forget the oldest peer
        kept = [t for t in self._seen.get(who, []) if now - t < self.window]
        self._seen[who] = [*kept, now][-self.failures :]

    def succeeded(self, who: str) -> None:
        self._seen.pop(who, None)


def trusted_networks(text: str | None) -> tuple[_Network, ...]:
    if not text:
        return ()
    try:
        return tuple(
            ipaddress.ip_network(part.strip(), strict=False) for part in text.split(",") if part
        )
    except ValueError as exc:
        raise SystemExit(f"memgate: bad MEMGATE_TRUSTED_PROXIES: {exc}") from None


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def peer_address(
    client: str | None, headers: Mapping[str, str], trusted: tuple[_Network, ...]
) -> str:
    """The socket's peer, or, when that is a trusted proxy, the nearest untrusted address
    in ``X-Forwarded-For`` (read from the right: the left part is whatever the client wrote)."""
    peer = client or "unknown"
    address = _ip(peer)
    if not trusted or address is None or not any(address in net for net in trusted):
        return peer
    hops = [h.strip() for h in headers.get("x-forwarded-for", "").split(",") if h.strip()]
    for hop in reversed(hops):
        hop_ip = _ip(hop)
        if hop_ip is None:
            return hop[:64]
        if not any(hop_ip in net for net in trusted):
            return str(hop_ip)
    return peer


class Gatekeeper:
    """Every credential check of the HTTP surface, with what it needs bound once: the
    settings (admin token, upstream key), the clock, the per-process admin-token throttle,
    the trusted proxies and the gateway keys."""

    def __init__(
        self,
        settings: Settings,
        clock: Clock,
        keyring: Keyring,
        *,
        throttle: AdminThrottle,
        trusted_proxies: tuple[_Network, ...] = (),
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.keyring = keyring
        self.throttle = throttle
        self.trusted_proxies = trusted_proxies

    def peer(self, connection: ASGIConnection[Any, Any, Any, Any]) -> str:
        client = connection.client.host if connection.client else None
        return peer_address(client, connection.headers, self.trusted_proxies)

    def check_admin_token(
        self, connection: ASGIConnection[Any, Any, Any, Any], given: str | None
    ) -> None:
        """The one admin-token check: throttled per peer first, then compared in constant
        time. Raises 429 (still locked) or 401 (wrong or no admin token configured)."""
        throttle = self.throttle
        who = self.peer(connection)
        now = self.clock.now().timestamp()
        wait = throttle.wait(who, now)
        if wait > 0:
            raise TooManyAttempts(
                f"Too many wrong admin tokens from this address: try again in {math.ceil(wait)} s.",
                extra={"retry_after": math.ceil(wait)},
            )
        token = self.settings.admin_token
        if not token or not given or not hmac.compare_digest(given.encode(), token.encode()):
            throttle.failed(who, now)
            raise Unauthorized("The admin token is missing or wrong.", code="invalid_admin_token")
        throttle.succeeded(who)

    async def authorize(self, connection: ASGIConnection[Any, Any, Any, Any]) -> Access:
        """What this request's credential grants (401/429 when it grants nothing it asked
        for); an admin request may also set its simulated time (``apply_eval_time``)."""
        access = await self._authorize(connection)
        apply_eval_time(connection.headers, access)
        return access

    async def _authorize(self, connection: ASGIConnection[Any, Any, Any, Any]) -> Access:
        settings = self.settings
        headers = connection.headers
        presented = client_key(headers)
        if headers.get(TENANT_HEADER):
            self.check_admin_token(connection, presented)
            return Access(
                tenant=check_tenant(headers[TENANT_HEADER]),
                is_admin=True,
                upstream_key=settings.upstream_api_key,
                own_credential=True,
            )
        found = await self.keyring.lookup(presented)
        if found.key is not None:
            return Access(
                tenant=found.key.tenant,
                key_id=found.key.id,
                upstream_key=found.key.upstream_key or settings.upstream_api_key,
                own_credential=True,
            )
        if found.configured:
            raise Unauthorized(
                "Incorrect or missing API key: this gateway needs one of its own keys "
                "(Authorization: Bearer <key>).",
                code="invalid_api_key",
            )
        if presented is None:
            return Access(tenant=None, upstream_key=settings.upstream_api_key)
        return Access(
            tenant=tenant_for_key(presented),
            upstream_key=settings.upstream_api_key,
            own_credential=_is_admin_token(presented, settings.admin_token),
        )

    def admin_keyring(self, connection: ASGIConnection[Any, Any, Any, Any]) -> Keyring:
        """The gateway keys, for a request that presents the admin token (else 401/429)."""
        self.check_admin_token(connection, client_key(connection.headers))
        return self.keyring


def _is_admin_token(given: str | None, token: str | None) -> bool:
    return bool(token and given and hmac.compare_digest(given.encode(), token.encode()))


EVAL_TIME_HEADER = "x-memory-eval-time"


def apply_eval_time(headers: Mapping[str, str], access: Access) -> None:
    """``X-Memory-Eval-Time`` (ISO 8601) moves this request's clock, for ``memgate eval``:
    honoured only when the admin token granted the request (with ``X-Memory-Tenant``, so the
    simulated time only ever touches a tenant the admin chose); anyone else gets a 400, never
    a silently moved or silently ignored clock."""
    value = headers.get(EVAL_TIME_HEADER)
    if value is None:
        return
    if not access.is_admin:
        raise BadRequest(
            "X-Memory-Eval-Time is honoured only with the admin token and X-Memory-Tenant.",
            param=EVAL_TIME_HEADER,
            code="invalid_header",
        )
    try:
        when = from_iso(value.strip())
        when.timestamp()
    except (ValueError, OverflowError):
        raise BadRequest(
            "Invalid X-Memory-Eval-Time header: expected an ISO-8601 time.",
            param=EVAL_TIME_HEADER,
            code="invalid_header",
        ) from None
    set_eval_now(when)
