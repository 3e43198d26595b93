"""Memory writes and edits: the write gate, dedup, newest-wins supersede, history, deletes.

Every mutation of one user's memories runs under that user's lock, so two identical writes
arriving at once (client retries, two replicas) end as one memory, and a supersede never
races a dedup.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from gateway.clock import Clock, from_iso, to_iso
from gateway.errors import NotFound, WriteRefused
from gateway.memory.embed import Embedder
from gateway.memory.gate import Draft, GateDecision, check_write
from gateway.memory.identity import Identity
from gateway.memory.policy import (
    Policy,
    change_may_replace,
    change_may_replace_named,
    change_names,
    change_subjects,
    derive_applies,
    memory_topics,
    names_a_thing,
    one_valued_slots_named,
    says_change,
    shares_a_name,
    without_project,
)
from gateway.memory.records import Memory, content_key, new_memory_id
from gateway.memory.resemblance import Resemblance, SlotResemblance
from gateway.memory.sensitivity import redact
from gateway.memory.textsearch import search_text
from gateway.memory.typicality import Typicality
from gateway.storage.store import Neighbour, Store

EXCERPT_CHARS = 160
_NEIGHBOURS = 8
EDITABLE = ("content", "type", "scope", "project_id", "expires_at", "slot", "applies")


@dataclass(slots=True)
class WriteOutcome:
    memory: Memory
    created: bool
    deduplicated: bool = False
    superseded: list[str] = field(default_factory=list)


class Memories:
    def __init__(self, store: Store, embedder: Embedder, policy: Policy, clock: Clock) -> None:
        self.store = store
        self.embedder = embedder
        self.policy = policy
        self.clock = clock
        self.typicality = Typicality(embedder, policy)
        self.resemblance = Resemblance(embedder, policy)
        self.slot_resemblance = SlotResemblance(embedder, policy)

    async def ready(self) -> None:
        """Create the index for the configured embedder (learning its size if need be)."""
        dims = self.embedder.dims
        if dims is None:
            dims = int((await self.embedder.embed(["dimension probe"])).shape[1])
        await self.store.ensure_memory_index(self.embedder.model_id, dims)

    # -- writes ----------------------------------------------------------------------------

    async def create(
        self,
        ident: Identity,
        *,
        content: str,
        type: str,
        source: str = "user_stated",
        scope: str = "global",
        project_id: str | None = None,
        expires_at: datetime | None = None,
        confirmed: bool = False,
        slot: str | None = None,
        applies: str | None = None,
        confidence: float = 1.0,
        evidence_trace: str | None = None,
        evidence_text: str | None = None,
        actor: str = "user",
        action: str = "created",
        noted: dict[str, Any] | None = None,
    ) -> WriteOutcome:
        """``action`` and ``noted`` (extra history fields, such as the candidate a memory
        was confirmed from and an edit made before confirming) go into its first entry."""
        now = self.clock.now()
        actor = _with_key(actor, ident)
        content = content.strip()
        draft = Draft(
            content=content,
            type=type,
            source=source,
            scope=scope,
            project_id=project_id,
            expires_at=expires_at,
            confirmed=confirmed,
            slot=slot,
            applies=applies,
        )
        decision = check_write(draft, self.policy, now)
        if not decision.allowed:
            raise WriteRefused(
                "The memory was not stored: " + ", ".join(decision.reasons) + ".",
                extra={"reasons": list(decision.reasons)},
            )
        if not self.store.index_ready:
            await self.ready()
        vector = (await self.embedder.embed([content]))[0]
        (typical,) = await self.typicality.encoded(vector[None, :])
        placed = self.slot_resemblance
        if slot is None and placed.considers(type, decision.slot):
            # no rule placed it ("哎还是中文吧，英文读着太吃力了"): a slot by resemblance,
            # decided again as if the writer had named it, so it supersedes as that slot does
            await placed.prepare()
            found = placed.slot(vector)
            if found is not None and placed.takes(found, content, type):
                decision = check_write(replace(draft, slot=found), self.policy, now)
        how = decision.applies
        like = self.resemblance
        if applies is None and like.considers(type, decision.slot, scope, how):
            # the writer did not say and the rules left it topical: by resemblance
            await like.prepare()
            how = like.applies(vector, type, decision.slot, scope, how)
        async with self.store.user_lock(ident.tenant, ident.user):
            same = await self.store.find_memories(
                ident.tenant, ident.user, status="active", content_key=content_key(content)
            )
            same = [m for m in same if m.scope == scope and m.project_id == project_id]
            neighbours = await self.store.similar_memories(
                ident.tenant,
                ident.user,
                vector,
                k=_NEIGHBOURS,
                scope=scope,
                project_id=project_id,
            )
            duplicate = (
                same[0]
                if same
                else next(
                    (n.memory for n in neighbours if n.similarity >= self.policy.dedup.similarity),
                    None,
                )
            )
            if duplicate is not None:
                return WriteOutcome(
                    await self._reconfirm(duplicate, now, actor), created=False, deduplicated=True
                )
            # a value for a while ("这几天回答都用英文", expiring in a week) ends nothing that
            # outlives it: both stay, recall takes the newer while it lasts (the newest wins
            # a conflict), and the older again once it has expired
            until = decision.expires_at
            replaced = await self._replaced_by(
                ident, decision, scope, project_id, neighbours, content, how, type
            )
            replaced += self._project_change(
                decision, scope, project_id, neighbours, content, type, replaced
            )
            conflicts = [
                m
                for m in replaced
                if until is None or (m.expires_at is not None and m.expires_at <= until)
            ]
            memory = Memory(
                id=new_memory_id(),
                tenant=ident.tenant,
                user=ident.user,
                content=content,
                type=type,
                source=decision.source,
                scope=scope,
                project_id=project_id,
                slot=decision.slot,
                confidence=confidence,
                sensitivity=decision.sensitivity,
                created_at=now,
                updated_at=now,
                confirmed_at=now,
                expires_at=decision.expires_at,
                supersedes=[m.id for m in conflicts],
                evidence_trace=evidence_trace,
                evidence_excerpt=self._excerpt(evidence_text) if evidence_text else None,
                embedding_model=self.embedder.model_id,
                applies=how,
                topics=list(decision.topics),
                typicality=typical,
                says_change=decision.says_change,
            )
            expire_at = memory.expires_at.timestamp() if memory.expires_at else None
            await self.store.put_memory(
                memory, search_text=search_text(content), embedding=vector, expire_at=expire_at
            )
            await self._log(
                memory,
                actor,
                action,
                {
                    "content": [None, memory.content],
                    "source": memory.source,
                    "type": memory.type,
                    "scope": memory.scope,
                    "applies": memory.applies,
                    "supersedes": memory.supersedes,
                    **(noted or {}),
                },
                now,
            )
            for old in conflicts:
                await self._supersede(old, memory, now, actor)
            await self.store.count_memories_written(
                ident.tenant, ident.user, 1, topical=int(memory.applies == "relevant")
            )
        return WriteOutcome(memory, created=True, superseded=[m.id for m in conflicts])

    def _project_change(
        self,
        decision: GateDecision,
        scope: str,
        project_id: str | None,
        neighbours: builtins.list[Neighbour],
        content: str,
        memory_type: str,
        taken: builtins.list[Memory],
    ) -> builtins.list[Memory]:
        """For a fact of a project that says something changed, the older fact of that
        project, not already ``taken``, it names a particular thing of: a project's subjects
        are its own (where its interview notes are kept, its glossary's system), so no slot
        lists them. A particular thing is a name both write alike, with a capital or a digit
        ("JSON", "Google Docs", "Tekla": ``shares_a_name``); of the older facts naming one,
        the most similar one no slot names if one is close enough
        (``conflict.change_similarity``), else the most similar one ("We ditched Tekla" after
        "Stair details are all Tekla models"). The project's own name, as its id or in
        Chinese, is no such thing, nor is a subject alone ("switched its database to
        Postgres" leaves "the database backups run nightly")."""
        policy = self.policy
        if scope != "project" or not project_id or not decision.says_change:
            return []
        ids = {m.id for m in taken}
        changed = without_project(content, project_id)
        named = [
            n
            for n in neighbours
            if n.memory.id not in ids
            and policy.tier(n.memory.type) == policy.tier(memory_type)
            and shares_a_name(changed, without_project(n.memory.content, project_id))
        ]
        older = [
            n
            for n in named
            if n.similarity >= policy.conflict.change_similarity and not n.memory.slot
        ] or named
        return [max(older, key=lambda n: n.similarity).memory] if older else []

    async def _replaced_by(
        self,
        ident: Identity,
        decision: GateDecision,
        scope: str,
        project_id: str | None,
        neighbours: builtins.list[Neighbour],
        content: str,
        applies: str,
        memory_type: str,
    ) -> builtins.list[Memory]:
        """The active memories a new memory supersedes: in a one-valued slot every one of
        the same scope, however it was worded ("answer in English", later "以后请用中文回答"),
        unless the two state the same value, and when it says something changed, those of
        the slots a change of it ends (``SlotSpec.change_ends``: a job left ends its
        shifts) and, in a project, those of every other one-valued slot it names, unless it
        names the older one's value too ("后端迁到了 Flask + MySQL" ends the cloud database,
        "数据库还是 MySQL" keeps it); in a many-valued one only those saying nearly the same
        thing. Without a
        slot, a topical memory that says something changed
        ("训练改成一周三练全身了") replaces the one most similar older topical memory of its
        tier that shares a topic with it, if close enough (``ChangesSpec``), or else the
        most similar one naming the particular thing it names (``names_a_thing``: "took her
        off donepezil" after "My wife takes donepezil"). In a many-valued
        slot, one that says it changed what an older one names replaces that one too
        (``change_names``: "别用表格了，改成分点列表" after "对比类的问题用表格回答"). The caller
        keeps those that outlive the new memory."""
        policy, slot = self.policy, decision.slot
        if not slot:
            if applies != "relevant" or not decision.says_change:
                return []
            bar = policy.conflict.change_similarity
            subjects = change_subjects(decision.topics, policy)
            older = [
                n
                for n in neighbours
                if n.similarity >= bar
                and change_may_replace(
                    subjects,
                    memory_type,
                    n.memory.type,
                    n.memory.slot,
                    n.memory.applies,
                    n.memory.topics,
                    policy,
                )
            ]
            if not older:
                # a change naming the particular thing an older memory names ("took her off
                # donepezil"), however far apart the rest of the two is worded
                older = [
                    n
                    for n in neighbours
                    if change_may_replace_named(
                        decision.topics,
                        memory_type,
                        n.memory.type,
                        n.memory.applies,
                        n.memory.topics,
                        policy,
                    )
                    and names_a_thing(content, n.memory.content, policy)
                ]
            return [max(older, key=lambda n: n.similarity).memory] if older else []
        if slot in policy.one_valued_slots:
            same = await self.store.find_memories(
                ident.tenant, ident.user, status="active", slot=slot
            )
            ended = list(policy.slot(slot).change_ends) if decision.says_change else []
            # a project's move names several of its values at once ("后端迁到了 Flask +
            # MySQL"): it ends the older fact of each, unless the two stand together
            named = (
                [s for s in one_valued_slots_named(content, policy, memory_type) if s != slot]
                if decision.says_change and scope == "project"
                else []
            )
            for other in dict.fromkeys(s for s in (*ended, *named) if s != slot):
                same += await self.store.find_memories(
                    ident.tenant, ident.user, status="active", slot=other
                )
            return [
                m
                for m in same
                if m.scope == scope
                and m.project_id == project_id
                and (
                    (m.slot != slot and m.slot not in named)
                    or (m.slot == slot and not policy.both_stand(slot, m.content, content))
                    or (m.slot in named and not policy.move_keeps(m.slot, m.content, content))
                )
            ]
        known = any(s.name == slot for s in self.policy.slots)
        bar = self.policy.conflict.similarity_many if known else self.policy.conflict.similarity
        close = [n.memory for n in neighbours if n.memory.slot == slot and n.similarity >= bar]
        if not decision.says_change:
            return close
        ids = {m.id for m in close}
        same = await self.store.find_memories(ident.tenant, ident.user, status="active", slot=slot)
        return close + [
            m
            for m in same
            if m.id not in ids
            and m.scope == scope
            and m.project_id == project_id
            and change_names(content, m.content)
        ]

    async def supersede(
        self, ident: Identity, old_id: str, new: Memory, actor: str = "user"
    ) -> bool:
        """A confirmed correction replaces the memory it corrects, even without a shared
        slot. False when that memory is gone or no longer active."""
        now = self.clock.now()
        actor = _with_key(actor, ident)
        async with self.store.user_lock(ident.tenant, ident.user):
            old = await self.store.get_memory(ident.tenant, ident.user, old_id)
            if old is None or old.status != "active":
                return False
            await self._supersede(old, new, now, actor)
            new.supersedes = [*new.supersedes, old_id]
            await self.store.update_memory(new, {"supersedes": ",".join(new.supersedes)})
        return True

    async def _reconfirm(self, memory: Memory, now: datetime, actor: str) -> Memory:
        await self.store.update_memory(
            memory, {"confirmed_at": now.timestamp(), "updated_at": now.timestamp()}
        )
        memory.confirmed_at = memory.updated_at = now
        await self._log(memory, actor, "reconfirmed", {}, now)
        return memory

    async def _supersede(self, old: Memory, new: Memory, now: datetime, actor: str) -> None:
        await self.store.update_memory(
            old, {"status": "superseded", "superseded_by": new.id, "updated_at": now.timestamp()}
        )
        await self._log(
            old,
            actor,
            "superseded",
            {"status": ["active", "superseded"], "superseded_by": new.id},
            now,
        )

    def _excerpt(self, text: str) -> str:
        """Evidence keeps a short excerpt with secrets and personal ids removed."""
        return redact(text, self.policy, min_level="medium")[:EXCERPT_CHARS]

    async def update(
        self, ident: Identity, memory_id: str, patch: dict[str, Any], actor: str = "user"
    ) -> Memory:
        now = self.clock.now()
        actor = _with_key(actor, ident)
        unknown = set(patch) - set(EDITABLE)
        if unknown:
            raise WriteRefused(
                f"These fields cannot be edited: {', '.join(sorted(unknown))}.",
                extra={"reasons": ["invalid"]},
            )
        # embedded once per process: not under the lock
        await self.typicality.sample()
        if "applies" not in patch and {"type", "scope"} & set(patch):
            await self.resemblance.prepare()  # how it applies is derived again
        async with self.store.user_lock(ident.tenant, ident.user):
            memory = await self.get(ident, memory_id)
            before = {k: getattr(memory, k) for k in EDITABLE}
            after = dict(before)
            for key, value in patch.items():
                after[key] = from_iso(value) if key == "expires_at" and value else value
            draft = Draft(
                content=str(after["content"]).strip(),
                type=after["type"],
                source=memory.source,
                scope=after["scope"],
                project_id=after["project_id"],
                expires_at=after["expires_at"],
                confirmed=True,
                slot=after["slot"],
                # kept as it was unless edited, or unless what it follows from changed
                applies=None
                if "applies" not in patch and {"type", "scope"} & set(patch)
                else after["applies"],
            )
            decision = check_write(draft, self.policy, now)
            if not decision.allowed:
                raise WriteRefused(
                    "The edit was not saved: " + ", ".join(decision.reasons) + ".",
                    extra={"reasons": list(decision.reasons)},
                )
            changes = {
                k: [_show(before[k]), _show(after[k])] for k in EDITABLE if before[k] != after[k]
            }
            for key in EDITABLE:
                setattr(memory, key, after[key])
            memory.content = draft.content
            memory.slot = decision.slot
            memory.applies = decision.applies
            memory.topics = list(decision.topics)
            memory.says_change = decision.says_change
            memory.sensitivity = decision.sensitivity
            memory.expires_at = (
                decision.expires_at
                if "expires_at" in patch or ("type" in patch)
                else memory.expires_at
            )
            memory.updated_at = memory.confirmed_at = now
            vector = (await self.embedder.embed([memory.content]))[0]
            # the sample was asked for before the lock: nothing more is embedded under it
            (memory.typicality,) = self.typicality.encoded_now(vector[None, :])
            if draft.applies is None:  # derived again: by the rules, or by resemblance
                memory.applies = self.resemblance.applies(
                    vector, memory.type, memory.slot, memory.scope, memory.applies
                )
            await self.store.put_memory(
                memory,
                search_text=search_text(memory.content),
                embedding=vector,
                expire_at=memory.expires_at.timestamp() if memory.expires_at else None,
            )
            if before["applies"] != memory.applies:
                changes["applies"] = [before["applies"], memory.applies]
                topical = int(memory.applies == "relevant") - int(before["applies"] == "relevant")
                await self.store.count_memories_written(
                    ident.tenant, ident.user, 0, topical=topical
                )
            await self._log(memory, actor, "edited", changes, now)
        return memory

    def settled(self, memory: Memory) -> Memory:
        """A memory written before ``applies`` and ``topics`` existed, given them as the
        policy derives them for its words, type, slot and scope."""
        if not memory.applies:
            memory.applies = derive_applies(
                memory.content, self.policy, memory.type, memory.slot, memory.scope
            )
            memory.topics, memory.says_change = self._derived(memory)
        return memory

    async def settle(self) -> int:
        """Settle (see ``settled``, then by resemblance) every memory of the current index
        that lacks ``applies``; each owner's topical count grows by the topical ones, so it
        is never low."""
        await self.ready()
        await self.resemblance.prepare()
        settled = 0
        while batch := await self.store.unsettled_memories(500):
            topical: dict[tuple[str, str], int] = {}
            for memory in batch:
                self.settled(memory)
            await self._resemble(batch)
            for memory in batch:
                await self.store.update_memory(memory, memory.derived_fields())
                owner = (memory.tenant, memory.user)
                topical[owner] = topical.get(owner, 0) + int(memory.applies == "relevant")
            for (tenant, user), count in topical.items():
                await self.store.count_memories_written(tenant, user, 0, topical=count)
            settled += len(batch)
        return settled

    async def follow_topic_rules(self) -> int:
        """Derive every stored memory's topics (and whether it says a change) again when
        the rules they were derived on (``Policy.topics_basis``) are not this policy's, so
        that new rules reach memories written under old ones; the number whose topics or
        change reading changed. Once per change of rules: a read when nothing changed. Each
        change is made under the owner's lock from the memory as it is then, so an edit
        meanwhile is never undone. Memories an earlier release writes during a rolling
        upgrade keep its topics until they are edited."""
        basis = self.policy.topics_basis
        if await self.store.topics_basis() == basis:
            return 0
        changed = 0
        async for batch in self.store.current_memories(500):
            for found in batch:
                if self._derived(found) == (found.topics, found.says_change):
                    continue
                async with self.store.user_lock(found.tenant, found.user):
                    memory = await self.store.get_memory(found.tenant, found.user, found.id)
                    if memory is None:
                        continue
                    derived = self._derived(memory)
                    if derived == (memory.topics, memory.says_change):
                        continue
                    memory.topics, memory.says_change = derived
                    await self.store.update_memory(memory, memory.derived_fields())
                    changed += 1
        await self.store.set_topics_basis(basis)
        return changed

    def _derived(self, memory: Memory) -> tuple[builtins.list[str], bool]:
        """What the rules read in a memory's words: its topics and whether it says a change."""
        return (
            memory_topics(memory.content, self.policy, memory.type, memory.slot),
            says_change(memory.content, self.policy),
        )

    async def _resemble(self, batch: builtins.list[Memory]) -> None:
        """Standing by resemblance for settled memories, from their stored embeddings."""
        judged: dict[tuple[str, str], builtins.list[Memory]] = {}
        for memory in batch:
            if self.resemblance.considers(memory.type, memory.slot, memory.scope, memory.applies):
                judged.setdefault((memory.tenant, memory.user), []).append(memory)
        for (tenant, user), memories in judged.items():
            vectors = await self.store.get_embeddings(tenant, user, [m.id for m in memories])
            for memory in memories:
                if memory.id in vectors:
                    memory.applies = self.resemblance.applies(
                        vectors[memory.id], memory.type, memory.slot, memory.scope, memory.applies
                    )

    # -- reads -----------------------------------------------------------------------------

    async def get(self, ident: Identity, memory_id: str) -> Memory:
        if not memory_id.startswith("mem_") or not memory_id[4:].isalnum():
            raise NotFound(f"No memory with id {memory_id[:40]!r}.", param="id")
        if not self.store.index_ready:
            await self.ready()
        memory = await self.store.get_memory(ident.tenant, ident.user, memory_id)
        if memory is None:
            raise NotFound(f"No memory with id {memory_id!r}.", param="id")
        return memory

    async def list(
        self,
        ident: Identity,
        *,
        status: str | None = None,
        type: str | None = None,
        project_id: str | None = None,
    ) -> list[Memory]:
        if not self.store.index_ready:
            await self.ready()
        return await self.store.find_memories(
            ident.tenant, ident.user, status=status, type_=type, project_id=project_id
        )

    async def owners(self) -> builtins.list[dict[str, Any]]:
        """Tenants and users with memories or pending candidates (the admin overview)."""
        if not self.store.index_ready:
            await self.ready()
        return await self.store.owners(self.clock.now().timestamp())

    async def history(self, ident: Identity, memory_id: str) -> builtins.list[dict[str, Any]]:
        entries = await self.store.history(ident.tenant, ident.user, memory_id)
        if not entries:
            raise NotFound(f"No history for memory {memory_id[:40]!r}.", param="id")
        return entries

    # -- deletes and archive ---------------------------------------------------------------

    async def delete(self, ident: Identity, memory_id: str, actor: str = "user") -> None:
        memory = await self.get(ident, memory_id)
        async with self.store.user_lock(ident.tenant, ident.user):
            await self._delete(memory, _with_key(actor, ident), self.clock.now())

    async def _delete(self, memory: Memory, actor: str, now: datetime) -> None:
        if await self.store.delete_memory(memory.tenant, memory.user, memory.id):
            await self.store.count_memories_written(
                memory.tenant, memory.user, -1, topical=-int(memory.applies == "relevant")
            )
        # The history keeps who deleted what when, without the content, for the retention period.
        retention = now + timedelta(days=self.policy.archive.retention_days)
        await self.store.append_history(
            memory.tenant,
            memory.user,
            memory.id,
            {"at": to_iso(now), **_actor_fields(actor), "action": "deleted", "changes": {}},
            expire_at=retention.timestamp(),
            replace=True,
        )

    async def delete_where(
        self,
        ident: Identity,
        *,
        project_id: str | None = None,
        everything: bool = False,
        actor: str = "user",
    ) -> int:
        """Delete one project's memories or all of them, then verify none is left."""
        if not everything and not project_id:
            raise ValueError("say which memories to delete")
        now = self.clock.now()
        actor = _with_key(actor, ident)
        async with self.store.user_lock(ident.tenant, ident.user):
            doomed = await self.list(ident, project_id=None if everything else project_id)
            for memory in doomed:
                await self._delete(memory, actor, now)
            left = await self.list(ident, project_id=None if everything else project_id)
            if left:
                raise RuntimeError(f"{len(left)} memories survived a delete")
        return len(doomed)

    async def archive_project(self, ident: Identity, project_id: str, actor: str = "user") -> int:
        """A finished project's memories stop being recalled and expire after the retention."""
        now = self.clock.now()
        actor = _with_key(actor, ident)
        until = now + timedelta(days=self.policy.archive.retention_days)
        async with self.store.user_lock(ident.tenant, ident.user):
            active = await self.store.find_memories(
                ident.tenant, ident.user, status="active", project_id=project_id
            )
            for memory in active:
                await self.store.update_memory(
                    memory,
                    {
                        "status": "archived",
                        "updated_at": now.timestamp(),
                        "expires_ts": until.timestamp(),
                    },
                    expire_at=until.timestamp(),
                )
                await self._log(memory, actor, "archived", {"status": ["active", "archived"]}, now)
        return len(active)

    async def _log(
        self, memory: Memory, actor: str, action: str, changes: dict[str, Any], now: datetime
    ) -> None:
        expire = None
        if memory.expires_at is not None:
            expire = memory.expires_at.timestamp()
        await self.store.append_history(
            memory.tenant,
            memory.user,
            memory.id,
            {"at": to_iso(now), **_actor_fields(actor), "action": action, "changes": changes},
            expire_at=expire,
        )


def _with_key(actor: str, ident: Identity) -> str:
    """The actor with the gateway key the request came with, as ``actor@key_id``."""
    return f"{actor}@{ident.key_id}" if ident.key_id and "@" not in actor else actor


def _actor_fields(actor: str) -> dict[str, Any]:
    """A history entry's who: ``actor`` (user, admin) and, when known, the gateway ``key_id``."""
    name, _, key_id = actor.partition("@")
    return {"actor": name, "key_id": key_id or None}


def _show(value: Any) -> Any:
    return to_iso(value) if isinstance(value, datetime) else value
