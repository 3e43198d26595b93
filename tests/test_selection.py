"""Recall's decisions on hand-made candidates: the checks, relevance and the selection, with
no Redis, embedder or server (``gateway.memory.selection``)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from itertools import count
from pathlib import Path

import pytest

from gateway.memory import inject, tokens
from gateway.memory.identity import Identity
from gateway.memory.policy import Policy, RecallSpec, load_policy
from gateway.memory.records import Memory
from gateway.memory.selection import (
    STANDING,
    Candidate,
    first_failure,
    relevant,
    select,
)

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ME = Identity("t", "u", "blog", "on", "tr_sel", task="work")
# the same user asking outside any project: the user's life is judged on every link
LIFE = Identity("t", "u", None, "on", "tr_life")
_ids = count()


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy()


@pytest.fixture(scope="module")
def spec(policy: Policy) -> RecallSpec:
    return policy.recall


def memory(content: str, *, days_old: float = 1.0, **fields: object) -> Memory:
    at = NOW - timedelta(days=days_old)
    values: dict[str, object] = {
        "id": f"m{next(_ids)}",
        "tenant": "t",
        "user": "u",
        "content": content,
        "type": "preference",
        "source": "user_stated",
        "created_at": at,
        "confirmed_at": at,
    }
    values.update(fields)
    return Memory(**values)  # type: ignore[arg-type]


def topical(
    content: str, fused: float, *, vector: float | None = None, **fields: object
) -> Candidate:
    return Candidate(memory(content, **fields), fused if vector is None else vector, 0.0, fused)


def standing(content: str, **fields: object) -> Candidate:
    return Candidate(memory(content, applies="always", **fields), 0.0, 0.0, 0.0, lane=STANDING)


def test_topical_memories_come_first_and_standing_ones_fill_the_rest(spec: RecallSpec) -> None:
    facts = [topical(f"fact {i}", 0.9 - i / 10) for i in range(4)]
    prefs = [standing(f"preference {i}") for i in range(6)]
    chosen = select([*prefs, *facts], spec, "gpt-4o-mini")
    taken = [m.content for m in chosen.injected]
    assert taken[: spec.topical.max] == ["fact 0", "fact 1"][: spec.topical.max]
    assert len(taken) == spec.max_memories
    assert (
        sum(c.memory.content.startswith("preference") for c in prefs if c.decision == "injected")
        <= spec.standing.max
    )
    assert {c.reason for c in [*facts, *prefs] if c.decision != "injected"} == {"limit"}
    assert len(chosen.fact_lines) + len(chosen.standing_lines) == len(chosen.injected)


def test_standing_memories_go_narrowest_scope_then_newest(spec: RecallSpec) -> None:
    old = standing("Answer in English", days_old=30)
    new = standing("Use bullet points", days_old=1)
    task = standing("Sign emails as Li", scope="task:work", days_old=60)
    chosen = select([old, new, task], spec, "gpt-4o-mini")
    assert [m.content for m in chosen.injected] == [
        "Sign emails as Li",
        "Use bullet points",
        "Answer in English",
    ]


def test_a_third_topical_memory_only_when_it_ranks_close_to_the_best(spec: RecallSpec) -> None:
    best = spec.topical.close_within
    close = [topical("a", 0.80), topical("b", 0.79), topical("c", 0.80 - best / 2)]
    assert len(select(close, spec, "gpt-4o-mini").injected) == min(3, spec.topical.close_max)
    far = [topical("a", 0.80), topical("b", 0.79), topical("c", 0.80 - best * 2)]
    assert len(select(far, spec, "gpt-4o-mini").injected) == spec.topical.max
    assert far[2].reason == "limit"


def test_a_short_list_keeps_a_third_memory_the_fit_is_sure_of(spec: RecallSpec) -> None:
    """Past topical.max, ranked far from the best: with no more than close_max passing, a
    memory the fitted relevance rates at least sure_at likely still gets a place (three diet
    rules for a dinner menu); one less likely does not, nor does any among more passing (a
    user with many memories: the cut keeps the best of them)."""
    lane = spec.topical
    assert lane.sure_at is not None and lane.close_max == 3
    gap = lane.close_within + 0.05  # past close (with no topics, fresh never applies)

    def passing(n: int, third: float) -> list[Candidate]:
        cands = [topical(f"rule {i}", 0.8 - i * gap) for i in range(n)]
        for cand in cands:
            cand.fitted = 0.99
        cands[2].fitted = third
        return cands

    sure = passing(3, lane.sure_at)
    assert len(select(sure, spec, "gpt-4o-mini").injected) == 3
    unsure = passing(3, lane.sure_at - 0.01)
    assert len(select(unsure, spec, "gpt-4o-mini").injected) == 2
    assert unsure[2].reason == "limit"
    many = passing(4, 0.99)
    assert len(select(many, spec, "gpt-4o-mini").injected) == 2
    assert many[2].reason == many[3].reason == "limit"
    # ... and never a memory the fit did not rate
    unrated = passing(3, 0.99)
    unrated[2].fitted = None
    assert len(select(unrated, spec, "gpt-4o-mini").injected) == 2
    off = spec.model_copy(update={"topical": lane.model_copy(update={"sure_at": None})})
    assert len(select(passing(3, 0.99), off, "gpt-4o-mini").injected) == 2


def test_the_token_budget_leaves_out_what_does_not_fit(spec: RecallSpec) -> None:
    long = topical("I am allergic to peanuts " * 20, 0.9)
    short = topical("I have a cat named Mochi", 0.8)
    model = "gpt-4o-mini"
    # room for both blocks' headings and the short line exactly, not for the long one
    room = inject.token_count([], [], model) + inject.line_tokens(
        inject.line_for(short.memory), model
    )
    tight = spec.model_copy(update={"token_budget": room})
    chosen = select([long, short], tight, model)
    assert [m.content for m in chosen.injected] == ["I have a cat named Mochi"]
    assert long.reason == "budget"
    one_less = spec.model_copy(update={"token_budget": room - 1})
    assert select([topical("I have a cat named Mochi", 0.8)], one_less, model).injected == []


def test_the_memory_message_is_counted_exactly_from_its_lines() -> None:
    """Recall counts the message from cached line counts; counting the whole message (with
    its random block ids) is the reference, for each tokenizer a model may pick."""
    rng = random.Random(11)
    words = ["peanuts", "花生过敏", "FastAPI", "emoji 😀", '"quoted"', "x" * 40, "3.12", "—", "   "]
    models = ["gpt-4o-mini", "gpt-4", "some-local-model"]
    assert len({tokens.encoding_for(m).name for m in models}) == 2
    for _ in range(150):
        pick = [
            inject.line_for(topical(" ".join(rng.choices(words, k=rng.randint(1, 8))), 0.5).memory)
            for _ in range(rng.randint(0, 6))
        ]
        cut = rng.randint(0, len(pick))
        standing, facts = pick[:cut], pick[cut:]
        for model in models:
            want = tokens.count(inject.render(standing, facts), model)
            assert inject.token_count(standing, facts, model) == want, (standing, facts, model)


def test_checks_run_in_order_and_name_the_first_failure(policy: Policy) -> None:
    words = frozenset({"python", "json"})

    def reason(cand: Candidate) -> str | None:
        return first_failure(cand, policy, ME, NOW, words)

    assert reason(topical("x", 0.9, expires_at=NOW - timedelta(seconds=1))) == "expired"
    assert reason(topical("x", 0.9, scope="project", project_id="shop")) == "scope"
    assert reason(topical("x", 0.9, scope="project", project_id="blog")) is None
    assert reason(standing("x", scope="task:home")) == "scope"
    assert reason(topical("x", 0.9, source="assistant_inferred")) == "source"
    assert reason(topical("x", 0.9, superseded_by="m0", status="superseded")) == "superseded"
    # a standing memory needs no relevance; a topical one does
    assert reason(standing("Always answer in English")) is None
    assert reason(topical("My cat is called Mochi", 0.05)) == "threshold"


def test_one_incidental_shared_word_is_not_relevance(policy: Policy) -> None:
    bar = policy.recall.relevance
    pet = Candidate(
        memory("My pet is a ball python named Monty"),
        bar.shared_terms_min_similarity + 0.01,
        5.0,
        0.3,
    )
    assert (
        first_failure(pet, policy, LIFE, NOW, frozenset({"python", "json", "read"})) == "threshold"
    )
    assert pet.shared_terms == 1
    # a topic shared with the request is relevance enough, whatever the words
    allergy = topical("I'm allergic to peanuts", 0.1, vector=bar.topic_min_similarity)
    allergy.topics = ("food",)
    assert first_failure(allergy, policy, LIFE, NOW, frozenset({"dinner", "menu"})) is None


def test_in_a_project_the_users_life_is_relevant_on_meaning_alone(policy: Policy) -> None:
    """A recipe app's code is "about" food; a nut allergy does not matter to its pages."""
    bar = policy.recall.relevance
    assert bar.meaning_only_in_projects

    def allergy(vector: float) -> Candidate:
        cand = topical("My husband has a tree nut allergy", 0.2, vector=vector)
        cand.topics = ("food",)
        return cand

    words = frozenset({"recipe", "page", "field"})
    assert first_failure(allergy(0.1), policy, LIFE, NOW, words) is None
    assert first_failure(allergy(0.1), policy, ME, NOW, words) == "threshold"
    assert first_failure(allergy(bar.similarity), policy, ME, NOW, words) is None
    # the project's own memories are not the user's life: scope already chose them
    stack = topical(
        "Recipes are stored as Markdown", 0.2, vector=0.1, scope="project", project_id="blog"
    )
    stack.topics = ("food",)
    assert first_failure(stack, policy, ME, NOW, words) is None
    # ... and a memory about other topics still needs the closer bar there, one shared word
    # never being enough ("My pet is a ball python" against a project's Python question)
    pet = topical("My pet is a ball python named Monty", 0.3, vector=bar.similarity + 0.01)
    pet.off_topic, pet.text = True, 5.0
    python = frozenset({"python", "json", "read"})
    assert first_failure(pet, policy, ME, NOW, python) == "threshold"
    pet.reason, pet.text = None, 0.0
    assert first_failure(pet, policy, ME, NOW, python) == "threshold"
    pet.vector = max(bar.off_topic_similarity, bar.similarity)
    assert first_failure(pet, policy, ME, NOW, python) is None
    # an overlay can turn it off
    either = bar.model_copy(update={"meaning_only_in_projects": False})
    off = policy.model_copy(
        update={"recall": policy.recall.model_copy(update={"relevance": either})}
    )
    in_blog = Identity("t", "u", "blog", "on", "tr_blog")  # no task: only the project counts
    assert first_failure(allergy(0.1), policy, in_blog, NOW, words) == "threshold"
    assert first_failure(allergy(0.1), off, in_blog, NOW, words) is None


