"""The history says who did what: the actor (user or admin), the gateway key, the change."""

from __future__ import annotations

import re
from typing import Any

import httpx

from gateway.memory.identity import tenant_for_key
from tests.conftest import Gateway
from tests.test_mining_e2e import confirm, pending
from tests.test_recall import User
from tests.test_tenancy_and_keys import ADMIN, keyed  # noqa: F401  (fixture)


def _history(gw: Gateway, headers: dict[str, str], memory_id: str) -> list[dict[str, Any]]:
    resp = httpx.get(f"{gw.base_url}/memories/{memory_id}/history", headers=headers)
    assert resp.status_code == 200, resp.text
    return list(resp.json()["data"])


def test_an_admin_edit_before_confirming_is_recorded_as_the_admins(gateway: Gateway) -> None:
    me = User(gateway)
    me.ask("以后都用中文回答我")
    [cand] = pending(me, 1)
    base = f"/admin/users/{tenant_for_key(me.key)}/{me.headers['x-memory-user']}"
    with httpx.Client(base_url=gateway.url) as admin:
        assert admin.post("/admin/login", data={"token": "test-admin-token"}).status_code == 303
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', admin.get(base).text)
        assert csrf is not None
        resp = admin.post(
            f"{base}/candidates/{cand['id']}/confirm",
            data={"csrf": csrf.group(1), "content": "回答用简体中文"},
        )
        assert resp.status_code == 303
    [stored] = httpx.get(f"{gateway.base_url}/memories", headers=me.headers).json()["data"]
    assert stored["content"] == "回答用简体中文" and stored["source"] == "admin"
    [entry] = _history(gateway, me.headers, stored["id"])
    assert (entry["actor"], entry["action"]) == ("admin", "edited_and_confirmed")
    assert entry["changes"]["candidate"] == cand["id"]
    assert entry["changes"]["edited"] == {"content": ["以后都用中文回答我", "回答用简体中文"]}
    assert entry["changes"]["content"] == [None, "回答用简体中文"]


def test_a_users_confirmation_and_edits_are_recorded_as_theirs(gateway: Gateway) -> None:
    me = User(gateway)
    me.ask("以后都用中文回答我")
    [cand] = pending(me, 1)
    stored = confirm(me, cand["id"])
    assert stored["source"] == "user_stated"
    [entry] = _history(gateway, me.headers, stored["id"])
    assert (entry["actor"], entry["action"], entry["key_id"]) == ("user", "confirmed", None)
    resp = httpx.patch(
        f"{gateway.base_url}/memories/{stored['id']}",
        headers=me.headers,
        json={"content": "回答用繁体中文"},
    )
    assert resp.status_code == 200
    edit = _history(gateway, me.headers, stored["id"])[-1]
    assert (edit["actor"], edit["action"]) == ("user", "edited")
    assert edit["changes"]["content"] == ["以后都用中文回答我", "回答用繁体中文"]


def test_history_names_the_gateway_key(keyed: Gateway) -> None:  # noqa: F811
    created = httpx.post(f"{keyed.base_url}/memory/keys", headers=ADMIN, json={"label": "audit"})
    key = created.json()
    headers = {"authorization": f"Bearer {key['key']}", "x-memory-user": "ann"}
    resp = httpx.post(
        f"{keyed.base_url}/memories",
        headers=headers,
        json={"content": "I prefer metric units", "type": "preference"},
    )
    assert resp.status_code == 201, resp.text
    [entry] = _history(keyed, headers, resp.json()["id"])
    assert (entry["actor"], entry["key_id"], entry["action"]) == ("user", key["id"], "created")
    assert entry["changes"]["content"] == [None, "I prefer metric units"]
    gone = httpx.delete(f"{keyed.base_url}/memories/{resp.json()['id']}", headers=headers)
    assert gone.status_code == 200
    [deleted] = _history(keyed, headers, resp.json()["id"])
    assert (deleted["action"], deleted["key_id"], deleted["changes"]) == ("deleted", key["id"], {})
