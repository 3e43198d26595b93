"""Standing by resemblance (``policy.applies.resemblance``), and a slot by resemblance
(``policy.slot_resemblance``, at the end).

The rules of ``policy.applies`` make a memory standing by its type, slot, scope or words, and
wishes about answers come in more wordings than any rule lists ("Stop flattering me", "别拍
马屁，有问题直接指出来", "Show your reasoning step by step"). A memory the rules leave topical
is compared, by meaning, with the policy's examples of standing wishes and of topical facts:
when it reads like the standing ones, it is standing too. The meaning carries across words
and across languages, as the multilingual encoder does for recall.

Only a memory whose writer did not say how it applies is judged so, and only one without a
one-valued slot: such a slot names a fact about the user's world (their editor, their city),
which is never an instruction however it is worded. A many-valued slot may be named by a
wish too ("Python 代码记得加类型注解"). The examples are embedded once per process
(``gateway.memory.reference``); until they are at hand, or when the embedder fails on them,
the rules' answer stands.
"""

from __future__ import annotations

import numpy as np
import structlog

from gateway.memory.embed import Embedder
from gateway.memory.policy import Policy, normalize
from gateway.memory.reference import ReferenceTexts

log = structlog.get_logger("memgate")


class Resemblance:
    """One process's standing-by-resemblance for one embedder and policy."""

    def __init__(self, embedder: Embedder, policy: Policy) -> None:
        self.spec = policy.applies.resemblance
        # a one-valued slot names a fact of the user's world (their editor, their city);
        # a many-valued one may be named by a wish too ("Python 代码记得加类型注解")
        self._facts = policy.one_valued_slots
        self.reference = ReferenceTexts(
            embedder, (*self.spec.always, *self.spec.relevant), "resemblance"
        )
        self._standing = np.arange(len(self.reference.texts)) < len(self.spec.always)

    @property
    def enabled(self) -> bool:
        return bool(self.spec.types) and bool(self.spec.always) and bool(self.spec.relevant)

    def considers(self, memory_type: str, slot: str | None, scope: str, applies: str) -> bool:
        """Whether a memory the rules judged ``applies`` is judged by resemblance too."""
        return (
            self.enabled
            and applies == "relevant"
            and memory_type in self.spec.types
            and slot not in self._facts
            and scope == "global"
        )

    async def prepare(self) -> None:
        """Embed the examples now (once per process), so that ``applies`` need not wait."""
        if self.enabled:
            await self.reference.vectors()

    def applies(
        self, vector: np.ndarray, memory_type: str, slot: str | None, scope: str, applies: str
    ) -> str:
        """``always`` for a memory the rules judged ``applies`` that reads like a standing
        wish (``vector``: its unit-length embedding), else ``applies``. Uses the examples'
        vectors only once they are at hand (``prepare``)."""
        examples = self.reference.at_hand
        if examples is None or not self.considers(memory_type, slot, scope, applies):
            return applies
        return "always" if self.reads_standing(np.asarray(vector) @ examples.T) else applies

    async def judge(
        self, text: str, memory_type: str, slot: str | None, scope: str, applies: str
    ) -> str | None:
        """How a memory of ``text`` that the rules judged ``applies`` applies, embedding the
        text when resemblance may decide; None when the embedder failed (undecided)."""
        if not self.considers(memory_type, slot, scope, applies):
            return applies
        await self.prepare()
        try:
            (vector,) = await self.reference.embedder.embed([text])
        except Exception as exc:
            log.warning("resemblance_not_judged", error=type(exc).__name__)
            return None
        return self.applies(vector, memory_type, slot, scope, applies)

    def reads_standing(self, sims: np.ndarray) -> bool:
        """The decision on one memory's similarities to the examples (standing ones first)."""
        spec, standing = self.spec, self._standing
        nearest = np.argsort(-sims)[: spec.neighbours]
        votes = int(standing[nearest].sum())
        best_standing = float(sims[standing].max())
        best_topical = float(sims[~standing].max())
        return (
            2 * votes > len(nearest)
            and best_standing >= spec.similarity
            and best_standing - best_topical >= spec.margin
        )


