"""``memgate eval``: does memory help, and what does wrong memory cost?

The same scenarios (``eval_scenarios``) run in three arms against a real gateway over HTTP:
``off`` (``X-Memory-Mode: off``), ``memory`` (the memories as stored) and ``wrong`` (plus the
scenarios' wrong memories). Everything goes through the product's own surface: memories are
seeded through the memory API, each turn is a chat completion, its simulated time set with
``X-Memory-Eval-Time`` (honoured for the admin token only) under a throwaway tenant that is
emptied afterwards.

Without ``--gateway`` the command starts its own gateway (embedded Redis in a temporary data
dir) and, without ``--upstream``, a loopback upstream that returns the answers recorded in the
scenarios, so the answer checks run offline.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import os
import secrets
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from gateway.clock import to_iso
from gateway.memory.eval_scenarios import (
    ARMS,
    SHIPPED_EVAL,
    Arm,
    EvalScenario,
    Turn,
    check_answer,
    load_eval_scenarios,
)
from gateway.memory.scenario_eval import ScenarioError, SeedMemory
from gateway.processes import http_body

ANSWER_HEADER = "x-eval-recorded-answer"
"""Sent only to the offline upstream this command starts: the recorded answers of a turn."""
RECORDED_HEADER = "x-eval-recorded"
_NO_ANSWER = "none"
_MODEL = "gpt-4o-mini"


class EvalError(RuntimeError):
    """The eval cannot run (gateway unreachable, admin token refused, ...)."""


# ----------------------------------------------------------------------------- offline upstream


def encode_answers(default: str | None, when: Sequence[tuple[str, str]]) -> str:
    payload = {"default": default, "when": [list(pair) for pair in when]}
    return base64.b64encode(json.dumps(payload, ensure_ascii=False).encode()).decode("ascii")


def recorded_answer(header: str | None, messages: Any) -> str | None:
    """The recorded answer for a request: the first ``when`` answer whose memory text is in
    the messages memgate forwarded, else the arm's answer; None when nothing was recorded."""
    if not header:
        return None
    try:
        payload = json.loads(base64.b64decode(header))
    except ValueError:
        return None
    sent = json.dumps(messages, ensure_ascii=False)
    for content, answer in payload.get("when") or []:
        if content and json.dumps(content, ensure_ascii=False)[1:-1] in sent:
            return str(answer)
    default = payload.get("default")
    return str(default) if default is not None else None


