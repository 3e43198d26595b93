"""Reading OpenAI request shapes: chat ``messages`` and the Responses API's ``input``.

The one place that knows where a request keeps its messages, its model and its text (a plain
string or a list of content parts). Bodies come from clients, so every reader takes any JSON
value and answers with an empty result for a shape it does not know; none of them raises.
"""

from __future__ import annotations

from typing import Any

# Content parts that carry what the user typed: chat's ``text``, the Responses API's
# ``input_text``. Images, audio and files are not text.
USER_TEXT_PARTS = ("text", "input_text")


def content_text(content: object, *, sep: str = "\n", any_part: bool = False) -> str:
    """The text of a message's ``content``: a string as it is; a list of content parts as the
    string ``text`` of each text part, joined by ``sep``; anything else (None, a number) "".

    ``any_part`` takes the ``text`` of every part that has one (an assistant's
    ``output_text`` too), for counting what the model reads.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return sep.join(
        part["text"]
        for part in content
        if isinstance(part, dict)
        and isinstance(part.get("text"), str)
        and (any_part or part.get("type") in USER_TEXT_PARTS)
    )


def messages_of(body: object) -> list[Any]:
    """A chat request's ``messages`` (a list of anything), or [] when it has none."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return messages if isinstance(messages, list) else []


def model_of(body: object) -> str:
    """The request's ``model``, or "" when it names none."""
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) else ""


def latest_user_text(messages: object) -> str:
    """What to recall for: the text of the last user message anywhere in ``messages``, its
    parts joined by spaces and stripped; "" when there is none.

    A request that ends with a tool result or an assistant prefill still asks about what the
    user last said.
    """
    if not isinstance(messages, list | tuple):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return content_text(message.get("content"), sep=" ").strip()
    return ""


def new_user_text(messages: object) -> str | None:
    """What to mine: the text of the request's last message when it is the user's (parts on
    lines of their own, so each is its own sentence), else None; None for blank text too.

    When the last message is a tool result or an assistant prefill, the latest user message
    was already mined with the request that ended with it.
    """
    if not isinstance(messages, list | tuple) or not messages:
        return None
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        return None
    text = content_text(last.get("content"))
    return text if text.strip() else None


def input_as_messages(value: object) -> list[dict[str, Any]]:
    """The Responses API's ``input`` read as chat messages: recall and mining look at the
    latest user message, as for chat. A string is one user message; items that are not
    messages (tool calls and their outputs, references to earlier items) are left out."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        return []
    return [
        {"role": item["role"], "content": item.get("content")}
        for item in value
        if isinstance(item, dict)
        and item.get("type", "message") == "message"
        and isinstance(item.get("role"), str)
    ]
