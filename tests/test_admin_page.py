"""The admin page in a real headless Chromium (Debian's package, driven by Playwright), plus
its sign-in and CSRF rules over plain HTTP."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import httpx
from playwright.sync_api import Page, expect

from gateway.clock import ManualClock, SystemClock
from gateway.memory.identity import tenant_for_key
from tests.conftest import Gateway, GatewayFactory
from tests.test_mining_e2e import memories, pending
from tests.test_recall import User

ADMIN_TOKEN = "test-admin-token"  # what conftest's make_gateway configures


def sign_in(page: Page, gw: Gateway) -> None:
    page.goto(f"{gw.url}/admin")
    page.get_by_label("Admin token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Tenants and users")).to_be_visible()


def open_user(page: Page, me: User) -> None:
    row = page.locator("#owners tr", has_text=me.headers["x-memory-user"]).filter(
        has_text=tenant_for_key(me.key)
    )
    row.get_by_role("link", name="Open").click()
    expect(page.get_by_role("heading", name=f"User: {me.headers['x-memory-user']}")).to_be_visible()


def test_sign_in_confirm_a_candidate_see_it_delete_it(gateway: Gateway, page: Page) -> None:
    """The issue's walk-through: sign in, confirm a candidate, see it listed, delete it, and
    check through the API that it is gone (and no longer injected)."""
    me = User(gateway)
    me.ask("以后都用中文回答我")
    (cand,) = pending(me, 1)

    sign_in(page, gateway)
    open_user(page, me)
    row = page.locator(f"tr[data-candidate='{cand['id']}']")
    expect(row.get_by_label("Content")).to_have_value(cand["content"])
    row.get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("status")).to_have_text("Candidate confirmed: it is now a memory.")
    expect(page.locator("tr[data-candidate]")).to_have_count(0)

    (memory,) = memories(me)
    assert memory["content"] == cand["content"] and memory["source"] == "user_stated"
    listed = page.locator(f"tr[data-memory='{memory['id']}']")
    expect(listed.get_by_label("Content")).to_have_value(cand["content"])
    expect(listed).to_contain_text("preference")
    assert me.injected(me.ask("你应该用什么语言回答我？")) == [memory["id"]]

    page.reload()
    page.locator(f"tr[data-memory='{memory['id']}']").get_by_role("button", name="Delete").click()
    expect(page.locator("#doomed")).to_contain_text(cand["content"])  # asked first
    page.get_by_role("button", name="Yes, delete").click()
    expect(page.get_by_role("status")).to_have_text("Memory deleted.")
    expect(page.locator(f"tr[data-memory='{memory['id']}']")).to_have_count(0)
    assert memories(me) == []
    gone = httpx.get(f"{gateway.base_url}/memories/{memory['id']}", headers=me.headers)
    assert gone.status_code == 404
    assert me.injected(me.ask("你应该用什么语言回答我？")) == []


def test_edit_then_confirm_pause_and_trace(gateway: Gateway, page: Page) -> None:
    me = User(gateway)
    me.ask("I prefer answers with bullet points")
    (cand,) = pending(me, 1)
    sign_in(page, gateway)
    open_user(page, me)

    row = page.locator(f"tr[data-candidate='{cand['id']}']")
    row.get_by_label("Content").fill("I prefer answers as short bullet lists")
    row.get_by_role("button", name="Confirm").click()
    expect(page.get_by_role("status")).to_contain_text("Candidate confirmed")
    (memory,) = memories(me)
    assert memory["content"] == "I prefer answers as short bullet lists"

    page.get_by_role("button", name="Pause recall").click()
    expect(page.get_by_role("status")).to_have_text("Recall paused.")
    settings = httpx.get(f"{gateway.base_url}/memory/settings", headers=me.headers).json()
    assert settings["recall_paused"] is True
    assert me.injected(me.ask("How should you format answers for me?")) == []
    page.get_by_role("button", name="Resume recall").click()
    expect(page.get_by_role("status")).to_have_text("Recall resumed.")
    raw = me.ask("How should you format answers for me?")
    assert me.injected(raw) == [memory["id"]]

    # The trace viewer: the answer's candidates, scores, decisions and the memory's text.
    trace_id = raw.headers["x-memory-trace-id"]
    me.trace(raw)  # written off the response path: wait for it
    page.reload()
    page.get_by_role("link", name=trace_id).click()
    candidate = page.locator(f"#trace-candidates tr[data-memory='{memory['id']}']")
    expect(candidate).to_contain_text("I prefer answers as short bullet lists")
    expect(candidate).to_contain_text("injected")
    expect(page.locator("table").first).to_contain_text(memory["id"])


def test_edit_a_memory_and_delete_a_project_after_confirming(gateway: Gateway, page: Page) -> None:
    me = User(gateway)
    keep = me.remember(
        "We deploy the billing service on Fridays",
        type="project",
        scope="project",
        project_id="billing",
    )
    drop = me.remember("这个项目用 FastAPI", type="project", scope="project", project_id="alpha")
    mine = me.remember("我喜欢简洁的回答")
    sign_in(page, gateway)
    open_user(page, me)

    row = page.locator(f"tr[data-memory='{mine}']")
    row.get_by_label("Content").fill("我喜欢简洁、分点的回答")
    row.get_by_label("Expires").fill("2099-12-31")
    row.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Saved.")
    edited = httpx.get(f"{gateway.base_url}/memories/{mine}", headers=me.headers).json()
    assert edited["content"] == "我喜欢简洁、分点的回答"
    assert edited["expires_at"].startswith("2099-12-31")

    danger = page.locator("#danger")
    danger.get_by_label("Project").select_option("alpha")
    danger.get_by_role("button", name="Delete this project's memories").click()
    expect(page.get_by_text("Delete 1 memories of project “alpha”")).to_be_visible()
    page.get_by_role("link", name="Cancel").click()
    assert {m["id"] for m in memories(me)} == {keep, drop, mine}  # nothing without confirming

    page.locator("#danger").get_by_label("Project").select_option("alpha")
    page.locator("#danger").get_by_role("button", name="Delete this project's memories").click()
    page.get_by_role("button", name="Yes, delete").click()
    expect(page.get_by_role("status")).to_have_text("The project's memories were deleted.")
    assert {m["id"] for m in memories(me)} == {keep, mine}

    page.get_by_role("button", name="Delete all of this user's memories").click()
    expect(page.get_by_text("Delete all 2 memories of user")).to_be_visible()
    page.get_by_role("button", name="Yes, delete").click()
    # Nothing is left of this user: back to the list, which says so.
    expect(page.get_by_role("status")).to_have_text("All memories of this user were deleted.")
    expect(page.get_by_role("heading", name="Tenants and users")).to_be_visible()
    assert memories(me) == []


def test_reject_in_chinese_ui(gateway: Gateway, page: Page) -> None:
    me = User(gateway)
    me.ask("我喜欢用表格展示对比")
    (cand,) = pending(me, 1)
    page.goto(f"{gateway.url}/admin?lang=zh")
    page.get_by_label("管理员令牌").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="登录").click()
    open_link = page.locator("#owners tr", has_text=tenant_for_key(me.key)).get_by_role(
        "link", name="查看"
    )
    open_link.click()
    page.locator(f"tr[data-candidate='{cand['id']}']").get_by_role("button", name="拒绝").click()
    expect(page.get_by_role("status")).to_have_text("候选已拒绝，不会再次提出。")
    assert pending(me, 0, wait=0) == []
    assert memories(me) == []


# -- sign-in and CSRF, over plain HTTP ---------------------------------------------------------


@contextmanager
def _signed_in(gw: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url) as client:
        resp = client.post("/admin/login", data={"token": ADMIN_TOKEN})
        assert resp.status_code == 303 and "memgate_admin" in client.cookies
        yield client


def test_wrong_token_and_forged_cookies_are_refused(gateway: Gateway) -> None:
    me = User(gateway)
    me.remember("I like tea")
    user_url = f"/admin/users/{tenant_for_key(me.key)}/{me.headers['x-memory-user']}"
    with httpx.Client(base_url=gateway.url) as anon:
        resp = anon.post("/admin/login", data={"token": "not-the-token"})
        assert resp.status_code == 401 and "not the admin token" in resp.text
        assert "memgate_admin" not in anon.cookies
        assert anon.get(user_url).status_code == 303  # to the sign-in form
        anon.cookies.set("memgate_admin", "9999999999.deadbeef", path="/admin")
        assert anon.get(user_url).status_code == 303
        assert "I like tea" not in anon.get("/admin").text
    with _signed_in(gateway) as admin:
        page = admin.get(user_url)
        assert page.status_code == 200 and "I like tea" in page.text
        # The session cookie is not the token, and the token never appears in the page.
        assert ADMIN_TOKEN not in admin.cookies["memgate_admin"] and ADMIN_TOKEN not in page.text
        # No script may run, no site may frame it, no cache may keep it.
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert page.headers["cache-control"] == "no-store"


def test_forms_without_the_csrf_token_change_nothing(gateway: Gateway) -> None:
    me = User(gateway)
    memory_id = me.remember("I like tea")
    base = f"/admin/users/{tenant_for_key(me.key)}/{me.headers['x-memory-user']}"
    with _signed_in(gateway) as admin:
        resp = admin.post(f"{base}/memories/{memory_id}/delete", data={"csrf": "forged"})
        assert resp.status_code == 400 and "form expired" in resp.text
        resp = admin.post(f"{base}/delete", data={"all": "true", "confirm": "yes"})
        assert resp.status_code == 400
        assert [m["id"] for m in memories(me)] == [memory_id]
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', admin.get(base).text)
        assert csrf is not None
        asked = admin.post(f"{base}/memories/{memory_id}/delete", data={"csrf": csrf.group(1)})
        assert asked.status_code == 200 and "Please confirm" in asked.text
        assert [m["id"] for m in memories(me)] == [memory_id]
        resp = admin.post(
            f"{base}/memories/{memory_id}/delete", data={"csrf": csrf.group(1), "confirm": "yes"}
        )
        assert resp.status_code == 303
        assert memories(me) == []


def test_bad_ids_and_gate_refusals_render_a_page_not_a_trace(gateway: Gateway) -> None:
    me = User(gateway)
    memory_id = me.remember("I like tea")
    base = f"/admin/users/{tenant_for_key(me.key)}/{me.headers['x-memory-user']}"
    with _signed_in(gateway) as admin:
        bad = admin.get("/admin/users/has:colon/u1")
        assert bad.status_code == 400 and "<html" in bad.text and "Traceback" not in bad.text
        missing = admin.get(f"{base}/memories/mem_doesnotexist")
        assert missing.status_code == 404 and "No memory" in missing.text
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', admin.get(base).text)
        assert csrf is not None
        key = "sk-proj-" + "Zq8Xw7Vu6Ts5Rp4On3Ml2Kj1Ih0Gf9Ed"
        refused = admin.post(
            f"{base}/memories/{memory_id}/edit",
            data={"csrf": csrf.group(1), "content": f"my key is {key}", "type": "preference"},
        )
        assert refused.status_code == 422 and "not saved" in refused.text
        assert key not in refused.text
        assert [m["content"] for m in memories(me)] == ["I like tea"]


def test_filters_by_status_and_project(gateway: Gateway) -> None:
    me = User(gateway)
    old = me.remember("I live in Berlin", type="profile")
    new = me.remember("I live in Lisbon", type="profile")  # same slot: supersedes Berlin
    work = me.remember(
        "This project deploys on Fridays", type="project", scope="project", project_id="alpha"
    )
    base = f"/admin/users/{tenant_for_key(me.key)}/{me.headers['x-memory-user']}"
    with _signed_in(gateway) as admin:
        rows = re.compile(r'data-memory="(mem_[0-9a-f]+)"')
        everything = admin.get(base)
        assert set(rows.findall(everything.text)) == {old, new, work}
        superseded = admin.get(base, params={"status": "superseded"})
        assert superseded.status_code == 200 and rows.findall(superseded.text) == [old]
        assert '<option value="superseded" selected>' in superseded.text
        alpha = admin.get(base, params={"project_id": "alpha"})
        assert alpha.status_code == 200 and rows.findall(alpha.text) == [work]


def test_guessing_the_token_locks_the_address_out(make_gateway: GatewayFactory) -> None:
    clock = ManualClock(SystemClock().now())
    gw = make_gateway(clock=clock)
    with httpx.Client(base_url=gw.url) as client:
        for _ in range(5):
            assert client.post("/admin/login", data={"token": "guess"}).status_code == 401
        locked = client.post("/admin/login", data={"token": ADMIN_TOKEN})
        assert locked.status_code == 429 and "try again in 60 s" in locked.text
        assert "memgate_admin" not in client.cookies  # not even the right token gets in
        clock.advance(timedelta(seconds=61))
        assert client.post("/admin/login", data={"token": ADMIN_TOKEN}).status_code == 303
        assert "memgate_admin" in client.cookies
