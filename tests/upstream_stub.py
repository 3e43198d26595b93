"""A real OpenAI-protocol HTTP server on loopback (raw ASGI under uvicorn) that records requests.

Behaviour is chosen by the request's ``model`` so a test can script faults per call:
``error-500``, ``error-429``, ``slow`` (sleeps ``slow_seconds``), ``cut-stream`` (drops the
connection mid-stream), ``stall-stream`` (goes quiet mid-stream), ``gated-stream`` (waits for
``gate`` before finishing), ``hold-stream`` (streams until the client goes away), ``no-usage``
(an upstream that never reports token usage). ``/embeddings`` knows ``error-500`` and
``gated`` (answers once ``gate`` is set).

A request for memgate's LLM extractor (``response_format`` is the ``memory_candidates`` JSON
schema) is answered with ``extract_reply`` as the message content (the test decides the
candidates, or a malformed reply) and ``extract_status`` as the status.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn


@dataclass
class Recorded:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class StubState:
    requests: list[Recorded] = field(default_factory=list)
    slow_seconds: float = 2.0
    chunk_delay: float = 0.0
    gate: threading.Event = field(default_factory=threading.Event)
    gate_released_in_time: bool | None = None
    disconnect_seen: threading.Event = field(default_factory=threading.Event)
    reply_text: str = "Hello from the stub."
    extract_reply: str = '{"candidates": []}'
    extract_status: int = 200

    def reset(self) -> None:
        self.requests.clear()
        self.gate.clear()
        self.gate_released_in_time = None
        self.disconnect_seen.clear()
        self.chunk_delay = 0.0
        self.reply_text = "Hello from the stub."
        self.extract_reply = '{"candidates": []}'
        self.extract_status = 200

    def extractions(self) -> list[Recorded]:
        """The LLM extractor's calls, in order."""
        return [rec for rec in self.requests if _is_extraction(rec)]

    def last(self, path_suffix: str = "") -> Recorded:
        for rec in reversed(self.requests):
            if rec.path.endswith(path_suffix):
                return rec
        raise AssertionError(f"no request to *{path_suffix} recorded")


