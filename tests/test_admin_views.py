"""What an operator sees on the admin page: paging and search, tenant names, the charts,
refused edits, dates, history, translations and phone widths, in a real headless Chromium.

Screenshots of every page at desktop and phone width go to ``MEMGATE_SCREENSHOT_DIR`` when it
is set (for review by eye); without it none is taken.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from babel.messages.extract import extract_from_dir
from playwright.sync_api import Browser, Page, expect

from gateway.clock import SystemClock
from gateway.http.admin_text import catalog_path
from gateway.memory.identity import tenant_for_key
from gateway.memory.policy import load_policy
from tests.conftest import Gateway, GatewayFactory, Shoot
from tests.test_admin_page import ADMIN_TOKEN, _signed_in, sign_in
from tests.test_mining_e2e import memories
from tests.test_recall import User

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1366, "height": 900}
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


def _base(me: User) -> str:
    return f"/admin/users/{tenant_for_key(me.key)}/{me.headers['x-memory-user']}"


def _no_page_overflow(page: Page) -> None:
    page.wait_for_load_state()  # a page still navigating has no document to measure
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"{page.url}: page is {width} px wide"  # type: ignore[index]


def _both_widths(page: Page, url: str, name: str, shoot: Shoot) -> None:
    """Open ``url`` at desktop and phone width: no horizontal page overflow on the phone,
    a full-page screenshot of each."""
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        page.goto(url)
        if label == "phone":
            _no_page_overflow(page)
        shoot(page, f"{name}-{label}")


# -- translations ------------------------------------------------------------------------------


def test_a_tenant_filter_never_renders_a_python_object(gateway: Gateway) -> None:
    """`?tenant=zzz` once printed `<built-in method clear of dict object>`: words were keys
    of a dict, and `t.clear` is the dict's method."""
    with _signed_in(gateway) as admin:
        for lang in ("en", "zh"):
            resp = admin.get("/admin", params={"tenant": "zzz", "lang": lang})
            assert resp.status_code == 200
            assert "built-in method" not in resp.text and "<bound" not in resp.text
            assert ("Show all" if lang == "en" else "显示全部") in resp.text


def test_every_message_of_the_page_has_a_chinese_translation() -> None:
    """Every message id in the templates and the admin modules is in the Chinese catalog,
    with the same {placeholders}."""
    from babel.messages.pofile import read_po

    with catalog_path("zh").open("rb") as po:
        catalog = read_po(po, locale="zh")
    root = Path(__file__).resolve().parent.parent / "gateway"
    found = set()
    for _file, _line, message, _comments, _context in extract_from_dir(
        str(root),
        method_map=[
            ("templates/admin/**.html", "jinja2"),
            ("http/admin*.py", "python"),
        ],
        keywords={"_": None, "N_": None, "gettext": None},
    ):
        found.add(message)
    assert len(found) > 100
    for message in found:
        entry = catalog.get(message)
        assert entry is not None and entry.string, f"not translated: {message!r}"
        placeholders = set(re.findall(r"\{\w+\}", message))
        assert set(re.findall(r"\{\w+\}", str(entry.string))) == placeholders, message


# -- owners: names, search, pages --------------------------------------------------------------


@pytest.fixture
def keyed(make_gateway: GatewayFactory) -> Iterator[Gateway]:
    """A gateway with gateway keys; they are revoked afterwards (the test Redis is shared,
    and keys switch every gateway on it to keys-only)."""
    gw = make_gateway()
    try:
        yield gw
    finally:
        for key in httpx.get(f"{gw.base_url}/memory/keys", headers=ADMIN).json()["data"]:
            httpx.delete(f"{gw.base_url}/memory/keys/{key['id']}", headers=ADMIN)


