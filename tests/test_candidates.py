"""The candidate queue and the durable mining stream, against a real Redis."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from gateway.errors import Conflict, NotFound, WriteRefused
from gateway.memory.background import Background
from gateway.memory.candidates import CandidateQueue
from gateway.memory.identity import Identity
from gateway.memory.memories import Memories
from gateway.memory.mine import Proposal, screen
from gateway.memory.pipeline import Exchange, MemoryFlow
from gateway.memory.policy import Policy, load_policy
from gateway.memory.recall import Recaller
from gateway.observability.metrics import Metrics
from gateway.storage.candidates import candidate_keys
from gateway.storage.store import Store
from tests.secret_corpus import SECRET_VALUES

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="session")
def policy() -> Policy:
    return load_policy()


_counter = iter(range(10**9))


def who(user: str = "alice", tenant: str | None = None, project: str | None = None) -> Identity:
    n = next(_counter)
    return Identity(
        tenant=tenant or f"c{time.time_ns()}{n}",
        user=user,
        project_id=project,
        mode="on",
        trace_id=f"tr_cand{n}",
    )


def queue_for(service: Memories, **kw: object) -> CandidateQueue:
    stream = f"memgate:test-mine:{uuid.uuid4().hex}"  # each test its own stream
    return CandidateQueue(service.store, service.policy, service.clock, stream=stream, **kw)  # type: ignore[arg-type]


def proposal(policy: Policy, content: str, type_: str = "preference") -> Proposal:
    p, refused = screen(Proposal(content=content, type=type_, evidence=content), policy)
    assert refused is None and p is not None
    return p


async def test_enqueue_list_confirm_creates_memory(service: Memories, policy: Policy) -> None:
    q, me = queue_for(service), who()
    assert await q.enqueue(me, proposal(policy, "以后都用中文回答我"), trace_id="tr_x1") == "queued"
    [cand] = await q.list(me)
    assert cand["id"].startswith("cand_") and cand["slot"] == "language"
    assert cand["evidence"] == {"trace_id": "tr_x1", "excerpt": "以后都用中文回答我"}
    assert await q.pending_count(me) == 1
    assert await service.list(me) == []  # nothing stored before the user confirms
    out = await q.confirm(me, cand["id"], service)
    assert out.created and out.memory.status == "active" and out.memory.confirmed_at
    assert out.memory.source == "user_stated" and out.memory.evidence_trace == "tr_x1"
    assert [m.id for m in await service.list(me, status="active")] == [out.memory.id]
    assert await q.list(me) == [] and await q.pending_count(me) == 0
    with pytest.raises(NotFound):
        await q.get(me, cand["id"])


async def test_confirm_with_edits(service: Memories, policy: Policy) -> None:
    q, me = queue_for(service), who()
    await q.enqueue(me, proposal(policy, "I use vim"), trace_id=None)
    [cand] = await q.list(me)
    out = await q.confirm(me, cand["id"], service, {"content": "I use Neovim"})
    assert out.memory.content == "I use Neovim" and out.memory.slot == "editor"


async def test_reject_then_same_content_is_not_proposed_again(
    service: Memories, policy: Policy
) -> None:
    q, me = queue_for(service), who()
    await q.enqueue(me, proposal(policy, "I prefer tabs"), trace_id=None)
    [cand] = await q.list(me)
    await q.reject(me, cand["id"])
    assert await q.list(me) == []
    assert await q.enqueue(me, proposal(policy, "I  PREFER tabs"), trace_id=None) == (
        "rejected_before"
    )


async def test_duplicates_of_pending_and_active(service: Memories, policy: Policy) -> None:
    q, me = queue_for(service), who()
    p = proposal(policy, "I prefer dark mode")
    assert await q.enqueue(me, p, trace_id=None) == "queued"
    assert await q.enqueue(me, p, trace_id=None) == "duplicate"
    await service.create(me, content="always use bullet points", type="format")
    assert (
        await q.enqueue(me, proposal(policy, "Always use bullet points", "format"), trace_id=None)
        == "duplicate"
    )
    assert len(await q.list(me)) == 1


async def test_other_users_and_tenants_cannot_touch_candidates(
    service: Memories, policy: Policy
) -> None:
    q, me = queue_for(service), who()
    await q.enqueue(me, proposal(policy, "I prefer green tea"), trace_id=None)
    [cand] = await q.list(me)
    for other in (who(user="bob", tenant=me.tenant), who(user="alice")):
        assert await q.list(other) == []
        for action in (
            q.get(other, cand["id"]),
            q.confirm(other, cand["id"], service),
            q.reject(other, cand["id"]),
        ):
            with pytest.raises(NotFound):
                await action
    assert len(await q.list(me)) == 1


async def test_candidate_keys_have_the_policy_ttl(service: Memories, policy: Policy) -> None:
    q, me = queue_for(service), who()
    await q.enqueue(me, proposal(policy, "I prefer short answers"), trace_id=None)
    [cand] = await q.list(me)
    redis = service.store.redis
    ttl_days = policy.candidates.ttl_days
    for key in candidate_keys(me.tenant, me.user, cand["id"]):
        ttl = await redis.ttl(key)
        assert ttl_days * 86400 - 60 < ttl <= ttl_days * 86400 + 2, key
    q.clock.advance(__import__("datetime").timedelta(days=ttl_days, seconds=1))  # type: ignore
    assert await q.list(me) == [] and await q.pending_count(me) == 0


async def test_submit_and_drain_queue_candidates_and_count_refusals(service: Memories) -> None:
    q, me = queue_for(service), who(project="shop")
    messages = [
        {"role": "assistant", "content": "You live in Paris."},
        {"role": "user", "content": "我们这个项目用 FastAPI。这次简短一点。以后都用中文回答我"},
    ]
    await q.submit(me, messages, ["以后都用中文回答我"], me.trace_id)
    outcomes = await q.drain_once()
    assert sorted(outcomes) == ["queued", "refused_one_time"]
    [cand] = await q.list(me)
    assert (cand["type"], cand["scope"], cand["project_id"]) == ("project", "project", "shop")
    assert await q.drain_once() == []  # acknowledged: not handled twice
    assert await service.store.redis.xlen(q.stream) == 0


async def test_secrets_never_reach_redis(service: Memories) -> None:
    q, me = queue_for(service), who()
    for text, _ in SECRET_VALUES:
        await q.submit(me, [{"role": "user", "content": f"remember that {text}"}], [], me.trace_id)
    outcomes = []
    while batch := await q.drain_once():
        outcomes += batch
    assert "queued" not in outcomes and "refused_sensitive" in outcomes
    redis = service.store.redis
    keys = [k async for k in redis.scan_iter(match=f"*{me.tenant}*")] + [q.stream.encode()]
    dump = b""
    for key in keys:
        kind = (await redis.type(key)).decode()
        if kind == "hash":
            dump += b"".join(k + v for k, v in (await redis.hgetall(key)).items())
        elif kind == "string":
            dump += await redis.get(key) or b""
        elif kind in ("set", "zset"):
            dump += b"".join(
                await redis.zrange(key, 0, -1) if kind == "zset" else await redis.smembers(key)
            )
        elif kind == "stream":
            for _id, fields in await redis.xrange(key):
                dump += b"".join(fields.values())
        dump += key
    for _text, value in SECRET_VALUES:
        assert value.encode() not in dump


async def test_a_crashed_worker_loses_no_job(service: Memories) -> None:
    first, me = queue_for(service, consumer="worker-a"), who()
    await first.submit(me, [{"role": "user", "content": "I prefer Rust"}], [], me.trace_id)
    await first.ensure_group()
    # The worker reads the job, then crashes before acknowledging it.
    reply = await service.store.redis.xreadgroup(
        first.group, "worker-a", {first.stream: ">"}, count=10
    )
    assert len(reply[0][1]) == 1
    assert await first.list(me) == []
    second = CandidateQueue(
        service.store,
        service.policy,
        service.clock,
        stream=first.stream,
        consumer="worker-b",
        claim_idle_ms=0,
    )
    assert await second.drain_once() == ["queued"]
    assert [c["content"] for c in await second.list(me)] == ["I prefer Rust"]
    pending = await service.store.redis.xpending(first.stream, first.group)
    assert pending["pending"] == 0


async def test_correction_supersedes_the_memory_it_corrects(service: Memories) -> None:
    q, me = queue_for(service), who()
    old = (await service.create(me, content="I use VS Code", type="profile")).memory
    answer_trace = "tr_answer1"
    await service.store.put_trace(
        me.tenant, me.user, answer_trace, {"id": answer_trace, "injected": [old.id]}, 600
    )
    await q.submit(me, [{"role": "user", "content": "Which editor do I use?"}], [], answer_trace)
    await q.submit(me, [{"role": "user", "content": "不对，我现在用的是 Neovim"}], [], "tr_next")
    outcomes = []
    while batch := await q.drain_once():
        outcomes += batch
    assert outcomes == ["queued"]
    [cand] = await q.list(me)
    assert cand["is_correction"] and cand["corrects"] == old.id and cand["type"] == "profile"
    out = await q.confirm(me, cand["id"], service)
    assert old.id in out.superseded
    assert (await service.get(me, old.id)).status == "superseded"


@pytest.mark.parametrize("second", ["confirm", "reject"])
async def test_two_decisions_on_one_candidate_make_at_most_one_memory(
    service: Memories, policy: Policy, second: str
) -> None:
    q, me = queue_for(service), who()
    await q.enqueue(me, proposal(policy, "I use vim"), trace_id=None)
    [cand] = await q.list(me)
    first = q.confirm(me, cand["id"], service, {"content": "I use Neovim"})
    other = (
        q.confirm(me, cand["id"], service, {"content": "I write code in Emacs every day"})
        if second == "confirm"
        else q.reject(me, cand["id"])
    )
    results = await asyncio.gather(first, other, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert len(errors) == 1 and isinstance(errors[0], Conflict | NotFound), results
    confirm_won = not isinstance(results[0], BaseException)
    assert len(await service.list(me)) == (1 if second == "confirm" or confirm_won else 0)
    assert await q.list(me) == []
    # The claim is gone with the decision: nothing is left to decide.
    with pytest.raises(NotFound):
        await q.confirm(me, cand["id"], service)


async def test_the_worker_stops_at_once_while_waiting_for_jobs(service: Memories) -> None:
    """Shutdown does not wait out the blocking read: stopping cancels it (nothing is in hand
    then), and the job queued afterwards is still there for the next worker."""
    store = Store(service.store.redis_url, timeout=600.0)
    try:
        q = CandidateQueue(
            store,
            service.policy,
            service.clock,
            stream=f"memgate:test-mine:{uuid.uuid4().hex}",
        )
        await q.ensure_group()
        stop = asyncio.Event()
        worker = asyncio.create_task(q.run_worker(stop, block_ms=300_000))
        while not q._waiting:  # noqa: ASYNC110 - until the worker is in its blocking read
            await asyncio.sleep(0.01)
        stop.set()
        # A read that were waited out would hold the worker for 300 s.
        await asyncio.wait_for(worker, timeout=120)
        assert worker.exception() is None
        me = who()
        await q.submit(me, [{"role": "user", "content": "I prefer green tea"}], (), me.trace_id)
        later = CandidateQueue(service.store, service.policy, service.clock, stream=q.stream)
        assert await later.drain_once() == ["queued"]
    finally:
        await store.aclose()


async def test_memories_injected_into_a_request_are_not_mined_back_as_they_were_injected(
    service: Memories,
) -> None:
    """The exchange carries the memories as the model saw them: the miner compares with
    those, not with whatever Redis holds by the time the answer is over."""
    q, me = queue_for(service), who()
    made = await service.create(me, content="I prefer green tea", type="preference")
    injected = made.memory
    metrics = Metrics("t")
    flow = MemoryFlow(
        Recaller(service.store, service.embedder, service.policy, service.clock),
        service.store,
        metrics,
        service.clock,
        7,
        candidates=q,
        background=Background(metrics),
    )
    # edited while the answer streamed: Redis no longer holds the injected text
    await service.update(me, injected.id, {"content": "I prefer black coffee"})
    repeat = {"role": "user", "content": "I prefer green tea"}
    flow.finish(Exchange(me, {"model": "m", "messages": [repeat]}, 200, [injected]))
    await flow.drain()
    assert await q.drain_once() == []
    assert await q.list(me) == []
    # the same message from the same user with nothing injected is mined
    flow.finish(Exchange(me, {"model": "m", "messages": [repeat]}, 200, []))
    await flow.drain()
    assert await q.drain_once() == ["queued"]


async def test_a_confirmed_plan_lasts_from_when_it_was_said(
    service: Memories, policy: Policy
) -> None:
    """A goal or plan names its time as of when the user said it: one confirmed days later
    ends when it would have, and one whose time has passed by then is refused."""
    from datetime import timedelta

    q, me = queue_for(service), who()
    said = service.clock.now()
    await q.enqueue(me, proposal(policy, "下周去杭州开会", "plan"), trace_id=None)
    await q.enqueue(me, proposal(policy, "dentist tomorrow at 9", "plan"), trace_id=None)
    q.clock.advance(timedelta(days=3))  # type: ignore[attr-defined]
    by_content = {c["content"]: c for c in await q.list(me)}
    out = await q.confirm(me, by_content["下周去杭州开会"]["id"], service)
    assert out.memory.expires_at is not None
    assert abs((out.memory.expires_at - (said + timedelta(days=14))).total_seconds()) < 5
    with pytest.raises(WriteRefused) as refused:
        await q.confirm(me, by_content["dentist tomorrow at 9"]["id"], service)
    assert "has passed" in refused.value.message