def test_a_plan_naming_the_project_meets_that_projects_requests(policy: Policy) -> None:
    """In a project the request's words describe the work, so no topic, word or likelihood
    links the user's life; a plan or a goal naming that very project is about the work
    ("the raftbook booking flow live by July" for the coming weeks' plan of raftbook), in
    any spelling of its id. Not one naming another project, nor a part of the id alone,
    nor a fact of another kind, nor the same plan in a work task (no project to name), nor
    one that has run out."""
    assert {"plan", "goal"} <= policy.recall.relevance.project_plans
    words = frozenset({"weeks", "plan"})
    raftbook = Identity("t", "u", "raftbook", "on", "tr_raft")
    kestrel = Identity("t", "u", "kestrel-web", "on", "tr_kestrel")
    work = Identity("t", "u", None, "on", "tr_work2", task="work")

    floor = policy.recall.relevance.shared_terms_min_similarity

    def aim(text: str, kind: str = "goal", vector: float = floor, **fields: object) -> Candidate:
        cand = topical(text, 0.2, vector=vector, type=kind, **fields)
        cand.off_topic, cand.fitted = True, 0.01
        return cand

    launch = "Goal: launch the raftbook booking flow by the end of July"
    assert first_failure(aim(launch), policy, raftbook, NOW, words) is None
    assert (
        first_failure(aim("RaftBook beta 下周上线", "plan"), policy, raftbook, NOW, words) is None
    )
    assert first_failure(aim("Kestrel Web 1.0 by June"), policy, kestrel, NOW, words) is None
    assert first_failure(aim("a web page by June"), policy, kestrel, NOW, words) == "threshold"
    assert first_failure(aim(launch), policy, kestrel, NOW, words) == "threshold"
    assert first_failure(aim(launch), policy, work, NOW, words) == "threshold"
    assert first_failure(aim(launch, "profile"), policy, raftbook, NOW, words) == "threshold"
    ended = aim(launch, expires_at=NOW - timedelta(days=1))
    assert first_failure(ended, policy, raftbook, NOW, words) == "expired"
    # a one-word id is often an everyday word: a meaning unrelated to the request's keeps
    # the plan out ("a new mobile phone for mum" in project "mobile")
    mobile = Identity("t", "u", "mobile", "on", "tr_mobile")
    phone = "Plan: buy my mum a new mobile phone for her birthday"
    assert first_failure(aim(phone, vector=floor - 0.01), policy, mobile, NOW, words) == (
        "threshold"
    )


