"""Who is asking: the one place that turns headers and body into an ``Identity``.

Later stages (recall, mining, the memory API) receive the ``Identity`` and never read
identity headers themselves, so tenancy rules live here only.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gateway.errors import InvalidIdentity

MemoryMode = Literal["on", "off", "dry-run"]
MODES: tuple[MemoryMode, ...] = ("on", "off", "dry-run")

USER_HEADER = "x-memory-user"
PROJECT_HEADER = "x-project-id"
MODE_HEADER = "x-memory-mode"
TENANT_HEADER = "x-memory-tenant"
TASK_HEADER = "x-memory-task"

# Ids end up in Redis keys and tag filters: a conservative charset keeps them boring.
_USER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}")
_PROJECT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_TENANT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_TASK_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
TENANT_HASH_CHARS = 24
AZURE_KEY_HEADER = "api-key"


@dataclass(frozen=True, slots=True)
class Access:
    """What the caller's credential grants (decided by ``access.authorize``).

    ``tenant`` None: no memory at all (a caller without a key never shares a tenant).
    ``upstream_key``: sent upstream in place of the client's credential. ``own_credential``:
    the client's credential is memgate's own (admin token, gateway key) and never leaves it.
    """

    tenant: str | None
    is_admin: bool = False
    key_id: str | None = None
    upstream_key: str | None = None
    own_credential: bool = False


@dataclass(frozen=True, slots=True)
class Identity:
    tenant: str
    user: str
    project_id: str | None
    mode: MemoryMode
    trace_id: str
    is_admin: bool = False
    task: str | None = None
    """The request's task kind (``X-Memory-Task``): memories scoped ``task:<kind>`` apply."""
    key_id: str | None = None
    """The gateway key the request came with (recorded in the memory history)."""

    @property
    def actor(self) -> str:
        """Who a change is recorded as: ``admin`` or ``user``."""
        return "admin" if self.is_admin else "user"


def new_trace_id() -> str:
    return "tr_" + uuid.uuid4().hex


def bearer_token(headers: Mapping[str, str]) -> str | None:
    value = headers.get("authorization")
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def client_key(headers: Mapping[str, str]) -> str | None:
    """The caller's API key: ``Authorization: Bearer`` or Azure's ``api-key`` (Basic auth and
    other schemes carry no key)."""
    key = bearer_token(headers)
    if key:
        return key
    azure = (headers.get(AZURE_KEY_HEADER) or "").strip()
    return azure or None


def tenant_for_key(key: str) -> str:
    """Without gateway keys, two client keys never share memories: the tenant is a truncated
    SHA-256 of the key."""
    return hashlib.sha256(key.encode()).hexdigest()[:TENANT_HASH_CHARS]


def client_access(headers: Mapping[str, str], upstream_key: str | None = None) -> Access:
    """Access from the client's own key alone (no gateway keys configured)."""
    key = client_key(headers)
    return Access(tenant=tenant_for_key(key) if key else None, upstream_key=upstream_key)


def check_tenant(value: str) -> str:
    return _check(value, _TENANT_RE, TENANT_HEADER)


def resolve(
    headers: Mapping[str, str],
    body: Mapping[str, Any] | None = None,
    *,
    access: Access | None = None,
) -> Identity:
    """The request's identity; without a tenant the mode is ``off`` (a plain proxy)."""
    granted = access if access is not None else client_access(headers)
    mode = _resolve_mode(headers)
    return Identity(
        tenant=granted.tenant or "",
        user=_resolve_user(headers, body),
        project_id=_resolve_project(headers),
        mode=mode if granted.tenant else "off",
        trace_id=new_trace_id(),
        is_admin=granted.is_admin,
        task=_optional(headers, TASK_HEADER, _TASK_RE),
        key_id=granted.key_id,
    )


def for_admin(tenant: str, user: str, project_id: str | None = None) -> Identity:
    """The identity the admin page acts as, with ids from its URLs checked like headers."""
    return Identity(
        tenant=_check(tenant, _TENANT_RE, TENANT_HEADER),
        user=_check(user, _USER_RE, USER_HEADER),
        project_id=_check(project_id, _PROJECT_RE, PROJECT_HEADER) if project_id else None,
        mode="on",
        trace_id="",
        is_admin=True,
    )


def _resolve_user(headers: Mapping[str, str], body: Mapping[str, Any] | None) -> str:
    header = headers.get(USER_HEADER)
    if header is not None:
        return _check(header, _USER_RE, USER_HEADER)
    if body:
        for field in ("safety_identifier", "user"):
            value = body.get(field)
            if isinstance(value, str) and value:
                # Body ids come from apps that never heard of memgate: rather than reject
                # their request, map an id outside our charset to a stable hash of it.
                if _USER_RE.fullmatch(value):
                    return value
                return "h-" + hashlib.sha256(value.encode()).hexdigest()[:32]
    return "default"


def _resolve_project(headers: Mapping[str, str]) -> str | None:
    return _optional(headers, PROJECT_HEADER, _PROJECT_RE)


def _optional(headers: Mapping[str, str], header: str, pattern: re.Pattern[str]) -> str | None:
    value = headers.get(header)
    if value is None or value == "":
        return None
    return _check(value, pattern, header)


def _resolve_mode(headers: Mapping[str, str]) -> MemoryMode:
    value = headers.get(MODE_HEADER)
    if value is None or value == "":
        return "on"
    lowered = value.strip().lower()
    for mode in MODES:
        if lowered == mode:
            return mode
    raise InvalidIdentity(
        f"Invalid X-Memory-Mode {value[:40]!r}: expected one of on, off, dry-run.",
        param=MODE_HEADER,
    )


def check_project_id(value: str, *, param: str) -> str:
    return _check(value, _PROJECT_RE, param)


def _check(value: str, pattern: re.Pattern[str], header: str) -> str:
    if pattern.fullmatch(value):
        return value
    raise InvalidIdentity(
        f"Invalid {_pretty(header)} header: use 1-{_max_len(pattern)} characters from "
        "letters, digits and . _ - (and @ + for users), starting with a letter or digit.",
        param=header,
    )


def _pretty(header: str) -> str:
    return "-".join(part.capitalize() if part != "id" else "Id" for part in header.split("-"))


def _max_len(pattern: re.Pattern[str]) -> int:
    match = re.search(r"\{0,(\d+)\}", pattern.pattern)
    return int(match.group(1)) + 1 if match else 0
