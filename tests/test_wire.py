"""Reading OpenAI request shapes: any JSON a client sends is read, never raised on."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.wire import (
    content_text,
    input_as_messages,
    latest_user_text,
    messages_of,
    model_of,
    new_user_text,
)

pytestmark = pytest.mark.unit

ODD_VALUES: list[Any] = [None, 42, 1.5, True, {"text": "not a list"}, "", []]


def test_content_text_reads_strings_and_text_parts_in_both_languages() -> None:
    assert content_text("以后都用中文回答我") == "以后都用中文回答我"
    parts = [
        {"type": "text", "text": "I prefer tea"},
        {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
        {"type": "input_text", "text": "我住在上海"},
        {"type": "input_image", "image_url": "https://example.com/y.png"},
    ]
    assert content_text(parts) == "I prefer tea\n我住在上海"
    assert content_text(parts, sep=" ") == "I prefer tea 我住在上海"


def test_content_text_skips_odd_parts() -> None:
    parts = [
        "a bare string is not a part",
        None,
        7,
        {"type": "text"},  # no text
        {"type": "text", "text": 12},  # text that is not a string
        {"type": "text", "text": ["nested"]},
        {"text": "a part without a type"},
        {"type": "output_text", "text": "an assistant's words"},
        {"type": "text", "text": "kept"},
    ]
    assert content_text(parts) == "kept"
    # counting what the model reads takes every part that has a string text
    assert content_text(parts, sep=" ", any_part=True) == (
        "a part without a type an assistant's words kept"
    )


@pytest.mark.parametrize("value", [None, 42, 1.5, True, {"type": "text", "text": "x"}])
def test_content_text_of_a_value_that_is_neither_string_nor_list_is_empty(value: Any) -> None:
    assert content_text(value) == ""
    assert content_text(value, any_part=True) == ""


def test_latest_user_text_is_the_last_user_message_anywhere() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Which city do I live in?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": []},
        {"role": "tool", "content": "{}"},
    ]
    assert latest_user_text(messages) == "Which city do I live in?"
    messages.append({"role": "user", "content": [{"type": "text", "text": "  我喜欢喝茶 "}]})
    assert latest_user_text(messages) == "我喜欢喝茶"


def test_latest_user_text_joins_parts_with_spaces_and_strips() -> None:
    content = [
        {"type": "text", "text": " always answer "},
        {"type": "input_text", "text": "in 中文 "},
    ]
    assert latest_user_text([{"role": "user", "content": content}]) == "always answer  in 中文"


def test_latest_user_text_stops_at_the_last_user_message_even_without_text() -> None:
    messages = [
        {"role": "user", "content": "I prefer tea"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
    ]
    assert latest_user_text(messages) == ""


@pytest.mark.parametrize("messages", ODD_VALUES)
def test_latest_user_text_of_odd_messages_is_empty(messages: Any) -> None:
    assert latest_user_text(messages) == ""


def test_latest_user_text_skips_messages_that_are_not_objects() -> None:
    messages = [{"role": "user", "content": "hello"}, "user", None, ["user"], {"role": "user"}]
    assert latest_user_text(messages) == ""  # the last user message has no content
    assert latest_user_text(messages[:4]) == "hello"


def test_new_user_text_is_only_a_last_message_from_the_user() -> None:
    assert new_user_text([{"role": "user", "content": "I prefer tea"}]) == "I prefer tea"
    tool_turn = [{"role": "user", "content": "I prefer tea"}, {"role": "tool", "content": "ok"}]
    assert new_user_text(tool_turn) is None
    prefill = [{"role": "user", "content": "我住在上海"}, {"role": "assistant", "content": "好"}]
    assert new_user_text(prefill) is None


def test_new_user_text_puts_each_part_on_its_own_line_and_keeps_the_text_as_written() -> None:
    content = [
        {"type": "text", "text": "I prefer tea "},
        {"type": "input_text", "text": "我住在上海"},
    ]
    assert new_user_text([{"role": "user", "content": content}]) == "I prefer tea \n我住在上海"
    assert new_user_text([{"role": "user", "content": " 我喜欢猫 "}]) == " 我喜欢猫 "


@pytest.mark.parametrize(
    "messages",
    [
        *ODD_VALUES,
        [{"role": "user", "content": "   "}],
        [{"role": "user", "content": None}],
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
        [{"role": "user"}],
        [{"content": "no role"}],
        ["user"],
        [None],
    ],
)
def test_new_user_text_of_odd_or_blank_messages_is_none(messages: Any) -> None:
    assert new_user_text(messages) is None


def test_messages_and_model_of_a_body() -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    assert messages_of(body) == body["messages"]
    assert model_of(body) == "gpt-4o-mini"
    for odd in [*ODD_VALUES, {"messages": "hi", "model": 4}, {"messages": None, "model": None}]:
        assert messages_of(odd) == []
        assert model_of(odd) == ""


def test_responses_input_as_messages() -> None:
    assert input_as_messages("我住在上海") == [{"role": "user", "content": "我住在上海"}]
    items = [
        {"role": "developer", "content": "be brief"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "{}"},
        {"type": "item_reference", "id": "msg_1"},
        {"type": "message", "role": 3, "content": "a role that is not a string"},
        "a bare string",
        None,
    ]
    assert input_as_messages(items) == [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    ]
    assert latest_user_text(input_as_messages(items)) == "hi"


@pytest.mark.parametrize("value", [None, 42, {"role": "user", "content": "x"}])
def test_responses_input_of_an_odd_shape_has_no_messages(value: Any) -> None:
    assert input_as_messages(value) == []