@pytest.mark.parametrize(
    ("text", "project", "named"),
    [
        ("Goal: launch the raftbook booking flow", "raftbook", True),
        ("RaftBook beta 下周上线", "raftbook", True),
        ("七月底之前想给barrica加一个网页界面", "barrica", True),
        ("Kestrel Web 1.0 by June", "kestrel-web", True),
        ("KestrelWeb 1.0 by June", "kestrel-web", True),
        ("kestrel_web by June", "kestrel-web", True),
        ("ship raftbook.", "raftbook", True),
        ("a web page by June", "kestrel-web", False),
        ("kestrel-web-v2 comes next", "kestrel-web", False),
        ("rafting book club", "raftbook", False),
        ("my-raftbook-fork", "raftbook", False),
    ],
)
def test_a_project_is_named_by_its_id_in_its_spellings(
    text: str, project: str, named: bool
) -> None:
    from gateway.memory.policy import names_project

    assert names_project(text, project) is named


def test_the_users_tools_meet_a_projects_code_and_a_coding_task(policy: Policy) -> None:
    """An editor switched to ("最近换成 VS Code 了") is how the user works on any
    project's code, though the project's words link nothing else of the user's life."""
    bar = policy.recall.relevance
    assert "coding" in bar.tools_in_projects
    assert "coding" in bar.meaning_only_in_tasks

    def editor(slot: str | None) -> Candidate:
        cand = topical("最近换成 VS Code 了", 0.2, vector=0.15, slot=slot)
        cand.topics = ("coding",)
        return cand

    words = frozenset({"debugger", "flask", "route"})
    coding = Identity("t", "u", None, "on", "tr_code", task="coding")
    in_blog = Identity("t", "u", "blog", "on", "tr_blog")
    for who in (ME, coding, in_blog):
        assert first_failure(editor("editor"), policy, who, NOW, words) is None
        # a memory of the topic in no slot, or in a slot of the user's life that a stray
        # word ties to code ("I live near the port"), is the user's life, not a tool
        assert first_failure(editor(None), policy, who, NOW, words) == "threshold"
        assert first_failure(editor("location"), policy, who, NOW, words) == "threshold"
        # ... and a tool the request shares no topic with is judged on its meaning
        other = editor("editor")
        other.topics = ()
        assert first_failure(other, policy, who, NOW, words) == "threshold"


def test_in_a_work_task_the_users_life_is_relevant_on_meaning_alone(policy: Policy) -> None:
    """A handover of patients' health is the work's subject: the user's bad back does not
    reach it by the shared topic. A task about the user's own life (a trip) is not so."""
    bar = policy.recall.relevance
    assert "work" in bar.meaning_only_in_tasks
    assert "travel" not in bar.meaning_only_in_tasks

    def back(vector: float) -> Candidate:
        cand = topical("我腰椎间盘突出，久坐就疼", 0.2, vector=vector)
        cand.topics = ("health",)
        return cand

    words = frozenset({"交接", "咳嗽", "血压"})
    at_work = Identity("t", "u", None, "on", "tr_work", task="work")
    on_a_trip = Identity("t", "u", None, "on", "tr_trip", task="travel")
    assert first_failure(back(0.1), policy, LIFE, NOW, words) is None
    assert first_failure(back(0.1), policy, on_a_trip, NOW, words) is None
    assert first_failure(back(0.1), policy, at_work, NOW, words) == "threshold"
    assert first_failure(back(bar.similarity), policy, at_work, NOW, words) is None
    # the task's own rules are not the user's life: scope already chose them
    rule = topical("工作上写的汇总都先写结论", 0.2, vector=0.1, scope="task:work")
    rule.topics = ("health",)
    assert first_failure(rule, policy, at_work, NOW, words) is None


def test_a_topic_the_request_calls_for_by_resemblance_links_a_memory(policy: Policy) -> None:
    """A request that reads like requests calling for food allergies ("what could I put out
    for the book club?") reaches the user's allergy, about other topics by its words, when the
    meaning is not unrelated; not in a project, whose words describe the code."""
    bar = policy.recall.relevance
    floor = bar.resembled.min_similarity
    assert bar.topic_min_similarity < floor < bar.similarity

    def allergy(vector: float, *, resembled: tuple[str, ...]) -> Candidate:
        cand = topical("I'm allergic to peanuts", 0.1, vector=vector)
        cand.off_topic, cand.resembled = True, resembled
        return cand

    words = frozenset({"book", "club", "put"})
    assert first_failure(allergy(floor, resembled=()), policy, LIFE, NOW, words) == "threshold"
    called = allergy(floor, resembled=("allergy",))
    assert first_failure(called, policy, LIFE, NOW, words) is None
    assert called.to_trace()["resembled"] == ["allergy"]
    below = allergy(floor - 0.01, resembled=("allergy",))
    assert first_failure(below, policy, LIFE, NOW, words) == "threshold"
    assert first_failure(allergy(floor, resembled=("allergy",)), policy, ME, NOW, words) == (
        "threshold"
    )


def test_a_memory_about_other_topics_needs_a_closer_meaning(policy: Policy) -> None:
    """Both about topics, none shared (a pet python and a Python question): a similarity
    that passes for a memory without topics is not enough; a close one still is."""
    bar = policy.recall.relevance
    assert bar.off_topic_similarity > bar.similarity
    between = (bar.similarity + bar.off_topic_similarity) / 2

    def pet(vector: float, *, off_topic: bool) -> Candidate:
        cand = topical("I have a pet ball python called Noodle", 0.1, vector=vector)
        cand.off_topic = off_topic
        return cand

    words = frozenset({"sort", "dicts"})
    assert first_failure(pet(between, off_topic=False), policy, LIFE, NOW, words) is None
    assert first_failure(pet(between, off_topic=True), policy, LIFE, NOW, words) == "threshold"
    close = pet(bar.off_topic_similarity, off_topic=True)
    assert first_failure(close, policy, LIFE, NOW, words) is None
    assert close.to_trace()["off_topic"] is True


