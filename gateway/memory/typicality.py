"""How typical a memory is of requests in general (``policy.recall.typicality``).

Some memories sit close to almost every request of their topic ("I avoid educational
resources that need a subscription" against any question about learning): ranked by
similarity alone they come first every time and leave no room for the one that fits the
request at hand. Discounting a memory's typicality (its mean cosine to its nearest requests
in a reference sample) from its ranking score corrects this, as hubness reduction does in
nearest-neighbour retrieval (CSLS).

A memory's typicality is worked out when it is written, edited or moved to another model,
and kept beside it with the basis it was worked out on (the embedding model, the sample and
the neighbour count), so a value from another basis counts as missing. Recall fills in
missing ones from the stored embeddings, but only once the sample's vectors are at hand: it
never embeds the sample itself, so a cold or failing embedder cannot hold up a request.

The sample is embedded with the gateway's own embedder once per process and basis
(``gateway.memory.reference``): by the first write that needs it, or by the background loop
beside a gateway with the local embedder (one with an upstream embedder fills in older
memories' values only after its first write). If the embedder fails, the memory is stored
without a typicality (recall fills it in later).
"""

from __future__ import annotations

import numpy as np

from gateway.memory.embed import Embedder
from gateway.memory.policy import Policy
from gateway.memory.records import Memory
from gateway.memory.reference import ReferenceTexts


class Typicality:
    """One process's typicality for one embedder and policy."""

    def __init__(self, embedder: Embedder, policy: Policy) -> None:
        self.spec = policy.recall.typicality
        self.reference = ReferenceTexts(
            embedder, self.spec.requests, "typicality", salt=str(self.spec.neighbours)
        )
        self.basis = self.reference.basis

    @property
    def enabled(self) -> bool:
        return self.spec.weight > 0 and bool(self.spec.requests)

    async def sample(self) -> np.ndarray | None:
        """The sample's vectors, embedded once per process and basis (None when off, or
        when the embedder failed on it)."""
        return await self.reference.vectors() if self.enabled else None

    async def encoded(self, vectors: np.ndarray) -> list[str]:
        """What to keep beside each memory (unit-length rows): its typicality and basis,
        or "" when off or the sample could not be had."""
        sample = await self.sample()
        return self._encode(vectors, sample)

    @property
    def ready(self) -> bool:
        """Whether the sample's vectors are at hand (recall never waits for them)."""
        return self.enabled and self.reference.at_hand is not None

    def encoded_now(self, vectors: np.ndarray) -> list[str]:
        """The same from the sample's vectors at hand, without waiting ("" for each row
        while they are not)."""
        return self._encode(vectors, self.reference.at_hand if self.enabled else None)

    def _encode(self, vectors: np.ndarray, sample: np.ndarray | None) -> list[str]:
        if sample is None or not len(vectors):
            return [""] * len(vectors)
        values = of_vectors(np.asarray(vectors), sample, self.spec.neighbours)
        return [f"{value:.4f}/{self.basis}" for value in values]

    def value(self, memory: Memory) -> float | None:
        """A memory's typicality if it was worked out on this basis (None: missing, from
        another model, sample or neighbour count, or the policy turns typicality off)."""
        value, _, basis = memory.typicality.partition("/")
        if not value or basis != self.basis or not self.enabled:
            return None
        try:
            return float(value)
        except ValueError:
            return None


def of_vectors(vectors: np.ndarray, reference: np.ndarray, neighbours: int) -> list[float]:
    """Mean cosine of each row of ``vectors`` to its ``neighbours`` nearest reference rows
    (all rows unit length)."""
    sims = vectors @ reference.T
    k = min(neighbours, reference.shape[0])
    nearest = np.partition(sims, sims.shape[1] - k, axis=1)[:, -k:]
    return [round(float(x), 4) for x in nearest.mean(axis=1)]
