"""The candidate queue: mined memories wait here, per user, until the user confirms them.

Nothing in this module stores a memory on its own: ``confirm`` hands the candidate to
``Memories.create`` (with the write gate, dedup and supersede) once the user says yes.

Mining runs off the response path through a Redis stream: ``submit`` XADDs a compact job (the
latest user message with secrets already redacted, ids and content keys, never the injected
memories' texts); ``drain_once``/``run_worker`` read it with a consumer group and XACK only
after the job is fully handled, so a crash or restart loses no queued work: unacknowledged
jobs are re-read by the same consumer or claimed (XAUTOCLAIM) by another one.

Every Redis call is ``gateway.storage.candidates.CandidateStore``'s; this module decides
what is queued, confirmed, rejected and mined.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import re
import socket
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import structlog

from gateway.clock import Clock, from_iso, to_iso
from gateway.errors import BadRequest, Conflict, NotFound, WriteRefused
from gateway.memory.identity import Identity, check_project_id
from gateway.memory.memories import EDITABLE, EXCERPT_CHARS, Memories, WriteOutcome
from gateway.memory.mine import Extractor, Proposal, extract_rules, mining_key, screen
from gateway.memory.policy import Policy
from gateway.memory.records import Memory, content_key
from gateway.memory.resemblance import Resemblance
from gateway.memory.sensitivity import redact
from gateway.observability.metrics import Metrics
from gateway.storage import RedisError
from gateway.storage.candidates import CandidateStore, Entry
from gateway.storage.store import Store
from gateway.wire import new_user_text

__all__ = ["CANDIDATE_ID", "CandidateQueue", "new_candidate_id"]

log = structlog.get_logger("memgate.mine")

CANDIDATE_ID = re.compile(r"cand_[0-9a-f]{24}")
_JOB_VERSION = 1
_CLAIM_SECONDS = 120  # longer than any one confirm takes; a crashed confirm's claim expires


def new_candidate_id() -> str:
    return "cand_" + uuid.uuid4().hex[:24]


class CandidateQueue:
    """Per-user candidate memories in Redis (TTL ``policy.candidates.ttl_days``) and the
    durable mining stream that fills them."""

    def __init__(
        self,
        store: Store,
        policy: Policy,
        clock: Clock,
        *,
        metrics: Metrics | None = None,
        stream: str | None = None,
        group: str | None = None,
        consumer: str | None = None,
        claim_idle_ms: int = 60_000,
        trace_ttl_days: int | None = None,
        extractor: Extractor | None = None,
        resemblance: Resemblance | None = None,
    ) -> None:
        self.store = store
        self.storage = CandidateStore(store, stream=stream, group=group)
        self.policy = policy
        self.clock = clock
        self.metrics = metrics
        # A stable name (host + pid) lets a restarted process re-read its own pending jobs.
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}"
        self.claim_idle_ms = claim_idle_ms
        self.ttl_seconds = policy.candidates.ttl_days * 86400
        self.trace_ttl = (trace_ttl_days or policy.recall.trace_ttl_days) * 86400
        # Chosen once at start-up (MEMGATE_EXTRACTOR): the rule table unless told otherwise.
        self.extractor: Extractor = extractor or extract_rules
        # how a proposal applies when the extractor did not say: as Memories.create decides
        self.resemblance = resemblance
        self._group_ready = False
        self._waiting = False  # in the blocking read for new jobs, nothing in hand

    @property
    def stream(self) -> str:
        return self.storage.stream

    @property
    def group(self) -> str:
        return self.storage.group

    # -- metrics ---------------------------------------------------------------------------

    def _count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.candidates.labels(outcome=outcome).inc()

    def _decide(self, decision: str) -> None:
        if self.metrics is not None:
            self.metrics.candidate_decisions.labels(decision=decision).inc()

    # -- the queue -------------------------------------------------------------------------

    async def enqueue(
        self,
        ident: Identity,
        proposal: Proposal,
        *,
        trace_id: str | None,
        corrects: str | None = None,
    ) -> str:
        """Queue a proposal that already passed the gate (``mine.screen``/``mine.extract``).

        Returns "queued", "duplicate" (same content as a pending candidate or an active
        memory in the same scope) or "rejected_before" (the user rejected this content).
        """
        proposal = await self._judged(proposal)
        now = self.clock.now()
        ck = content_key(proposal.content)
        storage, tenant, user = self.storage, ident.tenant, ident.user
        async with self.store.user_lock(tenant, user):
            if await storage.is_rejected(tenant, user, ck):
                return "rejected_before"
            if await storage.has_pending(tenant, user, ck):
                return "duplicate"
            if await self._active_duplicate(ident, ck, proposal):
                return "duplicate"
            cid = new_candidate_id()
            expires = now.timestamp() + self.ttl_seconds
            fields = {
                "id": cid,
                "tenant": ident.tenant,
                "user": ident.user,
                "content": proposal.content,
                "content_key": ck,
                "type": proposal.type,
                "scope": proposal.scope,
                "project_id": proposal.project_id or "",
                "slot": proposal.slot or "",
                "applies": proposal.applies or "",
                "sensitivity": proposal.sensitivity,
                "source": proposal.source,
                "inference": "1" if proposal.is_inference else "0",
                "is_correction": "1" if proposal.is_correction else "0",
                "corrects": corrects or "",
                "horizon": proposal.horizon or "",
                "rule": proposal.rule,
                "evidence_trace": trace_id or "",
                "evidence_excerpt": redact(proposal.evidence, self.policy, min_level="medium")[
                    :EXCERPT_CHARS
                ],
                "created_at": to_iso(now) or "",
                "expires_at": f"{expires:.3f}",
            }
            await storage.add(tenant, user, fields, expires)
        return "queued"

    async def _judged(self, proposal: Proposal) -> Proposal:
        """The proposal with how it applies by resemblance too, when the policy derived it
        (the user sees and may change it before confirming; confirming keeps it). When the
        embedder fails it is left undecided, so confirming derives it as a write does."""
        like, how = self.resemblance, proposal.applies
        if like is None or proposal.applies_said or how is None:
            return proposal
        judged = await like.judge(
            proposal.content, proposal.type, proposal.slot, proposal.scope, how
        )
        return proposal if judged == how else replace(proposal, applies=judged)

    async def _active_duplicate(self, ident: Identity, ck: str, proposal: Proposal) -> bool:
        if not self.store.index_ready:
            raise RuntimeError("memory index not initialised: await Memories.ready() first")
        same = await self.store.find_memories(
            ident.tenant, ident.user, status="active", content_key=ck
        )
        return any(m.scope == proposal.scope and m.project_id == proposal.project_id for m in same)

    async def list(self, ident: Identity) -> builtins.list[dict[str, Any]]:
        """The user's pending candidates, oldest first, as API objects."""
        now = self.clock.now().timestamp()
        return [_to_api(c) for c in await self.storage.pending(ident.tenant, ident.user, now)]

    async def get(self, ident: Identity, cid: str) -> dict[str, Any]:
        return _to_api(await self._raw(ident, cid))

    async def _raw(self, ident: Identity, cid: str) -> dict[str, str]:
        if not isinstance(cid, str) or not CANDIDATE_ID.fullmatch(cid):
            raise NotFound(f"No memory candidate with id {str(cid)[:40]!r}.", param="id")
        cand = await self.storage.get(ident.tenant, ident.user, cid)
        if cand is None:
            raise NotFound(f"No memory candidate with id {cid!r}.", param="id")
        return cand

    async def _remove(self, ident: Identity, cand: dict[str, str]) -> None:
        await self.storage.remove(ident.tenant, ident.user, cand["id"], cand["content_key"])

    async def confirm(
        self, ident: Identity, cid: str, memories: Memories, edits: dict[str, Any] | None = None
    ) -> WriteOutcome:
        """The user said yes: store the memory through ``Memories.create``, drop the candidate.

        ``edits`` may change any of ``memories.EDITABLE``. A correction linked to the memory
        it corrects supersedes that memory even when the slot rule did not.
        """
        cand = await self._raw(ident, cid)
        edits = dict(edits or {})
        unknown = set(edits) - set(EDITABLE)
        if unknown:
            raise WriteRefused(
                f"These fields cannot be edited: {', '.join(sorted(unknown))}.",
                extra={"reasons": ["invalid"]},
            )
        async with self._claim(ident, cid):
            return await self._confirm(ident, cand, memories, edits)

    @asynccontextmanager
    async def _claim(self, ident: Identity, cid: str) -> AsyncIterator[None]:
        """One decision per candidate: whoever sets the claim first decides it; a second
        confirm (or reject) meanwhile gets 409, and one after the decision 404. A claim
        left by a crashed process expires."""
        storage, tenant, user = self.storage, ident.tenant, ident.user
        token = uuid.uuid4().hex
        if not await storage.claim(tenant, user, cid, token, _CLAIM_SECONDS):
            raise Conflict(
                f"Memory candidate {cid!r} is being decided by another request.", param="id"
            )
        try:
            # A decision that finished between our read and our claim removed it.
            if not await storage.exists(tenant, user, cid):
                raise NotFound(f"No memory candidate with id {cid!r}.", param="id")
            yield
        finally:
            await storage.release(tenant, user, cid, token)

    async def _confirm(
        self, ident: Identity, cand: dict[str, str], memories: Memories, edits: dict[str, Any]
    ) -> WriteOutcome:
        values: dict[str, Any] = {
            "content": cand["content"],
            "type": cand["type"],
            "scope": cand["scope"],
            "project_id": cand["project_id"] or None,
            "slot": cand["slot"] or None,
            "applies": cand.get("applies") or None,
            "expires_at": None,
        }
        edited = {k: v for k, v in edits.items() if values.get(k) != v}
        cand_values = dict(values)
        if "content" in edited and "slot" not in edited:
            values["slot"] = None  # new words: let the gate derive the slot again
        if {"content", "type", "scope"} & set(edited) and "applies" not in edited:
            values["applies"] = None  # and how the memory applies
        values.update(edited)
        if "project_id" in edited and edited["project_id"] is not None:
            check_project_id(str(edited["project_id"]), param="project_id")
        if isinstance(values["expires_at"], str):
            try:
                when = from_iso(values["expires_at"])
                when.timestamp()
                values["expires_at"] = when
            except (ValueError, OverflowError):
                raise BadRequest(
                    "expires_at must be an ISO-8601 time or null.", param="expires_at"
                ) from None
        if values["expires_at"] is None and cand.get("created_at"):
            # a goal or plan names its time as of when the user said it, not as of the
            # confirmation: "dentist tomorrow" confirmed a week later is already over
            ends = self.policy.horizons.until(
                str(values["content"]), str(values["type"]), from_iso(cand["created_at"])
            )
            if ends is not None and ends <= self.clock.now():
                raise WriteRefused(
                    "The memory was not stored: the time it names has passed.",
                    extra={"reasons": ["expired"]},
                )
            values["expires_at"] = ends
        outcome = await memories.create(
            ident,
            content=str(values["content"]),
            type=str(values["type"]),
            source=_confirmed_source(cand, ident, edited),
            scope=str(values["scope"]),
            project_id=values["project_id"] or None,
            expires_at=values["expires_at"] or None,
            confirmed=True,
            slot=values["slot"],
            applies=values["applies"],
            evidence_trace=cand["evidence_trace"] or None,
            evidence_text=cand["evidence_excerpt"] or None,
            actor=ident.actor,
            action="edited_and_confirmed" if edited else "confirmed",
            noted={
                "candidate": cand["id"],
                "edited": {k: [cand_values[k], v] for k, v in edited.items()},
            },
        )
        corrects = cand.get("corrects") or ""
        if corrects and corrects != outcome.memory.id and corrects not in outcome.superseded:
            if await memories.supersede(ident, corrects, outcome.memory, actor=ident.actor):
                outcome.superseded.append(corrects)
        await self._remove(ident, cand)
        self._decide("edited" if edited else "confirmed")
        return outcome

    async def reject(self, ident: Identity, cid: str) -> None:
        """The user said no: drop it and never propose the same content again."""
        cand = await self._raw(ident, cid)
        async with self._claim(ident, cid):
            await self.storage.reject(ident.tenant, ident.user, cand["content_key"])
            await self._remove(ident, cand)
        self._decide("rejected")

    async def forget(self, ident: Identity, *, project_id: str | None = None) -> int:
        """Forget the user's words: with ``project_id`` that project's pending candidates;
        without, every candidate, queued mining job, trace and setting of the user (the
        memories' content-free history stays for the audit). Returns candidates removed."""
        if project_id is not None:
            removed = 0
            for cand in await self.list(ident):
                if cand["project_id"] == project_id:
                    await self._remove(ident, await self._raw(ident, cand["id"]))
                    removed += 1
            return removed
        removed = len(await self.list(ident))
        # Mining jobs still queued for this user carry their latest message.
        await self.storage.drop_jobs(ident.tenant, ident.user)
        await self.store.forget_user(ident.tenant, ident.user)
        return removed

    async def pending_count(self, ident: Identity) -> int:
        now = self.clock.now().timestamp()
        return await self.storage.count(ident.tenant, ident.user, now)

    # -- durable mining --------------------------------------------------------------------

    async def submit(
        self,
        ident: Identity,
        messages: Sequence[dict[str, Any]],
        injected_texts: Iterable[str] = (),
        trace_id: str | None = None,
    ) -> str | None:
        """Queue one finished exchange for mining; returns the stream entry id (None when
        there is nothing to mine). Only the latest user message travels, with high-level
        secrets redacted; the memories injected into the request (their texts as injected)
        travel as ``mining_key``s, never as text."""
        trace = trace_id or ident.trace_id
        # Remember this answer's trace: a correction in the next message corrects it.
        prev = await self.storage.swap_last_trace(ident.tenant, ident.user, trace, self.trace_ttl)
        if ident.mode == "off":
            return None
        text = new_user_text(messages)
        if text is None:
            return None
        keys = {mining_key(t) for t in injected_texts if t}
        job = {
            "v": _JOB_VERSION,
            "tenant": ident.tenant,
            "user": ident.user,
            "project_id": ident.project_id,
            "task": ident.task,
            "trace_id": trace,
            "prev_trace": prev,
            "text": redact(text, self.policy, min_level="high"),
            "injected": sorted(keys),
        }
        return await self.storage.submit(job)

    async def ensure_group(self) -> None:
        if self._group_ready:
            return
        await self.storage.ensure_group()
        self._group_ready = True

    async def drain_once(
        self, *, count: int = 32, block_ms: int | None = None, claim: bool = True
    ) -> builtins.list[str]:
        """Handle what is waiting: this consumer's own unacknowledged jobs, jobs other
        consumers left idle for ``claim_idle_ms`` (XAUTOCLAIM), then new ones. Returns the
        outcomes (metrics labels) of everything handled."""
        await self.ensure_group()
        outcomes: builtins.list[str] = []
        storage, consumer = self.storage, self.consumer
        entries: builtins.list[Entry] = await storage.read(consumer, "0", count, None)
        if claim:
            entries += await storage.claim_idle(consumer, self.claim_idle_ms, count)
        if not entries:
            self._waiting = True  # nothing in hand: the worker may cancel this read to stop
            try:
                entries = await storage.read(consumer, ">", count, block_ms)
            finally:
                self._waiting = False
        for entry_id, job in entries:
            outcomes += await self._handle_entry(entry_id, job)
        return outcomes

    async def _handle_entry(self, entry_id: str, job: Any) -> builtins.list[str]:
        valid = (
            isinstance(job, dict)
            and job.get("v") == _JOB_VERSION
            and job.get("tenant")
            and job.get("user")
        )
        outcomes: builtins.list[str] = []
        if valid:
            # A failure here leaves the job pending: it is retried, never lost.
            outcomes = await self.mine_job(job)
        else:
            log.warning("mine_job_dropped", entry=entry_id, reason="malformed")
        await self.storage.ack(entry_id)
        return outcomes

    async def mine_job(self, job: dict[str, Any]) -> builtins.list[str]:
        ident = Identity(
            tenant=job["tenant"],
            user=job["user"],
            project_id=job.get("project_id"),
            mode="on",
            trace_id=job.get("trace_id") or "",
            task=job.get("task"),
        )
        now = self.clock.now()
        result = await self.extractor(
            job.get("text") or "",
            project_id=ident.project_id,
            task=ident.task,
            injected_keys=job.get("injected") or (),
            policy=self.policy,
            now=now,
        )
        outcomes = list(result.refused)
        for proposal in result.proposals:
            corrects = None
            if proposal.is_correction:
                corrected = await self._corrected(ident, job.get("prev_trace"), proposal)
                if corrected is not None:
                    corrects = corrected.id
                    linked = replace(
                        proposal,
                        type=corrected.type,
                        scope=corrected.scope,
                        project_id=corrected.project_id,
                    )
                    screened, _ = screen(linked, self.policy, now)
                    if screened is not None:
                        proposal = screened
            outcome = await self.enqueue(
                ident, proposal, trace_id=ident.trace_id or None, corrects=corrects
            )
            if proposal.is_correction and outcome == "queued" and self.metrics is not None:
                self.metrics.corrections.inc()
            outcomes.append(outcome)
        for outcome in outcomes:
            self._count(outcome)
        return outcomes

    async def _corrected(
        self, ident: Identity, prev_trace: str | None, proposal: Proposal
    ) -> Memory | None:
        """The memory a correction corrects: one injected into the answer being corrected
        (found through that answer's trace) in the same slot, else the only one injected;
        without a trace, the only active memory in the same slot."""
        found: builtins.list[Memory] = []
        trace = (
            await self.store.get_trace(ident.tenant, ident.user, prev_trace) if prev_trace else None
        )
        if trace:
            for memory_id in trace.get("injected") or trace.get("would_inject") or []:
                memory = await self.store.get_memory(ident.tenant, ident.user, memory_id)
                if memory is not None and memory.status == "active":
                    found.append(memory)
            same = [m for m in found if proposal.slot and m.slot == proposal.slot]
            if same:
                return same[0]
            if len(found) == 1:
                return found[0]
        if proposal.slot and self.store.index_ready:
            active = await self.store.find_memories(ident.tenant, ident.user, status="active")
            same = [m for m in active if m.slot == proposal.slot]
            if len(same) == 1:
                return same[0]
        return None

    async def run_worker(self, stop: asyncio.Event | None = None, *, block_ms: int = 1000) -> None:
        """Mine until ``stop`` is set (or the task is cancelled); Redis faults back off.

        Setting ``stop`` ends a wait for new jobs at once; a job being mined is finished
        first. Jobs a cancelled read had already delivered stay pending in the stream and
        are claimed again, so stopping loses none.
        """
        stop = stop or asyncio.Event()
        stopping = asyncio.ensure_future(stop.wait())
        delay = 0.5
        try:
            while not stop.is_set():
                drain = asyncio.ensure_future(self.drain_once(block_ms=block_ms))
                try:
                    await asyncio.wait({drain, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    if not drain.done() and self._waiting:
                        drain.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await drain
                        return
                    await drain
                    delay = 0.5
                except asyncio.CancelledError:
                    drain.cancel()
                    raise
                except Exception as exc:  # the worker must outlive any one fault
                    if self.metrics is not None:
                        component = "redis" if isinstance(exc, RedisError) else "miner"
                        self.metrics.backend_errors.labels(component).inc()
                    log.warning("mine_worker_error", error=type(exc).__name__)
                    self._group_ready = False
                    try:
                        await asyncio.wait_for(stop.wait(), timeout=delay)
                    except TimeoutError:
                        pass
                    delay = min(delay * 2, 30.0)
        finally:
            stopping.cancel()


def _confirmed_source(cand: dict[str, str], ident: Identity, edited: dict[str, Any]) -> str:
    """An admin who rewrites a candidate, or confirms a model's inference, is its source: the
    memory is not recorded as the user's own words."""
    if ident.is_admin and ("content" in edited or cand.get("inference") == "1"):
        return "admin"
    return cand["source"]


def _to_api(c: dict[str, str]) -> dict[str, Any]:
    expires = float(c.get("expires_at") or 0)
    return {
        "object": "memory.candidate",
        "id": c["id"],
        "content": c["content"],
        "type": c["type"],
        "scope": c["scope"],
        "project_id": c.get("project_id") or None,
        "slot": c.get("slot") or None,
        "applies": c.get("applies") or None,
        "sensitivity": c.get("sensitivity") or "low",
        "source": c["source"],
        "inference": c.get("inference") == "1",
        "is_correction": c.get("is_correction") == "1",
        "corrects": c.get("corrects") or None,
        "horizon": c.get("horizon") or None,
        "created_at": c.get("created_at") or None,
        "expires_at": to_iso(datetime.fromtimestamp(expires, tz=UTC)) if expires else None,
        "evidence": {
            "trace_id": c.get("evidence_trace") or None,
            "excerpt": c.get("evidence_excerpt") or None,
        },
    }
