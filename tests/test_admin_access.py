"""Admin access: server-side sessions, one throttle for every admin-token check, no oracle."""

from __future__ import annotations

import httpx

from tests.conftest import Gateway, GatewayFactory

ADMIN_TOKEN = "test-admin-token"  # what conftest's make_gateway configures


def _sign_in(gw: Gateway, **headers: str) -> httpx.Client:
    client = httpx.Client(base_url=gw.url, headers=headers)
    assert client.post("/admin/login", data={"token": ADMIN_TOKEN}).status_code == 303
    return client


def _signed_in(client: httpx.Client) -> bool:
    return "Tenants and users" in client.get("/admin").text


def test_each_sign_in_gets_its_own_session_and_sign_out_revokes_it(gateway: Gateway) -> None:
    one, two = _sign_in(gateway), _sign_in(gateway)
    try:
        cookie = one.cookies["memgate_admin"]
        assert cookie != two.cookies["memgate_admin"] and ADMIN_TOKEN not in cookie
        assert _signed_in(one) and _signed_in(two)
        csrf = one.get("/admin").text.split('name="csrf" value="')[1].split('"')[0]
        assert one.post("/admin/logout", data={"csrf": csrf}).status_code == 303
        # the old cookie, replayed, no longer opens anything; the other session lives on
        with httpx.Client(base_url=gateway.url) as replay:
            replay.cookies.set("memgate_admin", cookie, path="/admin")
            assert not _signed_in(replay)
        assert _signed_in(two)
    finally:
        one.close()
        two.close()


def test_a_wrong_token_gets_the_same_answer_whatever_the_other_headers(
    make_gateway: GatewayFactory,
) -> None:
    gw = make_gateway()
    url = f"{gw.base_url}/memory/settings"
    answers = set()
    for tenant in ("!", "good-tenant", "x" * 200):
        resp = httpx.get(url, headers={"authorization": "Bearer wrong", "x-memory-tenant": tenant})
        answers.add((resp.status_code, resp.text))
    assert len(answers) == 1 and next(iter(answers))[0] == 401
    right = httpx.get(
        url, headers={"authorization": f"Bearer {ADMIN_TOKEN}", "x-memory-tenant": "!"}
    )
    assert right.status_code == 400  # only the holder of the token learns about the header


def test_page_and_api_share_one_throttle_keyed_on_the_real_peer(
    make_gateway: GatewayFactory,
) -> None:
    gw = make_gateway()
    api = f"{gw.base_url}/memory/settings"
    with httpx.Client(base_url=gw.url) as client:
        for n in range(5):  # three through the API, two through the page, each "from" elsewhere
            spoofed = {"x-forwarded-for": f"10.0.0.{n}"}
            if n < 3:
                wrong = {"authorization": "Bearer guess", "x-memory-tenant": "t1", **spoofed}
                assert client.get(api, headers=wrong).status_code == 401
            else:
                resp = client.post("/admin/login", data={"token": "guess"}, headers=spoofed)
                assert resp.status_code == 401
        right = {"authorization": f"Bearer {ADMIN_TOKEN}", "x-memory-tenant": "t1"}
        locked = client.get(api, headers={**right, "x-forwarded-for": "10.9.9.9"})
        assert locked.status_code == 429 and locked.json()["error"]["code"] == "too_many_attempts"
        assert int(locked.headers["retry-after"]) > 0
        assert client.post("/admin/login", data={"token": ADMIN_TOKEN}).status_code == 429
        keys = client.get("/v1/memory/keys", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
        assert keys.status_code == 429


def test_behind_a_trusted_proxy_one_peer_cannot_lock_out_another(
    make_gateway: GatewayFactory,
) -> None:
    gw = make_gateway(trusted_proxies="127.0.0.1/32")
    api = f"{gw.base_url}/memory/settings"
    attacker = {"x-forwarded-for": "203.0.113.7"}
    admin = {"x-forwarded-for": "198.51.100.2"}
    for _ in range(5):
        wrong = {"authorization": "Bearer guess", "x-memory-tenant": "t1", **attacker}
        assert httpx.get(api, headers=wrong).status_code == 401
    right = {"authorization": f"Bearer {ADMIN_TOKEN}", "x-memory-tenant": "t1"}
    assert httpx.get(api, headers={**right, **attacker}).status_code == 429
    # a client-written left part of the header does not make the attacker someone else
    spoof = {"x-forwarded-for": "198.51.100.2, 203.0.113.7"}
    assert httpx.get(api, headers={**right, **spoof}).status_code == 429
    assert httpx.get(api, headers={**right, **admin}).status_code == 200