async def stub_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Raw ASGI upstream for ``POST /v1/chat/completions``: answers with the recorded answer
    (``x-eval-recorded-answer``), or a fixed text marked ``x-eval-recorded: none``."""
    body = await http_body(scope, receive, send)
    if body is None:
        return
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    status, out, extra = 404, {"error": {"message": "not found"}}, []
    if scope["method"] == "POST" and scope["path"] == "/v1/chat/completions":
        try:
            request = json.loads(body)
            messages = request.get("messages")
            model = str(request.get("model") or _MODEL)
        except (ValueError, AttributeError):
            messages, model = None, _MODEL
        if messages is None:
            status, out = 400, {"error": {"message": "bad request"}}
        else:
            answer = recorded_answer(headers.get(ANSWER_HEADER), messages)
            if answer is None:
                extra = [(RECORDED_HEADER.encode(), _NO_ANSWER.encode())]
            status, out = 200, _completion(model, answer or "(no recorded answer)")
    payload = json.dumps(out, ensure_ascii=False).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-eval",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }


def serve_stub(port: int) -> None:
    """Entry point of the offline upstream's own process."""
    import uvicorn

    uvicorn.run(stub_app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# ----------------------------------------------------------------------------- results


@dataclass(slots=True)
class TurnResult:
    scenario: str
    index: int
    injected: list[str]
    expect: tuple[str, ...]
    forbidden: set[str]
    checks: list[tuple[str, bool]] | None  # None: no checks, or no answer to check
    overhead_ms: float | None
    trace_id: str
    injected_tokens: int = 0
    conflicts: int = 0


@dataclass(slots=True)
class ArmResult:
    arm: Arm
    scenarios: int = 0
    turns: list[TurnResult] = field(default_factory=list)
    seeded: int = 0
    wrong_seeded: int = 0
    wrong_refused: int = 0
    wrong_kinds: dict[str, str] = field(default_factory=dict)  # "scenario/ref" -> kind
    never_used: int = 0
    corrections: int = 0
    correction_cost: int = 0
    corrections_unresolved: int = 0
    checks_skipped: int = 0
    extra_ms: list[float] = field(default_factory=list)  # correction messages' overhead
    extra_tokens: int = 0

    def metrics(self) -> dict[str, Any]:
        turns = self.turns
        injected = sum(len(t.injected) for t in turns)
        hits = sum(len(set(t.injected) & set(t.expect)) for t in turns)
        false = [(t, r) for t in turns for r in t.injected if r in t.forbidden]
        by_kind: dict[str, int] = {}
        for t, ref in false:
            kind = self.wrong_kinds.get(f"{t.scenario}/{ref}", "forbidden")
            by_kind[kind] = by_kind.get(kind, 0) + 1
        wrong_injected = {
            f"{t.scenario}/{r}" for t, r in false if f"{t.scenario}/{r}" in self.wrong_kinds
        }
        needed = [t for t in turns if t.expect]
        avoided = [t for t in needed if set(t.expect) <= set(t.injected)]
        checks = [ok for t in turns if t.checks for _, ok in t.checks]
        conflicts = sum(t.conflicts for t in turns)
        latencies = [t.overhead_ms for t in turns if t.overhead_ms is not None]
        latencies += self.extra_ms
        tokens = sum(t.injected_tokens for t in turns) + self.extra_tokens
        return {
            "scenarios": self.scenarios,
            "turns": len(turns),
            "injected": injected,
            "hit_precision": _ratio(hits, injected),
            "false_recalls": len(false),
            "false_recall_rate": _ratio(len(false), injected, empty=0.0),
            "false_recalls_by_kind": dict(sorted(by_kind.items())),
            "wrong_seeded": self.wrong_seeded,
            "wrong_refused_by_gate": self.wrong_refused,
            "wrong_injected": len(wrong_injected),
            "conflicts": conflicts,
            "conflict_rate": _ratio(conflicts, len(turns), empty=0.0),
            "corrections": self.corrections,
            "correction_cost_turns": self.correction_cost,
            "corrections_unresolved": self.corrections_unresolved,
            "needed_turns": len(needed),
            "repeated_questions_avoided": len(avoided),
            "answer_checks": len(checks),
            "answer_checks_passed": sum(checks),
            "answer_checks_skipped_turns": self.checks_skipped,
            "memories_saved": self.seeded,
            "memories_never_used": self.never_used,
            "tokens_added": tokens,
            "tokens_added_per_turn": round(tokens / len(turns), 1) if turns else 0.0,
            "latency_added_ms_p50": _pct(latencies, 0.5),
            "latency_added_ms_p95": _pct(latencies, 0.95),
            "off_target": self.off_target(),
        }

    def off_target(self) -> list[str]:
        """Turns that got a memory they must not get, missed one they need, or failed a
        check of their answer."""
        out = []
        for t in self.turns:
            problems = []
            false = [r for r in t.injected if r in t.forbidden]
            missing = [r for r in t.expect if r not in t.injected]
            failed = [name for name, ok in t.checks or [] if not ok]
            if false:
                problems.append(f"got {false}")
            if missing and self.arm != "off":
                problems.append(f"missed {missing}")
            if failed:
                problems.append(f"failed {failed}")
            if problems:
                out.append(f"{t.scenario}#{t.index}: " + "; ".join(problems))
        return out


def _ratio(a: int, b: int, *, empty: float | None = None) -> float | None:
    return round(a / b, 4) if b else empty


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return round(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo), 2)


# ----------------------------------------------------------------------------- runner

