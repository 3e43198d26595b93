"""Recall scenarios: which memories a request needs, which it must not get, and how recall did.

A scenario file (``gateway/scenarios/recall.yaml`` is the shipped one; its header documents the
format) seeds each scenario's memories for a fresh user through ``Memories.create`` (the write
gate, dedup and newest-wins supersede of the memory API) at the simulated time each was saved,
then sends its request through ``Recaller.recall`` (chat's recall) and compares what was
injected with what the scenario expects and forbids.

PrefEval's explicit preferences run the same way: a sample of preferences stored for one user,
each indirect question recalled, hit when its own preference is injected.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from gateway.clock import ManualClock, SystemClock
from gateway.errors import WriteRefused
from gateway.memory.embed import Embedder
from gateway.memory.identity import Identity, new_trace_id
from gateway.memory.memories import Memories
from gateway.memory.policy import Policy
from gateway.memory.recall import Recaller, meaning_text, own_words
from gateway.memory.selection import TOPICAL
from gateway.storage.store import Store

SHIPPED = Path(__file__).resolve().parent.parent / "scenarios" / "recall.yaml"
_T = TypeVar("_T")
_MODEL = "gpt-4o-mini"

Ref = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SeedMemory(_Model):
    ref: Ref
    content: Annotated[str, StringConstraints(min_length=1)]
    type: str
    scope: str = "global"
    project: str | None = None
    applies: Literal["always", "relevant"] | None = None
    age_days: Annotated[float, Field(ge=0)] = 0.0
    expires_in_days: Annotated[float, Field(gt=0)] | None = None


class Request(_Model):
    message: Annotated[str, StringConstraints(min_length=1)]
    project: str | None = None
    task: str | None = None


class Scenario(_Model):
    id: Ref
    category: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    memories: tuple[SeedMemory, ...]
    request: Request
    expect: tuple[Ref, ...] = ()
    forbid: tuple[Ref, ...] = ()


class _File(_Model):
    scenarios: tuple[Scenario, ...]


class ScenarioError(ValueError):
    """A scenario file that cannot be run; the message names the file, scenario and field."""


def load_scenarios(path: Path = SHIPPED) -> list[Scenario]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"{path}: cannot read scenarios: {exc}") from None
    try:
        scenarios = list(_File.model_validate(raw).scenarios)
    except ValidationError as exc:
        raise ScenarioError(validation_problems(path, raw, exc)) from None
    seen: set[str] = set()
    for s in scenarios:
        if s.id in seen:
            raise ScenarioError(f"{path}: scenario {s.id}: id: declared twice")
        seen.add(s.id)
        refs = {m.ref for m in s.memories}
        for key in ("expect", "forbid"):
            for ref in getattr(s, key):
                if ref not in refs:
                    raise ScenarioError(f"{path}: scenario {s.id}: {key}: unknown memory {ref!r}")
    return scenarios


def validation_problems(path: Path, raw: Any, exc: ValidationError) -> str:
    """One line per problem: the file, the scenario (its id, else its position) and the
    field's path inside it."""
    problems = []
    for err in exc.errors():
        loc = list(err["loc"])
        where = ""
        if len(loc) >= 2 and loc[0] == "scenarios" and isinstance(loc[1], int):
            items = raw.get("scenarios") if isinstance(raw, dict) else None
            sid = (
                items[loc[1]].get("id")
                if isinstance(items, list) and isinstance(items[loc[1]], dict)
                else None
            )
            where = f"scenario {sid or loc[1]!s}: "
            loc = loc[2:]
        problems.append(f"{path}: {where}{'.'.join(map(str, loc))}: {err['msg']}")
    return "\n".join(problems)


@dataclass(slots=True)
class Outcome:
    scenario: Scenario
    injected: list[str]  # refs, in injection order
    not_stored: list[str] = field(default_factory=list)  # refs the write path refused or merged
    refs: dict[str, str] = field(default_factory=dict)  # stored memory id -> ref
    topical: list[str] = field(default_factory=list)  # ids recall weighed as topical

    @property
    def hits(self) -> int:
        return len(set(self.scenario.expect) & set(self.injected))

    @property
    def false(self) -> int:
        return len(set(self.scenario.forbid) & set(self.injected))


