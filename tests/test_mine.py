"""The rule-based miner: bilingual rules, refusals through the write gate, what is never mined."""

from __future__ import annotations

import random
import string

import pytest

from gateway.memory.mine import MineResult, extract, mining_key, split_sentences
from gateway.memory.policy import Policy, load_policy

pytestmark = pytest.mark.unit  # no Redis, servers or browsers


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy()


def mine(
    policy: Policy,
    text: str,
    *,
    project: str | None = None,
    injected: list[str] | None = None,
    role: str = "user",
) -> MineResult:
    messages = [{"role": "system", "content": "You are helpful."}, {"role": role, "content": text}]
    return extract(messages, project_id=project, injected_texts=injected or [], policy=policy)


@pytest.mark.parametrize(
    ("text", "type_", "slot"),
    [
        ("以后都用中文回答我", "preference", "language"),
        ("I'm colour-blind, please avoid red/green charts", "accessibility", "accessibility"),
        ("always use bullet points", "format", "output_format"),
        ("I'm preparing for the IELTS exam in March", "goal", None),
        ("下周去上海出差", "plan", None),
        ("remember that my cat is called Mochi", "profile", None),
        ("记住我的猫叫麻薯", "profile", None),
    ],
)
def test_rule_table(policy: Policy, text: str, type_: str, slot: str | None) -> None:
    result = mine(policy, text)
    assert result.refused == []
    [p] = result.proposals
    assert (p.type, p.scope, p.project_id, p.source) == (type_, "global", None, "user_stated")
    assert p.slot == slot
    assert p.evidence == text and not p.is_correction


def test_remember_keeps_the_fact_not_the_command(policy: Policy) -> None:
    assert mine(policy, "remember that my cat is called Mochi").proposals[0].content == (
        "my cat is called Mochi"
    )
    assert mine(policy, "记住我的猫叫麻薯").proposals[0].content == "我的猫叫麻薯"
    # read as the rules read Traditional Chinese, kept as the user wrote it
    assert mine(policy, "記住，我對花生過敏").proposals[0].content == "我對花生過敏"


def test_goals_and_plans_keep_their_horizon(policy: Policy) -> None:
    assert mine(policy, "I'm preparing for the IELTS exam in March").proposals[0].horizon == (
        "in March"
    )
    assert mine(policy, "下周去上海出差").proposals[0].horizon == "下周"
    assert mine(policy, "下週去上海出差").proposals[0].horizon == "下週"  # as the user said it


def test_project_fact_is_scoped_to_the_request_project(policy: Policy) -> None:
    [p] = mine(policy, "我们这个项目用 FastAPI", project="shop-api").proposals
    assert (p.type, p.scope, p.project_id, p.slot) == (
        "project",
        "project",
        "shop-api",
        "framework",
    )
    [q] = mine(policy, "我们这个项目用 FastAPI").proposals  # no project id: a global fact
    assert (q.scope, q.project_id) == ("global", None)


@pytest.mark.parametrize(
    ("text", "content", "slot"),
    [
        ("不对，我现在用的是 Neovim", "我现在用的是 Neovim", "editor"),
        ("no, I moved to Berlin", "I moved to Berlin", "location"),
        ("不對，我住在上海", "我住在上海", "location"),
    ],
)
def test_corrections(policy: Policy, text: str, content: str, slot: str) -> None:
    [p] = mine(policy, text).proposals
    assert p.is_correction and p.content == content and p.slot == slot


@pytest.mark.parametrize(
    "text", ["这次简短点", "just the answer this time", "这次简短一点，以后都用中文回答我"]
)
def test_one_time_instructions_are_refused_and_counted(policy: Policy, text: str) -> None:
    result = mine(policy, text)
    assert "refused_one_time" in result.refused
    assert all("这次" not in p.content for p in result.proposals)


def test_a_one_time_sentence_does_not_hide_a_lasting_one(policy: Policy) -> None:
    result = mine(policy, "这次简短一点。以后都用中文回答我")
    assert result.refused == ["refused_one_time"]
    assert [p.content for p in result.proposals] == ["以后都用中文回答我"]


def test_secrets_are_refused_and_never_proposed(policy: Policy) -> None:
    key = "sk-proj-" + "".join(random.choices(string.ascii_letters + string.digits, k=40))
    for text in (
        f"my OpenAI key is {key}",
        f"remember that my api key is {key}",
        f"I prefer this key: {key}",
    ):
        result = mine(policy, text)
        assert result.proposals == [] and result.refused == ["refused_sensitive"], text
    assert mine(policy, "remember that [REDACTED:openai] is mine").refused == ["refused_sensitive"]


@pytest.mark.parametrize(
    "text",
    [
        "do you remember my cat?",
        "你还记得我的猫叫什么",
        "Do you know I prefer Python",
        "我喜欢什么？",
        "Can you write a sorting function",
        "thanks!",
        "好的",
    ],
)
def test_questions_and_chatter_are_not_mined(policy: Policy, text: str) -> None:
    assert mine(policy, text).proposals == []


def test_only_the_latest_user_message_is_mined(policy: Policy) -> None:
    assert (
        mine(policy, "The user prefers dark mode and lives in Paris.", role="assistant").proposals
        == []
    )
    assert mine(policy, "Remember that the user likes tea", role="system").proposals == []
    messages = [
        {"role": "user", "content": "I prefer tea"},
        {"role": "assistant", "content": "Noted: you live in Paris and love jazz."},
    ]
    assert extract(messages, project_id=None, injected_texts=[], policy=policy).proposals == []
    tool = [{"role": "user", "content": "I prefer tea"}, {"role": "tool", "content": "ok"}]
    assert extract(tool, project_id=None, injected_texts=[], policy=policy).proposals == []
    parts = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "always use bullet points"},
                {"type": "image_url", "image_url": {"url": "x"}},
            ],
        }
    ]
    assert len(extract(parts, project_id=None, injected_texts=[], policy=policy).proposals) == 1


def test_injected_memories_are_not_mined_back(policy: Policy) -> None:
    assert mine(policy, "以后都用中文回答我。", injected=["以后都用中文回答我"]).proposals == []
    assert (
        mine(policy, "Always use bullet points!", injected=["always use  bullet points"]).proposals
        == []
    )
    keyed = extract(
        [{"role": "user", "content": "always use bullet points"}],
        project_id=None,
        policy=policy,
        injected_keys=[mining_key("Always use bullet points.")],
    )
    assert keyed.proposals == []
    # A different statement is still mined.
    assert mine(policy, "always use tables", injected=["always use bullet points"]).proposals


def test_sentence_splitting_keeps_dotted_names_whole() -> None:
    assert split_sentences("We use Next.js 14.2. 我喜欢Vue！你呢？") == [
        ("We use Next.js 14.2", "."),
        ("我喜欢Vue", "！"),
        ("你呢", "？"),
    ]