def test_a_memory_about_other_topics_linked_by_one_word_is_not_relevant(policy: Policy) -> None:
    """The shared word lifts the similarity as well ("ball python" against a Python
    question, even past the off-topic bar): one shared word never makes it relevant, while
    the same similarity without a shared word does."""
    bar = policy.recall.relevance
    high = bar.off_topic_similarity + 0.1
    words = frozenset({"python", "list", "tuple"})
    pet = Candidate(memory("我家养了条球蟒，英文叫 ball python"), high, 80.0, 0.5)
    pet.off_topic = True
    assert first_failure(pet, policy, LIFE, NOW, words) == "threshold"
    assert pet.shared_terms == 1
    unlinked = Candidate(memory("我家养了条球蟒"), high, 0.0, 0.5)
    unlinked.off_topic = True
    assert first_failure(unlinked, policy, LIFE, NOW, words) is None


def test_a_memory_in_the_other_language_meets_a_lower_bar(policy: Policy) -> None:
    """The embedder rates a pair across languages lower than within one, and such a memory
    shares no words to make up for it: its similarity bars are lower by the policy's
    discount, but not where meaning alone links the user's life to a task's request."""
    bar = policy.recall.relevance
    assert 0 < bar.other_language_discount < bar.similarity
    under = bar.similarity - bar.other_language_discount / 2

    def camping(vector: float, *, other: bool, off_topic: bool = False) -> Candidate:
        cand = topical("周末常带孩子去山里搭帐篷", 0.1, vector=vector)
        cand.other_language, cand.off_topic = other, off_topic
        return cand

    words = frozenset({"outdoor", "weekend"})
    at_work = Identity("t", "u", None, "on", "tr_work", task="work")
    assert first_failure(camping(under, other=False), policy, LIFE, NOW, words) == "threshold"
    across = camping(under, other=True)
    assert first_failure(across, policy, LIFE, NOW, words) is None
    assert across.to_trace()["other_language"] is True
    assert first_failure(camping(under, other=True), policy, at_work, NOW, words) == "threshold"
    low = bar.similarity - bar.other_language_discount - 0.01
    assert first_failure(camping(low, other=True), policy, LIFE, NOW, words) == "threshold"
    # about other topics than the request's, the closer bar is lowered alike
    off = bar.off_topic_similarity - bar.other_language_discount / 2
    assert first_failure(camping(off, other=False, off_topic=True), policy, LIFE, NOW, words) == (
        "threshold"
    )
    assert first_failure(camping(off, other=True, off_topic=True), policy, LIFE, NOW, words) is None


@pytest.mark.parametrize(
    ("text", "han"),
    [
        ("我用 Obsidian 记笔记", True),
        ("周末想去 Lake District 徒步", True),
        ("我在用 Visual Studio Code 写 TypeScript", True),
        ("I love 小笼包 from Din Tai Fung", False),
        ("Always answer in English", False),
        # neither: no language to tell apart
        ("2024", None),
        ("👍", None),
    ],
)
def test_a_text_is_chinese_by_its_share_of_chinese_characters(text: str, han: bool | None) -> None:
    from gateway.memory.textsearch import mostly_han

    assert mostly_han(text) is han


def test_the_off_topic_bar_is_never_below_the_plain_one(policy: Policy) -> None:
    """An operator's overlay may raise the plain bar above the shipped off-topic one: a memory
    about other topics then needs at least the plain bar, never less."""
    spec = policy.recall.model_copy(
        update={"relevance": policy.recall.relevance.model_copy(update={"similarity": 0.5})}
    )
    cand = topical("I have a pet ball python called Noodle", 0.1, vector=0.45)
    cand.off_topic = True
    assert not relevant(cand, spec, frozenset({"sort"}))
    cand.vector = 0.5
    assert relevant(cand, spec, frozenset({"sort"}))


def test_a_memory_on_another_side_of_the_request_gets_a_further_place(spec: RecallSpec) -> None:
    """Two fitness likes fill topical.max for a workout plan; a knee injury ranked further
    down still gets a place because it brings the request's other topic, health; a third
    fitness memory at the same rank does not, nor does a health memory ranked too far down."""
    lane = spec.topical
    assert lane.close_max > lane.max == 2 and lane.fresh_within > lane.close_within
    best = 0.5
    below = best - (lane.close_within + lane.fresh_within) / 2  # past close, within fresh
    likes = [topical(f"fitness like {i}", best - i / 100) for i in range(2)]
    for cand in likes:
        cand.topics = ("fitness",)
    third = topical("another fitness like", below)
    third.topics = ("fitness",)
    knee = topical("a bad knee", below - 0.001)
    knee.topics = ("health",)
    chosen = select([*likes, third, knee], spec, "gpt-4o-mini")
    assert [m.content for m in chosen.injected] == [
        "fitness like 0",
        "fitness like 1",
        "a bad knee",
    ]
    assert third.reason == "limit"

    far = topical("a bad knee, ranked far down", best - lane.fresh_within - 0.01)
    far.topics = ("health",)
    likes = [topical(f"fitness like {i}", best - i / 100) for i in range(2)]
    for cand in likes:
        cand.topics = ("fitness",)
    chosen = select([*likes, far], spec, "gpt-4o-mini")
    assert far.reason == "limit" and len(chosen.injected) == 2


