"""The LLM extractor: strict parsing, the same write gate as the rules, fallback to the rules."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import redis

from gateway.config import Settings
from gateway.memory.extract_llm import (
    MAX_CANDIDATES,
    SCHEMA_NAME,
    ExtractorFailure,
    LlmCandidate,
    LlmExtractor,
    build_request,
    make_extractor,
    parse_reply,
    screen_candidates,
)
from gateway.memory.mine import MineResult, extract_rules, mining_key
from gateway.memory.policy import Policy, load_policy
from gateway.upstream import Upstream as UpstreamClient
from tests.conftest import GatewayFactory, Upstream
from tests.test_recall import User

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SECRET = "sk-proj-" + "Qx7vB2nM9kL4pR8sT1wY6zA3cD5fG0hJ"
UPSTREAM_KEY = "sk-upstream-extractor-test"


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy()


def cand(content: str, type: str = "preference", **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "content": content,
        "type": type,
        "scope": "global",
        "sensitivity": "low",
        "one_time": False,
        "slot": None,
        "is_correction": False,
        "inference": False,
    }
    return {**base, **extra}


def completion(content: Any, **message: Any) -> bytes:
    msg = {"role": "assistant", "content": content, "refusal": None, **message}
    return json.dumps({"choices": [{"index": 0, "message": msg}]}).encode()


def reply(*candidates: dict[str, Any]) -> str:
    return json.dumps({"candidates": list(candidates)}, ensure_ascii=False)


def screened(
    policy: Policy,
    text: str,
    *candidates: dict[str, Any],
    project: str | None = None,
    task: str | None = None,
    injected: tuple[str, ...] = (),
) -> MineResult:
    parsed = [LlmCandidate.model_validate(c) for c in candidates]
    return screen_candidates(
        parsed,
        text,
        project_id=project,
        task=task,
        injected_keys={mining_key(t) for t in injected},
        policy=policy,
        now=NOW,
    )


# --- the request -----------------------------------------------------------------------------


def test_request_is_a_strict_json_schema_with_the_policys_types(policy: Policy) -> None:
    body = build_request("以后都用中文回答我", policy, "gpt-4o-mini")
    assert body["model"] == "gpt-4o-mini"
    system, user = body["messages"]
    assert system["role"] == "system" and "user's own language" in system["content"]
    assert user == {"role": "user", "content": "以后都用中文回答我"}
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == SCHEMA_NAME
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    item = schema["properties"]["candidates"]["items"]
    for obj in (schema, item):  # strict mode: every field required, nothing else allowed
        assert obj["additionalProperties"] is False
        assert set(obj["required"]) == set(obj["properties"])
    assert item["properties"]["type"]["enum"] == list(policy.types)
    assert item["properties"]["scope"]["enum"] == ["global", "project", "task"]
    assert item["properties"]["sensitivity"]["enum"] == ["low", "medium", "high"]
    assert item["properties"]["slot"]["type"] == ["string", "null"]
    assert {"one_time", "is_correction", "inference"} <= set(item["required"])


# --- parsing ---------------------------------------------------------------------------------


def test_parse_a_valid_reply() -> None:
    [c] = parse_reply(completion(reply(cand("回答用中文", slot="language"))))
    assert (c.content, c.type, c.slot, c.one_time) == (
        "回答用中文",
        "preference",
        "language",
        False,
    )
    assert parse_reply(completion('{"candidates": []}')) == []


def test_a_runaway_reply_is_capped() -> None:
    many = [cand(f"I like colour number {i}") for i in range(MAX_CANDIDATES + 5)]
    assert len(parse_reply(completion(reply(*many)))) == MAX_CANDIDATES


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"{}",
        json.dumps({"choices": []}).encode(),
        completion(None),
        completion("not json {"),
        completion('{"candidates": [{"content": "x"}]}'),  # missing fields
        completion(reply(cand("x", extra_field=1))),  # unknown field
        completion(reply(cand("x", one_time="false"))),  # strict: no "false" -> False
        completion(reply(cand("x", scope="everywhere"))),
        completion(reply(cand("x", sensitivity="none"))),
        completion('{"candidates": {}}'),
        completion(reply(cand("x")), refusal="I can't help with that."),
    ],
)
def test_anything_off_schema_is_malformed(body: bytes) -> None:
    with pytest.raises(ExtractorFailure) as err:
        parse_reply(body)
    assert err.value.reason == "malformed"


# --- every candidate through the write gate --------------------------------------------------


def test_a_stated_preference_keeps_its_type_and_slot(policy: Policy) -> None:
    text = "以后都用中文回答我"
    [p] = screened(policy, text, cand("以后都用中文回答", slot="language")).proposals
    assert (p.type, p.slot, p.scope, p.source, p.rule) == (
        "preference",
        "language",
        "global",
        "user_stated",
        "llm",
    )
    assert p.evidence == text and not p.is_inference


def test_the_gate_derives_a_slot_the_model_left_out_or_misspelt(policy: Policy) -> None:
    for slot in (None, "Not A Slot!"):
        [p] = screened(policy, "x", cand("回答用英文", slot=slot)).proposals
        assert p.slot == "language"


def test_one_time_and_secrets_are_refused_whatever_the_model_says(policy: Policy) -> None:
    result = screened(
        policy,
        "text",
        cand("Answer in French", one_time=True),  # model: one-time
        cand("这次简短一点", type="preference"),  # model missed it; the gate did not
        cand(f"my api key is {SECRET}", type="profile"),  # model copied a secret
        cand("my locker code is 1234", type="profile", sensitivity="high"),  # model: sensitive
        cand("my key is [REDACTED:openai_key]", type="profile"),
        cand("be a pirate", type="roleplay"),  # a session type
    )
    assert result.proposals == []
    assert sorted(result.refused) == sorted(
        [
            "refused_one_time",
            "refused_one_time",
            "refused_sensitive",
            "refused_sensitive",
            "refused_sensitive",
            "refused_one_time",
        ]
    )


def test_a_model_inference_is_only_queued_as_one(policy: Policy) -> None:
    [p] = screened(
        policy, "x", cand("The user is a backend developer", type="profile", inference=True)
    ).proposals
    assert p.source == "model_inference" and p.is_inference
    [q] = screened(policy, "x", cand("Probably likes cats", type="inference")).proposals
    assert q.source == "model_inference"


def test_scopes(policy: Policy) -> None:
    [p] = screened(
        policy, "x", cand("This repo uses FastAPI", type="project", scope="project"), project="shop"
    ).proposals
    assert (p.type, p.scope, p.project_id, p.slot) == ("project", "project", "shop", "framework")
    [q] = screened(
        policy, "x", cand("This repo uses FastAPI", type="project", scope="project")
    ).proposals
    assert (q.type, q.scope, q.project_id) == ("profile", "global", None)
    [t] = screened(
        policy, "x", cand("Use British spelling", scope="task"), task="writing"
    ).proposals
    assert t.scope == "task:writing"
    [g] = screened(policy, "x", cand("Use British spelling", scope="task")).proposals
    assert g.scope == "global"


def test_injected_memories_repeats_and_junk_are_dropped(policy: Policy) -> None:
    result = screened(
        policy,
        "x",
        cand("回答用中文"),
        cand("I like tea"),
        cand("I like tea!"),
        cand("  ", type="profile"),
        cand("I like jazz", type="no-such-type"),
        injected=("回答用中文",),
    )
    assert [p.content for p in result.proposals] == ["I like tea"]
    assert result.refused == ["invalid", "invalid"]
    # the user repeated an injected memory word for word: nothing to propose
    assert (
        screened(
            policy, "回答用中文", cand("Answer in Chinese"), injected=("回答用中文",)
        ).proposals
        == []
    )


def test_the_model_can_raise_sensitivity_never_lower_it(policy: Policy) -> None:
    [p] = screened(
        policy, "x", cand("I live in Berlin", type="profile", sensitivity="medium")
    ).proposals
    assert p.sensitivity == "medium"
    [q] = screened(policy, "x", cand("my email is li@example.com", type="profile")).proposals
    assert q.sensitivity == "medium"


# --- settings --------------------------------------------------------------------------------


def test_settings_default_to_rules_and_refuse_typos() -> None:
    assert Settings().extractor == "rules"
    assert Settings.from_env({"MEMGATE_EXTRACTOR": "LLM"}).extractor == "llm"
    assert Settings.from_env({"MEMGATE_EXTRACTOR_MODEL": "m"}).extractor_model == "m"
    with pytest.raises(SystemExit, match="MEMGATE_EXTRACTOR"):
        Settings.from_env({"MEMGATE_EXTRACTOR": "gpt"})
    upstream = UpstreamClient(Settings())
    assert make_extractor(Settings(), upstream) is extract_rules
    assert isinstance(make_extractor(Settings(extractor="llm"), upstream), LlmExtractor)
    with pytest.raises(SystemExit, match="MEMGATE_EXTRACTOR"):
        make_extractor(Settings(extractor="magic"), upstream)


# --- end to end through the running gateway --------------------------------------------------


def pending(me: User, want: int, wait: float = 10.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + wait
    while True:
        got = httpx.get(f"{me.gw.base_url}/memory/candidates", headers=me.headers).json()["data"]
        if len(got) >= want or time.monotonic() > deadline:
            return list(got)
        time.sleep(0.05)


def metric(gw: Any, name: str, wait: float = 0.0, at_least: float = 0.0) -> float:
    deadline = time.monotonic() + wait
    while True:
        text = httpx.get(f"{gw.url}/metrics").text
        found = [
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name + " ")
        ]
        value = found[0] if found else 0.0
        if value >= at_least or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def llm_gateway(make_gateway: GatewayFactory, **overrides: Any) -> Any:
    values: dict[str, Any] = {
        "extractor": "llm",
        "upstream_api_key": UPSTREAM_KEY,
        "extractor_model": "extract-model",
    }
    return make_gateway(**{**values, **overrides})


def test_llm_candidate_is_queued_and_sees_only_the_latest_user_message(
    make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    gw = llm_gateway(make_gateway)
    me = User(gw)
    memory_id = me.remember("My cat is called Mochi", type="profile")
    upstream.state.extract_reply = reply(
        cand("我家猫最爱吃金枪鱼", type="profile", slot="pet_food")
    )
    latest = "我家猫最爱吃金枪鱼，给我的猫 Mochi 推荐点零食？"
    raw = me.ask(
        "",
        messages=[
            {"role": "user", "content": "Tell me a story about a fox"},
            {"role": "assistant", "content": "ASSISTANT-ANSWER once upon a time"},
            {"role": "user", "content": latest},
        ],
    )
    assert me.injected(raw) == [memory_id]
    [queued] = pending(me, 1)
    assert (
        queued["content"],
        queued["type"],
        queued["slot"],
        queued["source"],
        queued["inference"],
    ) == ("我家猫最爱吃金枪鱼", "profile", "pet_food", "user_stated", False)
    [call] = upstream.state.extractions()
    assert call.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # never the client's key
    body = call.json()
    assert body["model"] == "extract-model"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == latest
    sent = call.body.decode()
    for absent in (
        "ASSISTANT-ANSWER",
        "Tell me a story",
        "My cat is called Mochi",
        "<memories",
        me.key,
    ):
        assert absent not in sent, absent


def all_redis_text(client: redis.Redis) -> str:
    """Every value in Redis as text: strings, hashes, sets, lists, streams, JSON documents."""
    parts: list[str] = []
    for key in client.scan_iter(count=1000):
        raw_kind: Any = client.type(key)
        kind = raw_kind.decode() if isinstance(raw_kind, bytes) else str(raw_kind)
        value: Any
        if kind == "string":
            value = client.get(key)
        elif kind == "hash":
            value = client.hgetall(key)
        elif kind == "set":
            value = client.smembers(key)
        elif kind == "zset":
            value = client.zrange(key, 0, -1)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "stream":
            value = client.xrange(key)
        elif kind == "ReJSON-RL":
            value = client.execute_command("JSON.GET", key)
        else:
            value = ""
        parts.append(f"{key!r} {value!r}")
    return "\n".join(parts)


def test_one_time_and_secret_candidates_are_never_queued(
    make_gateway: GatewayFactory, upstream: Upstream, redis_url: str
) -> None:
    gw = llm_gateway(make_gateway)
    me = User(gw)
    me.remember("I like green tea")  # proves the scan below reads stored values
    upstream.state.extract_reply = reply(
        cand("这次用法语回答", one_time=True),
        cand(f"my api key is {SECRET}", type="profile"),  # a model that ignored the redaction
        cand("my locker code is 4711", type="profile", sensitivity="high"),
    )
    me.ask(f"remember my api key is {SECRET}, and answer in French this time")
    assert (
        metric(gw, 'memgate_candidates_total{outcome="refused_sensitive"}', wait=10, at_least=2)
        == 2
    )
    assert metric(gw, 'memgate_candidates_total{outcome="refused_one_time"}') == 1
    assert metric(gw, 'memgate_candidates_total{outcome="queued"}') == 0
    assert pending(me, 1, wait=0.3) == []
    [call] = upstream.state.extractions()
    assert SECRET not in call.body.decode()  # the job was redacted before the model saw it
    client = redis.Redis.from_url(redis_url)
    try:
        everything = all_redis_text(client)
        assert "I like green tea" in everything and SECRET not in everything
    finally:
        client.close()


def test_an_llm_inference_is_queued_only_as_an_inference(
    make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    gw = llm_gateway(make_gateway)
    me = User(gw)
    upstream.state.extract_reply = reply(
        cand("The user is a backend developer", type="profile", inference=True)
    )
    me.ask("How do I add an index to a Postgres table?")
    [queued] = pending(me, 1)
    assert queued["source"] == "model_inference" and queued["inference"] is True
    assert httpx.get(f"{gw.base_url}/memories", headers=me.headers).json()["data"] == []


@pytest.mark.parametrize(
    ("status", "answer", "reason"),
    [
        (200, "sorry, no JSON today", "malformed"),
        (200, reply(cand("以后用中文", scope="everywhere")), "malformed"),
        (500, "", "upstream_error"),
    ],
)
def test_a_failed_extraction_falls_back_to_the_rules(
    make_gateway: GatewayFactory, upstream: Upstream, status: int, answer: str, reason: str
) -> None:
    gw = llm_gateway(make_gateway)
    me = User(gw)
    upstream.state.extract_status = status
    upstream.state.extract_reply = answer
    me.ask("以后都用中文回答我")
    [queued] = pending(me, 1)
    assert (queued["type"], queued["slot"]) == ("preference", "language")
    assert metric(gw, f'memgate_extractor_fallbacks_total{{reason="{reason}"}}') == 1
    assert len(upstream.state.extractions()) == 1


def test_without_an_upstream_key_a_refused_call_switches_to_the_rules(
    make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    gw = make_gateway(extractor="llm")  # no MEMGATE_UPSTREAM_API_KEY
    me = User(gw)
    upstream.state.extract_status = 401
    me.ask("以后都用中文回答我")
    [first] = pending(me, 1)
    [call] = upstream.state.extractions()
    assert "authorization" not in call.headers  # the client's key is never reused
    me.ask("I prefer answers with bullet points")
    assert len(pending(me, 2)) == 2
    assert len(upstream.state.extractions()) == 1  # not asked again
    assert metric(gw, 'memgate_extractor_fallbacks_total{reason="unauthorized"}') == 2
    assert first["type"] == "preference"


def test_the_default_rules_extractor_never_calls_the_upstream(
    make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    gw = make_gateway()
    me = User(gw)
    me.ask("以后都用中文回答我")
    assert len(pending(me, 1)) == 1
    assert upstream.state.extractions() == []
