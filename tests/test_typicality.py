"""A memory's typicality (``gateway.memory.typicality``): how close it is to requests of every
kind, worked out when it is written and discounted from its ranking, never from relevance."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

from gateway.memory.identity import Identity
from gateway.memory.memories import Memories
from gateway.memory.policy import Policy, PolicyError, load_policy, parse_policy
from gateway.memory.records import Memory
from gateway.memory.scenario_eval import (
    Runner,
    _default_prefeval,
    load_prefeval,
    run_prefeval,
)
from gateway.memory.selection import score
from gateway.memory.typicality import Typicality, of_vectors
from gateway.storage.store import Hit


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy()


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


# --- the score --------------------------------------------------------------------------------


@pytest.mark.unit
def test_typicality_is_the_mean_cosine_to_the_nearest_reference_requests() -> None:
    reference = np.stack([unit(1, 0, 0), unit(1, 1, 0), unit(0, 1, 0), unit(0, 0, 1)])
    memories = np.stack([unit(1, 0, 0), unit(0, 0, 1)])
    first, second = of_vectors(memories, reference, 2)
    assert first == pytest.approx((1.0 + 2**-0.5) / 2, abs=1e-4)  # itself and the diagonal
    assert second == pytest.approx(0.5, abs=1e-4)  # itself and one orthogonal request
    # more neighbours than requests: all of them
    assert of_vectors(memories[:1], reference, 10)[0] == pytest.approx(
        (1.0 + 2**-0.5 + 0 + 0) / 4, abs=1e-4
    )


@pytest.mark.unit
def test_the_ranking_discounts_typicality_and_relevance_does_not_read_it(policy: Policy) -> None:
    spec = policy.recall
    assert spec.typicality.weight > 0
    m = Memory("m", "t", "u", "I avoid paid courses", "preference", "user_stated")
    hit = Hit(m, vector=0.4, text=0.0)
    plain, typical = score(hit, spec), score(hit, spec, 0.5)
    assert plain.fused - typical.fused == pytest.approx(spec.typicality.weight * 0.5)
    assert typical.vector == plain.vector  # the relevance bars read the cosine, unchanged
    assert typical.to_trace()["scores"]["typicality"] == 0.5
    off = parse_policy("recall: {typicality: {weight: 0}}").recall
    assert score(hit, off, 0.5).fused == score(hit, off).fused


_embedders = itertools.count()


class CountingEmbedder:
    paid = False
    dims = 3

    def __init__(self, *, fail: int = 0) -> None:
        self.model_id = f"counting-{next(_embedders)}"  # its own entry in the process's cache
        self.calls: list[int] = []
        self.fail = fail  # calls that fail before the embedder answers

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        await asyncio.sleep(0)  # let concurrent writers reach the lock
        if self.fail:
            self.fail -= 1
            raise ConnectionError("embeddings upstream down")
        return np.stack([unit(1 + i % 3, i % 2, 1) for i in range(len(texts))])

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self.embed([text]))[0]

    async def warm_up(self) -> None:
        return None


@pytest.mark.unit
@pytest.mark.anyio
async def test_the_request_sample_is_embedded_once_per_basis(policy: Policy) -> None:
    embedder = CountingEmbedder()
    typicality = Typicality(embedder, policy)
    sample = len(policy.recall.typicality.requests)
    assert not typicality.ready and typicality.encoded_now(np.stack([unit(1, 0, 0)])) == [""]
    found = await asyncio.gather(*(typicality.encoded(np.stack([unit(1, 0, 0)])) for _ in range(5)))
    # in slices of at most 16 inputs (some embeddings APIs take no more), each text once
    assert sum(embedder.calls) == sample and max(embedder.calls) <= 16
    calls = len(embedder.calls)
    (code,) = found[0]
    assert all(f == [code] for f in found) and code.endswith("/" + typicality.basis)
    other = Typicality(embedder, policy)  # another writer of the same process and basis
    assert other.ready and await other.encoded(np.stack([unit(1, 0, 0)])) == [code]
    assert len(embedder.calls) == calls
    m = Memory("m", "t", "u", "x", "preference", "user_stated", typicality=code)
    assert typicality.value(m) == float(code.split("/")[0])
    # a value of another basis (model, sample or neighbour count) counts as missing
    fewer = Typicality(embedder, parse_policy("recall: {typicality: {neighbours: 3}}"))
    assert fewer.basis != typicality.basis and fewer.value(m) is None
    off = Typicality(embedder, parse_policy("recall: {typicality: {weight: 0}}"))
    assert await off.encoded(np.stack([unit(0, 1, 0)])) == [""] and off.value(m) is None
    assert len(embedder.calls) == calls


@pytest.mark.unit
@pytest.mark.anyio
async def test_an_embedder_failing_on_the_sample_leaves_typicality_out(policy: Policy) -> None:
    embedder = CountingEmbedder(fail=1)
    typicality = Typicality(embedder, policy)
    assert await typicality.encoded(np.stack([unit(1, 0, 0)])) == [""]
    assert not typicality.ready and len(embedder.calls) == 1
    # not asked for again at once: a failing upstream costs a write one failed call at most
    assert await typicality.encoded(np.stack([unit(1, 0, 0)])) == [""]
    assert len(embedder.calls) == 1
    typicality.reference.failed_at = time.monotonic() - 61  # a minute later
    (code,) = await typicality.encoded(np.stack([unit(1, 0, 0)]))
    assert code and typicality.ready


@pytest.mark.unit
def test_the_policy_needs_enough_reference_requests() -> None:
    overlay = "recall:\n  typicality:\n    neighbours: 4\n    requests: [a, b, c]\n"
    with pytest.raises(PolicyError, match=r"overlay\.yaml:4: recall\.typicality\.requests"):
        parse_policy(overlay, "overlay.yaml")
    assert parse_policy("recall: {typicality: {weight: 0, requests: []}}")


@pytest.mark.unit
def test_the_shipped_sample_is_broad_and_in_both_languages(policy: Policy) -> None:
    requests = policy.recall.typicality.requests
    chinese = [r for r in requests if re.search(r"[\u4e00-\u9fff]", r)]
    assert len(requests) == len(set(requests)) >= 300
    assert len(chinese) >= 100 and len(requests) - len(chinese) >= 150
    # requests of anyone, not of a user with likes, diets or needs of their own
    personal = re.compile(r"\bI (?:prefer|hate|love|dislike|am allergic)\b|我(?:不)?喜欢|讨厌")
    assert not [r for r in requests if personal.search(r)]


# --- the write path and memories from before ----------------------------------------------------


async def _kept(service: Memories, ident: Identity, memory_id: str) -> float | None:
    raw = await service.store.redis.hget(
        service.store.memory_key(ident.tenant, ident.user, memory_id), "typicality"
    )
    m = Memory(memory_id, "t", "u", "x", "preference", "user_stated", typicality=_s(raw))
    return service.typicality.value(m)


def _s(raw: bytes | str | None) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw or ""


async def _expected(service: Memories, ident: Identity, memory_id: str) -> float:
    vectors = await service.store.get_embeddings(ident.tenant, ident.user, [memory_id])
    (code,) = await service.typicality.encoded(vectors[memory_id][None, :])
    return float(code.split("/")[0])


@pytest.mark.anyio
async def test_a_write_and_an_edit_keep_the_memorys_typicality(service: Memories) -> None:
    ident = Identity(f"typical{time.time_ns()}", "ann", None, "on", "tr_typical")
    made = (
        await service.create(
            ident, content="I avoid courses that need a subscription", type="preference"
        )
    ).memory
    first = await _kept(service, ident, made.id)
    assert first is not None and first == await _expected(service, ident, made.id)
    assert "typicality" not in made.to_api()
    await service.update(ident, made.id, {"content": "我更喜欢线下的小班课"})
    second = await _kept(service, ident, made.id)
    assert second is not None and second != first
    assert second == await _expected(service, ident, made.id)


@pytest.mark.anyio
async def test_recall_works_out_typicality_for_memories_from_before(runner: Runner) -> None:
    """A memory without a typicality of the current basis (written before it existed, or on
    another sample) gets one from its stored embedding when recall finds it, kept only while
    the memory still has the content it was worked out for."""
    store = runner.memories.store
    try:
        ident = Identity(runner.tenant, "old", None, "on", "tr_typical_old")
        made = [
            (await runner.memories.create(ident, content=c, type="preference")).memory
            for c in ("I never eat mushrooms", "I don't drink coffee after noon")
        ]
        expected = [await _expected(runner.memories, ident, m.id) for m in made]
        key = [store.memory_key(ident.tenant, "old", m.id) for m in made]
        await store.redis.hdel(key[0], "typicality")  # as an earlier release wrote it
        await store.redis.hset(key[1], "typicality", "0.9000/0ther0ne")  # another basis
        result = await runner.recaller.recall(ident, "Plan a dinner menu", model="gpt-4o-mini")
        used = {c.memory.id: c.typicality for c in result.candidates}
        assert [used[m.id] for m in made] == pytest.approx(expected, abs=1e-4)
        kept = [await _kept(runner.memories, ident, m.id) for m in made]
        assert kept == pytest.approx(expected, abs=1e-4)
        # kept only where the memory still says what it was worked out for
        now = await store.redis.hget(key[0], "typicality")
        was = now.decode() if isinstance(now, bytes) else str(now)
        for stale in (
            {made[0].id: ("an edited text", was, "0.5000/x")},  # edited meanwhile
            {made[0].id: (made[0].content, "", "0.5000/x")},  # given a value meanwhile
            {"mem_gone000000000000000000": (made[0].content, "", "0.5000/x")},  # deleted
        ):
            assert await store.keep_typicality(ident.tenant, "old", stale)
        assert await _kept(runner.memories, ident, made[0].id) == pytest.approx(expected[0])
        assert not await store.redis.exists(
            store.memory_key(ident.tenant, "old", "mem_gone000000000000000000")
        )
    finally:
        await runner.forget(["old"])


@pytest.mark.anyio
async def test_recall_never_waits_for_the_request_sample(runner: Runner) -> None:
    """With the sample not at hand (another embedder model, cold), a memory without a
    typicality ranks as if it had none, and recall embeds nothing but the question."""
    store = runner.memories.store
    try:
        ident = Identity(runner.tenant, "cold", None, "on", "tr_typical_cold")
        made = (
            await runner.memories.create(ident, content="I never eat mushrooms", type="preference")
        ).memory
        await store.redis.hdel(store.memory_key(ident.tenant, "cold", made.id), "typicality")
        cold = CountingEmbedder()  # a basis whose sample nobody has embedded
        runner.recaller.typicality = Typicality(
            cold, parse_policy("recall: {typicality: {neighbours: 7}}")
        )
        result = await runner.recaller.recall(ident, "Plan a dinner menu", model="gpt-4o-mini")
        (cand,) = [c for c in result.candidates if c.memory.id == made.id]
        assert cand.typicality == 0.0 and cold.calls == []
        assert await _kept(runner.memories, ident, made.id) is None
    finally:
        await runner.forget(["cold"])


# --- PrefEval through the product path --------------------------------------------------------


@pytest.mark.anyio
async def test_a_preference_merged_into_an_equal_one_is_held_by_it(
    tmp_path: Path, runner: Runner
) -> None:
    """PrefEval repeats a few preferences in other words: the write path keeps one memory,
    and a question of the repeated one is answered when that memory is injected."""
    folder = tmp_path / "explicit_preference"
    folder.mkdir()
    rows = [
        {
            "preference": "I have a severe peanut allergy, so I avoid anything with peanuts.",
            "question": "What snacks should I bring to a picnic?",
        },
        {
            "preference": "I have a severe peanut allergy, so I must avoid anything with peanuts.",
            "question": "Suggest some snacks for a long hike.",
        },
    ]
    (folder / "food.json").write_text(json.dumps(rows))
    (folder / "pets.json").write_text(
        json.dumps([{"preference": "I dislike reptiles as pets.", "question": "Which pet?"}])
    )
    result = await run_prefeval(runner, load_prefeval(folder))
    assert (result.questions, result.stored, result.merged) == (3, 2, 1)
    assert result.hits == 3  # both snack questions get the one allergy memory


@pytest.mark.anyio
@pytest.mark.long
async def test_prefeval_through_the_product_path_meets_its_floor(runner: Runner) -> None:
    """Where PrefEval's data sits beside the repository (it is not shipped): at least 60 of
    its 100 questions get their own preference, at most 2.5 memories injected on average."""
    folder = _default_prefeval()
    if folder is None:
        pytest.skip("PrefEval's data is not beside the repository")
    result = await run_prefeval(runner, load_prefeval(folder))
    assert result.questions == 100
    assert result.hits >= 60 and result.mean_injected <= 2.5, result
