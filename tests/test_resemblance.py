"""Standing by resemblance (``gateway.memory.resemblance``): a wish about answers that no rule
lists is standing because it reads like the policy's examples of standing wishes; facts stay
topical, a one-valued slot is never an instruction, and what the writer said is kept."""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable

import numpy as np
import pytest

from gateway.clock import SystemClock
from gateway.memory.candidates import CandidateQueue
from gateway.memory.embed import LocalEmbedder
from gateway.memory.identity import Identity
from gateway.memory.memories import Memories
from gateway.memory.mine import Proposal, screen
from gateway.memory.policy import Policy, PolicyError, derive_applies, derive_slot, parse_policy
from gateway.memory.resemblance import Resemblance, ResembledTopics
from gateway.storage.store import Store

pytestmark = pytest.mark.anyio

# Wishes about every answer, worded apart from the rules' patterns and examples: the rules
# alone leave each of them topical (asserted below), resemblance makes them standing.
WISHES = [
    ("Stop flattering me. No 'great question!' openers.", "preference"),
    ("Please skip the disclaimers and the 'consult a professional' stuff.", "preference"),
    ("Write unit tests alongside any function you give me.", "preference"),
    ("Show your reasoning step by step before the final answer.", "preference"),
    ("English isn't my first language, so avoid idioms and slang.", "profile"),
    ("别拍马屁，有问题直接指出来。", "preference"),
    ("回答完不要再反问我问题。", "preference"),
    ("每个知识点都配一个具体的例子。", "preference"),
]
# Facts and likes, some with answer-ish words: topical by the rules and by resemblance.
FACTS = [
    ("I always take the window seat on long flights.", "preference"),
    ("My son is learning English at school.", "profile"),
    ("我说话声音小，开会总被人说听不清。", "profile"),
    ("I prefer short haircuts.", "preference"),
    ("写代码主要用 Go。", "profile"),
    ("我喜欢简单的北欧装修风格。", "preference"),
    # a pet that says hello, mild short sight: facts, however close to a greeting or an
    # eyesight need they read
    ("我家鹦鹉叫阿福，已经会说你好了哈哈", "profile"),
    ("我有点近视，两百多度", "profile"),
    ("I focus way better with pomodoros, 25/5", "preference"),
]


def rules_say(policy: Policy, text: str, type_: str) -> str:
    return derive_applies(text, policy, type_, derive_slot(text, policy, type_), "global")


def test_the_wishes_are_ones_the_rules_miss(shipped_policy: Policy) -> None:
    """Else the tests below would pass on the rules alone."""
    for text, type_ in WISHES:
        assert rules_say(shipped_policy, text, type_) == "relevant", text


@pytest.mark.parametrize(("text", "type_"), WISHES)
async def test_a_wish_in_other_words_is_standing(service: Memories, text: str, type_: str) -> None:
    ident = Identity(f"like{time.time_ns()}", "ann", None, "on", "tr_like")
    stored = (await service.create(ident, content=text, type=type_)).memory
    assert stored.applies == "always"


@pytest.mark.parametrize(("text", "type_"), FACTS)
async def test_a_fact_stays_topical(service: Memories, text: str, type_: str) -> None:
    ident = Identity(f"fact{time.time_ns()}", "ann", None, "on", "tr_fact")
    stored = (await service.create(ident, content=text, type=type_)).memory
    assert stored.applies == "relevant"


def test_only_what_the_rules_leave_topical_is_judged(shipped_policy: Policy) -> None:
    like = Resemblance(LocalEmbedder(), shipped_policy)
    assert like.considers("preference", None, "global", "relevant")
    # a many-valued slot may be named by a wish ("Python 代码记得加类型注解")
    assert like.considers("preference", "programming_language", "global", "relevant")
    # a one-valued slot is a fact of the user's world (their editor), never a wish
    assert not like.considers("profile", "editor", "global", "relevant")
    assert not like.considers("preference", None, "global", "always")
    assert not like.considers("plan", None, "global", "relevant")
    assert not like.considers("preference", None, "project", "relevant")


async def test_what_the_writer_said_is_kept(service: Memories) -> None:
    ident = Identity(f"kept{time.time_ns()}", "ann", None, "on", "tr_kept")
    said = await service.create(ident, content=WISHES[0][0], type="preference", applies="relevant")
    assert said.memory.applies == "relevant"
    # a task- or project-scoped memory is standing by its scope already
    task = await service.create(
        ident, content="My cat sleeps on my keyboard", type="profile", scope="task:coding"
    )
    assert task.memory.applies == "always"