def test_owners_are_named_searched_and_paged(keyed: Gateway, page: Page, shoot: Shoot) -> None:
    stamp = str(int(SystemClock().now().timestamp() * 1000))
    label = f"team-{stamp}"
    made = httpx.post(f"{keyed.base_url}/memory/keys", headers=ADMIN, json={"label": label})
    assert made.status_code == 201, made.text
    key, tenant = made.json()["key"], made.json()["tenant"]
    users = [f"ops{stamp}-{n}" for n in range(3)]
    for user in users:
        resp = httpx.post(
            f"{keyed.base_url}/memories",
            headers={"authorization": f"Bearer {key}", "x-memory-user": user},
            json={"content": f"I like tea number {user}", "type": "preference"},
        )
        assert resp.status_code == 201, resp.text

    sign_in(page, keyed)
    page.get_by_label("Search tenant, name or user").fill(label)  # by the key's label
    page.get_by_role("button", name="Search").click()
    rows = page.locator("#owners tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first.locator(".tenant-name")).to_have_text(label)
    expect(rows.first).to_contain_text(tenant)

    page.goto(f"{keyed.url}/admin?q=ops{stamp}&per_page=2")
    expect(rows).to_have_count(2)
    expect(page.get_by_text("1–2 of 3")).to_be_visible()
    page.get_by_role("link", name="Next").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(users[2])
    expect(page.get_by_text("Page 2 of 2")).to_be_visible()
    _both_widths(page, f"{keyed.url}/admin?q=ops{stamp}", "home", shoot)

    page.set_viewport_size(DESKTOP)
    page.goto(f"{keyed.url}/admin?q=nobody-{stamp}")
    expect(page.get_by_text("Nobody matches.")).to_be_visible()


def test_owners_are_not_capped(gateway: Gateway) -> None:
    """Every owner is listed, however many: the list is paged, never cut at a fixed count."""
    stamp = str(int(SystemClock().now().timestamp() * 1000))
    key = f"sk-many-{stamp}"
    for n in range(3):
        resp = httpx.post(
            f"{gateway.base_url}/memories",
            headers={"authorization": f"Bearer {key}", "x-memory-user": f"m{n}"},
            json={"content": f"I like tea {n}", "type": "preference"},
        )
        assert resp.status_code == 201
    tenant = tenant_for_key(key)
    with _signed_in(gateway) as admin:
        listed = admin.get("/admin", params={"tenant": tenant, "per_page": 1, "page": 3})
        assert listed.status_code == 200 and ">m2</td>" in listed.text
        assert "Page 3 of 3" in listed.text
        # a page past the end shows the last one
        assert (
            ">m2</td>"
            in admin.get("/admin", params={"tenant": tenant, "per_page": 1, "page": 9}).text
        )


# -- one user ----------------------------------------------------------------------------------


def test_unknown_users_get_404(gateway: Gateway) -> None:
    with _signed_in(gateway) as admin:
        resp = admin.get("/admin/users/nobody-tenant/nobody-user")
        assert resp.status_code == 404 and "No memories, candidates or answers" in resp.text


def test_memories_are_searched_by_content_and_paged(gateway: Gateway, page: Page) -> None:
    me = User(gateway)
    ids = [me.remember(f"I like {fruit}") for fruit in ("apples", "pears", "plums")]
    me.remember("We deploy on Fridays", type="project", scope="project", project_id="alpha")
    sign_in(page, gateway)
    base = f"{gateway.url}{_base(me)}"
    page.goto(f"{base}?per_page=2")
    listed = page.locator("#memory-list tbody tr")
    expect(listed).to_have_count(2)
    page.get_by_role("link", name="Next").click()
    expect(listed).to_have_count(2)
    page.get_by_label("Content contains").fill("PEARS")
    page.get_by_role("button", name="Filter").click()
    expect(listed).to_have_count(1)
    expect(page.locator(f"tr[data-memory='{ids[1]}']")).to_have_count(1)
    page.goto(f"{base}?project_id=alpha&q=friday")
    expect(listed).to_have_count(1)
    expect(listed.first.get_by_label("Content")).to_have_value("We deploy on Fridays")


def test_a_refused_edit_keeps_the_text_and_names_the_rule(
    gateway: Gateway, page: Page, shoot: Shoot
) -> None:
    me = User(gateway)
    memory_id = me.remember("I like green tea")
    sign_in(page, gateway)
    page.goto(f"{gateway.url}{_base(me)}?q=green")
    row = page.locator(f"tr[data-memory='{memory_id}']")
    typed = "I like green tea with a little honey, not sugar"
    row.get_by_label("Content").fill(typed)
    row.get_by_label("Expires").fill("2001-01-31")
    row.get_by_role("button", name="Save").click()
    refusal = page.locator("#refusal")
    expect(refusal).to_contain_text("The edit was not saved")
    expect(refusal).to_contain_text("rule “invalid”")
    expect(refusal).to_contain_text("the expiry date is not in the future")
    row = page.locator(f"tr[data-memory='{memory_id}']")
    expect(row.get_by_label("Content")).to_have_value(typed)
    expect(row.get_by_label("Expires")).to_have_value("2001-01-31")
    assert "q=green" in page.locator("input[name=view]").first.get_attribute("value")  # type: ignore[operator]
    shoot(page, "refused-desktop")
    assert [m["content"] for m in memories(me)] == ["I like green tea"]

    # A secret: the rule says why; the text comes back without the secret.
    secret = "sk-proj-" + "Zq8Xw7Vu6Ts5Rp4On3Ml2Kj1Ih0Gf9Ed"
    row.get_by_label("Expires").fill("")
    row.get_by_label("Content").fill(f"my deploy key is {secret} keep it")
    row.get_by_role("button", name="Save").click()
    expect(page.locator("#refusal")).to_contain_text("rule “sensitive”")
    kept = page.locator(f"tr[data-memory='{memory_id}']").get_by_label("Content").input_value()
    assert kept.startswith("my deploy key is ") and kept.endswith(" keep it")
    assert secret not in page.content()

    # Fixed, it saves: the date is written YYYY-MM-DD, in a plain text field.
    row = page.locator(f"tr[data-memory='{memory_id}']")
    row.get_by_label("Content").fill(typed)
    row.get_by_label("Expires").fill("2099-12-31")
    row.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Saved.")
    field = page.locator(f"tr[data-memory='{memory_id}']").get_by_label("Expires")
    expect(field).to_have_value("2099-12-31")
    assert field.get_attribute("type") == "text"
    assert [m["content"] for m in memories(me)] == [typed]


def test_history_shows_values_and_changes(gateway: Gateway, page: Page, shoot: Shoot) -> None:
    me = User(gateway)
    memory_id = me.remember("I like black coffee")
    edited = httpx.patch(
        f"{gateway.base_url}/memories/{memory_id}",
        headers=me.headers,
        json={"content": "I like black coffee, no sugar"},
    )
    assert edited.status_code == 200, edited.text
    sign_in(page, gateway)
    url = f"{gateway.url}{_base(me)}/memories/{memory_id}"
    page.goto(url)
    changes = page.locator("#history .change")
    expect(changes.filter(has_text="source")).to_have_text("source: user_stated")
    expect(changes.filter(has_text="content").first).to_have_text("content: I like black coffee")
    expect(changes.filter(has_text="→").first).to_have_text(
        "content: I like black coffee → I like black coffee, no sugar"
    )
    for text in changes.all_inner_texts():
        assert not text.rstrip().endswith("→"), text
    _both_widths(page, url, "memory", shoot)


def _answers(me: User) -> tuple[str, str, str]:
    """A standing memory injected and a topical one dropped, in one traced answer."""
    kept = me.remember("I prefer answers as short bullet lists")
    dropped = me.remember("My cat is called Miso", type="profile")
    raw = me.ask("How should you format answers for me?")
    assert me.injected(raw) == [kept]
    me.trace(raw)  # written off the response path: wait for it
    return kept, dropped, raw.headers["x-memory-trace-id"]


def test_the_user_page_charts_a_day_of_recall(gateway: Gateway, page: Page, shoot: Shoot) -> None:
    me = User(gateway)
    _kept, _dropped, trace_id = _answers(me)
    sign_in(page, gateway)
    url = f"{gateway.url}{_base(me)}"
    page.goto(url)
    today = SystemClock().now().date().isoformat()
    chart = page.locator("#daily-chart svg")
    expect(chart).to_be_visible()
    titles = [t.text_content() for t in chart.locator("rect title").all()]
    assert f"{today}: 1 injected" in titles
    assert any(t.startswith(f"{today}: ") and "dropped" in t for t in titles), titles
    expect(page.locator("#daily-chart figcaption")).to_contain_text("1 answers")
    answers = page.locator("#traces tbody tr")
    expect(answers).to_have_count(1)
    expect(answers.first).to_contain_text(trace_id)
    _both_widths(page, url, "user", shoot)


def test_a_trace_draws_scores_against_the_thresholds(
    gateway: Gateway, page: Page, shoot: Shoot
) -> None:
    me = User(gateway)
    _kept, dropped, trace_id = _answers(me)
    trace = httpx.get(f"{gateway.base_url}/memory/traces/{trace_id}", headers=me.headers).json()
    policy = load_policy()
    bar = policy.recall.relevance
    sign_in(page, gateway)
    url = f"{gateway.url}{_base(me)}/traces/{trace_id}"
    page.goto(url)
    chart = page.locator("#score-chart svg")
    expect(chart).to_be_visible()
    # thresholds are cosines, drawn on the same 0..1 axis as the cosine bars
    left, right = 40.0, 628.0
    lines = {
        float(x): line
        for line in chart.locator("line.threshold").all()
        if (x := line.get_attribute("x1")) is not None
    }
    for value in (bar.similarity, bar.shared_terms_min_similarity):
        assert any(abs(x - (left + (right - left) * value)) < 0.2 for x in lines), (value, lines)
    candidates = trace["candidates"]
    for n, cand in enumerate(candidates, start=1):
        vector = next(
            r
            for r in chart.locator("rect").all()
            if (r.text_content() or "").startswith(f"#{n} vector")
        )
        width = float(vector.get_attribute("width") or 0)
        expected = (right - left) * min(max(cand["scores"]["vector"], 0.0), 1.0)
        assert abs(width - expected) < 0.2
        row = page.locator(f"#trace-candidates tr[data-memory='{cand['id']}']")
        scores = row.locator("td.scores")
        # the keyword score shown is the saturated one (0..1), not raw BM25
        expect(scores).to_contain_text(
            " / ".join(str(cand["scores"][k]) for k in ("vector", "text_norm", "fused"))
        )
    assert any(c["id"] == dropped and c["reason"] for c in candidates)
    _both_widths(page, url, "trace", shoot)


def test_the_chinese_page_at_phone_width(gateway: Gateway, browser: Browser, shoot: Shoot) -> None:
    me = User(gateway)
    _answers(me)
    context = browser.new_context(locale="zh-CN", viewport=PHONE)
    try:
        page = context.new_page()
        page.goto(f"{gateway.url}/admin")
        page.get_by_label("管理员令牌").fill(ADMIN_TOKEN)
        page.get_by_role("button", name="登录").click()
        page.goto(f"{gateway.url}{_base(me)}")
        expect(page.get_by_role("heading", name="召回")).to_be_visible()
        _no_page_overflow(page)
        shoot(page, "user-zh-phone")
    finally:
        context.close()
