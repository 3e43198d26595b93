"""A slot by resemblance (``gateway.memory.resemblance.SlotResemblance``): a one-valued
subject changed back in words no slot's rules list takes its slot because it reads like the
slot's examples, so the newer memory supersedes the older one; facts that share a word with
those examples take none, and a slot the writer named is kept."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import pytest

from gateway.memory.embed import LocalEmbedder
from gateway.memory.identity import Identity
from gateway.memory.memories import Memories
from gateway.memory.policy import Policy, PolicyError, derive_slot, parse_policy
from gateway.memory.resemblance import SlotResemblance

pytestmark = pytest.mark.anyio

# (older, newer, slot): the newer one worded apart from the slot's patterns and examples
CHANGED_BACK = [
    ("以后回答都用英文，我在练英语。", "哎还是中文吧，英文读着太吃力了。", "language"),
    ("Give me distances in miles please.", "Swap the miles for kilometres from now on.", "units"),
]
# facts with a unit or a language in them: no slot by the rules and none by resemblance
FACTS = [
    "I ran 10 km again this morning.",
    "My son is learning English at school.",
    "I speak Dutch at home with my wife.",
    "Thai food is my favourite.",
    # nearest to a language wished for, but not clearly enough
    "I prefer texting my mum in Chinese",
    "Use British spelling please",
]
# they read like a language wished for, but the slot's `unless` rules say code comments and
# logs are not the answers' language
REFUSED = ["注释还是用英文吧", "算了，日志还是英文吧，中文看着乱"]


def test_the_newer_wordings_are_ones_the_rules_miss(shipped_policy: Policy) -> None:
    """Else the tests below would pass on the rules alone."""
    for older, newer, slot in CHANGED_BACK:
        assert derive_slot(older, shipped_policy, "preference") == slot, older
        assert derive_slot(newer, shipped_policy, "preference") is None, newer
    for text in FACTS:
        assert derive_slot(text, shipped_policy, "preference") is None, text


@pytest.mark.parametrize(("older", "newer", "slot"), CHANGED_BACK)
async def test_a_subject_changed_back_supersedes_in_its_slot(
    service: Memories, older: str, newer: str, slot: str
) -> None:
    ident = Identity(f"back{time.time_ns()}", "ann", None, "on", "tr_back")
    first = (await service.create(ident, content=older, type="preference")).memory
    outcome = await service.create(ident, content=newer, type="preference")
    assert outcome.memory.slot == slot
    assert outcome.memory.applies == "always"
    assert outcome.superseded == [first.id]
    assert (await service.get(ident, first.id)).status == "superseded"


@pytest.mark.parametrize("text", FACTS)
async def test_a_fact_takes_no_slot(service: Memories, text: str) -> None:
    ident = Identity(f"noslot{time.time_ns()}", "ann", None, "on", "tr_noslot")
    stored = (await service.create(ident, content=text, type="preference")).memory
    assert stored.slot is None


@pytest.mark.parametrize("text", REFUSED)
async def test_a_slot_refusing_the_words_is_not_taken(service: Memories, text: str) -> None:
    ident = Identity(f"refused{time.time_ns()}", "ann", None, "on", "tr_refused")
    answers = (await service.create(ident, content="请用中文回答", type="preference")).memory
    stored = await service.create(ident, content=text, type="preference")
    assert stored.memory.slot is None
    assert stored.superseded == []
    assert (await service.get(ident, answers.id)).status == "active"


async def test_what_the_writer_named_is_kept(service: Memories) -> None:
    ident = Identity(f"named{time.time_ns()}", "ann", None, "on", "tr_named")
    newer = CHANGED_BACK[0][1]
    stored = (await service.create(ident, content=newer, type="preference", slot="tone")).memory
    assert stored.slot == "tone"


def test_only_unplaced_memories_of_the_listed_types_are_judged(shipped_policy: Policy) -> None:
    placed = SlotResemblance(LocalEmbedder(), shipped_policy)
    assert placed.considers("preference", None)
    assert not placed.considers("preference", "units")
    # a profile fact names no wish about answers ("I speak Dutch at home")
    assert not placed.considers("profile", None)


async def test_turned_off_the_rules_alone_decide(
    service_under: Callable[[Policy], Awaitable[Memories]],
) -> None:
    memories = await service_under(parse_policy("slot_resemblance: {types: []}"))
    ident = Identity(f"sloff{time.time_ns()}", "ann", None, "on", "tr_sloff")
    stored = await memories.create(ident, content=CHANGED_BACK[0][1], type="preference")
    assert stored.memory.slot is None


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("slot_resemblance: {slots: [nonsense]}", "unknown slot 'nonsense'"),
        ("slot_resemblance: {slots: [output_format]}", "holds many values"),
        ("slot_resemblance: {types: [nonsense]}", "unknown memory type 'nonsense'"),
    ],
)
def test_the_policy_names_known_one_valued_slots(override: str, problem: str) -> None:
    with pytest.raises(PolicyError, match=problem):
        parse_policy(override)
