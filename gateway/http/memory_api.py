"""The memory API: users (and admins acting for them) see, edit, pause and delete memories.

Same identity as chat: the caller's key decides the tenant, ``X-Memory-User`` the user; every
call sees only that tenant and user. Errors use OpenAI's shape (see ``errors.py``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
import structlog
from litestar import Request, Response, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery

from gateway.clock import from_iso
from gateway.errors import BadRequest, NotFound, Unauthorized, WriteRefused
from gateway.http.services import Services
from gateway.memory import identity as identity_mod
from gateway.memory.identity import Identity
from gateway.memory.memories import WriteOutcome
from gateway.memory.records import Memory
from gateway.observability.metrics import UNUSED_AFTER_DAYS

log = structlog.get_logger("memgate.keys")


class MemoryIn(msgspec.Struct, forbid_unknown_fields=True):
    content: str
    type: str
    scope: str | None = None
    project_id: str | None = None
    expires_at: str | None = None
    source: str = "user_stated"
    slot: str | None = None
    applies: str | None = None


class MemoryPatch(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    content: str | msgspec.UnsetType = msgspec.UNSET
    type: str | msgspec.UnsetType = msgspec.UNSET
    scope: str | msgspec.UnsetType = msgspec.UNSET
    project_id: str | msgspec.UnsetType | None = msgspec.UNSET
    expires_at: str | msgspec.UnsetType | None = msgspec.UNSET
    slot: str | msgspec.UnsetType | None = msgspec.UNSET
    applies: str | msgspec.UnsetType = msgspec.UNSET


class SettingsPatch(msgspec.Struct, forbid_unknown_fields=True):
    recall_paused: bool


class KeyIn(msgspec.Struct, forbid_unknown_fields=True):
    label: str
    tenant: str | None = None
    upstream_key: str | None = None


def _decode(raw: bytes, kind: type[Any]) -> Any:
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        raise BadRequest(f"Invalid request body: {exc}.", code="invalid_body") from None
    except msgspec.DecodeError:
        raise BadRequest("The request body is not valid JSON.", code="invalid_json") from None
    except RecursionError:
        raise BadRequest("The request body nests JSON too deeply.", code="invalid_json") from None


def _given(patch: MemoryPatch) -> dict[str, Any]:
    """The fields the caller actually sent (an explicit null included)."""
    return {k: v for k, v in msgspec.structs.asdict(patch).items() if v is not msgspec.UNSET}


async def _who(request: Request[Any, Any, Any], services: Services) -> Identity:
    """The caller's identity; memory needs a key (a caller without one shares nothing)."""
    access = await services.gate.authorize(request)
    ident = identity_mod.resolve(request.headers, None, access=access)
    if not ident.tenant:
        raise Unauthorized(
            "The memory API needs an API key (Authorization: Bearer <key> or api-key).",
            code="missing_api_key",
        )
    return ident


def _when(value: str | None, param: str) -> datetime | None:
    if value is None:
        return None
    try:
        when = from_iso(value)
        when.timestamp()
    except (ValueError, OverflowError):
        raise BadRequest(f"{param} must be an ISO-8601 time or null.", param=param) from None
    return when


def _project(value: str | None) -> str | None:
    if value is not None:
        identity_mod.check_project_id(value, param="project_id")
    return value


def _scope(scope: str | None, project_id: str | None) -> str:
    """A memory's scope follows its project: ``project_id`` without ``scope`` means project
    scope; a global memory naming a project is a contradiction, refused."""
    if scope is None:
        return "project" if project_id else "global"
    if scope == "global" and project_id:
        raise BadRequest(
            "scope 'global' contradicts project_id: leave scope out (or use 'project') "
            "for a project's memory, or drop project_id.",
            param="scope",
            code="scope_mismatch",
        )
    return scope


def _checked_edits(changes: dict[str, Any]) -> dict[str, Any]:
    """The checks ``POST /v1/memories`` makes before the write gate, for an edit (a PATCH or
    the edits sent with a confirm): the same ids and times are refused the same way."""
    if "project_id" in changes:
        _project(changes["project_id"])
    if "expires_at" in changes:
        _when(changes["expires_at"], "expires_at")
    return changes