class SlotResemblance:
    """One process's slot-by-resemblance (``policy.slot_resemblance``) for one embedder.

    Rules place a memory in a slot by its words, and a one-valued subject changed back comes
    in more wordings than they list ("哎还是中文吧，英文读着太吃力了", "Swap the miles
    for kilometres from now on"). Left without its slot, the newer memory would supersede
    nothing and the older one would go on standing. A memory of the listed types that no rule
    places is compared, by meaning, with the examples of every slot and with the policy's
    texts of no slot; it takes a listed slot when it reads like that slot's examples clearly
    more than like anything else.
    """

    def __init__(self, embedder: Embedder, policy: Policy) -> None:
        self.spec = policy.slot_resemblance
        self._policy = policy
        texts: list[str] = []
        labels: list[str] = []
        for slot in policy.slots:
            texts += slot.said
            labels += [slot.name] * len(slot.said)
        # texts of no slot: topical facts, and what each slot's rules must not take
        unslotted = (
            *policy.applies.resemblance.relevant,
            *(text for slot in policy.slots for text in slot.not_examples),
            *(text for slot in policy.slots for rule in slot.unless for text in rule.examples),
        )
        texts += unslotted
        labels += [""] * len(unslotted)
        self._labels = np.array(labels)
        self._takes = np.isin(self._labels, self.spec.slots)
        self.reference = ReferenceTexts(embedder, texts, "slot_resemblance")

    @property
    def enabled(self) -> bool:
        return bool(self.spec.types) and bool(self.spec.slots)

    def considers(self, memory_type: str, slot: str | None) -> bool:
        """Whether a memory the rules placed in ``slot`` may take one by resemblance."""
        return self.enabled and slot is None and memory_type in self.spec.types

    def takes(self, name: str, text: str, memory_type: str) -> bool:
        """Whether the slot a memory reads like may hold it: a slot for other types, or one
        whose ``unless`` rules refuse the words, does not, however close the meaning ("注释
        还是用英文吧" reads like a language wished for, but code comments are not the
        answers' language)."""
        spec = self._policy.slot(name)
        return spec.holds(memory_type) and not spec.refuses(normalize(text))

    async def prepare(self) -> None:
        """Embed the examples now (once per process), so that ``slot`` need not wait."""
        if self.enabled:
            await self.reference.vectors()

    def slot(self, vector: np.ndarray) -> str | None:
        """The listed slot a memory (``vector``: its unit-length embedding) reads like, if
        any. Uses the examples' vectors only once they are at hand (``prepare``)."""
        examples = self.reference.at_hand
        if examples is None:
            return None
        sims = np.asarray(vector) @ examples.T
        best = int(np.argmax(sims))
        if not self._takes[best]:
            return None
        name = str(self._labels[best])
        others = sims[self._labels != name]
        if sims[best] < self.spec.similarity or (
            others.size and sims[best] - float(others.max()) < self.spec.margin
        ):
            return None
        return name


class ResembledTopics:
    """The memory topics a request takes by resemblance (``recall.relevance.resembled``).

    The request's words name its topics, and the policy's ``reaches`` link topics to each
    other; but which of the user's memories a request calls for is often a step no word
    takes ("what could I put out for the book club?" calls for a sesame allergy, three days
    in Chongqing for a knee bad on steps). The policy's example requests, each with the
    memory topics that matter to it and those that do not, carry that step by meaning: a
    request takes a topic that enough of its nearest examples say matters, net of those
    saying it does not.
    """

    def __init__(self, embedder: Embedder, policy: Policy) -> None:
        self.spec = policy.recall.relevance.resembled
        examples = self.spec.examples
        # an overlay may replace the topics; the agenda holds every plan by its type, which
        # says nothing of what a plan is about, and a day is said in words
        taken = {t.name for t in policy.topics} - policy.held_topics - set(self.spec.words_only)
        self._names = sorted(
            {t for e in examples for t in (*e.topics, *e.not_topics)}.intersection(taken)
        )
        column = {name: i for i, name in enumerate(self._names)}
        # one row an example: +1 where a topic matters to it, -1 where it does not
        self._votes = np.zeros((len(examples), len(self._names)))
        for i, example in enumerate(examples):
            for name in example.topics:
                if name in column:
                    self._votes[i, column[name]] += 1.0
            for name in example.not_topics:
                if name in column:
                    self._votes[i, column[name]] -= 1.0
        self.reference = ReferenceTexts(embedder, [e.text for e in examples], "resembled_topics")
        # this instance's own: what one recaller decides never depends on whether another
        # object of the process embedded the same texts first
        self._vectors: np.ndarray | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.spec.examples) and bool(self._names)

    async def prepare(self) -> bool:
        """Embed the examples (once per process) for ``topics``; whether they are at hand
        (or nothing is to be embedded). A failing embedder is logged (``ReferenceTexts``)."""
        if self.enabled and self._vectors is None:
            self._vectors = await self.reference.vectors()
        return self._vectors is not None or not self.enabled

    def topics(self, vector: np.ndarray) -> frozenset[str]:
        """The memory topics a request (``vector``: its unit-length embedding) takes from
        the examples it reads like; none before ``prepare`` brought the examples: recall
        never embeds them, as the first request would wait for a thousand texts."""
        examples = self._vectors
        if examples is None or not self._names:
            return frozenset()
        # numpy's own loop, not BLAS: a BLAS product on the request path leaves its threads
        # spinning against the encoder of the next request on a small machine
        sims = np.einsum("ij,j->i", examples, np.asarray(vector, dtype=examples.dtype))
        count = min(self.spec.neighbours, len(sims))
        nearest = np.argpartition(-sims, count - 1)[:count]
        share = self._votes[nearest].sum(axis=0) / count
        return frozenset(self._names[i] for i in np.flatnonzero(share >= self.spec.share))