def test_a_name_both_write_links_a_memory_to_the_request(policy: Policy) -> None:
    """Leo the grandson reaches a present for Leo although the memory is about other things;
    a ball python does not reach Python, nor a cat called Java a question about Java (the
    recaller leaves the policy's own words out of the request's names)."""
    from gateway.memory.textsearch import name_words

    leo = topical("My grandson Leo is turning 6 and loves dinosaurs", 0.3, vector=0.1)
    leo.memory.topics = ["child"]
    leo.off_topic, leo.text = True, 3.0
    asked = name_words("What would be a good birthday present for Leo?").inside
    assert asked == {"leo"}
    assert first_failure(leo, policy, LIFE, NOW, frozenset({"leo", "present"}), asked) is None
    assert leo.shared_name and leo.to_trace()["shared_name"] is True
    # the same memory without the name in the request: one shared word is not enough
    leo.shared_name = False
    assert first_failure(leo, policy, LIFE, NOW, frozenset({"leo", "present"})) == "threshold"
    # a request opening with the name: a name because the memory writes it mid-sentence,
    # with a meaning not unrelated ("Reading comprehension" and "We moved to Reading")
    opening = "Leo has a book report due. What should I get him?"
    lead = name_words(opening).opening
    assert name_words(opening).inside == frozenset() and "leo" in lead
    words = frozenset({"leo", "book", "report"})
    leo.vector = policy.recall.relevance.shared_terms_min_similarity
    assert first_failure(leo, policy, LIFE, NOW, words, frozenset(), lead) is None
    assert leo.shared_name
    leo.vector = policy.recall.relevance.shared_terms_min_similarity - 0.01
    assert first_failure(leo, policy, LIFE, NOW, words, frozenset(), lead) == "threshold"
    assert not leo.shared_name
    # someone's, opening a sentence, is someone: a name like one inside a sentence
    owned = name_words("Leo's birthday is coming up. Gift ideas under £30?")
    assert owned.inside == {"leo"} and owned.opening == {"gift"}
    assert first_failure(leo, policy, LIFE, NOW, words, owned.inside) is None
    assert leo.shared_name
    # ... not a contraction: "She's", "Let's", "Today's" open sentences as any word does
    for text in ("She's been poorly all week", "Let's plan a picnic", "Today's menu, please"):
        assert name_words(text).inside == frozenset(), text
    # ... but a word opening both texts says nothing ("Write", "Help" open many)
    hiking = topical("Hiking in the Alps is what I love most", 0.3, vector=0.1)
    hiking.memory.topics = ["outings"]
    hiking.off_topic, hiking.text = True, 3.0
    boots = "Hiking boots for a wet winter, which ones?"
    lead = name_words(boots).opening
    assert lead == {"hiking"}
    assert first_failure(hiking, policy, LIFE, NOW, frozenset({"hiking"}), frozenset(), lead) == (
        "threshold"
    )

    pet = topical("My pet is Monty, a ball python", 0.3, vector=0.1)
    pet.memory.topics = ["pets"]
    pet.off_topic, pet.text = True, 3.0
    asked = name_words("How do I read a JSON file in Python?").inside
    assert asked == {"python"}
    assert (
        first_failure(pet, policy, LIFE, NOW, frozenset({"python", "json"}), asked) == "threshold"
    )
    assert "java" in policy.vocabulary and "python" in policy.vocabulary
    assert name_words("Sure, I'm in").inside == frozenset()  # "I'm" is no name


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("下周小美生日，帮我想几个礼物", {"小美"}),
        ("我们组的小林下个月结婚", {"小林"}),  # a surname: a nickname though a word too
        ("老周和阿杰周末去钓鱼", {"老周", "阿杰"}),
        ("小心别摔了，老师说的", set()),  # words the dictionary knows
        ("帮我把字号改小一点", set()),  # ends a word with the character before it
        ("小朋友喜欢刷小红书吗", set()),  # begins a longer word
        ("小二和小三", set()),  # numerals
    ],
)
def test_chinese_nicknames_are_names(text: str, found: set[str]) -> None:
    """Chinese writes no capitals: a nickname (小/老/阿 and a character) marks a person."""
    from gateway.memory.textsearch import name_words

    assert name_words(text).inside == found


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Pepper 最近不太爱吃东西", {"pepper"}),
        ("周末想带Biscuit去海边", {"biscuit"}),
        ("伴郎致辞写给我的老同学 Marco", {"marco"}),
        ("Pepper，最近不太爱吃东西", {"pepper"}),  # Chinese punctuation beside it
        ("Review 一下这段代码", set()),  # an English word mixed into Chinese
        # an English sentence quoting a Chinese word opens as any sentence does
        ("Write me four lines on 春天 for a card", set()),
        ("Could you explain what 躺平 means?", set()),
        ("Is 火锅 or Sichuan food spicier?", set()),
        ("Pepper has been off her food lately", set()),  # no Chinese at all
    ],
)
def test_a_capitalised_word_against_chinese_is_a_name(text: str, found: set[str]) -> None:
    """Nothing else in a Chinese sentence is capitalised, so a capitalised word written
    against Chinese characters names someone or something wherever it stands."""
    from gateway.memory.textsearch import names_in_han

    assert names_in_han(text) == found


def test_a_pets_name_in_a_chinese_request_links_what_is_said_of_it(policy: Policy) -> None:
    """ "Biscuit 最近走路有点瘸" names the dog that "Biscuit is our old spaniel" is about,
    though each opens its sentence with the name; an English request opening with it
    does not say as much ("Write" and "Help" open requests too)."""
    from gateway.memory.textsearch import name_words, names_in_han

    dog = topical("Biscuit is our old spaniel, eleven this spring.", 0.3, vector=0.05)
    dog.memory.topics = ["pets"]
    dog.off_topic, dog.text = True, 1.0
    words = frozenset({"biscuit"})
    asked = names_in_han("Biscuit 最近走路有点瘸，怎么办？")
    assert first_failure(dog, policy, LIFE, NOW, words, asked) is None
    assert dog.shared_name
    dog.shared_name = False
    english = name_words("Biscuit keeps limping, what should I do?")
    assert english.inside == frozenset()
    assert (
        first_failure(dog, policy, LIFE, NOW, words, english.inside, english.opening) == "threshold"
    )


def test_a_nickname_both_write_links_a_memory_to_the_request(policy: Policy) -> None:
    """A colleague's taste reaches a present for her, by the nickname both texts use."""
    from gateway.memory.textsearch import name_words

    mei = topical("同事小美特别喜欢养多肉植物", 0.3, vector=0.12)
    mei.memory.topics = ["garden", "work"]
    mei.off_topic, mei.text = True, 0.5
    words = frozenset({"小美", "礼物"})
    asked = name_words("小美下个月生日，送什么礼物好？").inside
    assert first_failure(mei, policy, LIFE, NOW, words, asked) is None and mei.shared_name
    mei.shared_name = False
    assert first_failure(
        mei, policy, LIFE, NOW, words, name_words("送同事什么礼物好？").inside
    ) == ("threshold")


@pytest.mark.parametrize(
    ("text", "sure", "weak"),
    [
        # after a relative ("小马" of 小马宝莉 reads as a nickname, as "小美" does)
        ("孙女朵朵最近迷上了小马宝莉", {"朵朵", "小马"}, set()),
        ("我家狗狗叫壮壮", {"壮壮"}, set()),  # a pet's name
        ("朵朵下礼拜满六岁", set(), {"朵朵"}),  # anywhere else: a weaker sign
        ("妈妈天天说我，慢慢来好好学", set(), set()),  # kin and everyday words
        ("宝宝刚刚睡着，看看再说", set(), set()),
        ("周末带孩子逛逛公园，让孩子尝尝新菜", set(), set()),  # verbs said twice
    ],
)
def test_doubled_characters_are_childrens_and_pets_names(
    text: str, sure: set[str], weak: set[str]
) -> None:
    """A doubled character is how Chinese names a child or a pet, unless it is a word."""
    from gateway.memory.textsearch import name_words

    names = name_words(text)
    assert names.inside == sure
    assert names.opening == weak