@dataclass(slots=True)
class Tally:
    expected: int = 0
    hits: int = 0
    forbidden: int = 0
    false: int = 0
    injected: int = 0
    scenarios: int = 0

    def add(self, o: Outcome) -> None:
        self.scenarios += 1
        self.expected += len(o.scenario.expect)
        self.hits += o.hits
        self.forbidden += len(o.scenario.forbid)
        self.false += o.false
        self.injected += len(o.injected)

    @property
    def gold_recall(self) -> float:
        return self.hits / self.expected if self.expected else 1.0

    @property
    def false_recall(self) -> float:
        return self.false / self.forbidden if self.forbidden else 0.0

    @property
    def precision(self) -> float:
        return self.hits / self.injected if self.injected else 1.0


def tally(outcomes: Iterable[Outcome]) -> tuple[dict[str, Tally], Tally]:
    by: dict[str, Tally] = {}
    total = Tally()
    for o in outcomes:
        by.setdefault(o.scenario.category, Tally()).add(o)
        total.add(o)
    return by, total


def anchor(now: datetime) -> datetime:
    """The simulated "now" scenarios run at: the first 15 June, noon UTC, not before ``now``.
    A goal or plan lasts until the month or year it names ends (policy: horizons), so
    "this month" said ten days ago would be over or not by the day of the month a run falls
    on; a fixed point in the calendar gives every run the same result. Never before the
    real time: Redis drops a memory's key at its expiry by the real clock, which must not
    come before the simulated one's."""
    at = datetime(now.year, 6, 15, 12, tzinfo=UTC)
    return at if at >= now else at.replace(year=now.year + 1)


class Runner:
    """Seeds and recalls through the product's own write path and recall, on a simulated
    clock (``anchor``), each scenario under a tenant of its own (removed afterwards)."""

    def __init__(self, store: Store, embedder: Embedder, policy: Policy) -> None:
        self.clock = ManualClock(anchor(SystemClock().now()))
        self.now = self.clock.now()
        self.memories = Memories(store, embedder, policy, self.clock)
        self.recaller = Recaller(store, embedder, policy, self.clock)
        self.tenant = "eval-" + secrets.token_hex(6)

    async def ready(self) -> None:
        """The index built and the policy's example requests embedded, as at start-up."""
        await self.memories.ready()
        await self.recaller.prepare()

    def _ident(self, user: str, project: str | None = None, task: str | None = None) -> Identity:
        return Identity(self.tenant, user, project, "on", new_trace_id(), task=task)

    async def run(self, scenario: Scenario) -> Outcome:
        user = scenario.id
        by_id: dict[str, str] = {}
        not_stored: list[str] = []
        for seed in sorted(scenario.memories, key=lambda m: -m.age_days):
            saved_at = self.now - timedelta(days=seed.age_days)
            self.clock.set(saved_at)
            expires = (
                saved_at + timedelta(days=seed.expires_in_days) if seed.expires_in_days else None
            )
            try:
                outcome = await self.memories.create(
                    self._ident(user, seed.project),
                    content=seed.content,
                    type=seed.type,
                    scope=seed.scope,
                    project_id=seed.project,
                    applies=seed.applies,
                    expires_at=expires,
                )
            except WriteRefused:
                # the write gate's answer is part of the result (a one-time wish, a secret),
                # as for a user, not the end of the run
                not_stored.append(seed.ref)
                continue
            if outcome.created:
                by_id[outcome.memory.id] = seed.ref
            else:
                not_stored.append(seed.ref)
        self.clock.set(self.now)
        req = scenario.request
        result = await self.recaller.recall(
            self._ident(user, req.project, req.task), req.message.strip(), model=_MODEL
        )
        injected = [by_id.get(m.id, m.id) for m in result.injected]
        topical = [c.memory.id for c in result.candidates if c.lane == TOPICAL]
        return Outcome(scenario, injected, not_stored, by_id, topical)

    async def fitting_pairs(
        self, scenarios: Sequence[Scenario]
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[bool]]:
        """Each scenario run as ``run`` does; then, for every memory recall weighed as
        topical and the scenario expects or forbids: the request's vector (its own words,
        as recall embeds them), the memory's stored vector and whether it is needed. Not
        from requests whose words link nothing of the user's life (in a project, or a task
        in ``meaning_only_in_tasks``): there the fitted relevance does not apply."""
        recaller = self.recaller
        quiet = set(recaller.policy.recall.relevance.meaning_only_in_tasks)
        queries: list[np.ndarray] = []
        memories: list[np.ndarray] = []
        needed: list[bool] = []
        try:
            for scenario in scenarios:
                outcome = await self.run(scenario)
                req = scenario.request
                if req.project or req.task in quiet:
                    continue
                label = {ref: False for ref in scenario.forbid} | {r: True for r in scenario.expect}
                ids = [i for i in outcome.topical if outcome.refs.get(i) in label]
                if not ids:
                    continue
                vectors = await recaller.store.get_embeddings(self.tenant, scenario.id, ids)
                text = req.message.strip()
                query = await recaller.embedder.embed_query(meaning_text(text, own_words(text)))
                for memory_id in ids:
                    if memory_id in vectors:
                        queries.append(query)
                        memories.append(vectors[memory_id])
                        needed.append(label[outcome.refs[memory_id]])
        finally:
            await self.forget(s.id for s in scenarios)
        return queries, memories, needed

    async def run_all(self, scenarios: Sequence[Scenario]) -> list[Outcome]:
        try:
            return [await self.run(s) for s in scenarios]
        finally:
            await self.forget(s.id for s in scenarios)

    async def forget(self, users: Iterable[str]) -> None:
        for user in users:
            await self.memories.delete_where(self._ident(user), everything=True, actor="admin")