Progress = Callable[[str], None]


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class EvalRunner:
    """Runs scenarios over HTTP against a gateway as the admin, under a tenant of its own."""

    def __init__(
        self,
        gateway_url: str,
        admin_token: str,
        *,
        recorded: bool,
        model: str = _MODEL,
        progress: Progress = _stderr,
        tenant: str | None = None,
        trace_wait: float = 5.0,
    ) -> None:
        self.base = gateway_url.rstrip("/")
        self.token = admin_token
        self.recorded = recorded
        self.model = model
        self.progress = progress
        self.tenant = tenant or "eval-" + secrets.token_hex(6)
        self.trace_wait = trace_wait
        self.start = datetime.now(UTC).replace(microsecond=0)
        self._users: set[str] = set()

    def _headers(self, user: str, when: datetime, **extra: str | None) -> dict[str, str]:
        headers = {
            "authorization": f"Bearer {self.token}",
            "x-memory-tenant": self.tenant,
            "x-memory-user": user,
            "x-memory-eval-time": to_iso(when) or "",
        }
        headers.update({k: v for k, v in extra.items() if v is not None})
        return headers

    async def run(
        self, scenarios: Sequence[EvalScenario], arms: Sequence[Arm] = ARMS
    ) -> dict[Arm, ArmResult]:
        limits = httpx.Limits(max_connections=4)
        async with httpx.AsyncClient(timeout=120.0, limits=limits, trust_env=False) as client:
            self.client = client
            await self._check_access()
            out: dict[Arm, ArmResult] = {}
            try:
                for arm in arms:
                    result = ArmResult(arm)
                    for n, scenario in enumerate(scenarios, 1):
                        self.progress(f"[{arm}] {n}/{len(scenarios)} {scenario.id}")
                        await self._scenario(arm, scenario, result)
                    out[arm] = result
            finally:
                await self._forget()
            return out

    async def _check_access(self) -> None:
        try:
            resp = await self.client.get(
                self.base + "/v1/memories", headers=self._headers("eval-probe", self.start)
            )
        except httpx.HTTPError as exc:
            raise EvalError(f"cannot reach the gateway at {self.base}: {exc!r}") from None
        if resp.status_code != 200:
            raise EvalError(
                f"the gateway at {self.base} refused the admin token "
                f"(HTTP {resp.status_code}): set MEMGATE_ADMIN_TOKEN to its admin token"
            )

    async def _forget(self) -> None:
        for user in sorted(self._users):
            with contextlib.suppress(httpx.HTTPError):
                await self.client.delete(
                    self.base + "/v1/memories",
                    params={"all": "true"},
                    headers=self._headers(user, datetime.now(UTC)),
                )

    async def _seed(
        self, user: str, seed: SeedMemory, saved_at: datetime, source: str = "user_stated"
    ) -> tuple[str | None, list[str]]:
        """The stored memory's id (None when the write gate refused or merged it) and the
        ids it superseded."""
        body: dict[str, Any] = {
            "content": seed.content,
            "type": seed.type,
            "source": source,
            "scope": seed.scope,
        }
        if seed.project:
            body["project_id"] = seed.project
        if seed.scope == "global" and seed.project:
            body.pop("scope")
        if getattr(seed, "applies", None):
            body["applies"] = seed.applies
        expires = getattr(seed, "expires_in_days", None)
        if expires:
            body["expires_at"] = to_iso(saved_at + timedelta(days=expires))
        resp = await self.client.post(
            self.base + "/v1/memories", json=body, headers=self._headers(user, saved_at)
        )
        if resp.status_code == 201:
            data = resp.json()
            return data["id"], list(data.get("superseded") or [])
        if resp.status_code in (200, 403, 422) or resp.status_code == 400:
            return None, []
        raise EvalError(f"seeding failed: HTTP {resp.status_code} {resp.text[:200]}")

    async def _scenario(self, arm: Arm, s: EvalScenario, result: ArmResult) -> None:
        user = f"{s.id}-{arm}"[:64]
        self._users.add(user)
        result.scenarios += 1
        refs: dict[str, str] = {}  # memory id -> ref
        contents: dict[str, str] = {}  # ref -> content
        wrong_refs = {w.ref for w in s.wrong} if arm == "wrong" else set()
        seeds: list[tuple[SeedMemory, str]] = [(m, "user_stated") for m in s.memories]
        if arm == "wrong":
            seeds += [(w, w.source) for w in s.wrong]
            for w in s.wrong:
                result.wrong_kinds[f"{s.id}/{w.ref}"] = w.kind
        for seed, source in sorted(seeds, key=lambda pair: -pair[0].age_days):
            contents[seed.ref] = seed.content
            memory_id, _ = await self._seed(
                user, seed, self.start - timedelta(days=seed.age_days), source
            )
            if memory_id is None:
                if seed.ref in wrong_refs:
                    result.wrong_refused += 1
                continue
            refs[memory_id] = seed.ref
            result.seeded += 1
            if seed.ref in wrong_refs:
                result.wrong_seeded += 1
        for turn in s.turns:
            if turn.correction is not None and turn.correction.remember is not None:
                contents[turn.correction.remember.ref] = turn.correction.remember.content
        used: set[str] = set()
        scored: list[TurnResult] = []
        open_corrections: list[tuple[int, Turn]] = []
        turns = s.all_turns()
        for index, turn in enumerate(turns):
            when = self.start + timedelta(days=turn.at_day)
            answer, injected_ids, res = await self._chat(arm, s, turn, user, when, contents)
            injected = [refs.get(i, i) for i in injected_ids]
            used.update(injected)
            checks = None
            if turn.answer is not None:
                if answer is None:
                    result.checks_skipped += 1
                else:
                    checks = [(c.name, c.passed) for c in check_answer(answer, turn.answer)]
            tr = TurnResult(
                s.id,
                index,
                injected,
                turn.expect,
                set(turn.forbid) | wrong_refs,
                checks,
                _float(res.headers.get("x-memgate-overhead-ms")),
                res.headers.get("x-memory-trace-id", ""),
            )
            scored.append(tr)
            # the corrections this turn settles
            for at, corrected in list(open_corrections):
                fix = corrected.correction
                assert fix is not None
                if (
                    fix.remember is not None
                    and fix.remember.ref in turn.expect
                    and fix.remember.ref in injected
                    and not set(fix.if_injected) & set(injected)
                ):
                    result.correction_cost += index - at
                    open_corrections.remove((at, corrected))
            c = turn.correction
            if c is not None and (
                set(c.if_injected) & set(injected)
                or (c.if_answer_fails and checks is not None and not all(ok for _, ok in checks))
            ):
                result.corrections += 1
                said = Turn(message=c.message, project=turn.project, task=turn.task)
                _, _, fix_res = await self._chat(
                    arm, s, said, user, when + timedelta(minutes=1), contents
                )
                overhead = _float(fix_res.headers.get("x-memgate-overhead-ms"))
                if overhead is not None:
                    result.extra_ms.append(overhead)
                if c.remember is not None:
                    memory_id, _ = await self._seed(
                        user, _as_seed(c.remember), when + timedelta(minutes=2), "user_confirmed"
                    )
                    if memory_id is not None:
                        refs[memory_id] = c.remember.ref
                        result.seeded += 1
                    open_corrections.append((index, turn))
                else:
                    result.correction_cost += 1
        for at, _ in open_corrections:
            result.corrections_unresolved += 1
            result.correction_cost += len(turns) - at
        await self._read_traces(arm, user, scored)
        result.turns += scored
        result.never_used += len(set(refs.values()) - used)

    async def _chat(
        self,
        arm: Arm,
        s: EvalScenario,
        turn: Turn,
        user: str,
        when: datetime,
        contents: dict[str, str],
    ) -> tuple[str | None, list[str], httpx.Response]:
        headers = self._headers(
            user,
            when,
            **{
                "x-project-id": turn.project,
                "x-memory-task": turn.task,
                "x-memory-mode": "off" if arm == "off" else "on",
            },
        )
        if self.recorded:
            chain = ARMS[: ARMS.index(arm) + 1]  # wrong falls back to memory, memory to off
            default = next((turn.answers[a] for a in reversed(chain) if a in turn.answers), None)
            when_sent = [
                (contents[ref], text) for ref, text in turn.if_injected.items() if ref in contents
            ]
            headers[ANSWER_HEADER] = encode_answers(default, when_sent)
        body = {"model": self.model, "messages": [{"role": "user", "content": turn.message}]}
        resp = await self.client.post(
            self.base + "/v1/chat/completions", json=body, headers=headers
        )
        if resp.status_code != 200:
            raise EvalError(f"{s.id}: chat failed: HTTP {resp.status_code} {resp.text[:300]}")
        injected = [i for i in resp.headers.get("x-memory-injected", "").split(",") if i]
        if resp.headers.get(RECORDED_HEADER) == _NO_ANSWER:
            return None, injected, resp
        try:
            answer = resp.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            answer = None
        return (answer if isinstance(answer, str) else None), injected, resp

    async def _read_traces(self, arm: Arm, user: str, turns: list[TurnResult]) -> None:
        """Injected tokens and conflicts from each turn's trace (written off the response
        path, so a trace may take a moment to appear)."""
        if arm == "off":
            return
        for t in turns:
            deadline = asyncio.get_running_loop().time() + self.trace_wait
            while t.trace_id:
                resp = await self.client.get(
                    f"{self.base}/v1/memory/traces/{t.trace_id}",
                    headers=self._headers(user, datetime.now(UTC)),
                )
                if resp.status_code == 200:
                    trace = resp.json()
                    t.injected_tokens = int(trace.get("injected_tokens") or 0)
                    t.conflicts = int(trace.get("conflicts") or 0)
                    break
                if asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.05)


