"""Texts of the policy embedded once per process, for comparing memories and requests with them.

Three rules measure a memory against texts the policy ships: its typicality against a sample
of what people ask (``gateway.memory.typicality``), whether it reads like a standing wish
against examples of how a memory applies, and which slot it reads like against the slots'
examples (both ``gateway.memory.resemblance``); one measures a request against example
requests, for the memory topics it calls for (``ResembledTopics``, embedded at start-up,
never by recall). Their vectors must
come from the gateway's own embedder (of the memories' model), so they are embedded at run
time: once per process and basis (the model and the texts), by the first caller that needs
them, however many callers wait at once. If the embedder fails on them, the caller goes on
without them, and they are not asked for again for a minute, so a failing upstream costs a
write one failed call per set of texts at most.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence

import numpy as np
import structlog

from gateway.memory.embed import Embedder

log = structlog.get_logger("memgate")

# basis -> the texts' vectors; a process has one or two embedders and one policy, so this
# stays tiny
_VECTORS: dict[str, np.ndarray] = {}
_SLICE = 16  # inputs per embedding call: some embeddings APIs take only a few
RETRY_AFTER = 60.0  # seconds without asking again after the embedder failed on the texts


class ReferenceTexts:
    """One process's vectors of ``texts`` for one embedder; ``name`` labels log lines."""

    def __init__(self, embedder: Embedder, texts: Sequence[str], name: str, salt: str = "") -> None:
        self.embedder = embedder
        self.texts = tuple(texts)
        self.name = name
        seed = "\n".join((embedder.model_id, salt, *self.texts))
        self.basis = hashlib.sha256(seed.encode()).hexdigest()[:8]
        self._lock = asyncio.Lock()
        self.failed_at: float | None = None

    @property
    def at_hand(self) -> np.ndarray | None:
        """The vectors if they were embedded already (never waits)."""
        return _VECTORS.get(self.basis)

    async def vectors(self) -> np.ndarray | None:
        """The texts' unit-length vectors (None when there are no texts, or when the embedder
        failed: logged, and not asked for again for ``RETRY_AFTER`` seconds)."""
        if not self.texts:
            return None
        found = _VECTORS.get(self.basis)
        if found is not None:
            return found
        async with self._lock:  # one embedding of the texts, however many callers wait
            found = _VECTORS.get(self.basis)
            failed = self.failed_at
            if found is None and failed is not None and time.monotonic() - failed < RETRY_AFTER:
                return None
            if found is None:
                texts = list(self.texts)
                try:
                    found = np.concatenate(
                        [
                            await self.embedder.embed(texts[i : i + _SLICE])
                            for i in range(0, len(texts), _SLICE)
                        ]
                    )
                except Exception as exc:
                    self.failed_at = time.monotonic()
                    log.warning("reference_texts_failed", texts=self.name, error=type(exc).__name__)
                    return None
                _VECTORS[self.basis] = found
        return found