_STATUSES = ("active", "superseded", "archived")


def _filter(value: str | None, param: str, allowed: tuple[str, ...] = ()) -> str | None:
    """A list filter: absent, or a value a memory can have (an empty one is a mistake)."""
    if value is None:
        return None
    if not value or (allowed and value not in allowed):
        expected = f"one of {', '.join(allowed)}" if allowed else "a non-empty value"
        raise BadRequest(f"Invalid {param} filter: expected {expected}.", param=param)
    return value


def _written(outcome: WriteOutcome) -> Response[Any]:
    """201 for a new memory; 200 when an existing one was refreshed instead (dedup)."""
    body = outcome.memory.to_api()
    body["deduplicated"] = outcome.deduplicated
    body["superseded"] = outcome.superseded
    return Response(body, status_code=201 if outcome.created else 200)


@post("/v1/memories", status_code=201, summary="Store a memory the caller states")
async def create_memory(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Response[Any]:
    ident = await _who(request, services)
    data: MemoryIn = _decode(await request.body(), MemoryIn)
    if data.source == "model_inference":
        raise WriteRefused(
            "A model inference becomes a memory only when the user confirms its candidate.",
            extra={"reasons": ["model_inference"]},
        )
    if data.source == "admin" and not ident.is_admin:
        raise WriteRefused(
            "Only the admin token may store admin memories.", extra={"reasons": ["invalid"]}
        )
    outcome = await services.memories.create(
        ident,
        content=data.content,
        type=data.type,
        source=data.source,
        scope=_scope(data.scope, data.project_id),
        project_id=_project(data.project_id),
        expires_at=_when(data.expires_at, "expires_at"),
        slot=data.slot,
        applies=data.applies,
        actor="admin" if ident.is_admin else "user",
    )
    return _written(outcome)


@get("/v1/memories", summary="List the caller's memories")
async def list_memories(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    project_id: FromQuery[str | None] = None,
    status: FromQuery[str | None] = None,
    type: FromQuery[str | None] = None,
) -> dict[str, Any]:
    ident = await _who(request, services)
    found = await services.memories.list(
        ident,
        status=_filter(status, "status", _STATUSES),
        type=_filter(type, "type"),
        project_id=_project(_filter(project_id, "project_id")),
    )
    return {"object": "list", "data": [m.to_api() for m in found]}


@delete("/v1/memories", status_code=200, summary="Delete one project's memories, or all")
async def delete_memories(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    project_id: FromQuery[str | None] = None,
    all: FromQuery[bool] = False,
) -> dict[str, Any]:
    ident = await _who(request, services)
    if not all and not project_id:
        raise BadRequest("Say what to delete: ?project_id=<id> or ?all=true.", param="project_id")
    count = await services.memories.delete_where(
        ident, project_id=_project(project_id), everything=all, actor=ident.actor
    )
    await services.candidates.forget(ident, project_id=None if all else project_id)
    return {"object": "memory.deleted", "deleted": count, "project_id": project_id, "all": all}


@get("/v1/memories/{memory_id:str}", summary="One memory")
async def get_memory(
    request: Request[Any, Any, Any], services: NamedDependency[Services], memory_id: FromPath[str]
) -> dict[str, Any]:
    return (await services.memories.get(await _who(request, services), memory_id)).to_api()


@patch("/v1/memories/{memory_id:str}", summary="Edit a memory")
async def patch_memory(
    request: Request[Any, Any, Any], services: NamedDependency[Services], memory_id: FromPath[str]
) -> dict[str, Any]:
    ident = await _who(request, services)
    changes = _checked_edits(_given(_decode(await request.body(), MemoryPatch)))
    if "scope" in changes and changes.get("project_id"):
        _scope(changes["scope"], changes["project_id"])
    memory = await services.memories.update(
        ident, memory_id, changes, actor="admin" if ident.is_admin else "user"
    )
    return memory.to_api()


@delete("/v1/memories/{memory_id:str}", status_code=200, summary="Delete a memory")
async def delete_memory(
    request: Request[Any, Any, Any], services: NamedDependency[Services], memory_id: FromPath[str]
) -> dict[str, Any]:
    ident = await _who(request, services)
    await services.memories.delete(ident, memory_id, actor="admin" if ident.is_admin else "user")
    return {"object": "memory.deleted", "id": memory_id, "deleted": True}


@get("/v1/memories/{memory_id:str}/history", summary="Every change to a memory")
async def memory_history(
    request: Request[Any, Any, Any], services: NamedDependency[Services], memory_id: FromPath[str]
) -> dict[str, Any]:
    entries = await services.memories.history(await _who(request, services), memory_id)
    return {"object": "list", "id": memory_id, "data": entries}


@get("/v1/memory/settings", summary="The caller's memory settings")
async def get_settings(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> dict[str, Any]:
    ident = await _who(request, services)
    paused = await services.store.is_recall_paused(ident.tenant, ident.user)
    return {"object": "memory.settings", "recall_paused": paused}


@patch("/v1/memory/settings", summary="Pause or resume recall")
async def patch_settings(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> dict[str, Any]:
    ident = await _who(request, services)
    data: SettingsPatch = _decode(await request.body(), SettingsPatch)
    await services.store.set_recall_paused(ident.tenant, ident.user, data.recall_paused)
    return {"object": "memory.settings", "recall_paused": data.recall_paused}


@get("/v1/memory/traces/{trace_id:str}", summary="Which memories an answer used, and why")
async def get_trace(
    request: Request[Any, Any, Any], services: NamedDependency[Services], trace_id: FromPath[str]
) -> dict[str, Any]:
    ident = await _who(request, services)
    trace = await services.store.get_trace(ident.tenant, ident.user, trace_id)
    if trace is None:
        raise NotFound(
            f"No trace {trace_id[:40]!r} for this user (traces expire).", param="trace_id"
        )
    return trace


@post(
    "/v1/memory/projects/{project_id:str}/archive",
    status_code=200,
    summary="Archive a finished project's memories",
)
async def archive_project(
    request: Request[Any, Any, Any], services: NamedDependency[Services], project_id: FromPath[str]
) -> dict[str, Any]:
    ident = await _who(request, services)
    count = await services.memories.archive_project(ident, _project(project_id) or "")
    return {"object": "memory.project.archived", "project_id": project_id, "archived": count}


@get("/v1/memory/candidates", summary="Candidate memories waiting for the user's decision")
async def list_candidates(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> dict[str, Any]:
    return {"object": "list", "data": await services.candidates.list(await _who(request, services))}


@post(
    "/v1/memory/candidates/{candidate_id:str}/confirm",
    status_code=201,
    summary="Confirm a candidate (optionally edited): it becomes a memory",
)
async def confirm_candidate(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    candidate_id: FromPath[str],
) -> Response[Any]:
    ident = await _who(request, services)
    raw = await request.body()
    edits = _checked_edits(_given(_decode(raw, MemoryPatch))) if raw.strip() else {}
    outcome = await services.candidates.confirm(
        ident, candidate_id, services.memories, edits or None
    )
    return _written(outcome)


@post(
    "/v1/memory/candidates/{candidate_id:str}/reject",
    status_code=200,
    summary="Reject a candidate: it is never proposed again",
)
async def reject_candidate(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    candidate_id: FromPath[str],
) -> dict[str, Any]:
    await services.candidates.reject(await _who(request, services), candidate_id)
    return {"object": "memory.candidate", "id": candidate_id, "rejected": True}


@get("/v1/memory/report", summary="The first-week checks: unused, corrected, counts by type")
async def memory_report(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> dict[str, Any]:
    """Memories never injected since saved, injected but later corrected, counts by type."""
    ident = await _who(request, services)
    everything = await services.memories.list(ident)
    active = [m for m in everything if m.status == "active"]
    by_type: dict[str, int] = {}
    for memory in active:
        by_type[memory.type] = by_type.get(memory.type, 0) + 1
    corrected = [m for m in everything if m.status == "superseded" and m.inject_count > 0]
    signals = _signals(everything, len(corrected), services.clock.now().timestamp())
    recent = await services.store.recent_traces(ident.tenant, ident.user)
    recalled = [t for t in recent if "conflicts" in t]
    signals["recent_requests"] = len(recalled)
    settings = await services.store.get_settings(ident.tenant, ident.user)
    prompt = int(settings.get("prompt_tokens") or 0)
    injected = int(settings.get("injected_tokens") or 0)
    signals["prompt_tokens"] = prompt
    signals["injected_tokens"] = injected
    signals["injected_share_of_prompt_tokens"] = round(injected / prompt, 4) if prompt else None
    signals["conflicts_per_request"] = (
        round(sum(int(t.get("conflicts") or 0) for t in recalled) / len(recalled), 3)
        if recalled
        else None
    )
    return {
        "object": "memory.report",
        "active": len(active),
        "counts_by_type": dict(sorted(by_type.items())),
        "never_injected": [_brief(m) for m in active if m.inject_count == 0],
        "injected_then_corrected": [
            {**_brief(m), "superseded_by": m.superseded_by} for m in corrected
        ],
        "signals": signals,
    }


def _signals(everything: list[Memory], corrected: int, now_ts: float) -> dict[str, Any]:
    """The live-traffic signals for one user: corrections per 1,000 injected memories and
    the share of memories never injected once they are N days old (as on the dashboard)."""
    injections = sum(m.inject_count for m in everything)
    aged: dict[str, Any] = {}
    for days in UNUSED_AFTER_DAYS:
        old = [
            m
            for m in everything
            if m.status == "active"
            and m.created_at is not None
            and m.created_at.timestamp() < now_ts - days * 86400
        ]
        unused = sum(m.inject_count == 0 for m in old)
        aged[str(days)] = {
            "memories": len(old),
            "never_injected": unused,
            "share": round(unused / len(old), 3) if old else None,
        }
    return {
        "injections": injections,
        "corrections_per_1000_injected": (
            round(1000 * corrected / injections, 1) if injections else None
        ),
        "never_injected_after_days": aged,
    }


def _brief(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "content": memory.content,
        "type": memory.type,
        "inject_count": memory.inject_count,
        "created_at": memory.to_api()["created_at"],
    }


# -- gateway keys (admin token only) ----------------------------------------------------------


@post("/v1/memory/keys", status_code=201, summary="Issue a gateway key (admin)")
async def create_key(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> dict[str, Any]:
    """The secret is in this answer only; memgate keeps its hash."""
    keyring = services.gate.admin_keyring(request)
    data: KeyIn = _decode(await request.body(), KeyIn)
    key, secret = await keyring.create(
        data.label, tenant=data.tenant, upstream_key=data.upstream_key or None
    )
    log.info("gateway_key_created", key_id=key.id, tenant=key.tenant)
    return {**key.to_api(), "key": secret}


@get("/v1/memory/keys", summary="Gateway keys, without their secrets (admin)")
async def list_keys(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> dict[str, Any]:
    keyring = services.gate.admin_keyring(request)
    return {"object": "list", "data": [k.to_api() for k in await keyring.list()]}


@post("/v1/memory/keys/{key_id:str}/rotate", status_code=200, summary="New secret, same tenant")
async def rotate_key(
    request: Request[Any, Any, Any], services: NamedDependency[Services], key_id: FromPath[str]
) -> dict[str, Any]:
    keyring = services.gate.admin_keyring(request)
    key, secret = await keyring.rotate(key_id)
    log.info("gateway_key_rotated", key_id=key.id)
    return {**key.to_api(), "key": secret}


@delete("/v1/memory/keys/{key_id:str}", status_code=200, summary="Revoke a gateway key (admin)")
async def revoke_key(
    request: Request[Any, Any, Any], services: NamedDependency[Services], key_id: FromPath[str]
) -> dict[str, Any]:
    keyring = services.gate.admin_keyring(request)
    key = await keyring.revoke(key_id)
    log.info("gateway_key_revoked", key_id=key.id)
    return {**key.to_api(), "object": "gateway_key.revoked", "revoked": True}


ROUTES = [
    create_key,
    list_keys,
    rotate_key,
    revoke_key,
    memory_report,
    list_candidates,
    confirm_candidate,
    reject_candidate,
    create_memory,
    list_memories,
    delete_memories,
    get_memory,
    patch_memory,
    delete_memory,
    memory_history,
    get_settings,
    patch_settings,
    get_trace,
    archive_project,
]
