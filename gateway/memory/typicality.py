"""How typical a memory is of requests in general (``policy.recall.typicality``).

Some memories sit close to almost every request of their topic ("I avoid educational
resources that need a subscription" against any question about learning): ranked by
similarity alone they come first every time and leave no room for the one that fits the
request at hand. Discounting a memory's typicality (its mean cosine to its nearest requests
in a reference sample) from its ranking score corrects this, as hubness reduction does in
nearest-neighbour retrieval (CSLS). It is worked out when a memory is written or re-embedded
and kept beside it; recall only reads it.

The reference requests are embedded with the gateway's own embedder (their vectors must be
of the memories' model) once per process and embedder, on the first write that needs them.
"""

from __future__ import annotations

import asyncio

import numpy as np

from gateway.memory.embed import Embedder
from gateway.memory.policy import Policy

# (embedder model, requests) -> their vectors; a process has one or two embedders and one
# policy, so this stays tiny
_REFERENCE: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}
_SLICE = 16


class Typicality:
    def __init__(self, embedder: Embedder, policy: Policy) -> None:
        self.embedder = embedder
        self.spec = policy.recall.typicality
        self._lock = asyncio.Lock()

    @property
    def enabled(self) -> bool:
        return self.spec.weight > 0 and bool(self.spec.requests)

    async def of(self, vectors: np.ndarray) -> list[float]:
        """Each unit-length row's typicality (0.0 for all when the policy turns it off)."""
        if not self.enabled or not len(vectors):
            return [0.0] * len(vectors)
        return of_vectors(np.asarray(vectors), await self._reference(), self.spec.neighbours)

    async def _reference(self) -> np.ndarray:
        key = (self.embedder.model_id, self.spec.requests)
        found = _REFERENCE.get(key)
        if found is None:
            async with self._lock:  # one embedding of the sample, however many writes wait
                found = _REFERENCE.get(key)
                if found is None:
                    # in slices: some embeddings APIs take only a few inputs per call
                    texts = list(self.spec.requests)
                    found = np.concatenate(
                        [
                            await self.embedder.embed(texts[i : i + _SLICE])
                            for i in range(0, len(texts), _SLICE)
                        ]
                    )
                    _REFERENCE[key] = found
        return found


def of_vectors(vectors: np.ndarray, reference: np.ndarray, neighbours: int) -> list[float]:
    """Mean cosine of each row of ``vectors`` to its ``neighbours`` nearest reference rows
    (all rows unit length)."""
    sims = vectors @ reference.T
    k = min(neighbours, reference.shape[0])
    nearest = np.partition(sims, sims.shape[1] - k, axis=1)[:, -k:]
    return [round(float(x), 4) for x in nearest.mean(axis=1)]
