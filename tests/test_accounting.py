"""Token accounting and request logs, through the openai SDK and a real loopback upstream.

Each test starts its own gateway, so every metric value read here is this test's alone (a
shared one would also label models it has not seen among its first ones ``other``).
"""

from __future__ import annotations

import json
import re

import httpx
import openai
import pytest
import structlog

from gateway.memory import tokens
from tests.conftest import Gateway, GatewayFactory, Upstream

KEY = "sk-test-accounting"


def sdk(gw: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=KEY, max_retries=0)


def metric(gw: Gateway, name: str, **labels: str) -> float:
    text = httpx.get(f"{gw.url}/metrics").text
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{name}(?:\{{(.*)\}})? (\S+)$", line)
        if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
            total += float(match.group(2))
    return total


MESSAGES = [{"role": "user", "content": "count to six please"}]


@pytest.fixture
def gateway(fresh_gateway: Gateway) -> Gateway:
    """This module's tests read absolute metric values: each has a gateway of its own."""
    return fresh_gateway


def test_stream_without_usage_option_is_counted_and_the_extra_chunk_kept_back(
    gateway: Gateway, upstream: Upstream
) -> None:
    upstream.state.reply_text = "one two three four five six"
    chunks = list(
        sdk(gateway).chat.completions.create(model="gpt-acct", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    )
    # the client sees exactly what it would have seen without memgate asking: no usage chunk
    assert chunks and all(chunk.choices for chunk in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == (
        "one two three four five six"
    )
    # memgate asked the upstream for usage, splicing one member in front of the client's bytes
    seen = upstream.state.last("/chat/completions")
    assert seen.body.startswith(b'{"stream_options":{"include_usage":true},')
    assert json.loads(seen.body)["messages"] == MESSAGES
    # and counted what the upstream reported (the stub: 11 prompt, 20 completion)
    assert metric(gateway, "memgate_prompt_tokens_total", model="gpt-acct") == 11
    assert metric(gateway, "memgate_completion_tokens_total", model="gpt-acct") == 20


def test_stream_with_other_stream_options_keeps_them(gateway: Gateway, upstream: Upstream) -> None:
    body = {
        "model": "gpt-acct",
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_obfuscation": False},
    }
    with httpx.stream(
        "POST",
        f"{gateway.base_url}/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {KEY}"},
    ) as resp:
        data = b"".join(resp.iter_raw())
    assert b'"usage"' not in data and data.rstrip().endswith(b"data: [DONE]")
    forwarded = upstream.state.last("/chat/completions").json()
    assert forwarded["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    assert metric(gateway, "memgate_prompt_tokens_total", model="gpt-acct") == 11


def test_client_that_asked_for_usage_still_gets_it(gateway: Gateway, upstream: Upstream) -> None:
    chunks = list(
        sdk(gateway).chat.completions.create(
            model="gpt-acct",
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 11
    assert metric(gateway, "memgate_prompt_tokens_total", model="gpt-acct") == 11


def test_upstream_without_usage_gets_prompt_tokens_counted_locally(
    gateway: Gateway, upstream: Upstream
) -> None:
    expected = tokens.count_messages(MESSAGES, "no-usage")
    assert expected > 3
    with structlog.testing.capture_logs() as logs:
        list(sdk(gateway).chat.completions.create(model="no-usage", messages=MESSAGES, stream=True))  # type: ignore[arg-type]
        sdk(gateway).chat.completions.create(model="no-usage", messages=MESSAGES)  # type: ignore[arg-type]
    assert metric(gateway, "memgate_prompt_tokens_total", model="no-usage") == 2 * expected
    lines = [line for line in logs if line["event"] == "request"]
    assert [line["prompt_tokens_source"] for line in lines] == ["local", "local"]


def test_model_label_and_request_logs(gateway: Gateway, upstream: Upstream) -> None:
    client = sdk(gateway)
    with structlog.testing.capture_logs() as logs:
        client.chat.completions.create(model="gpt-acct", messages=MESSAGES)  # type: ignore[arg-type]
        try:
            client.chat.completions.create(model="error-500", messages=MESSAGES)  # type: ignore[arg-type]
        except openai.InternalServerError:
            pass
        try:
            client.chat.completions.create(model="error-429", messages=MESSAGES)  # type: ignore[arg-type]
        except openai.RateLimitError:
            pass
        httpx.get(f"{gateway.base_url}/models", headers={"Authorization": f"Bearer {KEY}"})
    assert metric(gateway, "memgate_upstream_duration_seconds_count", model="gpt-acct") == 1
    # a model the upstream never answered with success does not get a label of its own
    assert metric(gateway, "memgate_upstream_duration_seconds_count", model="error-500") == 0
    requests = [line for line in logs if line["event"] == "request"]
    by_model = {line.get("model"): line for line in requests}
    assert by_model["gpt-acct"]["log_level"] == "info"
    assert by_model["error-500"]["log_level"] == "warning"  # the upstream failed
    assert by_model["error-429"]["log_level"] == "info"  # the client's own limit
    assert by_model["gpt-acct"]["path"] == "/v1/chat/completions"
    assert [line["path"] for line in requests if line["route"] == "passthrough"] == ["/v1/models"]
    assert all(line.get("path") for line in logs), logs


def test_dry_run_injects_nothing_so_counts_no_injected_tokens(
    make_gateway: GatewayFactory, upstream: Upstream
) -> None:
    gateway = make_gateway()
    headers = {"Authorization": f"Bearer {KEY}", "X-Memory-User": "acct-dry"}
    created = httpx.post(
        f"{gateway.base_url}/memories",
        json={"content": "I prefer answers in French", "type": "preference"},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    ask = {"model": "gpt-acct", "messages": [{"role": "user", "content": "Which language?"}]}
    for mode in ("dry-run", "on"):
        resp = httpx.post(
            f"{gateway.base_url}/chat/completions",
            json=ask,
            headers={**headers, "X-Memory-Mode": mode},
        )
        assert resp.status_code == 200
        injected = resp.headers["x-memory-injected"]
        if mode == "dry-run":
            assert injected == ""
            assert metric(gateway, "memgate_injected_tokens_total") == 0
    assert injected, "the memory was not injected in mode on"
    assert metric(gateway, "memgate_injected_tokens_total", model="gpt-acct") > 0


@pytest.mark.unit
@pytest.mark.parametrize(
    "text", ["- Always answer in English", "- 以后都用中文回答我，代码注释也用中文"]
)
def test_a_recurring_line_is_counted_like_any_text(text: str) -> None:
    assert tokens.count_recurring(text, "gpt-4o-mini") == tokens.count(text, "gpt-4o-mini") > 0
    assert tokens.count_recurring(text, "gpt-4o-mini") == tokens.count(text, "gpt-4o-mini")
