"""How likely a topical memory is to be needed by a request, from a relevance fitted to
written scenarios (``recall.relevance.fitted``).

The cosine of two meanings weighs every dimension of the embedder alike, and most of
what makes a memory matter to a request is not closeness of meaning: a knee bad on steps
matters to three days in Chongqing, a hobby that reads much like the request does not.
Scenarios that say which memories a request needs and which it must not get teach which
dimensions carry that: a logistic model over the products of the two unit vectors,
dimension by dimension (one weight a dimension: the cosine is the case of equal weights),
plus what each vector says alone: some kinds of memory matter to many requests (an
allergy, a night shift, a knee that cannot take stairs) and some requests call for the
user's life far more than others (a week to plan, against a word to translate),
``sigmoid(sum_i (w_i q_i m_i + a_i m_i + c_i q_i) + b)``. The weights hold only for the
embedder they were fitted with, named in the policy; another embedder (an upstream's)
leaves this off.
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
        # no weights for what a vector says alone: the products' terms only (the form before)
        self._memory = _or_zeros(spec.memory_weights, weights.size)
        self._request = _or_zeros(spec.request_weights, weights.size)

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
        logits = np.einsum("ij,j->i", rows, weights * vector + self._memory).astype(np.float64)
        return _sigmoid(logits + float(np.dot(self._request, vector)) + self.spec.bias)


def _or_zeros(values: tuple[float, ...], size: int) -> np.ndarray:
    return np.asarray(values, dtype=np.float32) if values else np.zeros(size, np.float32)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """The logistic function without overflow for large weights: tanh saturates where exp
    would overflow."""
    return 0.5 * (1.0 + np.tanh(0.5 * x))


@dataclass(frozen=True, slots=True)
class Fit:
    weights: tuple[float, ...]
    memory_weights: tuple[float, ...]
    request_weights: tuple[float, ...]
    bias: float
    pairs: int
    needed: int


def fit(
    queries: np.ndarray,
    memories: np.ndarray,
    needed: Sequence[bool],
    *,
    iterations: int = 1500,
    rate: float = 0.01,
    start: float = 5.0,
    shrink: float = 1e-3,
) -> Fit:
    """Logistic regression of ``needed`` on the dimension-wise products of each request's
    and memory's unit vectors (row i of ``queries`` with row i of ``memories``) and on each
    vector alone, by Adam from equal product weights ``start`` (a scaled cosine) and no
    weight for either vector alone: deterministic, so the same scenarios give the same
    weights on one machine (another BLAS may sum in another order, and Adam's normalised
    step can carry such differences on weights with next to no gradient). ``rate`` is Adam's
    step; with it, ``iterations`` bounds how far a weight moves from its start (twice the
    steps rank held-out scenarios' pairs no better, at a lower log loss; not tried through
    recall). The weights of a vector alone are held towards
    0 (``shrink``, the gradient of a penalty ``shrink / 2`` times their squared norm):
    without it they learn the very memories and requests of the scenarios fitted to, which
    new scenarios do not repeat."""
    q = np.asarray(queries, dtype=np.float64)
    m = np.asarray(memories, dtype=np.float64)
    y = np.asarray(needed, dtype=np.float64)
    if q.shape != m.shape or q.ndim != 2 or len(q) != len(y) or not len(y):
        raise ValueError("one request and one memory vector per pair, and some pairs")
    if y.min() == y.max():
        raise ValueError("pairs of both kinds are needed: some needed, some not")
    x = q * m
    dims = x.shape[1]
    # one parameter vector: product weights, memory weights, request weights, bias
    theta = np.concatenate([np.full(dims, start), np.zeros(2 * dims), [-1.0]])
    penalty = np.concatenate([np.zeros(dims), np.full(2 * dims, shrink), [0.0]])
    first = np.zeros_like(theta)
    second = np.zeros_like(theta)
    for step in range(1, iterations + 1):
        w, a, c, b = theta[:dims], theta[dims : 2 * dims], theta[2 * dims : 3 * dims], theta[-1]
        error = (_sigmoid(x @ w + m @ a + q @ c + b) - y) / len(y)
        grad = np.concatenate([x.T @ error, m.T @ error, q.T @ error, [error.sum()]])
        grad += penalty * theta
        first = 0.9 * first + 0.1 * grad
        second = 0.999 * second + 0.001 * grad**2
        theta -= rate * (first / (1 - 0.9**step)) / (np.sqrt(second / (1 - 0.999**step)) + 1e-8)

    def rounded(values: np.ndarray) -> tuple[float, ...]:
        return tuple(round(float(v), 4) for v in values)

    return Fit(
        rounded(theta[:dims]),
        rounded(theta[dims : 2 * dims]),
        rounded(theta[2 * dims : 3 * dims]),
        round(float(theta[-1]), 4),
        len(y),
        int(y.sum()),
    )