# ----------------------------------------------------------------------------- PrefEval


def load_prefeval(folder: Path, per_topic: int = 5) -> list[tuple[str, str, str]]:
    """(topic, preference, question): the first ``per_topic`` explicit preferences of each
    topic (20 topics: 100 with the default)."""
    rows: list[tuple[str, str, str]] = []
    for file in sorted(folder.glob("*.json")):
        data = json.loads(file.read_text(encoding="utf-8"))
        rows += [(file.stem, r["preference"], r["question"]) for r in data[:per_topic]]
    return rows


@dataclass(slots=True)
class PrefEvalResult:
    questions: int
    stored: int  # preferences stored as memories of their own
    merged: int  # ... or merged into an earlier memory that says the same (the dedup rule)
    hits: int
    injected_total: int

    @property
    def mean_injected(self) -> float:
        return self.injected_total / self.questions if self.questions else 0.0


async def run_prefeval(runner: Runner, rows: Sequence[tuple[str, str, str]]) -> PrefEvalResult:
    """All preferences stored for one user through the write path, then each question
    recalled: a hit when its own preference is injected. A preference that the write path
    merges into an earlier memory saying the same (PrefEval repeats a few in other words)
    is held by that memory, so injecting it is injecting the preference; one refused or
    superseded is a miss."""
    user = "prefeval"
    ident = runner._ident(user)
    gold: list[str | None] = []
    stored = merged = 0
    try:
        for _, preference, _ in rows:
            try:
                outcome = await runner.memories.create(ident, content=preference, type="preference")
            except WriteRefused:
                gold.append(None)
                continue
            gold.append(outcome.memory.id)
            stored += int(outcome.created)
            merged += int(outcome.deduplicated)
        hits = injected = 0
        for (_, _, question), want in zip(rows, gold, strict=True):
            result = await runner.recaller.recall(
                runner._ident(user), question.strip(), model=_MODEL
            )
            ids = [m.id for m in result.injected]
            injected += len(ids)
            hits += int(want is not None and want in ids)
        return PrefEvalResult(len(rows), stored, merged, hits, injected)
    finally:
        await runner.forget([user])


# ----------------------------------------------------------------------------- report