def _as_seed(remember: Any) -> SeedMemory:
    return SeedMemory(
        ref=remember.ref,
        content=remember.content,
        type=remember.type,
        scope=remember.scope,
        project=remember.project,
    )


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


# ----------------------------------------------------------------------------- report

ROWS: tuple[tuple[str, str], ...] = (
    ("hit precision", "hit_precision"),
    ("false-recall rate", "false_recall_rate"),
    ("false recalls", "false_recalls"),
    ("wrong seeded / refused", "wrong"),
    ("conflict rate", "conflict_rate"),
    ("corrections", "corrections"),
    ("correction cost (turns)", "correction_cost_turns"),
    ("repeated questions avoided", "avoided"),
    ("answer checks passed", "checks"),
    ("memories never used", "never_used"),
    ("tokens added", "tokens_added"),
    ("tokens added per turn", "tokens_added_per_turn"),
    ("latency added p50 ms", "latency_added_ms_p50"),
    ("latency added p95 ms", "latency_added_ms_p95"),
)


def _cell(m: dict[str, Any], key: str) -> str:
    if key == "wrong":
        return f"{m['wrong_seeded']} / {m['wrong_refused_by_gate']}"
    if key == "avoided":
        return f"{m['repeated_questions_avoided']}/{m['needed_turns']}"
    if key == "checks":
        return f"{m['answer_checks_passed']}/{m['answer_checks']}"
    if key == "never_used":
        return f"{m['memories_never_used']}/{m['memories_saved']}"
    value = m[key]
    if value is None:
        return "-"
    if isinstance(value, float) and key.endswith(("rate", "precision")):
        return f"{value:.2f}"
    return str(value)


