"""The gateway core end to end: the official openai SDK -> memgate -> a real loopback upstream."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import openai
import pytest

from gateway.storage.redis_server import free_port
from tests.conftest import Gateway, GatewayFactory, Upstream

KEY = "sk-test-client-key-1"


def sdk(gw: Gateway, **kwargs: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=KEY, max_retries=0, **kwargs)  # type: ignore[arg-type]


def test_plain_chat_through_sdk(gateway: Gateway, upstream: Upstream) -> None:
    client = sdk(gateway)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": "你好, hello"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "Hello from the stub."
    assert completion.usage is not None and completion.usage.total_tokens == 18
    # Upstream's useful headers come back, plus memgate's own.
    assert raw.headers["x-request-id"] == "req_stub_1"
    assert raw.headers["x-ratelimit-remaining-tokens"] == "9999"
    assert raw.headers["x-memory-trace-id"].startswith("tr_")
    assert raw.headers["x-memory-injected"] == ""
    assert float(raw.headers["x-memgate-overhead-ms"]) >= 0
    seen = upstream.state.last("/chat/completions")
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {KEY}"


def test_trace_id_is_fresh_per_request(gateway: Gateway) -> None:
    client = sdk(gateway)
    ids = {
        client.chat.completions.with_raw_response.create(
            model="gpt-test", messages=[{"role": "user", "content": "hi"}]
        ).headers["x-memory-trace-id"]
        for _ in range(3)
    }
    assert len(ids) == 3


def test_body_with_unknown_fields_and_tools_arrives_byte_for_byte(
    gateway: Gateway, upstream: Upstream
) -> None:
    body = (
        '{"model":"gpt-test","messages":[{"role":"user","content":"天气 weather?"}],'
        '"tools":[{"type":"function","function":{"name":"get_weather","parameters":'
        '{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],'
        '"tool_choice":"auto","response_format":{"type":"json_object"},'
        '"some_future_field":{"nested":[1,2.50,"x"]},  "temperature": 0.0 ,"seed":42}'
    ).encode()
    resp = httpx.post(
        f"{gateway.base_url}/chat/completions",
        content=body,
        headers={
            "authorization": f"Bearer {KEY}",
            "content-type": "application/json",
            "x-custom-app-header": "kept",
            "X-Memory-User": "alice",
            "X-Project-Id": "proj-1",
            "X-Memory-Mode": "dry-run",
        },
    )
    assert resp.status_code == 200
    seen = upstream.state.last("/chat/completions")
    assert seen.body == body
    assert seen.headers["x-custom-app-header"] == "kept"
    for own in ("x-memory-user", "x-project-id", "x-memory-mode"):
        assert own not in seen.headers


def test_sdk_extra_fields_and_tools_pass_through(gateway: Gateway, upstream: Upstream) -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
        }
    ]
    sdk(gateway).chat.completions.create(
        model="gpt-test",
        messages=[{"role": "user", "content": "hi"}],
        tools=tools,  # type: ignore[arg-type]
        response_format={"type": "json_object"},
        extra_body={"vendor_extension": {"a": [1, None, True]}},
        extra_headers={"X-Memory-User": "bob"},
    )
    got = upstream.state.last("/chat/completions").json()
    assert got["tools"] == tools
    assert got["response_format"] == {"type": "json_object"}
    assert got["vendor_extension"] == {"a": [1, None, True]}


def test_upstream_api_key_replaces_client_key(
    make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    gw = make_gateway(upstream_api_key="sk-upstream-secret")
    sdk(gw).chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}])
    assert upstream.state.last().headers["authorization"] == "Bearer sk-upstream-secret"


def test_path_without_v1_prefix(gateway: Gateway, upstream: Upstream) -> None:
    resp = httpx.post(
        f"{gateway.url}/chat/completions",
        json={"model": "gpt-test", "messages": [{"role": "user", "content": "x"}]},
    )
    assert resp.status_code == 200
    assert upstream.state.last().path == "/v1/chat/completions"


def test_stream_through_sdk_keeps_usage_chunk(gateway: Gateway, upstream: Upstream) -> None:
    upstream.state.reply_text = "one two three four five six"
    stream = sdk(gateway).chat.completions.create(
        model="gpt-test",
        messages=[{"role": "user", "content": "count"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three four five six"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 20


def test_stream_bytes_relayed_untouched_with_done(gateway: Gateway, upstream: Upstream) -> None:
    upstream.state.reply_text = "a b c"
    with httpx.stream(
        "POST",
        f"{gateway.base_url}/chat/completions",
        json={
            "model": "gpt-test",
            "stream": True,
            "messages": [{"role": "user", "content": "x"}],
            "stream_options": {"include_usage": True},
        },
    ) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert resp.headers["x-memory-trace-id"].startswith("tr_")
        assert resp.headers["x-request-id"] == "req_stub_stream"
        data = b"".join(resp.iter_raw())
    events = [e for e in data.split(b"\n\n") if e]
    assert events[-1] == b"data: [DONE]"
    assert b'"usage"' in events[-2]
    assert len(events) == 1 + 3 + 1 + 1 + 1  # role, 3 words, finish, usage, done


def test_stream_is_not_buffered(gateway: Gateway, upstream: Upstream) -> None:
    """The upstream holds its stream open until the client has seen the first chunk."""
    upstream.state.reply_text = "first second third"
    stream = sdk(gateway).chat.completions.create(
        model="gated-stream", messages=[{"role": "user", "content": "x"}], stream=True
    )
    pieces: list[str] = []
    for chunk in stream:
        piece = chunk.choices[0].delta.content if chunk.choices else None
        if piece:
            pieces.append(piece)
            if piece == "first":
                assert upstream.state.gate_released_in_time is None  # upstream still waiting
                upstream.state.gate.set()
    assert "".join(pieces) == "first second third"
    assert upstream.state.gate_released_in_time is True


def test_async_sdk_stream(gateway: Gateway, upstream: Upstream) -> None:
    upstream.state.reply_text = "异步 stream works"

    async def run() -> str:
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=KEY, max_retries=0)
        stream = await client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "x"}], stream=True
        )
        out = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        plain = await client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "x"}]
        )
        await client.close()
        return out + "|" + (plain.choices[0].message.content or "")

    assert asyncio.run(run()) == "异步 stream works|异步 stream works"


def test_upstream_500_passes_through(gateway: Gateway) -> None:
    with pytest.raises(openai.InternalServerError) as info:
        sdk(gateway).chat.completions.create(
            model="error-500", messages=[{"role": "user", "content": "x"}]
        )
    assert info.value.status_code == 500
    assert info.value.body == {
        "message": "The server had an error",
        "type": "server_error",
        "param": None,
        "code": None,
    }
    assert info.value.response.headers["x-request-id"] == "req_stub_500"


def test_upstream_429_passes_through_with_retry_after(gateway: Gateway) -> None:
    with pytest.raises(openai.RateLimitError) as info:
        sdk(gateway).chat.completions.create(
            model="error-429", messages=[{"role": "user", "content": "x"}]
        )
    headers = info.value.response.headers
    assert headers["retry-after"] == "7"
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert info.value.code == "rate_limit_exceeded"


def test_upstream_unreachable_is_502(make_gateway: GatewayFactory) -> None:
    gw = make_gateway(upstream_url=f"http://127.0.0.1:{free_port()}/v1")
    resp = httpx.post(
        f"{gw.base_url}/chat/completions",
        json={"model": "gpt-test", "messages": [{"role": "user", "content": "x"}]},
    )
    assert resp.status_code == 502
    err = resp.json()["error"]
    assert err["code"] == "upstream_unreachable"
    assert set(err) == {"message", "type", "param", "code"}
    assert "Traceback" not in resp.text
    with pytest.raises(openai.APIStatusError) as info:
        sdk(gw).chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "x"}]
        )
    assert info.value.status_code == 502


def test_upstream_timeout_is_504(make_gateway: GatewayFactory, upstream: Upstream) -> None:
    upstream.state.slow_seconds = 1.5
    gw = make_gateway(read_timeout=0.3)
    resp = httpx.post(
        f"{gw.base_url}/chat/completions",
        timeout=10,
        json={"model": "slow", "messages": [{"role": "user", "content": "x"}]},
    )
    assert resp.status_code == 504
    assert resp.json()["error"]["code"] == "upstream_timeout"


def test_stream_allows_gaps_longer_than_read_timeout(
    make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    """Streaming reads use their own, longer gap limit."""
    upstream.state.slow_seconds = 0.8
    gw = make_gateway(read_timeout=0.3, stream_read_timeout=5.0)
    stream = sdk(gw).chat.completions.create(
        model="stall-stream", messages=[{"role": "user", "content": "x"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == (
        "Hello from the stub."
    )


def test_stream_cut_mid_way_becomes_sse_error(gateway: Gateway, upstream: Upstream) -> None:
    stream = sdk(gateway).chat.completions.create(
        model="cut-stream", messages=[{"role": "user", "content": "x"}], stream=True
    )
    got: list[str] = []
    with pytest.raises(openai.APIError) as info:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                got.append(chunk.choices[0].delta.content)
    assert got == ["Hello"]
    assert "ended unexpectedly" in info.value.message
    # The gateway is fine afterwards.
    ok = sdk(gateway).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "x"}]
    )
    assert ok.choices[0].message.content


def test_stream_stall_past_gap_limit_becomes_sse_error(
    make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    upstream.state.slow_seconds = 1.5
    gw = make_gateway(stream_read_timeout=0.3)
    with httpx.stream(
        "POST",
        f"{gw.base_url}/chat/completions",
        timeout=10,
        json={
            "model": "stall-stream",
            "stream": True,
            "messages": [{"role": "user", "content": "x"}],
        },
    ) as resp:
        data = b"".join(resp.iter_raw())
    last = [e for e in data.split(b"\n\n") if e][-1]
    assert last.startswith(b"data: ")
    assert json.loads(last[6:])["error"]["code"] == "upstream_timeout"


def test_client_disconnect_closes_upstream(gateway: Gateway, upstream: Upstream) -> None:
    with httpx.stream(
        "POST",
        f"{gateway.base_url}/chat/completions",
        timeout=10,
        json={
            "model": "hold-stream",
            "stream": True,
            "messages": [{"role": "user", "content": "x"}],
        },
    ) as resp:
        for chunk in resp.iter_raw():
            if b"Hello" in chunk:
                break
    assert upstream.state.disconnect_seen.wait(5), "upstream connection was left open"


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        (b"{not json", "invalid_json", None),
        (b"[1, 2]", "invalid_json", None),
        (b"\xff\xfe", "invalid_json", None),
        (b'{"messages": []}', "missing_required_parameter", "model"),
        (b'{"model": "gpt-test"}', "missing_required_parameter", "messages"),
        (b'{"model": "gpt-test", "messages": "hi"}', "missing_required_parameter", "messages"),
    ],
)
def test_bad_body_is_openai_shaped_400(
    gateway: Gateway, upstream: Upstream, body: bytes, code: str, param: str | None
) -> None:
    resp = httpx.post(
        f"{gateway.base_url}/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert (err["type"], err["code"], err["param"]) == ("invalid_request_error", code, param)
    assert "Traceback" not in resp.text
    assert upstream.state.requests == []


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("X-Memory-User", "has space"),
        ("X-Memory-User", "a|b"),
        ("X-Memory-User", "x" * 129),
        ("X-Memory-User", "*"),
        ("X-Project-Id", "@content:(x)"),
        ("X-Project-Id", "p" * 65),
        ("X-Memory-Mode", "sometimes"),
    ],
)
def test_bad_identity_headers_are_400(
    gateway: Gateway, upstream: Upstream, header: str, value: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        sdk(gateway).chat.completions.create(
            model="gpt-test",
            messages=[{"role": "user", "content": "x"}],
            extra_headers={header: value},
        )
    assert info.value.code == "invalid_header"
    assert info.value.param == header.lower()
    assert upstream.state.requests == []


def test_other_v1_routes_pass_through(gateway: Gateway, upstream: Upstream) -> None:
    client = sdk(gateway)
    assert [m.id for m in client.models.list()] == ["gpt-test"]
    emb = client.embeddings.create(model="text-embedding-3-small", input=["a", "bcd"])
    assert [e.embedding[2] for e in emb.data] == [1.0, 3.0]
    assert upstream.state.last("/embeddings").json()["input"] == ["a", "bcd"]
    # A multipart upload streams through with its body intact.
    payload = b"line\n" * 50_000
    resp = httpx.post(
        f"{gateway.base_url}/files?purpose=batch",
        files={"file": ("x.jsonl", payload)},
        data={"purpose": "batch"},
        headers={"authorization": f"Bearer {KEY}"},
    )
    echo = resp.json()["echo"]
    assert echo["path"] == "/v1/files" and echo["query"] == "purpose=batch"
    assert echo["body_bytes"] > len(payload)
    assert echo["content_type"].startswith("multipart/form-data")
    assert upstream.state.last("/files").headers["authorization"] == f"Bearer {KEY}"
    # DELETE and GET with query strings too.
    assert httpx.delete(f"{gateway.base_url}/files/file-1").json()["echo"]["method"] == "DELETE"


def test_passthrough_streams_response_bodies(gateway: Gateway) -> None:
    with httpx.stream("GET", f"{gateway.base_url}/events") as resp:
        assert resp.headers["content-type"] == "text/event-stream"
        chunks = [c for c in resp.iter_raw() if c]
    assert b"".join(chunks) == b"".join(f"data: {i}\n\n".encode() for i in range(5))


def test_unknown_route_is_openai_shaped_404(gateway: Gateway) -> None:
    resp = httpx.get(f"{gateway.url}/nope")
    assert resp.status_code == 404
    assert resp.json()["error"]["type"] == "not_found_error"


def test_health_and_readiness(gateway: Gateway) -> None:
    assert httpx.get(f"{gateway.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{gateway.url}/readyz")
    assert ready.status_code == 200 and ready.json()["redis"] is True


def test_concurrent_requests(gateway: Gateway) -> None:
    client = sdk(gateway)
    errors: list[BaseException] = []

    def one() -> None:
        try:
            client.chat.completions.create(
                model="gpt-test", messages=[{"role": "user", "content": "x"}]
            )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_compressed_upstream_answers_reach_the_client_decoded(
    gateway: Gateway, upstream: Upstream
) -> None:
    # The SDK offers gzip; memgate reads the answer (usage, mining), so it decodes it.
    reply = sdk(gateway).chat.completions.create(
        model="gzip", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content == upstream.state.reply_text
    # A client offering codings memgate cannot decode gets them narrowed, never garbage.
    resp = httpx.post(
        f"{gateway.base_url}/chat/completions",
        json={"model": "gzip", "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {KEY}", "accept-encoding": "br, zstd, gzip"},
    )
    assert resp.status_code == 200 and "content-encoding" not in resp.headers
    assert resp.json()["choices"][0]["message"]["content"] == upstream.state.reply_text
    assert upstream.state.last("/chat/completions").headers["accept-encoding"] == "gzip, deflate"