def report(outcomes: Sequence[Outcome], pref: PrefEvalResult | None, pref_note: str) -> str:
    by, total = tally(outcomes)
    head = (
        f"{'category':<16}{'scenarios':>11}{'gold recall':>16}{'false recall':>16}{'precision':>11}"
    )
    lines = ["Recall scenarios (memories expected / forbidden per request)", "", head]

    def row(name: str, t: Tally) -> str:
        return (
            f"{name:<16}{t.scenarios:>11}"
            f"{f'{t.gold_recall:.2f} ({t.hits}/{t.expected})':>16}"
            f"{f'{t.false_recall:.2f} ({t.false}/{t.forbidden})':>16}"
            f"{t.precision:>11.2f}"
        )

    lines += [row(name, t) for name, t in sorted(by.items())]
    lines += ["-" * len(head), row("overall", total), ""]
    misses = [o for o in outcomes if o.hits < len(o.scenario.expect) or o.false]
    if misses:
        lines.append("Scenarios off target (expected / forbidden / injected):")
        for o in misses:
            lines.append(
                f"  {o.scenario.id}: expected {list(o.scenario.expect)} forbidden "
                f"{list(o.scenario.forbid)} injected {o.injected}"
                + (f" not stored {o.not_stored}" if o.not_stored else "")
            )
        lines.append("")
    kept_out = [o for o in outcomes if o.not_stored]
    if kept_out:
        lines.append("Memories the write path refused or merged (scenario: refs):")
        lines += [f"  {o.scenario.id}: {o.not_stored}" for o in kept_out]
        lines.append("")
    if pref is not None:
        lines.append(
            f"PrefEval explicit preferences through the product path: {pref.hits}/"
            f"{pref.questions} questions got their preference injected, mean injected "
            f"{pref.mean_injected:.2f} ({pref.stored} of {pref.questions} preferences stored, "
            f"{pref.merged} merged into an earlier memory saying the same)"
        )
    else:
        lines.append(f"PrefEval: {pref_note}")
    return "\n".join(lines)


def summary(outcomes: Sequence[Outcome], pref: PrefEvalResult | None) -> dict[str, Any]:
    """The figures as data (one object per category and overall)."""
    by, total = tally(outcomes)

    def figures(t: Tally) -> dict[str, Any]:
        return {
            "scenarios": t.scenarios,
            "gold_recall": round(t.gold_recall, 4),
            "false_recall": round(t.false_recall, 4),
            "precision": round(t.precision, 4),
        }

    out: dict[str, Any] = {
        "categories": {k: figures(v) for k, v in sorted(by.items())},
        "overall": figures(total),
    }
    if pref is not None:
        out["prefeval"] = {
            "questions": pref.questions,
            "hits": pref.hits,
            "stored": pref.stored,
            "merged": pref.merged,
            "mean_injected": round(pref.mean_injected, 3),
        }
    return out


# ----------------------------------------------------------------------------- command


