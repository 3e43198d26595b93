"""Tenancy: no shared tenant for callers without a key, gateway keys, no open relay."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from gateway.cli import main
from gateway.config import Settings, open_relay_problem
from gateway.memory.identity import tenant_for_key
from tests.conftest import Gateway, GatewayFactory, Upstream

ADMIN = {"authorization": "Bearer test-admin-token"}
CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hello"}]}


def _remember(gw: Gateway, headers: dict[str, str], content: str) -> httpx.Response:
    return httpx.post(
        f"{gw.base_url}/memories", headers=headers, json={"content": content, "type": "preference"}
    )


def _listed(gw: Gateway, headers: dict[str, str]) -> httpx.Response:
    return httpx.get(f"{gw.base_url}/memories", headers=headers)


def _openai_401(resp: httpx.Response) -> None:
    assert resp.status_code == 401, resp.text
    error = resp.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    assert error["type"] == "authentication_error"


# -- no shared tenant ------------------------------------------------------------------------


def test_api_key_basic_auth_and_no_credentials_never_share_a_tenant(
    gateway: Gateway, upstream: Upstream
) -> None:
    one = {"api-key": "azure-key-one-shared-test", "x-memory-user": "bob"}
    two = {"api-key": "azure-key-two-shared-test", "x-memory-user": "bob"}
    created = _remember(gateway, one, "I prefer answers in French")
    assert created.status_code == 201, created.text
    assert created.json()["tenant"] == tenant_for_key("azure-key-one-shared-test")
    memory_id = created.json()["id"]
    assert [m["id"] for m in _listed(gateway, one).json()["data"]] == [memory_id]
    assert _listed(gateway, two).json()["data"] == []
    assert httpx.delete(f"{gateway.base_url}/memories/{memory_id}", headers=two).status_code == 404
    for nobody in (
        {"x-memory-user": "bob"},
        {"authorization": "Basic Ym9iOnB3", "x-memory-user": "bob"},
    ):
        _openai_401(_listed(gateway, nobody))
        _openai_401(_remember(gateway, nobody, "I like tea"))
        _openai_401(httpx.delete(f"{gateway.base_url}/memories/{memory_id}", headers=nobody))
        # chat still works, as a plain proxy: nothing recalled, nothing traced or mined
        body = json.dumps(CHAT).encode()
        resp = httpx.post(f"{gateway.base_url}/chat/completions", headers=nobody, content=body)
        assert resp.status_code == 200 and resp.headers["x-memory-injected"] == ""
        assert upstream.state.last("/chat/completions").body == body
    assert [m["id"] for m in _listed(gateway, one).json()["data"]] == [memory_id]


# -- gateway keys ----------------------------------------------------------------------------


@pytest.fixture
def keyed(make_gateway: GatewayFactory) -> Iterator[Gateway]:
    """A gateway whose Redis holds gateway keys; every key is revoked afterwards (the test
    Redis is shared, and keys switch every gateway on it to keys-only)."""
    gw = make_gateway(upstream_api_key="sk-operator-default")
    try:
        yield gw
    finally:
        for key in httpx.get(f"{gw.base_url}/memory/keys", headers=ADMIN).json()["data"]:
            httpx.delete(f"{gw.base_url}/memory/keys/{key['id']}", headers=ADMIN)


def _create(gw: Gateway, **body: Any) -> dict[str, Any]:
    resp = httpx.post(f"{gw.base_url}/memory/keys", headers=ADMIN, json=body)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


def test_gateway_keys_gate_every_route_and_map_tenant_and_upstream_key(
    keyed: Gateway, upstream: Upstream
) -> None:
    team = _create(keyed, label="team", upstream_key="sk-team-upstream")
    other = _create(keyed, label="other")
    assert team["key"].startswith("mg-") and team["tenant"] != other["tenant"]
    listed = httpx.get(f"{keyed.base_url}/memory/keys", headers=ADMIN).json()["data"]
    assert {k["id"] for k in listed} == {team["id"], other["id"]}
    assert team["key"] not in json.dumps(listed) and "sk-team-upstream" not in json.dumps(listed)

    # unknown, missing and client keys get OpenAI's 401 on chat, pass-through and memory
    for headers in ({}, {"authorization": "Bearer sk-some-client-key"}, {"api-key": "mg-nope"}):
        _openai_401(httpx.post(f"{keyed.base_url}/chat/completions", headers=headers, json=CHAT))
        _openai_401(httpx.get(f"{keyed.base_url}/models", headers=headers))
        _openai_401(_listed(keyed, headers))
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=keyed.base_url, api_key="wrong", max_retries=0).models.list()

    client = openai.OpenAI(base_url=keyed.base_url, api_key=team["key"], max_retries=0)
    client.chat.completions.create(**CHAT)
    assert upstream.state.last("/chat/completions").headers["authorization"] == (
        "Bearer sk-team-upstream"
    )
    openai.OpenAI(base_url=keyed.base_url, api_key=other["key"], max_retries=0).models.list()
    seen = upstream.state.last("/models").headers
    assert seen["authorization"] == "Bearer sk-operator-default"
    assert other["key"] not in json.dumps(seen)

    mine = {"authorization": f"Bearer {team['key']}", "x-memory-user": "ann"}
    created = _remember(keyed, mine, "I prefer tabs over spaces")
    assert created.status_code == 201 and created.json()["tenant"] == team["tenant"]
    theirs = {"authorization": f"Bearer {other['key']}", "x-memory-user": "ann"}
    assert _listed(keyed, theirs).json()["data"] == []

    # rotation: a new secret, the same tenant and memories; the old secret stops working
    rotated = httpx.post(f"{keyed.base_url}/memory/keys/{team['id']}/rotate", headers=ADMIN)
    assert rotated.status_code == 200 and rotated.json()["tenant"] == team["tenant"]
    _openai_401(_listed(keyed, mine))
    renewed = {**mine, "authorization": f"Bearer {rotated.json()['key']}"}
    assert [m["id"] for m in _listed(keyed, renewed).json()["data"]] == [created.json()["id"]]

    # a second key for the same tenant (another developer of the team) shares its memories
    colleague = _create(keyed, label="team-2", tenant=team["tenant"])
    shared = {"authorization": f"Bearer {colleague['key']}", "x-memory-user": "ann"}
    assert [m["id"] for m in _listed(keyed, shared).json()["data"]] == [created.json()["id"]]

    revoked = httpx.delete(f"{keyed.base_url}/memory/keys/{other['id']}", headers=ADMIN)
    assert revoked.status_code == 200
    _openai_401(_listed(keyed, theirs))


def test_key_management_needs_the_admin_token(keyed: Gateway) -> None:
    for headers in ({}, {"authorization": "Bearer not-admin"}):
        resp = httpx.post(f"{keyed.base_url}/memory/keys", headers=headers, json={"label": "x"})
        _openai_401(resp)
        _openai_401(httpx.get(f"{keyed.base_url}/memory/keys", headers=headers))
    bad = httpx.post(f"{keyed.base_url}/memory/keys", headers=ADMIN, json={"label": ""})
    assert bad.status_code == 400
    bad = httpx.post(
        f"{keyed.base_url}/memory/keys", headers=ADMIN, json={"label": "x", "tenant": "a b"}
    )
    assert bad.status_code == 400


def test_cli_creates_lists_rotates_and_revokes(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMGATE_REDIS_URL", redis_url)
    ids: list[str] = []
    try:
        monkeypatch.setattr(sys, "stdin", io.StringIO("sk-cli-upstream\n"))
        assert main(["keys", "create", "--label", "cli", "--upstream-key-stdin"]) == 0
        created = json.loads(capsys.readouterr().out)
        ids.append(created["id"])
        assert created["key"].startswith("mg-") and created["has_upstream_key"]
        assert main(["keys", "list"]) == 0
        listed = capsys.readouterr().out
        assert created["id"] in listed and created["key"] not in listed
        assert main(["keys", "rotate", created["id"]]) == 0
        rotated = json.loads(capsys.readouterr().out)
        assert rotated["tenant"] == created["tenant"] and rotated["key"] != created["key"]
        assert main(["keys", "revoke", created["id"]]) == 0
        ids.clear()
        assert json.loads(capsys.readouterr().out)["revoked"] is True
        assert main(["keys", "revoke", created["id"]]) == 1
        assert "No gateway key" in capsys.readouterr().err
        monkeypatch.setattr(sys, "stdin", io.StringIO("sk-old-client-key\n"))
        assert main(["keys", "legacy-tenant"]) == 0
        assert capsys.readouterr().out.strip() == tenant_for_key("sk-old-client-key")
    finally:
        for key_id in ids:
            main(["keys", "revoke", key_id])


# -- no open relay ---------------------------------------------------------------------------


def test_refuses_an_open_relay_unless_told() -> None:
    paid = Settings(upstream_api_key="sk-operator")
    assert open_relay_problem(paid, "0.0.0.0", 0) is not None
    assert open_relay_problem(paid, "192.168.1.5", 0) is not None
    assert open_relay_problem(paid, "127.0.0.1", 0) is None
    assert open_relay_problem(paid, "::1", 0) is None
    assert open_relay_problem(paid, "0.0.0.0", 1) is None
    assert open_relay_problem(Settings(), "0.0.0.0", 0) is None
    opted_in = Settings.from_env(
        {"MEMGATE_UPSTREAM_API_KEY": "sk-operator", "MEMGATE_ALLOW_OPEN_RELAY": "true"}
    )
    assert open_relay_problem(opted_in, "0.0.0.0", 0) is None


def test_serve_exits_before_listening_as_an_open_relay(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMGATE_REDIS_URL", redis_url)
    monkeypatch.setenv("MEMGATE_UPSTREAM_API_KEY", "sk-operator")
    assert main(["serve", "--host", "0.0.0.0", "--port", "1"]) == 2
    assert "MEMGATE_ALLOW_OPEN_RELAY" in capsys.readouterr().err
