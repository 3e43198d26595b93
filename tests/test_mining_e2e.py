"""Mining through the running gateway: chat -> pending candidate -> confirm -> recalled.

Chat goes through the official ``openai`` SDK (``tests.test_recall.User``); the memory API is
called with httpx. Waits poll for a real signal (the candidate list, this gateway's mining
counters, the mining stream being empty) under generous deadlines, never a bare sleep.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, TypeVar

import httpx
import openai
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from gateway.storage.candidates import STREAM
from tests.conftest import Gateway, GatewayFactory, Upstream
from tests.test_recall import User, memory_message

T = TypeVar("T")

DEADLINE = 60.0  # seconds; the test machine is small and shared, so waits are generous


# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture
def rdb(gateway: Gateway) -> Iterator[redis.Redis]:
    """A plain client on the gateway's Redis (shared by the tests that share the gateway)."""
    assert gateway.settings.redis_url is not None
    client = redis.Redis.from_url(gateway.settings.redis_url)
    try:
        yield client
    finally:
        client.close()


def wait_until(what: str, probe: Callable[[], T | None], wait: float = DEADLINE) -> T:
    """Poll ``probe`` until it returns something other than None (or fail after ``wait``)."""
    deadline = time.monotonic() + wait
    while True:
        got = probe()
        if got is not None:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {wait:.0f}s waiting for {what}")
        time.sleep(0.05)


def candidates(me: User) -> list[dict[str, Any]]:
    resp = httpx.get(f"{me.gw.base_url}/memory/candidates", headers=me.headers)
    assert resp.status_code == 200, resp.text
    return list(resp.json()["data"])


def pending(me: User, want: int, wait: float = DEADLINE) -> list[dict[str, Any]]:
    """The user's pending candidates once there are at least ``want`` of them."""
    if want == 0:
        return candidates(me)
    return wait_until(
        f"{want} pending candidate(s)",
        lambda: got if len(got := candidates(me)) >= want else None,
        wait,
    )


def memories(me: User, **params: str) -> list[dict[str, Any]]:
    resp = httpx.get(f"{me.gw.base_url}/memories", headers=me.headers, params=params)
    assert resp.status_code == 200, resp.text
    return list(resp.json()["data"])


def memory(me: User, memory_id: str) -> dict[str, Any]:
    resp = httpx.get(f"{me.gw.base_url}/memories/{memory_id}", headers=me.headers)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def confirm(me: User, candidate_id: str, edits: dict[str, Any] | None = None) -> dict[str, Any]:
    resp = httpx.post(
        f"{me.gw.base_url}/memory/candidates/{candidate_id}/confirm",
        headers=me.headers,
        json=edits,
    )
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