async def test_turned_off_the_rules_alone_decide(
    service_under: Callable[[Policy], Awaitable[Memories]],
) -> None:
    memories = await service_under(parse_policy("applies: {resemblance: {types: []}}"))
    ident = Identity(f"off{time.time_ns()}", "ann", None, "on", "tr_off")
    stored = (await memories.create(ident, content=WISHES[0][0], type="preference")).memory
    assert stored.applies == "relevant"


class FailingOnce:
    """The local embedder, failing on its first call (the examples' first slice)."""

    def __init__(self, inner: LocalEmbedder) -> None:
        self.inner = inner
        self.model_id = f"failing-{time.time_ns()}"  # its own entry in the process's cache
        self.dims = inner.dims
        self.failed = False

    async def embed(self, texts: list[str]) -> np.ndarray:
        if not self.failed:
            self.failed = True
            raise ConnectionError("embeddings upstream down")
        return await self.inner.embed(texts)


async def test_an_embedder_failing_on_the_examples_leaves_the_rules_answer(
    shared_embedder: LocalEmbedder, shipped_policy: Policy
) -> None:
    like = Resemblance(FailingOnce(shared_embedder), shipped_policy)  # type: ignore[arg-type]
    await like.prepare()
    assert like.reference.at_hand is None
    (vector,) = await shared_embedder.embed([WISHES[0][0]])
    assert like.applies(vector, "preference", None, "global", "relevant") == "relevant"
    like.reference.failed_at = time.monotonic() - 61  # a minute later it is asked again
    await like.prepare()
    assert like.applies(vector, "preference", None, "global", "relevant") == "always"


async def test_a_mined_wish_is_proposed_as_standing(
    redis_url: str, shared_embedder: LocalEmbedder, shipped_policy: Policy
) -> None:
    """The candidate queue shows the user how a proposal will apply before they confirm it,
    decided as a memory write decides it."""
    store = Store(redis_url)
    try:
        memories = Memories(store, shared_embedder, shipped_policy, SystemClock())
        await memories.ready()
        queue = CandidateQueue(
            store, shipped_policy, SystemClock(), resemblance=memories.resemblance
        )
        ident = Identity(f"mined{time.time_ns()}", "ann", None, "on", "tr_mined")
        for text, want in ((WISHES[5][0], "always"), (FACTS[0][0], "relevant")):
            proposal, _ = screen(Proposal(content=text, type="preference"), shipped_policy)
            assert proposal is not None and proposal.applies == "relevant"
            assert await queue.enqueue(ident, proposal, trace_id=None) == "queued"
            (pending,) = [c for c in await queue.list(ident) if c["content"] == text]
            assert pending["applies"] == want
        # what an extractor said stays
        said, _ = screen(
            Proposal(content=WISHES[6][0], type="preference", applies="relevant"), shipped_policy
        )
        assert said is not None and said.applies_said
        await queue.enqueue(ident, said, trace_id=None)
        (pending,) = [c for c in await queue.list(ident) if c["content"] == WISHES[6][0]]
        assert pending["applies"] == "relevant"
    finally:
        await store.aclose()


async def test_memories_from_before_applies_are_settled_by_resemblance_too(
    service: Memories,
) -> None:
    ident = Identity(f"settle{time.time_ns()}", "bob", None, "on", "tr_settle")
    wish = (await service.create(ident, content=WISHES[1][0], type="preference")).memory
    fact = (await service.create(ident, content=FACTS[1][0], type="profile")).memory
    for m in (wish, fact):  # as an earlier release wrote them
        await service.store.redis.hdel(
            service.store.memory_key(ident.tenant, "bob", m.id), "applies", "topics"
        )
    assert await service.settle() >= 2
    assert (await service.get(ident, wish.id)).applies == "always"
    assert (await service.get(ident, fact.id)).applies == "relevant"


_axes = itertools.count()


