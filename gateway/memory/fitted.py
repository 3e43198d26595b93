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
user's life far more than others (a week to plan, against a word to translate), and a few
directions of the request against a few of the memory (``U`` and ``V``, rank ``k``): what
one dimension of a request calls for is often said in another of the memory (a week to
plan and a night shift are not alike in any one dimension),
``sigmoid(sum_i (w_i q_i m_i + a_i m_i + c_i q_i) + (Uq) . (Vm) + b)``. The weights
hold only for the embedder they were fitted with, named in the policy; another embedder
(an upstream's) leaves this off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
        # no factors: no term across dimensions (the form before); none kept for weights
        # that are not read
        self._request_factors = _rows(spec.request_factors if fits else (), weights.size)
        self._memory_factors = _rows(spec.memory_factors if fits else (), weights.size)

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
        # (Uq) . (Vm) = m . (V^T U q): the term across dimensions is one more weight a
        # dimension of the memory, for this request
        request = np.einsum("kj,j->k", self._request_factors, vector)
        across = np.einsum("kj,k->j", self._memory_factors, request)
        # numpy's own loop, not BLAS (as ResembledTopics): a handful of rows a request
        per_memory = weights * vector + self._memory + across
        logits = np.einsum("ij,j->i", rows, per_memory).astype(np.float64)
        return _sigmoid(logits + float(np.dot(self._request, vector)) + self.spec.bias)


def _or_zeros(values: tuple[float, ...], size: int) -> np.ndarray:
    return np.asarray(values, dtype=np.float32) if values else np.zeros(size, np.float32)


def _rows(values: tuple[tuple[float, ...], ...], size: int) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).reshape(len(values), size)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """The logistic function without overflow for large weights: tanh saturates where exp
    would overflow."""
    return 0.5 * (1.0 + np.tanh(0.5 * x))


@dataclass(frozen=True, slots=True)
class Fit:
    weights: tuple[float, ...]
    memory_weights: tuple[float, ...]
    request_weights: tuple[float, ...]
    request_factors: tuple[tuple[float, ...], ...]
    memory_factors: tuple[tuple[float, ...], ...]
    bias: float
    pairs: int
    needed: int

    def layer_fields(self) -> dict[str, Any]:
        """The fit as the keys of ``recall.relevance.fitted`` (FittedRelevanceSpec) but for
        the embedder, in lists as a policy file writes them."""
        return {
            "bias": self.bias,
            "weights": list(self.weights),
            "memory_weights": list(self.memory_weights),
            "request_weights": list(self.request_weights),
            "request_factors": [list(row) for row in self.request_factors],
            "memory_factors": [list(row) for row in self.memory_factors],
        }


def fit(
    queries: np.ndarray,
    memories: np.ndarray,
    needed: Sequence[bool],
    *,
    iterations: int = 1500,
    rate: float = 0.01,
    start: float = 5.0,
    shrink: float = 1e-3,
    rank: int = 8,
    factor_shrink: float = 3e-4,
) -> Fit:
    """Logistic regression of ``needed`` on the dimension-wise products of each request's
    and memory's unit vectors (row i of ``queries`` with row i of ``memories``), on each
    vector alone and on ``rank`` products of a direction of the request with one of the
    memory, by Adam from equal product weights ``start`` (a scaled cosine), no weight for
    either vector alone and small directions drawn from a fixed seed: deterministic, so the
    same scenarios give the same weights on one machine (another BLAS may sum in another
    order, and Adam's normalised step can carry such differences on weights with next to no
    gradient). ``rate`` is Adam's step; with it, ``iterations`` bounds how far a weight
    moves from its start (twice the steps ranked held-out scenarios' pairs no better, at
    a lower log loss, without directions and with eight at a penalty of 1e-3; not tried
    through recall). The weights of a vector alone are held
    towards 0 (``shrink``, the gradient of a penalty ``shrink / 2`` times their squared
    norm), and the directions by ``factor_shrink``: without it they learn the very
    memories and requests of the scenarios fitted to, which new scenarios do not repeat
    (the README's figures say which values held-out scenarios' pairs were ranked best at)."""
    q = np.asarray(queries, dtype=np.float64)
    m = np.asarray(memories, dtype=np.float64)
    y = np.asarray(needed, dtype=np.float64)
    if q.shape != m.shape or q.ndim != 2 or len(q) != len(y) or not len(y):
        raise ValueError("one request and one memory vector per pair, and some pairs")
    if y.min() == y.max():
        raise ValueError("pairs of both kinds are needed: some needed, some not")
    if rank < 0:
        raise ValueError("the rank is a count of directions, 0 or more")
    x = q * m
    dims = x.shape[1]
    # one parameter vector: product weights, memory weights, request weights, the request's
    # and the memory's directions (rank rows each), bias
    cut = np.cumsum([dims, dims, dims, rank * dims, rank * dims])
    directions = np.random.default_rng(0).normal(0.0, 0.01, 2 * rank * dims)
    theta = np.concatenate([np.full(dims, start), np.zeros(2 * dims), directions, [-1.0]])
    penalty = np.concatenate(
        [np.zeros(dims), np.full(2 * dims, shrink), np.full(2 * rank * dims, factor_shrink), [0.0]]
    )
    first = np.zeros_like(theta)
    second = np.zeros_like(theta)
    for step in range(1, iterations + 1):
        w, a, c, u, v, b = np.split(theta, cut)
        u, v = u.reshape(rank, dims), v.reshape(rank, dims)
        qu, mv = q @ u.T, m @ v.T
        logits = x @ w + m @ a + q @ c + (qu * mv).sum(axis=1) + b[0]
        error = (_sigmoid(logits) - y) / len(y)
        grad = np.concatenate(
            [
                x.T @ error,
                m.T @ error,
                q.T @ error,
                ((error[:, None] * mv).T @ q).ravel(),
                ((error[:, None] * qu).T @ m).ravel(),
                [error.sum()],
            ]
        )
        grad += penalty * theta
        first = 0.9 * first + 0.1 * grad
        second = 0.999 * second + 0.001 * grad**2
        theta -= rate * (first / (1 - 0.9**step)) / (np.sqrt(second / (1 - 0.999**step)) + 1e-8)

    def rounded(values: np.ndarray) -> tuple[float, ...]:
        return tuple(round(float(v), 4) for v in values)

    w, a, c, u, v, b = np.split(theta, cut)
    return Fit(
        rounded(w),
        rounded(a),
        rounded(c),
        tuple(rounded(row) for row in u.reshape(rank, dims)),
        tuple(rounded(row) for row in v.reshape(rank, dims)),
        round(float(b[0]), 4),
        len(y),
        int(y.sum()),
    )
