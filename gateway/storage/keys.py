"""Gateway keys: memgate's own API keys, each mapped to a stable tenant.

A key's secret is shown once, at creation or rotation; Redis keeps only its SHA-256 (the
secret is 256 random bits, so a fast hash is enough). Each key names a tenant id that stays
the same when the key is rotated, so memories survive rotation, and several keys (one per
developer of a team) may share one tenant. A key may carry the upstream key its requests are
sent with; it is stored as given, since memgate must send it.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from gateway.clock import Clock, to_iso
from gateway.errors import BackendUnavailable, BadRequest, NotFound
from gateway.memory.identity import check_tenant
from gateway.storage.store import Store

SECRET_PREFIX = "mg-"
KEY_ID = re.compile(r"key_[0-9a-f]{16}")
_LABEL = re.compile(r"[^\x00-\x1f\x7f]{1,64}")
# Every request checks its key first: a hung Redis must cost it this long at most (as long as
# a readiness probe waits), not the Redis timeout, so chat keeps answering within its budgets.
KEY_CHECK_WITHIN = 1.0


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def new_tenant_id() -> str:
    return "t-" + uuid.uuid4().hex[:20]


@dataclass(frozen=True, slots=True)
class GatewayKey:
    id: str
    tenant: str
    label: str
    created_at: str
    rotated_at: str | None
    upstream_key: str | None

    @classmethod
    def from_record(cls, record: dict[str, str]) -> GatewayKey:
        return cls(
            id=record["id"],
            tenant=record["tenant"],
            label=record.get("label", ""),
            created_at=record.get("created_at", ""),
            rotated_at=record.get("rotated_at") or None,
            upstream_key=record.get("upstream_key") or None,
        )

    def to_api(self) -> dict[str, Any]:
        """Never the secret, never the upstream key: only whether one is set."""
        return {
            "object": "gateway_key",
            "id": self.id,
            "tenant": self.tenant,
            "label": self.label,
            "created_at": self.created_at,
            "rotated_at": self.rotated_at,
            "has_upstream_key": self.upstream_key is not None,
        }


@dataclass(frozen=True, slots=True)
class Lookup:
    configured: bool
    """At least one gateway key exists: every request needs one."""
    key: GatewayKey | None


class Keyring:
    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self._configured: bool | None = None

    async def lookup(self, presented: str | None) -> Lookup:
        """The gateway key ``presented`` is, and whether keys are configured at all.

        When Redis cannot answer, a process that last saw no keys carries on without them
        (memory itself is then unavailable too, and chat still gets its answer); one that saw
        keys, or never looked, refuses (503) rather than serve without checking.
        """
        try:
            async with asyncio.timeout(KEY_CHECK_WITHIN):
                count, record = await self.store.gateway_key(digest(presented or ""))
        except (RedisError, TimeoutError):
            if self._configured is False:
                return Lookup(False, None)
            raise BackendUnavailable(
                "memgate cannot check API keys right now; try again shortly."
            ) from None
        self._configured = count > 0
        key = GatewayKey.from_record(record) if record and presented else None
        return Lookup(count > 0, key)

    async def create(
        self, label: str, *, tenant: str | None = None, upstream_key: str | None = None
    ) -> tuple[GatewayKey, str]:
        """A new key and its secret (shown to the caller once, stored only as a hash)."""
        if not _LABEL.fullmatch(label):
            raise BadRequest("label: 1-64 printable characters.", param="label")
        if tenant is not None:
            tenant = check_tenant(tenant)
        secret = new_secret()
        record = {
            "id": "key_" + secrets.token_hex(8),
            "tenant": tenant or new_tenant_id(),
            "label": label,
            "created_at": to_iso(self.clock.now()) or "",
            "secret_hash": digest(secret),
        }
        if upstream_key:
            record["upstream_key"] = upstream_key
        await self.store.put_gateway_key(record, record["secret_hash"])
        return GatewayKey.from_record(record), secret

    async def list(self) -> list[GatewayKey]:
        return [GatewayKey.from_record(r) for r in await self.store.gateway_keys()]

    async def _record(self, key_id: str) -> dict[str, str]:
        record = await self.store.gateway_key_record(key_id) if KEY_ID.fullmatch(key_id) else None
        if record is None:
            raise NotFound(f"No gateway key {key_id[:40]!r}.", param="id")
        return record

    async def rotate(self, key_id: str) -> tuple[GatewayKey, str]:
        """A new secret for the same key id and tenant; the old secret stops working now."""
        record = await self._record(key_id)
        secret = new_secret()
        fields = {"secret_hash": digest(secret), "rotated_at": to_iso(self.clock.now()) or ""}
        await self.store.replace_gateway_key_secret(
            key_id, record["secret_hash"], fields["secret_hash"], fields
        )
        return GatewayKey.from_record({**record, **fields}), secret

    async def revoke(self, key_id: str) -> GatewayKey:
        record = await self._record(key_id)
        await self.store.delete_gateway_key(key_id, record["secret_hash"])
        return GatewayKey.from_record(record)
