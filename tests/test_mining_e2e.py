"""Mining through the running gateway: chat -> pending candidate -> confirm -> recalled."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.conftest import Gateway, GatewayFactory, Upstream
from tests.test_recall import User


def pending(me: User, want: int, wait: float = 10.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + wait
    while True:
        got = httpx.get(f"{me.gw.base_url}/memory/candidates", headers=me.headers).json()["data"]
        if len(got) >= want or time.monotonic() > deadline:
            return list(got)
        time.sleep(0.05)


def test_stated_preference_is_queued_confirmed_then_injected(gateway: Gateway,
                                                             upstream: Upstream) -> None:
    me = User(gateway)
    me.ask("以后都用中文回答我")
    queued = pending(me, 1)
    assert [c["content"] for c in queued] and queued[0]["type"] == "preference"
    assert httpx.get(f"{gateway.base_url}/memories", headers=me.headers).json()["data"] == []
    resp = httpx.post(f"{gateway.base_url}/memory/candidates/{queued[0]['id']}/confirm",
                      headers=me.headers)
    assert resp.status_code == 201, resp.text
    memory = resp.json()
    assert pending(me, 0, wait=0) == []
    raw = me.ask("你应该用什么语言回答我？")
    assert me.injected(raw) == [memory["id"]]


def test_one_time_and_secret_messages_queue_nothing(gateway: Gateway) -> None:
    me = User(gateway)
    me.ask("这次简短点")
    me.ask("just the answer this time")
    me.ask("remember that my api key is sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5" * 1)
    time.sleep(1.0)
    assert pending(me, 1, wait=1.0) == []


def test_rejected_candidate_is_not_proposed_again(gateway: Gateway) -> None:
    me = User(gateway)
    me.ask("I prefer answers with bullet points")
    cand = pending(me, 1)[0]
    resp = httpx.post(f"{gateway.base_url}/memory/candidates/{cand['id']}/reject",
                      headers=me.headers)
    assert resp.json()["rejected"] is True
    me.ask("I prefer answers with bullet points")
    time.sleep(0.5)
    assert pending(me, 1, wait=1.0) == []


def test_users_never_see_each_others_candidates(gateway: Gateway) -> None:
    me, other = User(gateway), User(gateway)
    me.ask("以后都用中文回答我")
    cand = pending(me, 1)[0]
    assert pending(other, 1, wait=0.5) == []
    resp = httpx.post(f"{gateway.base_url}/memory/candidates/{cand['id']}/confirm",
                      headers=other.headers)
    assert resp.status_code == 404


def test_pending_queue_depth_is_exported(make_gateway: GatewayFactory) -> None:
    gw = make_gateway(metrics_sample_seconds=0.2)
    me = User(gw)
    me.ask("以后都用中文回答我")
    pending(me, 1)
    deadline = time.monotonic() + 10
    while True:
        text = httpx.get(f"{gw.url}/metrics").text
        line = next(x for x in text.splitlines() if x.startswith("memgate_pending_candidates "))
        if float(line.split()[1]) >= 1 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert float(line.split()[1]) >= 1