def test_a_doubled_name_links_a_grandchild_to_her_birthday(policy: Policy) -> None:
    """ "朵朵下礼拜满六岁" reaches "孙女朵朵迷上了小马宝莉" by the name both write, where the
    meanings are not unrelated; the same memory is not reached without the name."""
    from gateway.memory.textsearch import name_words

    pony = topical("孙女朵朵最近迷上了小马宝莉，天天看", 0.3, vector=0.29)
    pony.memory.topics = ["child"]
    pony.off_topic, pony.text = True, 2.0
    asked = name_words("朵朵下礼拜满六岁，帮我写几句生日卡上的话")
    words = frozenset({"朵朵", "生日卡"})
    assert first_failure(pony, policy, LIFE, NOW, words, asked.inside, asked.opening) is None
    assert pony.shared_name
    pony.shared_name = False
    assert first_failure(pony, policy, LIFE, NOW, words) == "threshold"


def plan_candidate(
    text: str, *, days_old: float, days_before_end: float, vector: float
) -> Candidate:
    """A plan saved ``days_old`` ago that ends ``days_before_end`` days after it was saved,
    found by both searches (text score 12, fused 0.3)."""
    saved = NOW - timedelta(days=days_old)
    return Candidate(
        memory(
            text, type="plan", days_old=days_old, expires_at=saved + timedelta(days=days_before_end)
        ),
        vector,
        12.0,
        0.3,
    )


def test_a_memory_ending_within_days_is_relevant_on_one_shared_word(policy: Policy) -> None:
    """What the user is about to do is what they most likely ask about: a plan said for
    the coming days (saved at most ``due_within_days`` before it ends) needs one content
    word in common with the request, not two, even when its words' topics are others. A
    memory saved for longer (a goal for the month, a default horizon) still needs two, and
    a request in a project is judged on meaning alone as before."""
    due = policy.recall.relevance.due_within_days
    assert due > 0
    words = frozenset({"farne", "pack", "boat", "trip"})

    def plan(*, saved_days_before_end: float, vector: float = 0.2) -> Candidate:
        cand = plan_candidate(
            "Heading out to the Farne Islands this weekend for the puffins!",
            days_old=2,
            days_before_end=saved_days_before_end,
            vector=vector,
        )
        cand.off_topic = True
        return cand

    soon = plan(saved_days_before_end=5)
    assert first_failure(soon, policy, LIFE, NOW, words) is None
    assert soon.shared_terms == 1
    assert first_failure(plan(saved_days_before_end=due + 20), policy, LIFE, NOW, words) == (
        "threshold"
    )
    # no word in common, or a meaning opposed: not relevant however soon
    assert first_failure(soon, policy, LIFE, NOW, frozenset({"boat"})) == "threshold"
    opposed = plan(
        saved_days_before_end=5, vector=policy.recall.relevance.topic_min_similarity - 0.1
    )
    assert first_failure(opposed, policy, LIFE, NOW, words) == "threshold"
    # about other topics than the request's, a meaning unrelated is not enough either
    unrelated = policy.recall.relevance.shared_terms_min_similarity - 0.05
    assert first_failure(
        plan(saved_days_before_end=5, vector=unrelated), policy, LIFE, NOW, words
    ) == ("threshold")
    # the day after the span: the memory was saved for longer than the coming days
    assert first_failure(plan(saved_days_before_end=due + 1), policy, LIFE, NOW, words) == (
        "threshold"
    )
    # about other topics, a word the topics read as a subject is not enough: the pet
    # python's vet visit this weekend is no Python question
    pet = plan_candidate(
        "Taking my ball python to the vet this weekend", days_old=2, days_before_end=5, vector=0.3
    )
    pet.off_topic = True
    python = frozenset({"python", "json", "read", "file"})
    assert first_failure(pet, policy, LIFE, NOW, python) == "threshold"
    in_project = Identity("t", "u", "birds-app", "on", "tr_proj")
    assert first_failure(plan(saved_days_before_end=5), policy, in_project, NOW, words) == (
        "threshold"
    )


def test_a_plan_of_the_coming_days_named_at_work_is_relevant(policy: Policy) -> None:
    """At work the request's words describe the work, so a memory of the user's life is
    judged on meaning alone; a plan said for the coming days that the request names ("the
    agency call") is the work's too. It needs a word no topic reads as a subject and a
    meaning not unrelated, as a plan about other topics does; a plan for longer still
    needs the meaning, and a project's words describe its code, whatever they share."""
    bar = policy.recall.relevance
    at_work = Identity("t", "u", None, "on", "tr_work", task="work")
    in_project = Identity("t", "u", "birds-app", "on", "tr_proj", task="work")

    def call(*, days_before_end: float, vector: float = 0.2) -> Candidate:
        return plan_candidate(
            "Call with the Hamburg agency this Friday about a framework contract.",
            days_old=1,
            days_before_end=days_before_end,
            vector=vector,
        )

    words = frozenset({"prep", "talking", "points", "agency", "call", "rate"})
    assert bar.shared_terms_min_similarity <= 0.2 < bar.similarity
    assert first_failure(call(days_before_end=6), policy, at_work, NOW, words) is None
    assert first_failure(call(days_before_end=60), policy, at_work, NOW, words) == "threshold"
    unrelated = bar.shared_terms_min_similarity - 0.05
    assert first_failure(
        call(days_before_end=6, vector=unrelated), policy, at_work, NOW, words
    ) == ("threshold")
    assert first_failure(call(days_before_end=6), policy, in_project, NOW, words) == ("threshold")


