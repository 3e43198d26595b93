"""Gateway keys on the admin page: issue, list, rotate and revoke them in a real headless
Chromium, and check with the openai SDK that each secret works, or stops working, as shown.

Every test runs its gateway on a Redis of its own: while any gateway key exists, every
gateway on that Redis requires one, so these keys must never reach the shared test Redis.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from playwright.sync_api import Browser, Page, expect

from gateway.storage.redis_server import EmbeddedRedis
from tests.conftest import Gateway, GatewayFactory, Shoot, Upstream
from tests.test_admin_page import ADMIN_TOKEN, _signed_in, sign_in
from tests.test_admin_views import DESKTOP, PHONE, _both_widths, _no_page_overflow

CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hello"}]}
OPERATOR_UPSTREAM = "sk-operator-default-for-keys"


@pytest.fixture
def own(make_gateway: GatewayFactory, tmp_path: Path) -> Iterator[Gateway]:
    """A gateway on a Redis of its own, stopped before that Redis is."""
    redis = EmbeddedRedis(tmp_path / "own-redis")
    redis.start()
    gw: Gateway | None = None
    try:
        gw = make_gateway(redis_url=redis.url, upstream_api_key=OPERATOR_UPSTREAM)
        yield gw
    finally:
        if gw is not None and gw.server is not None:
            gw.server.stop()
        redis.stop()


def _client(gw: Gateway, secret: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=secret, max_retries=0)


def _chat(gw: Gateway, secret: str) -> None:
    _client(gw, secret).chat.completions.create(**CHAT)  # type: ignore[call-overload]


def _refused(gw: Gateway, secret: str) -> None:
    with pytest.raises(openai.AuthenticationError):
        _chat(gw, secret)


def _memories(gw: Gateway, secret: str) -> list[dict[str, Any]]:
    resp = httpx.get(
        f"{gw.base_url}/memories",
        headers={"authorization": f"Bearer {secret}", "x-memory-user": "ann"},
    )
    assert resp.status_code == 200, resp.text
    return list(resp.json()["data"])


def _create_in_page(page: Page, label: str, tenant: str = "", upstream_key: str = "") -> str:
    """Fill the new-key form on the keys page and return the secret the answer shows."""
    form = page.locator("#new-key")
    form.get_by_label("Label").fill(label)
    if tenant:
        form.get_by_label("Tenant").select_option(tenant)
    if upstream_key:
        form.get_by_label("Upstream key (optional)").fill(upstream_key)
    with page.expect_response(
        lambda r: r.request.method == "POST" and r.url.endswith("/admin/keys")
    ) as answer:
        form.get_by_role("button", name="Create key").click()
    assert answer.value.status == 200
    assert answer.value.headers["cache-control"] == "no-store"  # never kept by a cache
    expect(page.get_by_role("heading", name=f"Key “{label}” created")).to_be_visible()
    expect(page.locator("#secret-warning")).to_contain_text("it will not be shown again")
    secret = page.locator("#secret").inner_text().strip()
    assert secret.startswith("mg-")
    return secret


def _row(page: Page, label: str) -> Any:
    return page.locator("#keys tbody tr", has_text=label)


def test_create_shows_the_secret_once_and_it_works_as_a_gateway_key(
    own: Gateway, upstream: Upstream, page: Page, shoot: Shoot
) -> None:
    sign_in(page, own)
    page.locator("header").get_by_role("link", name="Gateway keys").click()
    expect(page.get_by_role("heading", name="Gateway keys")).to_be_visible()
    expect(page.locator("#no-keys")).to_be_visible()

    own_upstream = "sk-team-upstream-kept-in-redis"
    secret = _create_in_page(page, "team alpha", upstream_key=own_upstream)
    summary = page.locator("#key-summary")
    expect(summary).to_contain_text("its own")
    assert own_upstream not in page.content()
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)  # the answer to the post, not fetched again
        if label == "phone":
            _no_page_overflow(page)
        shoot(page, f"key-created-{label}")
    page.set_viewport_size(DESKTOP)

    # The secret is a gateway key: the openai SDK's chat goes upstream with the key's own
    # upstream key, never with the gateway key itself.
    _chat(own, secret)
    sent = upstream.state.last("/chat/completions").headers
    assert sent["authorization"] == f"Bearer {own_upstream}"
    assert secret not in str(sent)
    _refused(own, "mg-not-a-key")  # keys are now required

    # Listed without its secret or its upstream key.
    page.get_by_role("link", name="Done: back to the gateway keys").click()
    row = _row(page, "team alpha")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("its own")
    expect(row.locator("td").nth(4)).to_have_text("never")  # not rotated yet
    html = page.content()
    assert secret not in html and own_upstream not in html
    _both_widths(page, f"{own.url}/admin/keys", "keys", shoot)


def test_no_page_ever_shows_a_secret_again(own: Gateway) -> None:
    with _signed_in(own) as admin:
        csrf = _csrf(admin.get("/admin/keys").text)
        made = admin.post(
            "/admin/keys",
            data={"csrf": csrf, "label": "ops", "upstream_key": "sk-ops-upstream-secret"},
        )
        assert made.status_code == 200 and made.headers["cache-control"] == "no-store"
        found = re.search(r'<code id="secret" class="secret">(mg-[^<]+)</code>', made.text)
        assert found is not None
        secret = found.group(1)
        assert "sk-ops-upstream-secret" not in made.text
        key_id = re.search(r'data-key="(key_[0-9a-f]+)"', admin.get("/admin/keys").text)
        assert key_id is not None
        for url in ("/admin/keys?lang=zh", "/admin", "/admin?q=ops", "/admin/keys?lang=en"):
            shown = admin.get(url)
            assert shown.status_code == 200
            assert secret not in shown.text and "sk-ops-upstream-secret" not in shown.text
        # The confirmation pages do not show it either.
        for action in ("rotate", "revoke"):
            asked = admin.post(f"/admin/keys/{key_id.group(1)}/{action}", data={"csrf": csrf})
            assert asked.status_code == 200 and "Please confirm" in asked.text
            assert secret not in asked.text and "sk-ops-upstream-secret" not in asked.text
        assert "This is the last gateway key" in asked.text  # revoking it ends keys-required
        _chat(own, secret)  # nothing was rotated or revoked without confirming


def test_rotate_keeps_the_tenant_and_the_old_secret_stops_working(
    own: Gateway, page: Page, shoot: Shoot
) -> None:
    sign_in(page, own)
    page.goto(f"{own.url}/admin/keys")
    first = _create_in_page(page, "team beta")
    stored = httpx.post(
        f"{own.base_url}/memories",
        headers={"authorization": f"Bearer {first}", "x-memory-user": "ann"},
        json={"content": "I prefer tabs over spaces", "type": "preference"},
    )
    assert stored.status_code == 201, stored.text
    tenant = stored.json()["tenant"]

    # A second key for the same tenant (another developer), chosen from the list.
    page.goto(f"{own.url}/admin/keys")
    colleague = _create_in_page(page, "team beta 2", tenant=tenant)
    expect(page.locator("#key-summary")).to_contain_text(tenant)
    assert [m["id"] for m in _memories(own, colleague)] == [stored.json()["id"]]

    page.goto(f"{own.url}/admin/keys")
    _row(page, "team beta 2").get_by_role("button", name="Rotate").click()
    expect(page.get_by_text("Rotate gateway key “team beta 2”?")).to_be_visible()
    page.get_by_role("link", name="Cancel").click()
    _chat(own, colleague)  # nothing changed without confirming

    _row(page, "team beta 2").get_by_role("button", name="Rotate").click()
    # measured once the confirmation page is there, not while the click navigates
    expect(page.get_by_text("Rotate gateway key “team beta 2”?")).to_be_visible()
    page.set_viewport_size(PHONE)
    _no_page_overflow(page)
    shoot(page, "key-rotate-confirm-phone")
    page.set_viewport_size(DESKTOP)
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.get_by_role("button", name="Yes, rotate").click()
    assert answer.value.headers["cache-control"] == "no-store"
    expect(page.get_by_role("heading", name="New secret for key “team beta 2”")).to_be_visible()
    expect(page.locator("#secret-warning")).to_contain_text("it will not be shown again")
    renewed = page.locator("#secret").inner_text().strip()
    assert renewed.startswith("mg-") and renewed != colleague
    expect(page.locator("#key-summary")).to_contain_text(tenant)
    shoot(page, "key-rotated-desktop")

    _refused(own, colleague)
    _chat(own, renewed)
    assert [m["id"] for m in _memories(own, renewed)] == [stored.json()["id"]]
    _chat(own, first)  # the other key of the tenant is untouched

    page.goto(f"{own.url}/admin/keys")
    row = _row(page, "team beta 2")
    expect(row).to_contain_text(tenant)
    expect(row.locator("td").nth(4)).not_to_have_text("never")
    assert renewed not in page.content() and colleague not in page.content()


def test_revoke_stops_the_key(own: Gateway, page: Page) -> None:
    sign_in(page, own)
    page.goto(f"{own.url}/admin/keys")
    # A key that stays: with no key left, the gateway would stop requiring one.
    kept = _create_in_page(page, "keeper")
    page.goto(f"{own.url}/admin/keys")
    doomed = _create_in_page(page, "leaver")
    _chat(own, doomed)

    page.goto(f"{own.url}/admin/keys")
    _row(page, "leaver").get_by_role("button", name="Revoke").click()
    expect(page.get_by_text("Revoke gateway key “leaver”?")).to_be_visible()
    page.get_by_role("link", name="Cancel").click()
    _chat(own, doomed)  # nothing changed without confirming

    _row(page, "leaver").get_by_role("button", name="Revoke").click()
    expect(page.locator("#last-key")).to_have_count(0)  # another key stays
    page.get_by_role("button", name="Yes, revoke").click()
    expect(page.get_by_role("status")).to_have_text("Key revoked: its secret no longer works.")
    expect(_row(page, "leaver")).to_have_count(0)
    expect(_row(page, "keeper")).to_have_count(1)
    _refused(own, doomed)
    _chat(own, kept)


def test_the_chinese_keys_page_at_phone_width(own: Gateway, browser: Browser, shoot: Shoot) -> None:
    context = browser.new_context(locale="zh-CN", viewport=PHONE)
    try:
        page = context.new_page()
        page.goto(f"{own.url}/admin")
        page.get_by_label("管理员令牌").fill(ADMIN_TOKEN)
        page.get_by_role("button", name="登录").click()
        page.locator("header").get_by_role("link", name="网关密钥").click()
        page.locator("#new-key").get_by_label("标签").fill("团队密钥")
        page.get_by_role("button", name="创建密钥").click()
        expect(page.locator("#secret-warning")).to_contain_text("它不会再次显示")
        _no_page_overflow(page)
        shoot(page, "key-created-zh-phone")
        page.get_by_role("link", name="完成：返回网关密钥").click()
        expect(page.locator("#keys tbody tr")).to_have_count(1)
        _no_page_overflow(page)
        shoot(page, "keys-zh-phone")
    finally:
        context.close()


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found is not None
    return found.group(1)


def _key_ids(gw: Gateway) -> list[str]:
    admin = {"authorization": "Bearer test-admin-token"}
    return [k["id"] for k in httpx.get(f"{gw.base_url}/memory/keys", headers=admin).json()["data"]]


def test_key_forms_need_the_session_and_the_csrf_token(own: Gateway) -> None:
    with httpx.Client(base_url=own.url) as anon:
        assert anon.get("/admin/keys").status_code == 303  # to the sign-in form
        assert anon.post("/admin/keys", data={"label": "x"}).status_code == 303
    assert _key_ids(own) == []
    with _signed_in(own) as admin:
        assert admin.post("/admin/keys", data={"label": "x"}).status_code == 400
        forged = admin.post("/admin/keys", data={"label": "x", "csrf": "0" * 64})
        assert forged.status_code == 400 and "form expired" in forged.text
        assert _key_ids(own) == []
        csrf = _csrf(admin.get("/admin/keys").text)
        made = admin.post("/admin/keys", data={"csrf": csrf, "label": "x"})
        assert made.status_code == 200
        (key_id,) = _key_ids(own)
        secret = re.search(r'id="secret" class="secret">(mg-[^<]+)<', made.text)
        assert secret is not None
        for action in ("rotate", "revoke"):
            for data in ({"confirm": "yes"}, {"confirm": "yes", "csrf": "f" * 64}):
                resp = admin.post(f"/admin/keys/{key_id}/{action}", data=data)
                assert resp.status_code == 400
        _chat(own, secret.group(1))  # neither rotated nor revoked
        assert admin.post("/admin/logout", data={"csrf": csrf}).status_code == 303
        # signed out, a form with the old token does nothing
        resp = admin.post(f"/admin/keys/{key_id}/revoke", data={"csrf": csrf, "confirm": "yes"})
        assert resp.status_code == 303 and resp.headers["location"] == "/admin"
    assert _key_ids(own) == [key_id]


def test_bad_input_comes_back_as_a_page(own: Gateway) -> None:
    with _signed_in(own) as admin:
        csrf = _csrf(admin.get("/admin/keys").text)
        upstream_key = "sk-typed-upstream-never-echoed"
        bad = admin.post(
            "/admin/keys",
            data={"csrf": csrf, "label": "x" * 65, "upstream_key": upstream_key},
        )
        assert bad.status_code == 422 and "The label must be 1 to 64 characters" in bad.text
        assert upstream_key not in bad.text and "Traceback" not in bad.text
        unknown = admin.post(
            "/admin/keys", data={"csrf": csrf, "label": "ok", "tenant": "t-made-up"}
        )
        assert unknown.status_code == 422 and "Choose the tenant from the list" in unknown.text
        assert _key_ids(own) == []
        missing = admin.post("/admin/keys/key_0123456789abcdef/rotate", data={"csrf": csrf})
        assert missing.status_code == 404 and "No gateway key" in missing.text
        odd = admin.post("/admin/keys/not-a-key/revoke", data={"csrf": csrf, "confirm": "yes"})
        assert odd.status_code == 404 and "<html" in odd.text
        zh = admin.post(
            "/admin/keys?lang=zh", data={"csrf": csrf, "label": "", "upstream_key": "x"}
        )
        assert zh.status_code == 422 and "标签须为 1 到 64 个字符" in zh.text