def report(metrics: dict[str, dict[str, Any]]) -> str:
    arms = list(metrics)
    width = 28
    head = f"{'metric':<{width}}" + "".join(f"{arm:>12}" for arm in arms)
    lines = [head, "-" * len(head)]
    for label, key in ROWS:
        lines.append(f"{label:<{width}}" + "".join(f"{_cell(metrics[a], key):>12}" for a in arms))
    first = metrics[arms[0]]
    lines.append("")
    lines.append(f"{first['scenarios']} scenarios, {first['turns']} turns per arm")
    for arm in arms:
        if metrics[arm]["off_target"]:
            lines.append(f"\n{arm}: turns off target")
            lines += [f"  {line}" for line in metrics[arm]["off_target"]]
    return "\n".join(lines)


def write_chart(metrics: dict[str, dict[str, Any]], path: Path) -> None:
    """Benefit next to error cost, per arm: a PNG of three panels."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise EvalError("--chart needs matplotlib: pip install 'memgate[eval]'") from None
    arms = list(metrics)

    def share(a: int, b: int) -> float:
        return 100.0 * a / b if b else 0.0

    benefit = {
        "answer checks passed %": [
            share(metrics[a]["answer_checks_passed"], metrics[a]["answer_checks"]) for a in arms
        ],
        "needed facts injected %": [
            share(metrics[a]["repeated_questions_avoided"], metrics[a]["needed_turns"])
            for a in arms
        ],
    }
    cost = {
        "false-recall %": [100.0 * (metrics[a]["false_recall_rate"] or 0.0) for a in arms],
        "corrections": [float(metrics[a]["corrections"]) for a in arms],
        "correction cost (turns)": [float(metrics[a]["correction_cost_turns"]) for a in arms],
    }
    spend = {
        "tokens added / turn": [float(metrics[a]["tokens_added_per_turn"]) for a in arms],
        "latency added p50 ms": [float(metrics[a]["latency_added_ms_p50"] or 0.0) for a in arms],
    }
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
    colours = {"off": "#9e9e9e", "memory": "#2e7d32", "wrong": "#c62828"}
    for ax, (title, series) in zip(
        axes,
        (("Benefit", benefit), ("Error cost", cost), ("What it adds", spend)),
        strict=True,
    ):
        names = list(series)
        bar = 0.8 / len(arms)
        for i, arm in enumerate(arms):
            xs = [n + (i - (len(arms) - 1) / 2) * bar for n in range(len(names))]
            values = [series[name][i] for name in names]
            bars = ax.bar(xs, values, bar, label=arm, color=colours.get(arm))
            ax.bar_label(bars, fmt="%.0f", fontsize=8, padding=1)
        ax.set_xticks(range(len(names)), names, fontsize=9)
        ax.set_title(title)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].set_ylim(0, 125)
    axes[0].legend(frameon=False, ncol=len(arms), loc="upper center")
    fig.suptitle("memgate eval: no memory, memory, wrong memory")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- command


def _parse_arms(text: str) -> list[Arm]:
    arms: list[Arm] = []
    for part in text.split(","):
        name = part.strip()
        if name not in ARMS:
            raise EvalError(f"unknown arm {name!r}: choose from {', '.join(ARMS)}")
        if name not in arms:
            arms.append(name)  # type: ignore[arg-type]
    if not arms:
        raise EvalError("no arm given")
    return arms


def run_eval(
    *,
    scenarios: str | None = None,
    arms: str = ",".join(ARMS),
    gateway: str | None = None,
    upstream: str | None = None,
    json_out: str | None = None,
    chart: str | None = None,
    model: str = _MODEL,
) -> int:
    """``memgate eval``; prints the table, 0 on success, 2 for bad input, 1 when it failed."""
    from gateway.processes import BenchError, _Server
    from gateway.storage.redis_server import free_port

    name = "memgate eval"
    try:
        chosen_arms = _parse_arms(arms)
        chosen = load_eval_scenarios(Path(scenarios) if scenarios else SHIPPED_EVAL)
    except (EvalError, ScenarioError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    if gateway and upstream:
        print(
            f"{name}: --upstream is for the gateway eval starts; not with --gateway",
            file=sys.stderr,
        )
        return 2
    token = os.environ.get("MEMGATE_ADMIN_TOKEN") or ""
    if gateway and not token:
        print(f"{name}: --gateway needs that gateway's MEMGATE_ADMIN_TOKEN", file=sys.stderr)
        return 2

    servers: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="memgate-eval-") as tmp:
        work = Path(tmp)
        try:
            url = gateway
            recorded = False
            if url is None:
                token = secrets.token_hex(16)
                upstream_url = upstream
                if upstream_url is None:
                    port = free_port()
                    code = f"from gateway.memory.eval import serve_stub; serve_stub({port})"
                    stub = _Server.spawn(
                        "upstream", port, [sys.executable, "-c", code], dict(os.environ), work
                    )
                    servers.append(stub)
                    stub.wait_ready("/", 404)
                    upstream_url = stub.url + "/v1"
                    recorded = True
                _stderr("starting a throwaway gateway (embedded Redis in a temporary directory)")
                port = free_port()
                env = {k: v for k, v in os.environ.items() if k != "MEMGATE_REDIS_URL"}
                env.update(
                    MEMGATE_UPSTREAM_URL=upstream_url,
                    MEMGATE_ADMIN_TOKEN=token,
                    MEMGATE_DATA_DIR=str(work / "data"),
                    MEMGATE_LOG_LEVEL="warning",
                    NO_PROXY=",".join(filter(None, [env.get("NO_PROXY"), "127.0.0.1"])),
                )
                if recorded:
                    env["MEMGATE_EXTRACTOR"] = "rules"
                args = [sys.executable, "-m", "gateway.cli", "serve", "--host", "127.0.0.1"]
                args += ["--port", str(port), "--workers", "1"]
                gw = _Server.spawn("gateway", port, args, env, work)
                servers.append(gw)
                gw.wait_ready("/readyz", 200)
                url = gw.url
            runner = EvalRunner(url, token, recorded=recorded, model=model)
            results = asyncio.run(runner.run(chosen, chosen_arms))
        except (BenchError, EvalError) as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            return 1
        finally:
            for server in reversed(servers):
                server.stop()
    metrics: dict[str, dict[str, Any]] = {arm: results[arm].metrics() for arm in chosen_arms}
    print(report(metrics), flush=True)
    if json_out:
        Path(json_out).write_text(json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")
    if chart:
        try:
            write_chart(metrics, Path(chart))
        except EvalError as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            return 1
        _stderr(f"chart written to {chart}")
    return 0