def _is_extraction(rec: Recorded) -> bool:
    if not rec.path.endswith("/chat/completions"):
        return False
    try:
        fmt = json.loads(rec.body).get("response_format") or {}
    except ValueError:
        return False
    return bool(
        fmt.get("type") == "json_schema"
        and (fmt.get("json_schema") or {}).get("name") == "memory_candidates"
    )


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _usage_chunk(model: str) -> bytes:
    payload = {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
        "choices": [],
        "usage": {"prompt_tokens": 11, "completion_tokens": 20, "total_tokens": 31},
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


class UpstreamStub:
    def __init__(self) -> None:
        self.state = StubState()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        rec = Recorded(
            scope["method"], scope["path"], scope["query_string"].decode(), headers, body
        )
        self.state.requests.append(rec)
        path = scope["path"]
        if path.endswith("/chat/completions"):
            await self._chat(rec, receive, send)
        elif path.endswith("/responses"):
            await self._responses(rec, send)
        elif path.endswith("/models"):
            await _json(
                send,
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": "gpt-test", "object": "model", "created": 0, "owned_by": "stub"}
                    ],
                },
            )
        elif path.endswith("/embeddings"):
            data = json.loads(body)
            if data.get("model") == "error-500":
                await _json(
                    send,
                    500,
                    {"error": {"message": "boom", "type": "server_error", "param": None}},
                )
                return
            if data.get("model") == "gated":
                await asyncio.to_thread(self.state.gate.wait, 10.0)
            inputs = data["input"] if isinstance(data["input"], list) else [data["input"]]
            await _json(
                send,
                200,
                {
                    "object": "list",
                    "model": data["model"],
                    "data": [
                        {"object": "embedding", "index": i, "embedding": [0.1, 0.2, float(len(t))]}
                        for i, t in enumerate(inputs)
                    ],
                    "usage": {"prompt_tokens": 3, "total_tokens": 3},
                },
            )
        elif path.endswith("/events"):
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            for i in range(5):
                await send(
                    {
                        "type": "http.response.body",
                        "body": f"data: {i}\n\n".encode(),
                        "more_body": True,
                    }
                )
                await asyncio.sleep(0.01)
            await send({"type": "http.response.body", "body": b""})
        else:
            await _json(
                send,
                200,
                {
                    "echo": {
                        "method": rec.method,
                        "path": path,
                        "query": rec.query,
                        "body_bytes": len(body),
                        "content_type": headers.get("content-type"),
                    }
                },
            )

    async def _responses(self, rec: Recorded, send: Any) -> None:
        """The Responses API: one output message, plain or as a stream of events."""
        data = rec.json()
        model = data.get("model", "")
        st = self.state
        if model == "error-500":
            await _json(
                send,
                500,
                {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}},
            )
            return
        if not data.get("stream"):
            await _json(send, 200, _response(model, st.reply_text))
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream; charset=utf-8")],
            }
        )
        seq = 0

        async def emit(payload: dict[str, Any]) -> None:
            nonlocal seq
            payload["sequence_number"] = seq
            seq += 1
            await send({"type": "http.response.body", "more_body": True, "body": _event(payload)})

        await emit({"type": "response.created", "response": _response(model, "", "in_progress")})
        words = st.reply_text.split(" ")
        for i, word in enumerate(words):
            await emit(
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg_stub",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": word if i == 0 else " " + word,
                    "logprobs": [],
                }
            )
            if i == 0 and model == "gated-stream":
                released = await asyncio.to_thread(st.gate.wait, 10.0)
                st.gate_released_in_time = released
        await emit({"type": "response.completed", "response": _response(model, st.reply_text)})
        await send({"type": "http.response.body", "body": b""})

    async def _chat(self, rec: Recorded, receive: Any, send: Any) -> None:
        data = rec.json()
        model = data.get("model", "")
        st = self.state
        if _is_extraction(rec):
            if st.extract_status != 200:
                await _json(
                    send,
                    st.extract_status,
                    {
                        "error": {
                            "message": "stub extraction error",
                            "type": "server_error",
                            "param": None,
                            "code": None,
                        }
                    },
                )
                return
            await _json(send, 200, _completion(model, st.extract_reply))
            return
        if model == "error-500":
            await _json(
                send,
                500,
                {
                    "error": {
                        "message": "The server had an error",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    }
                },
                extra=[(b"x-request-id", b"req_stub_500"), (b"x-should-retry", b"false")],
            )
            return
        if model == "error-429":
            await _json(
                send,
                429,
                {
                    "error": {
                        "message": "Rate limit reached",
                        "type": "requests",
                        "param": None,
                        "code": "rate_limit_exceeded",
                    }
                },
                extra=[
                    (b"retry-after", b"7"),
                    (b"x-ratelimit-remaining-requests", b"0"),
                    (b"x-request-id", b"req_stub_429"),
                    (b"x-should-retry", b"false"),
                ],
            )
            return
        if model == "gzip" and not data.get("stream"):
            accepted = rec.headers.get("accept-encoding", "")
            payload = json.dumps(_completion(model, st.reply_text)).encode()
            coded = "gzip" in accepted
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"application/json"),
                        *([(b"content-encoding", b"gzip")] if coded else []),
                    ],
                }
            )
            await send(
                {"type": "http.response.body", "body": gzip.compress(payload) if coded else payload}
            )
            return
        if model == "slow":
            await asyncio.sleep(st.slow_seconds)
        if not data.get("stream"):
            answer = _completion(model, st.reply_text)
            if model == "no-usage":
                del answer["usage"]
            await _json(
                send,
                200,
                answer,
                extra=[
                    (b"x-request-id", b"req_stub_1"),
                    (b"x-ratelimit-remaining-tokens", b"9999"),
                    (b"openai-processing-ms", b"5"),
                ],
            )
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"x-request-id", b"req_stub_stream"),
                ],
            }
        )
        words = st.reply_text.split(" ")
        await send(
            {
                "type": "http.response.body",
                "more_body": True,
                "body": _chunk(model, {"role": "assistant", "content": ""}),
            }
        )
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            await send(
                {
                    "type": "http.response.body",
                    "more_body": True,
                    "body": _chunk(model, {"content": piece}),
                }
            )
            if st.chunk_delay:
                await asyncio.sleep(st.chunk_delay)
            if i == 0 and model == "gated-stream":
                released = await asyncio.to_thread(st.gate.wait, 10.0)
                st.gate_released_in_time = released
            if i == 0 and model == "cut-stream":
                raise RuntimeError("stub: connection cut mid-stream")
            if i == 0 and model == "stall-stream":
                await asyncio.sleep(st.slow_seconds)
            if i == 0 and model == "hold-stream":
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        st.disconnect_seen.set()
                        return
        await send(
            {
                "type": "http.response.body",
                "more_body": True,
                "body": _chunk(model, {}, finish="stop"),
            }
        )
        if (data.get("stream_options") or {}).get("include_usage") and model != "no-usage":
            await send(
                {"type": "http.response.body", "more_body": True, "body": _usage_chunk(model)}
            )
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


def _response(model: str, text: str, status: str = "completed") -> dict[str, Any]:
    done = status == "completed"
    return {
        "id": "resp_stub",
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "model": model,
        "output": [
            {
                "type": "message",
                "id": "msg_stub",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ]
        if done
        else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "usage": {
            "input_tokens": 13,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 18,
        }
        if done
        else None,
    }


def _event(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


async def _json(
    send: Any, status: int, payload: Any, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class ServerThread:
    """Runs an ASGI app under uvicorn in a background thread on a loopback port."""

    def __init__(
        self,
        app: Any,
        port: int,
        *,
        uvicorn_logging: bool = True,
        sock: socket.socket | None = None,
    ) -> None:
        """``sock``, when given, is a socket already bound to ``port`` that the server
        listens on: a port held from before the server exists (a scraper configured with it
        while nothing listens there) that no other process can take in the meantime."""
        self.port = port
        extra: dict[str, Any] = {} if uvicorn_logging else {"log_config": None}
        # As `memgate serve` runs it: the peer address is the socket's, never X-Forwarded-For.
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
            access_log=False,
            proxy_headers=False,
            **extra,
        )
        self.server = uvicorn.Server(config)
        sockets = None if sock is None else [sock]
        self.thread = threading.Thread(target=self.server.run, args=(sockets,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("server thread died at start")
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start in time")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
