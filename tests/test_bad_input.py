"""Bad input on every route gets an OpenAI-shaped 4xx, never a 500; big uploads stream through."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.clock import SystemClock
from gateway.memory.candidates import CandidateQueue
from gateway.memory.embed import LocalEmbedder
from gateway.memory.identity import Identity, tenant_for_key
from gateway.memory.memories import Memories
from gateway.memory.mine import Proposal, screen
from gateway.memory.policy import load_policy
from gateway.storage.store import Store
from tests.conftest import Gateway, GatewayFactory, Upstream
from tests.test_recall import User


def assert_openai_4xx(resp: httpx.Response, status: int, code: str | None = None) -> None:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error"
    if code is not None:
        assert err["code"] == code
    assert "Traceback" not in resp.text


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_deeply_nested_chat_body_is_400(gateway: Gateway, upstream: Upstream) -> None:
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi", "x": '
    body += nested(1000) + b"}]}"
    resp = httpx.post(
        f"{gateway.base_url}/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert_openai_4xx(resp, 400, "invalid_json")
    assert upstream.state.requests == []


def test_deeply_nested_memory_body_is_400(gateway: Gateway) -> None:
    me = User(gateway)
    for body in (nested(5000), b'{"content": ' + nested(5000) + b', "type": "profile"}'):
        resp = httpx.post(f"{gateway.base_url}/memories", headers=me.headers, content=body)
        assert_openai_4xx(resp, 400)


def test_chat_body_limit_is_configurable(make_gateway: GatewayFactory, upstream: Upstream) -> None:
    gw = make_gateway(max_body_bytes=2000)
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 3000}]}
    resp = httpx.post(f"{gw.base_url}/chat/completions", json=body)
    assert_openai_4xx(resp, 413, "request_too_large")
    assert upstream.state.requests == []
    small = {"model": "m", "messages": [{"role": "user", "content": "x" * 100}]}
    assert httpx.post(f"{gw.base_url}/chat/completions", json=small).status_code == 200


@pytest.mark.parametrize("param", ["status", "type", "project_id"])
def test_empty_list_filters_are_400(gateway: Gateway, param: str) -> None:
    me = User(gateway)
    resp = httpx.get(f"{gateway.base_url}/memories?{param}=", headers=me.headers)
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["param"] == param


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("status=bogus", "status"),
        ("project_id=a%20b", "project_id"),
        ("project_id=@x", "project_id"),
    ],
)
def test_bad_list_filters_are_400(gateway: Gateway, query: str, param: str) -> None:
    me = User(gateway)
    resp = httpx.get(f"{gateway.base_url}/memories?{query}", headers=me.headers)
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["param"] == param


def test_good_list_filters_still_filter(gateway: Gateway) -> None:
    me = User(gateway)
    me.remember("I prefer tea over coffee")
    url = f"{gateway.base_url}/memories"
    assert len(httpx.get(url, headers=me.headers, params={"status": "active"}).json()["data"]) == 1
    assert httpx.get(url, headers=me.headers, params={"type": "goal"}).json()["data"] == []


@pytest.mark.parametrize("expires_at", ["", "garbage", "2026-13-45", "9999-12-31T23:59:59-01:00"])
def test_patch_with_bad_expiry_is_400(gateway: Gateway, expires_at: str) -> None:
    me = User(gateway)
    memory_id = me.remember("I prefer green tea")
    resp = httpx.patch(
        f"{gateway.base_url}/memories/{memory_id}",
        headers=me.headers,
        json={"expires_at": expires_at},
    )
    assert_openai_4xx(resp, 400)
    assert resp.json()["error"]["param"] == "expires_at"


def test_patch_null_expiry_still_clears_it(gateway: Gateway) -> None:
    me = User(gateway)
    memory_id = me.remember("I prefer oolong tea")
    resp = httpx.patch(
        f"{gateway.base_url}/memories/{memory_id}", headers=me.headers, json={"expires_at": None}
    )
    assert resp.status_code == 200, resp.text


# -- confirm-time edits -----------------------------------------------------------------------


@pytest.fixture
def pending_candidate(
    gateway: Gateway, shared_embedder: LocalEmbedder
) -> Iterator[tuple[User, str]]:
    """A user with one pending candidate, queued the way the miner queues one."""
    me = User(gateway)
    policy = load_policy()

    async def enqueue() -> str:
        assert gateway.settings.redis_url is not None
        store = Store(gateway.settings.redis_url)
        try:
            await Memories(store, shared_embedder, policy, SystemClock()).ready()
            ident = Identity(
                tenant=tenant_for_key(me.key),
                user=me.headers["x-memory-user"],
                project_id=None,
                mode="on",
                trace_id="tr_bad_input",
            )
            screened, refused = screen(
                Proposal(content="I prefer dark mode", type="preference", evidence="x"), policy
            )
            assert refused is None and screened is not None
            queue = CandidateQueue(store, policy, SystemClock())
            await queue.enqueue(ident, screened, trace_id=None)
            listed = await queue.list(ident)
            return str(listed[0]["id"])
        finally:
            await store.aclose()

    yield me, asyncio.run(enqueue())


@pytest.mark.parametrize(
    ("edits", "param"),
    [
        ({"expires_at": "garbage"}, "expires_at"),
        ({"expires_at": ""}, "expires_at"),
        ({"project_id": "a b", "scope": "project", "type": "project"}, "project_id"),
        ({"project_id": "@content:(x)", "scope": "project"}, "project_id"),
    ],
)
def test_confirm_edits_are_validated_like_a_new_memory(
    gateway: Gateway, pending_candidate: tuple[User, str], edits: dict[str, Any], param: str
) -> None:
    me, cid = pending_candidate
    url = f"{gateway.base_url}/memory/candidates/{cid}/confirm"
    resp = httpx.post(url, headers=me.headers, json=edits)
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["param"] == param
    # Same refusal as POST /v1/memories gives for the same values.
    post = httpx.post(
        f"{gateway.base_url}/memories",
        headers=me.headers,
        json={"content": "I prefer dark mode", "type": "preference", **edits},
    )
    assert post.status_code == 400 and post.json()["error"]["param"] == param
    # The candidate is still pending and can be confirmed unedited.
    assert httpx.post(url, headers=me.headers).status_code == 201


# -- pass-through bodies --------------------------------------------------------------------


def test_upload_past_the_framework_default_streams_through(
    gateway: Gateway, upstream: Upstream
) -> None:
    payload = b"x" * 12_000_000
    resp = httpx.post(
        f"{gateway.base_url}/files",
        files={"file": ("big.jsonl", payload)},
        data={"purpose": "batch"},
        timeout=60,
    )
    assert resp.status_code == 200, resp.text[:300]
    assert resp.json()["echo"]["body_bytes"] > len(payload)


def test_upload_past_the_configured_limit_is_413(
    make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    gw = make_gateway(passthrough_max_body_bytes=3_000_000)
    # With a Content-Length: refused before anything is sent upstream.
    resp = httpx.post(f"{gw.base_url}/files", content=b"x" * 3_000_001)
    assert_openai_4xx(resp, 413, "request_too_large")
    assert upstream.state.requests == []

    # Chunked, without a length: refused once the limit is passed, still 413 (not 502).
    def chunks() -> Iterator[bytes]:
        for _ in range(40):
            yield b"y" * 100_000

    resp = httpx.post(f"{gw.base_url}/files", content=chunks())
    assert_openai_4xx(resp, 413, "request_too_large")
    # Under the limit, chunked bodies pass.
    resp = httpx.post(f"{gw.base_url}/files", content=iter([b"z" * 1000]))
    assert resp.status_code == 200 and resp.json()["echo"]["body_bytes"] == 1000
