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

The sample is embedded with the gateway's own embedder (its vectors must be of the memories'
model), once per process and basis: by the first write that needs it, or by the background
loop beside a gateway with the local embedder (one with an upstream embedder fills in older
memories' values only after its first write). If the embedder fails, the memory is stored
without a typicality (recall fills it in later), and the sample is not asked for again for
a minute, so a failing upstream costs a write one failed call at most.
"""

from __future__ import annotations

import asyncio
import hashlib
import time

import numpy as np
import structlog

from gateway.memory.embed import Embedder
from gateway.memory.policy import Policy
from gateway.memory.records import Memory

log = structlog.get_logger("memgate")

# basis -> the sample's vectors; a process has one or two embedders and one policy, so this
# stays tiny
_SAMPLES: dict[str, np.ndarray] = {}
_SLICE = 16  # inputs per embedding call: some embeddings APIs take only a few
_RETRY_AFTER = 60.0  # seconds without asking again after the embedder failed on the sample


class Typicality:
    """One process's typicality for one embedder and policy."""

    def __init__(self, embedder: Embedder, policy: Policy) -> None:
        self.embedder = embedder
        self.spec = policy.recall.typicality
        requests = "\n".join(self.spec.requests)
        seed = f"{embedder.model_id}\n{self.spec.neighbours}\n{requests}"
        self.basis = hashlib.sha256(seed.encode()).hexdigest()[:8]
        self._lock = asyncio.Lock()
        self._failed_at: float | None = None

    @property
    def enabled(self) -> bool:
        return self.spec.weight > 0 and bool(self.spec.requests)

    async def sample(self) -> np.ndarray | None:
        """The sample's vectors, embedded once per process and basis (None when off, or
        when the embedder failed: logged, and not asked for again for a minute)."""
        if not self.enabled:
            return None
        found = _SAMPLES.get(self.basis)
        if found is not None:
            return found
        async with self._lock:  # one embedding of the sample, however many writes wait
            found = _SAMPLES.get(self.basis)
            failed = self._failed_at
            if found is None and failed is not None and time.monotonic() - failed < _RETRY_AFTER:
                return None
            if found is None:
                texts = list(self.spec.requests)
                try:
                    found = np.concatenate(
                        [
                            await self.embedder.embed(texts[i : i + _SLICE])
                            for i in range(0, len(texts), _SLICE)
                        ]
                    )
                except Exception as exc:
                    self._failed_at = time.monotonic()
                    log.warning("typicality_sample_failed", error=type(exc).__name__)
                    return None
                _SAMPLES[self.basis] = found
        return found

    async def encoded(self, vectors: np.ndarray) -> list[str]:
        """What to keep beside each memory (unit-length rows): its typicality and basis,
        or "" when off or the sample could not be had."""
        sample = await self.sample()
        return self._encode(vectors, sample)

    @property
    def ready(self) -> bool:
        """Whether the sample's vectors are at hand (recall never waits for them)."""
        return self.enabled and self.basis in _SAMPLES

    def encoded_now(self, vectors: np.ndarray) -> list[str]:
        """The same from the sample's vectors at hand, without waiting ("" for each row
        while they are not)."""
        return self._encode(vectors, _SAMPLES.get(self.basis) if self.enabled else None)

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
