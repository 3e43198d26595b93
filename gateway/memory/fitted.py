"""How likely a topical memory is to be needed by a request, from a relevance fitted to
written scenarios (``recall.relevance.fitted``).

The cosine of two meanings weighs every dimension of the embedder alike, and most of
what makes a memory matter to a request is not closeness of meaning: a knee bad on steps
matters to three days in Chongqing, a hobby that reads much like the request does not.
Scenarios that say which memories a request needs and which it must not get teach which
dimensions carry that: a logistic model over the products of the two unit vectors,
dimension by dimension, ``sigmoid(sum_i w_i q_i m_i + b)`` (one weight a dimension: the
cosine is the case of equal weights). The weights hold only for the embedder they were
fitted with, named in the policy; another embedder (an upstream's) leaves this off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gateway.memory.embed import Embedder
from gateway.memory.policy import FittedRelevanceSpec


class FittedRelevance:
    """The policy's fitted weights for one embedder, if they are for it."""

    def __init__(self, spec: FittedRelevanceSpec, embedder: Embedder) -> None:
        self.spec = spec
        weights = np.asarray(spec.weights, dtype=np.float32)
        dims = embedder.dims
        fits = (
            bool(spec.weights)
            and spec.embedder == embedder.model_id
            and (dims is None or dims == weights.size)
        )
        self._weights = weights if fits else None

    @property
    def enabled(self) -> bool:
        return self._weights is not None

    def likelihoods(self, query: np.ndarray, memories: np.ndarray) -> np.ndarray | None:
        """For each row of ``memories`` (unit-length embeddings), how likely the request
        (``query``, its unit-length embedding) needs it, in [0, 1]; None when the vectors
        are not as wide as the weights (an embedder whose width was not known up front)."""
        weights = self._weights
        if weights is None:
            raise RuntimeError("no fitted weights for this embedder")
        rows = np.asarray(memories, dtype=np.float32)
        vector = np.asarray(query, dtype=np.float32)
        if vector.shape != weights.shape or rows.ndim != 2 or rows.shape[1] != weights.size:
            return None
        # numpy's own loop, not BLAS (as ResembledTopics): a handful of rows a request
        logits = np.einsum("ij,j->i", rows, weights * vector).astype(np.float64) + self.spec.bias
        return _sigmoid(logits)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """The logistic function without overflow for large weights: tanh saturates where exp
    would overflow."""
    return 0.5 * (1.0 + np.tanh(0.5 * x))


@dataclass(frozen=True, slots=True)
class Fit:
    weights: tuple[float, ...]
    bias: float
    pairs: int
    needed: int


def fit(
    queries: np.ndarray,
    memories: np.ndarray,
    needed: Sequence[bool],
    *,
    iterations: int = 4000,
    rate: float = 20.0,
    start: float = 5.0,
) -> Fit:
    """Logistic regression of ``needed`` on the dimension-wise products of each request's
    and memory's unit vectors (row i of ``queries`` with row i of ``memories``), by plain
    gradient descent from equal weights ``start`` (a scaled cosine): deterministic, so the
    same scenarios always give the same weights. ``rate`` is the weights' step; the bias
    takes a tenth of it, as it sees the full error of every pair."""
    x = np.asarray(queries, dtype=np.float64) * np.asarray(memories, dtype=np.float64)
    y = np.asarray(needed, dtype=np.float64)
    if x.ndim != 2 or len(x) != len(y) or not len(y):
        raise ValueError("one request and one memory vector per pair, and some pairs")
    if y.min() == y.max():
        raise ValueError("pairs of both kinds are needed: some needed, some not")
    weights = np.full(x.shape[1], start)
    bias = -1.0
    for _ in range(iterations):
        error = _sigmoid(x @ weights + bias) - y
        weights -= rate * (x.T @ error) / len(y)
        bias -= rate / 10.0 * float(error.mean())
    return Fit(
        tuple(round(float(w), 4) for w in weights),
        round(bias, 4),
        len(y),
        int(y.sum()),
    )
