"""The upstream embedder (``MEMGATE_EMBEDDINGS=upstream``) calls ``/v1/embeddings`` through the
gateway's one upstream client: its key, timeouts and error mapping, against a real loopback
upstream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from gateway.app import create_app
from gateway.config import Settings
from gateway.errors import UpstreamTimeout, UpstreamUnreachable
from gateway.memory.embed import UpstreamEmbedder, UpstreamEmbeddingsError, make_embedder
from gateway.storage.redis_server import EmbeddedRedis, free_port
from gateway.upstream import Upstream as UpstreamClient
from tests.conftest import Upstream
from tests.upstream_stub import Recorded, ServerThread

UPSTREAM_KEY = "sk-memgate-own-upstream-key"


def settings_for(url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "upstream_url": url,
        "embeddings": "upstream",
        "embeddings_model": "text-embedding-3-small",
        "upstream_api_key": UPSTREAM_KEY,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
async def client(upstream: Upstream) -> AsyncIterator[UpstreamClient]:
    made = UpstreamClient(settings_for(upstream.url))
    yield made
    await made.aclose()


@pytest.mark.anyio
async def test_embeddings_go_through_the_upstream_client(
    upstream: Upstream, client: UpstreamClient
) -> None:
    settings = settings_for(upstream.url)
    embedder = make_embedder(settings, client)
    assert isinstance(embedder, UpstreamEmbedder) and embedder.dims is None
    vectors = await embedder.embed(["I prefer tea", "我住在上海"])
    call = upstream.state.last("/embeddings")
    assert call.json() == {
        "model": "text-embedding-3-small",
        "input": ["I prefer tea", "我住在上海"],
    }
    assert call.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert call.headers["content-type"] == "application/json"
    # rows in input order, unit length (the stub's third component is the text's length)
    assert vectors.shape == (2, 3) and embedder.dims == 3
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert vectors[0][2] > vectors[1][2]
    query = await embedder.embed_query("tea")
    assert upstream.state.last("/embeddings").json()["input"] == ["tea"]
    assert query.shape == (3,) and np.isclose(np.linalg.norm(query), 1.0)


@pytest.mark.anyio
async def test_an_error_status_raises_and_teaches_no_dimensions(
    upstream: Upstream, client: UpstreamClient
) -> None:
    embedder = UpstreamEmbedder(settings_for(upstream.url, embeddings_model="error-500"), client)
    with pytest.raises(UpstreamEmbeddingsError, match="500"):
        await embedder.embed(["I prefer tea"])
    assert embedder.dims is None


@pytest.mark.anyio
async def test_a_silent_upstream_times_out_after_the_read_timeout(upstream: Upstream) -> None:
    settings = settings_for(upstream.url, embeddings_model="gated", read_timeout=0.3)
    client = UpstreamClient(settings)
    try:
        with pytest.raises(UpstreamTimeout):
            await UpstreamEmbedder(settings, client).embed(["I prefer tea"])
    finally:
        upstream.state.gate.set()  # the stub answers only after the client gave up
        await client.aclose()


@pytest.mark.anyio
async def test_an_unreachable_upstream_is_reported_as_such() -> None:
    settings = settings_for(f"http://127.0.0.1:{free_port()}/v1")
    client = UpstreamClient(settings)
    try:
        with pytest.raises(UpstreamUnreachable):
            await UpstreamEmbedder(settings, client).embed(["I prefer tea"])
    finally:
        await client.aclose()


def _embedded(upstream: Upstream, texts: list[str]) -> Recorded:
    """The one call to the upstream's /embeddings that embedded exactly ``texts``."""
    (found,) = [
        rec
        for rec in upstream.state.requests
        if rec.path.endswith("/embeddings") and rec.json()["input"] == texts
    ]
    return found


def test_a_gateway_embeds_memories_and_questions_through_its_upstream(
    tmp_path: Path, upstream: Upstream
) -> None:
    user = {"authorization": "Bearer sk-app-key", "x-memory-user": "ann"}
    with EmbeddedRedis(tmp_path / "redis") as redis_server:
        settings = settings_for(
            upstream.url, redis_url=redis_server.url, data_dir=str(tmp_path / "data")
        )
        gateway = ServerThread(create_app(settings, redis_url=redis_server.url), free_port())
        gateway.start()
        try:
            base = gateway.url + "/v1"
            made = httpx.post(
                f"{base}/memories",
                headers=user,
                json={"content": "I am allergic to peanuts", "type": "profile"},
            )
            assert made.status_code == 201, made.text
            # the first write of a process also embeds the request sample (typicality)
            stored = _embedded(upstream, ["I am allergic to peanuts"])
            assert stored.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
            chat = openai.OpenAI(base_url=base, api_key="sk-app-key", max_retries=0)
            chat.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "Can I eat peanut butter cookies?"}],
                extra_headers={"X-Memory-User": "ann"},
            )
            _embedded(upstream, ["Can I eat peanut butter cookies?"])
        finally:
            gateway.stop()


def test_a_memory_write_with_the_embeddings_upstream_down_is_a_clear_502(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"
    with EmbeddedRedis(tmp_path / "redis") as redis_server:
        settings = settings_for(down, redis_url=redis_server.url, data_dir=str(tmp_path / "data"))
        gateway = ServerThread(create_app(settings, redis_url=redis_server.url), free_port())
        gateway.start()
        try:
            resp = httpx.post(
                f"{gateway.url}/v1/memories",
                headers={"authorization": "Bearer sk-app-key"},
                json={"content": "I am allergic to peanuts", "type": "profile"},
            )
        finally:
            gateway.stop()
    assert resp.status_code == 502
    error = resp.json()["error"]
    assert (error["type"], error["code"]) == ("upstream_error", "upstream_unreachable")
    assert "Traceback" not in resp.text