def test_how_likely_a_fitted_relevance_says_it_is_needed_decides(policy: Policy) -> None:
    """Where the request's words may link the user's life, a memory the fitted relevance
    (recall.relevance.fitted) makes likely needed is relevant whatever its topics and words
    share (about other topics than the request's, at a higher bar and sharing no word a
    topic or slot reads as a subject), and one it makes unlikely is not, even on a shared
    topic; a name both write still links. In a project, or with no likelihood worked out,
    the other tests decide."""
    bar = policy.recall.relevance
    fitted = bar.fitted
    assert 0.0 < fitted.drop_below < fitted.add_at <= 1.0

    def knee(likely: float | None, *, vector: float = 0.05, off_topic: bool = False) -> Candidate:
        cand = topical("我膝盖做过手术，爬坡上坎还是疼", 0.1, vector=vector)
        cand.off_topic, cand.fitted = off_topic, likely
        return cand

    words = frozenset({"重庆", "行程"})
    assert first_failure(knee(None), policy, LIFE, NOW, words) == "threshold"
    likely = knee(fitted.add_at)
    assert first_failure(likely, policy, LIFE, NOW, words) is None
    assert likely.to_trace()["fitted"] == fitted.add_at
    assert first_failure(knee(fitted.add_at - 0.01), policy, LIFE, NOW, words) == "threshold"
    # about other topics than the request's: only a likelihood of add_off_topic_at adds it,
    # and not when it shares with the request a word a topic or slot reads as a subject (the
    # two use it in two senses, and it lifts the likelihood), in the form the topics read it
    # (Traditional as Simplified); any other shared word does not keep it out
    off_bar = fitted.add_off_topic_at
    assert off_bar is not None and off_bar > fitted.add_at
    assert first_failure(knee(off_bar, off_topic=True), policy, LIFE, NOW, words) is None
    below = knee(off_bar - 0.01, off_topic=True)
    assert first_failure(below, policy, LIFE, NOW, words) == "threshold"
    knees = frozenset({"膝盖", "行程"})
    assert "膝盖" in policy.keywords
    assert first_failure(knee(0.99, off_topic=True), policy, LIFE, NOW, knees) == "threshold"
    traditional = knee(0.99, off_topic=True)
    traditional.memory.content = "我膝蓋做過手術，爬坡上坎還是疼"
    assert "膝蓋" not in policy.keywords
    assert first_failure(traditional, policy, LIFE, NOW, frozenset({"膝蓋", "重慶"})) == (
        "threshold"
    )
    stairs = frozenset({"上坎", "重庆"})
    assert not stairs & policy.keywords
    assert first_failure(knee(off_bar, off_topic=True), policy, LIFE, NOW, stairs) is None

    def java(likely: float) -> Candidate:
        cand = topical("我平时工作写Java后端", 0.1, vector=0.05)
        cand.off_topic, cand.fitted = True, likely
        return cand

    island = frozenset({"java", "indonesia", "august"})
    assert first_failure(java(0.99), policy, LIFE, NOW, island) == "threshold"
    unset = bar.model_copy(update={"fitted": fitted.model_copy(update={"add_off_topic_at": None})})
    never = policy.model_copy(
        update={"recall": policy.recall.model_copy(update={"relevance": unset})}
    )
    assert first_failure(knee(0.99, off_topic=True), never, LIFE, NOW, words) == "threshold"
    # ... nor below add_at, if that is higher
    higher = bar.model_copy(update={"fitted": fitted.model_copy(update={"add_at": 0.9})})
    strict = policy.model_copy(
        update={"recall": policy.recall.model_copy(update={"relevance": higher})}
    )
    assert first_failure(knee(0.85, off_topic=True), strict, LIFE, NOW, words) == "threshold"
    assert first_failure(knee(0.9, off_topic=True), strict, LIFE, NOW, words) is None
    # in a project the request's words describe the code: the likelihood is not read
    assert first_failure(knee(0.99), policy, ME, NOW, words) == "threshold"

    def allergy(likely: float | None) -> Candidate:
        cand = topical("I'm allergic to peanuts", 0.1, vector=0.05)
        cand.topics = ("food",)
        cand.fitted = likely
        return cand

    menu = frozenset({"dinner", "menu"})
    assert "food" in fitted.drop_through
    assert first_failure(allergy(None), policy, LIFE, NOW, menu) is None
    assert first_failure(allergy(fitted.drop_below), policy, LIFE, NOW, menu) is None
    assert first_failure(allergy(fitted.drop_below - 0.01), policy, LIFE, NOW, menu) == "threshold"
    # ... but not a memory of a topic kept through it (recall.relevance.fitted.kept): an
    # allergy read as one is what a shared food topic is there for, however unlikely the fit
    assert "allergy" in fitted.kept
    read = allergy(fitted.drop_below - 0.01)
    read.memory.topics = ["food", "allergy"]
    assert first_failure(read, policy, LIFE, NOW, menu) is None
    # a narrow topic shared (a pacemaker and airport security, a hearing aid and a phone
    # call) stands, however unlikely the fit
    pacer = topical("I've had a pacemaker since 2021", 0.1, vector=0.0)
    pacer.topics, pacer.fitted = ("implants",), 0.01
    assert "implants" not in fitted.drop_through and "implants" in fitted.narrow
    assert first_failure(pacer, policy, LIFE, NOW, frozenset({"airport"})) is None
    aid = topical("I wear a hearing aid in my left ear", 0.1, vector=0.0)
    aid.topics, aid.fitted = ("hearing",), 0.01
    assert "hearing" in fitted.narrow
    assert first_failure(aid, policy, LIFE, NOW, frozenset({"phone", "bank"})) is None
    # ... but any other topic shared says little below drop_shared_below: a stray word
    # links what the user or the family does as often as its meaning does (a son learning
    # the guitar for a free evening of the user's own)
    assert fitted.drop_shared_below is not None
    assert fitted.drop_shared_below <= fitted.drop_below

    def guitar(likely: float) -> Candidate:
        cand = topical("Kai is learning the guitar", 0.1, vector=0.0)
        cand.topics, cand.fitted = ("music",), likely
        return cand

    evening = frozenset({"evening", "unwind"})
    assert "music" not in (*fitted.drop_through, *fitted.narrow)
    assert first_failure(guitar(fitted.drop_shared_below), policy, LIFE, NOW, evening) is None
    below = fitted.drop_shared_below - 0.01
    assert first_failure(guitar(below), policy, LIFE, NOW, evening) == "threshold"
    off = bar.model_copy(update={"fitted": fitted.model_copy(update={"drop_shared_below": None})})
    unset = policy.model_copy(
        update={"recall": policy.recall.model_copy(update={"relevance": off})}
    )
    assert first_failure(guitar(0.0), unset, LIFE, NOW, evening) is None
    # ... nor is a memory of a kept topic dropped: a blood thinner is what a question on a
    # painkiller needs, however the fit reads its wording
    thinner = topical("I take apixaban twice a day for my AFib", 0.1, vector=0.0)
    thinner.memory.topics = ["health", "heart"]
    thinner.topics, thinner.fitted = ("health",), 0.01
    assert "heart" in fitted.kept
    assert first_failure(thinner, policy, LIFE, NOW, frozenset({"ibuprofen"})) is None
    thinner.memory.topics = ["health"]
    assert first_failure(thinner, policy, LIFE, NOW, frozenset({"ibuprofen"})) == "threshold"
    # a slot's link stands when a topic naming the slot is the link (the weather "here")
    home = topical("I live in Leith", 0.1, vector=0.0, slot="location")
    home.topics, home.fitted = ("place",), 0.01
    assert "place" in policy.slot_topics["location"]
    assert first_failure(home, policy, LIFE, NOW, frozenset({"weather"})) is None
    # ... not another topic its words happen to hold: where the user lives is no link to
    # the children's homework
    moved = topical("We moved to Leith for the kids' school", 0.1, vector=0.0, slot="location")
    moved.topics, moved.fitted = ("child_school",), 0.01
    assert "child_school" not in policy.slot_topics["location"]
    assert "child_school" not in (*fitted.drop_through, *fitted.narrow)
    homework = frozenset({"homework", "fractions"})
    assert first_failure(moved, policy, LIFE, NOW, homework) == "threshold"
    # ... while a slot no topic names links through any (the language the user codes in)
    rust = topical("I mostly code in Rust", 0.1, vector=0.0, slot="programming_language")
    rust.topics, rust.fitted = ("coding",), 0.01
    assert "programming_language" not in policy.slot_topics
    assert first_failure(rust, policy, LIFE, NOW, frozenset({"parse", "arguments"})) is None
    # a name both write links whatever the likelihood
    leo = Candidate(memory("My son Leo is dyslexic"), 0.2, 3.0, 0.2)
    leo.fitted = 0.01
    assert relevant(leo, policy.recall, frozenset({"leo", "book"}), frozenset({"leo"}))


