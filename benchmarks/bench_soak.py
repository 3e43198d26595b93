"""``memgate bench soak``: a bounded loopback soak with memory on.

A fast upstream stub that closes idle keep-alive connections after one second, the gateway
(``memgate serve``, JSON logs at info) with its embedded Redis, and users who each have one
memory that every question of theirs should carry. ``concurrency`` clients send chat requests
(plain and streamed alternately) for ``seconds``, each pausing a random gap of up to about a
second between requests so that pooled upstream connections go stale. It reports requests,
errors, answers missing the memory they should carry, mining jobs lost (finished exchanges
never queued), the gateway's added latency (its ``X-Memgate-Overhead-Ms``), the gateway's
resident memory at start and end, and whether every log line was JSON. Exit code 1 when any
of errors, missing memories, lost jobs or non-JSON lines is not zero.
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.bench import _start_gateway, _start_stub, percentile

_CITIES = ("Lisbon", "Oslo", "Kyoto", "Quito", "Hanoi", "Dakar", "Lima", "Perth", "Riga", "Turin")


@dataclass
class Tally:
    requests: int = 0
    ok: int = 0
    errors: int = 0
    missing: int = 0
    overhead_ms: list[float] = field(default_factory=list)
    error_kinds: dict[str, int] = field(default_factory=dict)

    def fail(self, kind: str) -> None:
        self.errors += 1
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1


@dataclass
class SoakUser:
    name: str
    key: str
    memory_id: str
    city: str

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.key}", "x-memory-user": self.name}


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _metric(text: str, name: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                total += sample.value
    return total


async def _make_users(client: httpx.AsyncClient, base: str, count: int) -> list[SoakUser]:
    users = []
    stamp = time.time_ns()
    for i in range(count):
        city = _CITIES[i % len(_CITIES)]
        user = SoakUser(f"soak{i}", f"sk-soak-{stamp}-{i}", "", city)
        resp = await client.post(
            f"{base}/v1/memories",
            headers=user.headers,
            json={"content": f"My home city is {city}", "type": "profile"},
        )
        resp.raise_for_status()
        user.memory_id = resp.json()["id"]
        users.append(user)
    return users


async def _one(client: httpx.AsyncClient, base: str, user: SoakUser, n: int, t: Tally) -> None:
    stream = n % 2 == 1
    body = {
        "model": "gpt-bench",
        "stream": stream,
        "messages": [{"role": "user", "content": "Which city is my home city?"}],
    }
    t.requests += 1
    try:
        async with client.stream(
            "POST", f"{base}/v1/chat/completions", headers=user.headers, json=body
        ) as resp:
            data = await resp.aread()
            if resp.status_code != 200:
                t.fail(f"http_{resp.status_code}")
                return
            if stream and not data.rstrip().endswith(b"data: [DONE]"):
                t.fail("stream_incomplete")
                return
            t.ok += 1
            if user.memory_id not in resp.headers.get("x-memory-injected", "").split(","):
                t.missing += 1
            overhead = resp.headers.get("x-memgate-overhead-ms")
            if overhead:
                t.overhead_ms.append(float(overhead))
    except httpx.HTTPError as exc:
        t.fail(type(exc).__name__)


async def _drive(
    base: str, users: list[SoakUser], seconds: float, concurrency: int, max_gap: float
) -> Tally:
    tally = Tally()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits, trust_env=False) as client:
        stop_at = time.monotonic() + seconds
        rng = random.Random(14)

        async def worker(w: int) -> None:
            n = w
            # Clients arrive spread over the first gap, as real ones do, not all in the same
            # millisecond: a synchronized start measures a cold thundering herd, once.
            await asyncio.sleep(rng.uniform(0, max_gap))
            while time.monotonic() < stop_at:
                await _one(client, base, users[n % len(users)], n, tally)
                n += concurrency
                await asyncio.sleep(rng.uniform(0, max_gap))

        await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return tally


def run_soak(*, seconds: float, concurrency: int, users: int, max_gap: float = 1.1) -> int:
    with tempfile.TemporaryDirectory(prefix="memgate-soak-") as tmp:
        workdir = Path(tmp)
        stub = _start_stub(workdir, keep_alive=1)
        gateway = None
        try:
            stub.wait_ready("/v1/nothing", 404)
            gateway = _start_gateway(stub.url, workdir, log_level="info")
            gateway.wait_ready("/readyz", 200)
            base = gateway.url

            async def setup() -> list[SoakUser]:
                async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
                    made = await _make_users(client, base, users)
                    warm = Tally()
                    for i, user in enumerate(made):  # warm-up: not counted
                        await _one(client, base, user, i, warm)
                    return made

            soak_users = asyncio.run(setup())
            rss_start = _rss_kib(gateway.proc.pid)
            before = httpx.get(f"{base}/metrics", trust_env=False).text
            print(
                f"soak: {seconds:.0f} s, {concurrency} concurrent clients, {users} users "
                "with a memory each, upstream closing idle connections after 1 s",
                flush=True,
            )
            tally = asyncio.run(_drive(base, soak_users, seconds, concurrency, max_gap))
            queued_before = _metric(before, "memgate_mining_queued_total")
            expected = queued_before + tally.ok
            deadline = time.monotonic() + 60
            while True:  # mining jobs are queued off the response path: let them land
                after = httpx.get(f"{base}/metrics", trust_env=False).text
                queued = _metric(after, "memgate_mining_queued_total")
                if queued >= expected or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            rss_end = _rss_kib(gateway.proc.pid)
            lost = int(expected - queued)
            failed_bg = _metric(after, "memgate_background_failures_total") - _metric(
                before, "memgate_background_failures_total"
            )
            over_budget = _metric(after, "memgate_recall_over_budget_total") - _metric(
                before, "memgate_recall_over_budget_total"
            )
        finally:
            if gateway is not None:
                gateway.stop()
            stub.stop()
        lines = gateway.log_path.read_text(errors="replace").splitlines() if gateway else []
        not_json = 0
        waited: dict[str, int] = {}
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                not_json += 1
                continue
            if isinstance(record, dict) and record.get("event") == "recall_over_budget":
                stage = str(record.get("waited_for"))
                waited[stage] = waited.get(stage, 0) + 1
    p50 = percentile(tally.overhead_ms, 0.5) if tally.overhead_ms else float("nan")
    p99 = percentile(tally.overhead_ms, 0.99) if tally.overhead_ms else float("nan")
    print(f"requests:                      {tally.requests}")
    print(f"errors:                        {tally.errors} {tally.error_kinds or ''}".rstrip())
    print(f"answers missing their memory:  {tally.missing}")
    print(f"mining jobs lost:              {lost}")
    print(f"background writes lost:        {int(failed_bg)}")
    split = ", ".join(f"waiting for {k}: {v}" for k, v in sorted(waited.items()))
    split = f" ({split})" if split else ""
    print(f"recalls over budget:           {int(over_budget)}{split}")
    print(f"added latency p50 / p99 (ms):  {p50:.2f} / {p99:.2f}")
    print(f"gateway RSS start / end (MiB): {rss_start / 1024:.1f} / {rss_end / 1024:.1f}")
    print(f"log lines: {len(lines)}, not JSON: {not_json}")
    bad = tally.errors or tally.missing or lost or not_json
    print("verdict: " + ("FAILED" if bad else "ok"))
    return 1 if bad else 0
