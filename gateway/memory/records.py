"""The memory record: how it sits in a Redis hash and how it looks in the API."""

from __future__ import annotations

import hashlib
import unicodedata
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from gateway.clock import to_iso

# Fields of the record that the memory API never shows: derived by the gateway, like the
# embedding.
INTERNAL_FIELDS = ("typicality", "says_change")
NO_EXPIRY = 253402300799.0  # 9999-12-31: numeric stand-in for "never", so range filters stay simple


def new_memory_id() -> str:
    return "mem_" + uuid.uuid4().hex[:24]


def content_key(text: str) -> str:
    """Exact-duplicate key: case, width and whitespace differences do not make a new memory."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return hashlib.sha256(" ".join(folded.split()).encode()).hexdigest()[:32]


def _ts(when: datetime | None) -> float:
    return when.timestamp() if when else 0.0


# Recall builds dozens of memories per request from the same few stored timestamps (a
# memory's creation, update and confirmation are often one instant, and the same memories
# come back request after request); the result is immutable, so sharing it is safe.
@lru_cache(maxsize=8192)
def _dt(value: Any) -> datetime | None:
    number = float(value or 0)
    if number <= 0 or number >= NO_EXPIRY:
        return None
    return datetime.fromtimestamp(number, tz=UTC)


def _flag(value: Any) -> bool | None:
    return None if value is None or value == "" else value == "1"


@dataclass(slots=True)
class Memory:
    id: str
    tenant: str
    user: str
    content: str
    type: str
    source: str
    scope: str = "global"
    project_id: str | None = None
    slot: str | None = None
    confidence: float = 1.0
    sensitivity: str = "low"
    status: str = "active"
    created_at: datetime | None = None
    updated_at: datetime | None = None
    confirmed_at: datetime | None = None
    expires_at: datetime | None = None
    supersedes: list[str] = field(default_factory=list)
    superseded_by: str | None = None
    evidence_trace: str | None = None
    evidence_excerpt: str | None = None
    inject_count: int = 0
    last_injected_at: datetime | None = None
    embedding_model: str = ""
    # "always": a standing memory, injected into every request in its scope; "relevant":
    # only when the request is about it. Empty only on records written before the field
    # existed, until the gateway settles them at start-up.
    applies: str = ""
    topics: list[str] = field(default_factory=list)
    # How typical of requests in general, with the basis it was worked out on ("0.3145/
    # 1a2b3c4d"; gateway.memory.typicality reads it): derived from the embedding, as the
    # embedding is, and never shown by the memory API. Empty when not worked out.
    typicality: str = ""
    # Whether the text says that something about the user changed (``policy.says_change``),
    # read when written under the rules of ``Policy.topics_basis``, as the topics are: recall
    # asks it of memories request after request. None on records written before it existed,
    # until the rules-follow pass reads it; recall then reads the text itself.
    says_change: bool | None = None

    def to_hash(self, *, search_text: str, embedding: bytes) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "user": self.user,
            "content": self.content,
            "content_key": content_key(self.content),
            "search_text": search_text,
            "type": self.type,
            "source": self.source,
            "scope": self.scope,
            "project_id": self.project_id or "",
            "slot": self.slot or "",
            "confidence": self.confidence,
            "sensitivity": self.sensitivity,
            "status": self.status,
            "created_at": _ts(self.created_at),
            "updated_at": _ts(self.updated_at),
            "confirmed_at": _ts(self.confirmed_at),
            "expires_ts": _ts(self.expires_at) if self.expires_at else NO_EXPIRY,
            "supersedes": ",".join(self.supersedes),
            "superseded_by": self.superseded_by or "",
            "evidence_trace": self.evidence_trace or "",
            "evidence_excerpt": self.evidence_excerpt or "",
            "inject_count": self.inject_count,
            "last_injected_at": _ts(self.last_injected_at),
            "embedding_model": self.embedding_model,
            **self.derived_fields(),
            "typicality": self.typicality,
            "embedding": embedding,
        }

    def derived_fields(self) -> dict[str, Any]:
        """The hash fields the policy's rules derive from the memory's words and type."""
        return {
            "applies": self.applies,
            "topics": ",".join(self.topics),
            "says_change": "" if self.says_change is None else int(self.says_change),
        }

    @classmethod
    def from_hash(cls, raw: dict[Any, Any]) -> Memory:
        s: dict[str, Any] = {}
        for k, v in raw.items():
            if isinstance(k, bytes):
                k = k.decode()
            if k != "embedding":
                s[k] = v.decode() if isinstance(v, bytes) else v
        return cls.from_fields(s)

    @classmethod
    def from_fields(cls, s: dict[str, Any]) -> Memory:
        """From decoded hash fields. Recall builds dozens of these per request, so the
        arguments are positional (cheaper than keywords); a test round-trips every field so
        the order cannot drift."""
        get = s.get
        return cls(
            s["id"],
            s["tenant"],
            s["user"],
            s["content"],
            s["type"],
            s["source"],
            get("scope") or "global",
            get("project_id") or None,
            get("slot") or None,
            float(get("confidence") or 1.0),
            get("sensitivity") or "low",
            get("status") or "active",
            _dt(get("created_at")),
            _dt(get("updated_at")),
            _dt(get("confirmed_at")),
            _dt(get("expires_ts")),
            [x for x in (get("supersedes") or "").split(",") if x],
            get("superseded_by") or None,
            get("evidence_trace") or None,
            get("evidence_excerpt") or None,
            int(float(get("inject_count") or 0)),
            _dt(get("last_injected_at")),
            get("embedding_model") or "",
            get("applies") or "",
            [x for x in (get("topics") or "").split(",") if x],
            get("typicality") or "",
            _flag(get("says_change")),
        )

    def to_api(self) -> dict[str, Any]:
        data = asdict(self)
        for key in INTERNAL_FIELDS:
            del data[key]
        for key, value in data.items():
            if isinstance(value, datetime):
                data[key] = to_iso(value)
        data["object"] = "memory"
        data["evidence"] = {
            "trace_id": data.pop("evidence_trace"),
            "excerpt": data.pop("evidence_excerpt"),
        }
        return data
