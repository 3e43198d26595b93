"""The Responses API gets memory like chat: through the openai SDK's ``responses.create``,
plain and streamed, against a real loopback upstream."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.conftest import Gateway, Upstream
from tests.test_mining_e2e import pending
from tests.test_recall import User


def client(me: User) -> openai.OpenAI:
    return openai.OpenAI(base_url=me.gw.base_url, api_key=me.key, max_retries=0)


def headers(me: User, mode: str = "on") -> dict[str, str]:
    return {"X-Memory-User": me.headers["x-memory-user"], "X-Memory-Mode": mode}


def forwarded(upstream: Upstream) -> dict[str, Any]:
    return upstream.state.last("/responses").json()


def test_plain_response_gets_memories_in_its_instructions(
    gateway: Gateway, upstream: Upstream
) -> None:
    me = User(gateway)
    mid = me.remember("I prefer answers in French")
    raw = client(me).responses.with_raw_response.create(
        model="gpt-4o-mini",
        instructions="You are a helpful assistant.",
        input="Which language should you answer me in?",
        extra_headers=headers(me),
    )
    response = raw.parse()
    assert response.output_text == "Hello from the stub."
    assert me.injected(raw) == [mid]  # type: ignore[arg-type]
    sent = forwarded(upstream)
    # the app's own instructions first, then the memory block; the input untouched
    assert sent["instructions"].startswith("You are a helpful assistant.\n\n")
    assert "I prefer answers in French" in sent["instructions"]
    assert "<preferences id=" in sent["instructions"]
    assert sent["input"] == "Which language should you answer me in?"
    trace = me.trace(raw)
    assert trace["injected"] == [mid]
    assert float(raw.headers["x-memgate-overhead-ms"]) >= 0


def test_streamed_response_is_relayed_as_it_comes(gateway: Gateway, upstream: Upstream) -> None:
    me = User(gateway)
    mid = me.remember("I prefer answers in French")
    upstream.state.reply_text = "first second third"
    events: list[str] = []
    with client(me).responses.with_streaming_response.create(
        model="gated-stream",
        input=[
            {"role": "user", "content": "Hi there"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": [{"type": "input_text", "text": "Which language?"}]},
        ],
        stream=True,
        extra_headers=headers(me),
    ) as raw:
        assert me.injected(raw) == [mid]  # type: ignore[arg-type]
        for event in raw.parse():
            events.append(event.type)
            if event.type == "response.output_text.delta" and event.delta == "first":
                # the upstream holds the rest back until the client has seen this event
                assert upstream.state.gate_released_in_time is None
                upstream.state.gate.set()
    assert upstream.state.gate_released_in_time is True
    assert events[0] == "response.created" and events[-1] == "response.completed"
    sent = forwarded(upstream)
    assert "I prefer answers in French" in sent["instructions"]
    assert sent["input"][2]["content"][0]["text"] == "Which language?"


def test_no_memories_or_mode_off_forward_the_body_byte_for_byte(
    gateway: Gateway, upstream: Upstream
) -> None:
    me = User(gateway)
    for mode in ("on", "off", "dry-run"):
        client(me).responses.create(
            model="gpt-4o-mini",
            input="Tell me a joke",
            extra_headers=headers(me, mode),
            extra_body={"some_future_field": {"x": [1, 2]}},
        )
        sent = forwarded(upstream)
        assert "instructions" not in sent
        assert sent["some_future_field"] == {"x": [1, 2]}
        assert not any(k.startswith("x-memory") for k in upstream.state.last("/responses").headers)


def test_the_users_input_is_mined(gateway: Gateway, upstream: Upstream) -> None:
    me = User(gateway)
    list(
        client(me).responses.create(
            model="gpt-4o-mini",
            input="Remember that my favourite editor is Helix",
            stream=True,
            extra_headers=headers(me),
        )
    )
    client(me).responses.create(
        model="gpt-4o-mini",
        input=[{"role": "user", "content": "I prefer dark mode in every app"}],
        extra_headers=headers(me),
    )
    found = pending(me, 2)
    contents = " ".join(c["content"] for c in found)
    assert "Helix" in contents and "dark mode" in contents


def test_previous_response_id_conversation(gateway: Gateway, upstream: Upstream) -> None:
    """With the conversation kept upstream, each turn's own input is what is recalled for,
    and the memories go into that turn's instructions (the upstream does not carry earlier
    instructions over)."""
    me = User(gateway)
    mid = me.remember("I prefer answers in French")
    first = client(me).responses.create(
        model="gpt-4o-mini", input="Hello", extra_headers=headers(me)
    )
    raw = client(me).responses.with_raw_response.create(
        model="gpt-4o-mini",
        previous_response_id=first.id,
        input="Which language do I prefer for answers?",
        extra_headers=headers(me),
    )
    assert me.injected(raw) == [mid]  # type: ignore[arg-type]
    sent = forwarded(upstream)
    assert sent["previous_response_id"] == "resp_stub"
    assert "I prefer answers in French" in sent["instructions"]


def test_errors_are_openai_shaped(gateway: Gateway, upstream: Upstream) -> None:
    me = User(gateway)
    with pytest.raises(openai.BadRequestError) as bad:
        client(me).responses.create(model="", input="x", extra_headers=headers(me))
    assert bad.value.code == "missing_required_parameter"
    with pytest.raises(openai.InternalServerError):
        client(me).responses.create(model="error-500", input="x", extra_headers=headers(me))