def test_a_memory_about_someone_the_user_names_meets_a_request_about_someone_close(
    policy: Policy, tmp_path: Path
) -> None:
    """A request about someone close to the user (a boyfriend's present) names no one; a
    memory about someone the user names ("Tomás 最近迷上了攀岩") may be about them. At the
    likelihood ``someone_close.at`` it is relevant; not about a pet, not one opening with a
    word the topics read, not for a request about no one close, not in a work task."""
    close = policy.recall.relevance.fitted.someone_close
    assert close.at is not None and close.at < policy.recall.relevance.fitted.add_at
    words = frozenset({"男朋友", "生日", "礼物"})

    def about(content: str, likely: float, **fields: object) -> Candidate:
        cand = topical(content, 0.1, vector=0.05, **fields)
        cand.off_topic, cand.fitted = True, likely
        return cand

    def decided(cand: Candidate, close_one: bool = True, who: Identity = LIFE) -> str | None:
        return first_failure(cand, policy, who, NOW, words, close=close_one)

    for text in ("Tomás 最近迷上了攀岩", "Tomás is obsessed with bouldering", "乐乐最近迷上了拼图"):
        assert decided(about(text, close.at)) is None, text
        assert decided(about(text, close.at - 0.01)) == "threshold", text
        assert decided(about(text, close.at), close_one=False) == "threshold", text
        at_work = Identity("t", "u", None, "on", "tr_close", task="work")
        assert decided(about(text, close.at), who=at_work) == "threshold", text
    # a pet's name, a memory opening with a hobby or with the user
    pet = about("Pickles is scared of thunder", close.at, topics=["pets"])
    assert decided(pet) == "threshold"
    for text in ("Yoga is my thing", "Bouldering is my thing", "我最近迷上了攀岩"):
        assert decided(about(text, 0.5)) == "threshold", text
    # an overlay without the bar, or without the topics, turns it off
    for i, knobs in enumerate(("at: null", "topics: []")):
        path = tmp_path / f"off{i}.yaml"
        path.write_text(
            f"recall:\n  relevance:\n    fitted:\n      someone_close:\n        {knobs}\n"
        )
        off = load_policy(path)
        closed = off.recall.relevance.fitted.someone_close
        close_one = not closed.topics.isdisjoint({"partner"})
        cand = about("Tomás 最近迷上了攀岩", 0.5)
        assert first_failure(cand, off, LIFE, NOW, words, close=close_one) == "threshold"


@pytest.mark.parametrize(
    ("text", "who"),
    [
        ("Tomás is a nurse and loves jazz", "tomás"),
        ("Anna's exams start in June", "anna"),
        ("Mei Ling loves hiking", "mei"),
        ("Kai 最近在学冲浪", "kai"),
        ("豆豆最近迷恐龙", "豆豆"),
        ("Tingting 最近迷上了拼图", "tingting"),
        ("Kai，最近在学冲浪", "kai"),
        ("小美喜欢猫", "小美"),
        ("丁丁最近迷恐龙", None),
        ("Let's keep it simple", None),
        ("Today's plan is a long walk", None),
        ("Fishing is how I relax", None),
        ("Coriander's a no for me", None),
        ("This year I want to swim more", None),
        ("My son is 7", None),
        ("天天都要喝咖啡", None),
        ("我最喜欢钓鱼", None),
    ],
)
def test_who_a_memory_opens_with(text: str, who: str | None) -> None:
    from gateway.memory.textsearch import opens_with_someone

    assert opens_with_someone(text) == who


def test_a_name_written_in_chinese_and_in_english_is_one_name(policy: Policy) -> None:
    """ "糖糖周末来我家" and "My granddaughter Tangtang is three" share no word, so no keyword
    search or shared-name test of the same writing links them; the name in pinyin does,
    either way round, where the meanings are not opposed."""
    from gateway.memory.textsearch import romanized

    assert romanized(frozenset({"糖糖", "阿杰", "leo"})) == {"tangtang", "ajie"}

    def cand(content: str, vector: float = 0.05) -> Candidate:
        return topical(content, 0.1, vector=vector)

    words = frozenset({"周末", "点心"})
    gran = "My granddaughter Tangtang is three and loves dumplings"
    assert first_failure(cand(gran), policy, LIFE, NOW, words, leading=frozenset({"糖糖"})) is None
    assert first_failure(cand(gran), policy, LIFE, NOW, words, frozenset({"糖糖"})) is None
    party = frozenset({"party", "birthday"})
    nuts = cand("悦悦对花生过敏，一点都不能碰")
    assert first_failure(nuts, policy, LIFE, NOW, party, frozenset({"yueyue"})) is None
    assert nuts.shared_name
    # a weak sign on both sides: a word opening the request, a doubled name opening the memory
    nana = cand("娜娜对花生过敏，一点都不能碰")
    assert first_failure(nana, policy, LIFE, NOW, party, leading=frozenset({"nana"})) == (
        "threshold"
    )
    # another name, a meaning opposed, a work task
    assert first_failure(cand(gran), policy, LIFE, NOW, words, frozenset({"豆豆"})) == "threshold"
    opposed = cand(gran, vector=policy.recall.relevance.topic_min_similarity - 0.05)
    assert first_failure(opposed, policy, LIFE, NOW, words, frozenset({"糖糖"})) == "threshold"
    at_work = Identity("t", "u", None, "on", "tr_names", task="work")
    assert first_failure(cand(gran), policy, at_work, NOW, words, frozenset({"糖糖"})) == (
        "threshold"
    )