def counters(gw: Gateway, name: str, label: str) -> dict[str, float]:
    """One labelled counter of this gateway's /metrics, by label value."""
    text = httpx.get(f"{gw.url}/metrics").text
    return {
        sample.labels[label]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def counter(gw: Gateway, name: str) -> float:
    text = httpx.get(f"{gw.url}/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    raise AssertionError(f"{name} not exported")


def outcomes(gw: Gateway) -> dict[str, float]:
    """``memgate_candidates_total`` by outcome: bumped once the miner has handled a job."""
    return counters(gw, "memgate_candidates_total", "outcome")


def mining_idle(gw: Gateway, rdb: redis.Redis) -> dict[str, float]:
    """Wait until the mining stream is empty (jobs left by earlier tests are handled: every
    handled job is XDEL'd), then return the outcome counters as a baseline."""
    wait_until("the mining stream to drain", lambda: True if rdb.xlen(STREAM) == 0 else None)
    return outcomes(gw)


def mined(gw: Gateway, rdb: redis.Redis, before: dict[str, float], jobs: int) -> dict[str, float]:
    """Wait until this gateway's miner has handled ``jobs`` more jobs (each job here yields
    exactly one outcome) and deleted them from the stream; return the outcome deltas."""

    def delta() -> dict[str, float]:
        now = outcomes(gw)
        return {k: v - before.get(k, 0.0) for k, v in now.items() if v != before.get(k, 0.0)}

    def done() -> dict[str, float] | None:
        got = delta()
        return got if sum(got.values()) >= jobs and rdb.xlen(STREAM) == 0 else None

    return wait_until(f"{jobs} mined job(s)", done)


def redis_dump(rdb: redis.Redis) -> bytes:
    """Every key of the (whole) test Redis and every value in it, read according to its type."""
    parts: list[bytes] = []
    for key in rdb.scan_iter(count=1000):
        parts.append(key)
        kind = rdb.type(key).decode()
        if kind == "string":
            parts.append(rdb.get(key) or b"")
        elif kind == "hash":
            parts += [k + b"=" + v for k, v in rdb.hgetall(key).items()]
        elif kind == "list":
            parts += rdb.lrange(key, 0, -1)
        elif kind == "set":
            parts += list(rdb.smembers(key))
        elif kind == "zset":
            parts += rdb.zrange(key, 0, -1)
        elif kind == "stream":
            for entry_id, fields in rdb.xrange(key):
                parts.append(entry_id)
                parts += [k + b"=" + v for k, v in fields.items()]
        elif kind == "ReJSON-RL":
            parts.append(rdb.execute_command("JSON.GET", key) or b"")
        elif kind != "none":  # "none": expired between SCAN and TYPE
            parts.append(rdb.dump(key) or b"")  # any other type: its serialized form
    return b"\n".join(parts)


class CommandLog:
    """Every command the Redis server runs, from every client, while open (``MONITOR``)."""

    def __init__(self, redis_url: str) -> None:
        self._client = redis.Redis.from_url(redis_url)
        self._mark = f"memgate-test-monitor-{uuid.uuid4().hex}"
        self.commands: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self._client.monitor() as monitor:
            while True:
                command = str(monitor.next_command()["command"])
                if f"{self._mark}-stop" in command:
                    return
                self.commands.append(command)

    def __enter__(self) -> CommandLog:
        self._thread.start()

        def live() -> bool | None:  # MONITOR sees commands only once it has answered OK
            self._client.echo(f"{self._mark}-start")
            return True if any(self._mark in c for c in list(self.commands)) else None

        wait_until("MONITOR to start", live)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._client.echo(f"{self._mark}-stop")
        self._thread.join(DEADLINE)
        self._client.close()
        assert not self._thread.is_alive(), "MONITOR did not stop"

    def mentioning(self, text: str) -> list[str]:
        """The commands whose arguments contain ``text`` (case-insensitive)."""
        return [c for c in self.commands if text.lower() in c.lower()]


def injected_facts(upstream: Upstream) -> list[str]:
    block = memory_message(upstream) or ""
    return [json.loads(line)["fact"] for line in block.splitlines() if line.startswith("{")]


def candidate_ids(me: User, raw: Any) -> set[str]:
    return {c["id"] for c in me.trace(raw)["candidates"]}


# -- the list ------------------------------------------------------------------------


def test_stated_preference_is_queued_confirmed_injected_and_pausable(
    gateway: Gateway, upstream: Upstream
) -> None:
    me = User(gateway)
    said = me.ask("以后都用中文回答我")
    [cand] = pending(me, 1)
    assert cand["content"] == "以后都用中文回答我"
    assert (cand["type"], cand["slot"], cand["scope"], cand["source"]) == (
        "preference",
        "language",
        "global",
        "user_stated",
    )
    assert cand["is_correction"] is False and cand["corrects"] is None
    assert cand["evidence"]["trace_id"] == said.headers["x-memory-trace-id"]
    assert memories(me) == []  # nothing is stored before the user confirms
    stored = confirm(me, cand["id"])
    assert stored["content"] == "以后都用中文回答我" and stored["status"] == "active"
    assert stored["type"] == "preference" and stored["slot"] == "language"
    assert stored["evidence"]["trace_id"] == said.headers["x-memory-trace-id"]
    assert pending(me, 0) == []
    assert [m["id"] for m in memories(me)] == [stored["id"]]

    raw = me.ask("你应该用什么语言回答我？")
    assert me.injected(raw) == [stored["id"]]
    assert injected_facts(upstream) == ["以后都用中文回答我"]

    # Pause stops injection (recall stops at the settings read) ...
    resp = httpx.patch(
        f"{gateway.base_url}/memory/settings", headers=me.headers, json={"recall_paused": True}
    )
    assert resp.json()["recall_paused"] is True
    raw = me.ask("你应该用什么语言回答我？")
    assert me.injected(raw) == [] and memory_message(upstream) is None
    trace = me.trace(raw)
    assert trace["skipped"] == "paused" and trace["candidates"] == []
    # ... and resuming brings exactly that memory back.
    httpx.patch(
        f"{gateway.base_url}/memory/settings", headers=me.headers, json={"recall_paused": False}
    )
    assert me.injected(me.ask("你应该用什么语言回答我？")) == [stored["id"]]


def test_one_time_instructions_queue_nothing(gateway: Gateway, rdb: redis.Redis) -> None:
    me = User(gateway)
    before = mining_idle(gateway, rdb)
    me.ask("这次简短点")
    me.ask("just the answer this time")
    assert mined(gateway, rdb, before, jobs=2) == {"refused_one_time": 2}
    assert pending(me, 0) == [] and memories(me) == []


def test_secret_messages_queue_nothing_and_never_reach_redis(
    gateway: Gateway, upstream: Upstream, rdb: redis.Redis
) -> None:
    me = User(gateway)
    secrets = [
        "sk-proj-" + uuid.uuid4().hex + uuid.uuid4().hex[:12],
        "sk-" + uuid.uuid4().hex + "Xq7",
        "sk-proj-" + uuid.uuid4().hex.upper() + "zz9",
    ]
    assert gateway.settings.redis_url is not None
    with CommandLog(gateway.settings.redis_url) as log:
        before = mining_idle(gateway, rdb)
        traces = [
            me.ask(f"remember that my api key is {secrets[0]}").headers["x-memory-trace-id"],
            me.ask(f"记住我的密钥是 {secrets[1]}").headers["x-memory-trace-id"],
        ]
        # The streamed path queues its mining job when the stream ends: same rule.
        client = openai.OpenAI(base_url=gateway.base_url, api_key=me.key, max_retries=0)
        with client.chat.completions.with_streaming_response.create(
            model="gpt-4o-mini",
            stream=True,
            messages=[{"role": "user", "content": f"My OpenAI key is {secrets[2]}, keep it"}],
            extra_headers={"X-Memory-User": me.headers["x-memory-user"]},
        ) as streamed:
            traces.append(streamed.headers["x-memory-trace-id"])
            assert "".join(streamed.iter_lines())  # read to the end: the exchange completes
        sent = b"".join(r.body for r in upstream.state.requests)
        assert all(s.encode() in sent for s in secrets)  # the chat itself went through untouched

        assert mined(gateway, rdb, before, jobs=3) == {"refused_sensitive": 3}
    # The mining jobs went through Redis already redacted (seen as the server ran them) ...
    jobs = [c for c in log.commands if c.startswith(f"XADD {STREAM} ")]
    for trace_id in traces:
        [job] = [c for c in jobs if f'"trace_id": "{trace_id}"' in c]
        assert "[REDACTED:openai_key]" in job
    assert pending(me, 0) == [] and memories(me) == []
    for trace_id in traces:
        me_trace = httpx.get(f"{gateway.base_url}/memory/traces/{trace_id}", headers=me.headers)
        assert me_trace.status_code == 200  # traces are written ...

    dump = redis_dump(rdb)
    for trace_id in traces:
        assert trace_id.encode() in dump  # ... and the scan really sees this user's keys
    for secret in secrets:
        body = secret.removeprefix("sk-").removeprefix("proj-")
        middle = body[len(body) // 2 - 8 : len(body) // 2 + 8]
        assert secret.encode() not in dump, secret
        assert middle.lower().encode() not in dump.lower(), middle
        # ... and no command ever carried the key: not a write, and not recall's search
        # query either (Redis's slow log would keep that).
        carriers = {c.split(" ", 1)[0].upper() for c in log.mentioning(middle)}
        assert carriers == set(), carriers


@pytest.mark.parametrize(
    ("fact", "question", "correction", "new_fact", "old_word", "new_word"),
    [
        # No slot: the correction can only be linked through the trace of the answer it
        # follows (the answer that injected the old memory).
        (
            "我喜欢喝乌龙茶",
            "我喜欢喝什么茶？",
            "不对，我现在喜欢喝龙井茶",
            "我现在喜欢喝龙井茶",
            "乌龙",
            "龙井",
        ),
        # Same slot (location) as well.
        (
            "I live in Shanghai",
            "Which city do I live in?",
            "no, I moved to Berlin",
            "I moved to Berlin",
            "Shanghai",
            "Berlin",
        ),
    ],
    ids=["zh-linked-by-trace", "en-same-slot"],
)
def test_correction_supersedes_the_memory_it_corrects(
    gateway: Gateway,
    upstream: Upstream,
    rdb: redis.Redis,
    fact: str,
    question: str,
    correction: str,
    new_fact: str,
    old_word: str,
    new_word: str,
) -> None:
    me = User(gateway)
    mining_idle(gateway, rdb)  # earlier tests' jobs are handled: what is counted next is ours
    corrections = counter(gateway, "memgate_corrections_total")
    me.ask(fact)
    [cand] = pending(me, 1)
    assert cand["content"] == fact and cand["is_correction"] is False
    old = confirm(me, cand["id"])["id"]

    answer = me.ask(question)
    assert me.injected(answer) == [old]
    assert me.trace(answer)["injected"] == [old]  # the answer's trace is what links them

    fixed = me.ask(correction)
    [cand] = pending(me, 1)
    kind = memory(me, old)["type"]  # a linked correction takes the corrected memory's type
    assert cand["content"] == new_fact and cand["type"] == kind
    assert cand["is_correction"] is True and cand["corrects"] == old
    assert cand["evidence"]["trace_id"] == fixed.headers["x-memory-trace-id"]
    assert memory(me, old)["status"] == "active"  # nothing changes before confirmation
    # counted right after the candidate is queued: poll, then check it counted just this one
    wait_until(
        "the correction to be counted",
        lambda: True if counter(gateway, "memgate_corrections_total") >= corrections + 1 else None,
    )
    assert counter(gateway, "memgate_corrections_total") == corrections + 1

    stored = confirm(me, cand["id"])
    new = stored["id"]
    assert stored["superseded"] == [old] and stored["content"] == new_fact
    was = memory(me, old)
    assert (was["status"], was["superseded_by"]) == ("superseded", new)
    now = memory(me, new)
    assert (now["status"], now["supersedes"]) == ("active", [old])
    assert [m["id"] for m in memories(me, status="active")] == [new]

    for _ in range(2):  # the new fact, every time; the old one never again
        raw = me.ask(question)
        assert me.injected(raw) == [new]
        assert old not in candidate_ids(me, raw)
        facts = injected_facts(upstream)
        assert facts == [new_fact] and old_word not in "".join(facts) and new_word in facts[0]

    report = httpx.get(f"{gateway.base_url}/memory/report", headers=me.headers).json()
    assert report["active"] == 1 and report["counts_by_type"] == {kind: 1}
    assert [(m["id"], m["superseded_by"]) for m in report["injected_then_corrected"]] == [
        (old, new)
    ]


def test_delete_by_project_keeps_other_projects_and_globals(
    gateway: Gateway, upstream: Upstream
) -> None:
    me = User(gateway)

    def project_fact(text: str, project: str) -> str:
        return me.remember(text, type="project", scope="project", project_id=project)

    a_db = project_fact("This project uses PostgreSQL as its database", "alpha")
    a_deploy = project_fact("This project deploys to Kubernetes", "alpha")
    b_db = project_fact("This project uses MySQL as its database", "beta")
    lang = me.remember("Always answer me in English")
    database = "Which database does this project use?"
    language = "Which language should you answer in?"

    injected = me.injected(me.ask(database, project="alpha"))
    assert a_db in injected and b_db not in injected
    injected = me.injected(me.ask(database, project="beta"))
    assert b_db in injected and not {a_db, a_deploy} & set(injected)

    resp = httpx.delete(
        f"{gateway.base_url}/memories", headers=me.headers, params={"project_id": "alpha"}
    )
    assert resp.status_code == 200, resp.text
    assert resp.json() == {
        "object": "memory.deleted",
        "deleted": 2,
        "project_id": "alpha",
        "all": False,
    }

    assert memories(me, project_id="alpha") == []
    assert {m["id"] for m in memories(me)} == {b_db, lang}
    for gone in (a_db, a_deploy):
        resp = httpx.get(f"{gateway.base_url}/memories/{gone}", headers=me.headers)
        assert resp.status_code == 404

    for text in (database, "Where does this project deploy to?"):
        raw = me.ask(text, project="alpha")
        assert not {a_db, a_deploy} & set(me.injected(raw))
        assert not {a_db, a_deploy} & candidate_ids(me, raw)
    assert "PostgreSQL" not in "".join(injected_facts(upstream))
    assert b_db in me.injected(me.ask(database, project="beta"))
    assert "This project uses MySQL as its database" in injected_facts(upstream)
    assert me.injected(me.ask(language, project="alpha")) == [lang]

    again = httpx.delete(
        f"{gateway.base_url}/memories", headers=me.headers, params={"project_id": "alpha"}
    )
    assert again.json()["deleted"] == 0


def test_confirm_with_edits_injects_the_edited_memory(
    gateway: Gateway, upstream: Upstream, rdb: redis.Redis
) -> None:
    me = User(gateway)
    # decisions are counted by the request that makes them, so the change is this test's own
    before = counters(gateway, "memgate_candidate_decisions_total", "decision")
    said = me.ask("I prefer tea")
    [cand] = pending(me, 1)
    assert cand["content"] == "I prefer tea"
    url = f"{gateway.base_url}/memory/candidates/{cand['id']}/confirm"

    # Bad edits are refused and leave the candidate waiting.
    resp = httpx.post(url, headers=me.headers, json={"status": "active"})
    assert resp.status_code == 400, resp.text
    secret = "sk-proj-" + uuid.uuid4().hex + uuid.uuid4().hex[:8]
    resp = httpx.post(url, headers=me.headers, json={"content": f"my api key is {secret}"})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["code"] == "write_refused"
    assert "sensitive" in resp.json()["error"]["reasons"]
    assert secret.encode() not in redis_dump(rdb)
    assert [c["id"] for c in pending(me, 0)] == [cand["id"]]

    edited = "I prefer green tea without sugar"
    stored = confirm(me, cand["id"], {"content": edited, "scope": "project", "project_id": "cafe"})
    assert (stored["content"], stored["type"], stored["scope"], stored["project_id"]) == (
        edited,
        "preference",
        "project",
        "cafe",
    )
    assert stored["evidence"]["trace_id"] == said.headers["x-memory-trace-id"]
    assert memory(me, stored["id"])["content"] == edited
    assert pending(me, 0) == []
    after = counters(gateway, "memgate_candidate_decisions_total", "decision")
    decided = {k: v - before.get(k, 0.0) for k, v in after.items()}
    assert {k: v for k, v in decided.items() if v} == {"edited": 1.0}

    raw = me.ask("What kind of tea do I like?", project="cafe")
    assert me.injected(raw) == [stored["id"]]
    assert injected_facts(upstream) == [edited]
    # The edited scope holds too: another project never sees it.
    assert me.injected(me.ask("What kind of tea do I like?", project="office")) == []


def test_rejected_candidate_is_not_proposed_again(gateway: Gateway, rdb: redis.Redis) -> None:
    me = User(gateway)
    me.ask("I prefer answers with bullet points")
    [cand] = pending(me, 1)
    resp = httpx.post(
        f"{gateway.base_url}/memory/candidates/{cand['id']}/reject", headers=me.headers
    )
    assert resp.json()["rejected"] is True
    assert pending(me, 0) == []
    before = mining_idle(gateway, rdb)
    me.ask("I prefer answers with bullet points")
    assert mined(gateway, rdb, before, jobs=1) == {"rejected_before": 1}
    assert pending(me, 0) == [] and memories(me) == []


def test_users_never_see_each_others_memories_or_candidates(gateway: Gateway) -> None:
    me, neighbour, other_app = User(gateway), User(gateway), User(gateway)
    # Same user name, another API key: another tenant.
    other_app.headers["x-memory-user"] = me.headers["x-memory-user"]
    question = "你应该用什么语言回答我？"
    me.ask("以后都用中文回答我")
    [cand] = pending(me, 1)
    base = gateway.base_url
    for them in (neighbour, other_app):
        assert candidates(them) == []
        for action in ("confirm", "reject"):
            resp = httpx.post(
                f"{base}/memory/candidates/{cand['id']}/{action}", headers=them.headers
            )
            assert resp.status_code == 404, (action, resp.text)
    assert [c["id"] for c in pending(me, 0)] == [cand["id"]]  # untouched by the others

    mid = confirm(me, cand["id"])["id"]
    for them in (neighbour, other_app):
        assert memories(them) == []
        for method, path in (("GET", ""), ("GET", "/history"), ("PATCH", ""), ("DELETE", "")):
            resp = httpx.request(
                method,
                f"{base}/memories/{mid}{path}",
                headers=them.headers,
                json={"content": "回答用英文"} if method == "PATCH" else None,
            )
            assert resp.status_code == 404, (method, path, resp.text)
        resp = httpx.delete(f"{base}/memories", headers=them.headers, params={"all": "true"})
        assert resp.json()["deleted"] == 0
        raw = them.ask(question)
        assert them.injected(raw) == [] and mid not in candidate_ids(them, raw)
    assert memory(me, mid)["content"] == "以后都用中文回答我"
    assert me.injected(me.ask(question)) == [mid]


def test_pending_queue_depth_is_exported(make_gateway: GatewayFactory) -> None:
    gw = make_gateway(metrics_sample_seconds=0.2)
    me = User(gw)
    me.ask("以后都用中文回答我")
    pending(me, 1)

    def exported() -> float | None:
        value = counter(gw, "memgate_pending_candidates")
        return value if value >= 1 else None

    assert wait_until("memgate_pending_candidates >= 1", exported) >= 1