class AxisEmbedder:
    """Each text a fixed direction, so that which examples are nearest is known."""

    paid = False
    dims = 3

    def __init__(self, directions: dict[str, tuple[float, float, float]]) -> None:
        self.model_id = f"axes-{next(_axes)}"  # its own entry in the process's cache
        self.directions = directions

    async def embed(self, texts: list[str]) -> np.ndarray:
        rows = np.array([self.directions[t] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self.embed([text]))[0]

    async def warm_up(self) -> None:
        return None


@pytest.mark.unit
async def test_a_request_takes_the_topics_its_nearest_examples_call_for() -> None:
    """Of the nearest examples, a topic's share listing it, net of those saying it is not
    called for, must reach ``share``; nothing is taken before the examples are embedded."""
    overlay = """
recall:
  relevance:
    resembled:
      neighbours: 3
      share: 0.6
      examples:
        - {text: "snacks a", topics: [food, allergy]}
        - {text: "snacks b", topics: [food]}
        - {text: "snacks c", not_topics: [food]}
        - {text: "walk a", topics: [mobility]}
        - {text: "walk b", topics: [mobility, health]}
        - {text: "walk c", topics: [mobility]}
"""
    policy = parse_policy(overlay)
    near_snacks, near_walks = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)
    directions = {
        "snacks a": near_snacks,
        "snacks b": (1.0, 0.1, 0.0),
        "snacks c": (1.0, 0.0, 0.1),
        "walk a": near_walks,
        "walk b": (0.1, 1.0, 0.0),
        "walk c": (0.0, 1.0, 0.1),
    }
    resembled = ResembledTopics(AxisEmbedder(directions), policy)
    query = np.array(near_walks, dtype=np.float32)
    assert resembled.topics(query) == frozenset()  # not embedded yet
    await resembled.prepare()
    # three of three call for mobility; one of three for health is below the share
    assert resembled.topics(query) == {"mobility"}
    # two of three call for food, one says it is not: a net share of one in three
    assert resembled.topics(np.array(near_snacks, dtype=np.float32)) == frozenset()
    lenient = parse_policy(overlay.replace("share: 0.6", "share: 0.3"))
    loose = ResembledTopics(AxisEmbedder(directions), lenient)
    await loose.prepare()
    assert loose.topics(np.array(near_snacks, dtype=np.float32)) == {"food", "allergy"}


async def taken_for_a_trip(policy: Policy) -> frozenset[str]:
    """The topics a request reading exactly like the policy's one example, "trip", takes."""
    resembled = ResembledTopics(AxisEmbedder({"trip": (1.0, 0.0, 0.0)}), policy)
    await resembled.prepare()
    return resembled.topics(np.array((1.0, 0.0, 0.0), dtype=np.float32))


@pytest.mark.unit
async def test_example_requests_name_a_topic_once_and_some_are_never_taken() -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(
            "recall:\n  relevance:\n    resembled:\n      examples:\n"
            "        - {text: y, topics: [food], not_topics: [food]}\n"
        )
    assert str(info.value).endswith(
        "recall.relevance.resembled.examples[0]: a topic is listed twice"
    )
    # topics an overlay's own topic list lacks say nothing
    policy = parse_policy(
        "topics:\n  - name: travel\n    keywords: [flight]\n"
        "recall:\n  relevance:\n    resembled:\n      neighbours: 1\n      examples:\n"
        "        - {text: trip, topics: [moon, travel]}\n"
    )
    assert await taken_for_a_trip(policy) == {"travel"}
    # nor days (said in words) nor the agenda (every plan is on it by its type)
    shipped = parse_policy(
        "recall:\n  relevance:\n    resembled:\n      neighbours: 1\n      examples:\n"
        "        - {text: trip, topics: [agenda, thursday, travel]}\n"
    )
    assert "thursday" in shipped.recall.relevance.resembled.words_only
    assert await taken_for_a_trip(shipped) == {"travel"}
    bare = parse_policy(
        "recall:\n  relevance:\n    resembled:\n      examples:\n"
        "        - {text: trip, topics: [agenda, thursday]}\n"
    )
    assert not ResembledTopics(AxisEmbedder({"trip": (1.0, 0.0, 0.0)}), bare).enabled


@pytest.mark.unit
async def test_example_requests_count_only_once_this_instance_has_them() -> None:
    """A recaller decides the same whatever else the process embedded: examples another
    instance brought are not used before its own ``prepare``; an embedder failing on them
    leaves ``prepare`` false, to be asked again (start-up retries in the background)."""
    overlay = (
        "recall:\n  relevance:\n    resembled:\n      neighbours: 1\n      examples:\n"
        "        - {text: trip, topics: [travel]}\n"
    )
    policy = parse_policy(overlay)
    embedder = AxisEmbedder({"trip": (1.0, 0.0, 0.0)})
    query = np.array((1.0, 0.0, 0.0), dtype=np.float32)
    first, second = ResembledTopics(embedder, policy), ResembledTopics(embedder, policy)
    assert await first.prepare() and first.topics(query) == {"travel"}
    assert second.topics(query) == frozenset()
    assert await second.prepare() and second.topics(query) == {"travel"}

    class Down(AxisEmbedder):
        async def embed(self, texts: list[str]) -> np.ndarray:
            raise ConnectionError("embeddings upstream down")

    down = ResembledTopics(Down({"trip": (1.0, 0.0, 0.0)}), policy)
    assert not await down.prepare() and down.topics(query) == frozenset()