def _with_runner(
    command: str, policy: Policy, count: int, work: Callable[[Runner], Awaitable[_T]]
) -> tuple[int, _T | None]:
    """``work`` done by a scenario ``Runner`` on a throwaway embedded Redis with the local
    embedder (what `memgate bench scenarios` and `memgate fit relevance` run on): (0, its
    result), or (1, None) with the reason in one line on stderr when Redis does not start
    or fails on the way."""
    import asyncio
    import sys
    import tempfile

    from gateway.memory.embed import LocalEmbedder
    from gateway.memory.tokens import prepare_cache
    from gateway.storage import RedisError
    from gateway.storage.redis_server import EmbeddedRedis, EmbeddedRedisError

    async def job(url: str) -> _T:
        store = Store(url)
        try:
            runner = Runner(store, LocalEmbedder(), policy)
            await runner.ready()
            print(f"running {count} scenarios", file=sys.stderr, flush=True)
            return await work(runner)
        finally:
            await store.aclose()

    with tempfile.TemporaryDirectory(prefix="memgate-scenarios-") as tmp:
        prepare_cache(Path(tmp) / "tiktoken")
        server = EmbeddedRedis(Path(tmp) / "redis")
        try:
            url = server.start()
        except EmbeddedRedisError as exc:
            print(f"{command}: {exc}", file=sys.stderr)
            return 1, None
        try:
            return 0, asyncio.run(job(url))
        except (RedisError, OSError) as exc:
            print(f"{command}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1, None
        finally:
            server.stop()


def run_scenario_bench(
    *,
    scenarios: str | None = None,
    prefeval: str | None = None,
    no_prefeval: bool = False,
    json_out: str | None = None,
) -> int:
    """`memgate bench scenarios`: a throwaway embedded Redis, the local embedder and the
    default (or ``MEMGATE_POLICY``) policy; prints the report, 0 on success."""
    import os
    import sys

    from gateway.memory.policy import PolicyError, load_policy

    try:
        policy = load_policy(os.environ.get("MEMGATE_POLICY") or None)
        chosen = load_scenarios(Path(scenarios) if scenarios else SHIPPED)
    except (PolicyError, ScenarioError) as exc:
        print(f"memgate bench scenarios: {exc}", file=sys.stderr)
        return 2
    rows: list[tuple[str, str, str]] = []
    note = "skipped (--no-prefeval)"
    if not no_prefeval:
        folder = Path(prefeval) if prefeval else _default_prefeval()
        rows = load_prefeval(folder) if folder is not None and folder.is_dir() else []
        if not rows:
            note = "no data (pass --prefeval DIR: PrefEval's explicit_preference folder)"

    async def work(runner: Runner) -> tuple[list[Outcome], PrefEvalResult | None]:
        outcomes = await runner.run_all(chosen)
        pref = None
        if rows:
            print(f"PrefEval: {len(rows)} preferences", file=sys.stderr, flush=True)
            pref = await run_prefeval(runner, rows)
        return outcomes, pref

    code, done = _with_runner("memgate bench scenarios", policy, len(chosen), work)
    if done is None:
        return code
    outcomes, pref = done
    print(report(outcomes, pref, note), flush=True)
    if json_out:
        Path(json_out).write_text(json.dumps(summary(outcomes, pref), indent=2) + "\n")
    return 0


def _default_prefeval() -> Path | None:
    """PrefEval next to a repository checkout (``../shared/eval-data``), when present."""
    root = Path(__file__).resolve().parent.parent.parent
    folder = root.parent / "shared" / "eval-data" / "prefeval" / "explicit_preference"
    return folder if folder.is_dir() else None


def run_fit(*, scenarios: Sequence[str], out: str) -> int:
    """`memgate fit relevance`: the fitted relevance (``gateway.memory.fitted``) from
    scenario files, through the product's own write path and recall on a throwaway embedded
    Redis with the local embedder, written to ``out`` as a policy layer (the shipped one
    is ``gateway/policies/fitted.yaml``); 0 on success."""
    import os
    import sys

    from gateway.memory.embed import LocalEmbedder
    from gateway.memory.fitted import fit
    from gateway.memory.policy import PolicyError, load_policy

    try:
        policy = load_policy(os.environ.get("MEMGATE_POLICY") or None)
        chosen = [s for path in scenarios for s in load_scenarios(Path(path))]
    except (PolicyError, ScenarioError) as exc:
        print(f"memgate fit relevance: {exc}", file=sys.stderr)
        return 2
    code, pairs = _with_runner(
        "memgate fit relevance", policy, len(chosen), lambda runner: runner.fitting_pairs(chosen)
    )
    if pairs is None:
        return code
    queries, memories, needed = pairs
    if not needed:
        print(
            "memgate fit relevance: no memory recall weighed as topical is expected or forbidden",
            file=sys.stderr,
        )
        return 2
    try:
        fitted = fit(np.stack(queries), np.stack(memories), needed)
    except ValueError as exc:
        print(f"memgate fit relevance: {exc}", file=sys.stderr)
        return 2
    layer = {
        "recall": {
            "relevance": {"fitted": {"embedder": LocalEmbedder.model_id, **fitted.layer_fields()}}
        }
    }
    header = (
        "# The fitted relevance (recall.relevance.fitted, gateway/memory/fitted.py), written by\n"
        "# `memgate fit relevance`: one weight a dimension of `embedder`'s vectors for their\n"
        "# products, one for the memory's and one for the request's vector alone, directions\n"
        "# of the request and of the memory whose products add to it, and a bias.\n"
    )
    try:
        Path(out).write_text(
            header + yaml.safe_dump(layer, default_flow_style=None, width=100, sort_keys=False),
            encoding="utf-8",
        )
    except OSError as exc:
        print(f"memgate fit relevance: cannot write {out}: {exc.strerror}", file=sys.stderr)
        return 1
    print(
        f"{len(chosen)} scenarios, {fitted.pairs} pairs ({fitted.needed} needed) -> {out}",
        flush=True,
    )
    return 0
