"""The write gate: the single place that decides whether a memory may be stored.

Every path that writes memories (mining, the admin API, imports, confirmations) goes through
``check_write`` so that "memgate saves little" is enforced once. The decision is pure: time
comes from the ``now`` argument and duplicates are judged by the store, which passes the
verdict in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.memory.policy import (
    Policy,
    derive_applies,
    derive_slot,
    is_one_time,
    memory_topics,
    says_change,
)
from gateway.memory.sensitivity import scan

__all__ = ["APPLIES", "REASONS", "Draft", "GateDecision", "check_write"]

# How a memory applies (see the policy's `applies`).
APPLIES = ("always", "relevant")
# Every reason the gate can give, in the order decisions list them.
REASONS = ("sensitive", "model_inference", "one_time", "unconfirmed", "duplicate", "invalid")

_TASK_SCOPE = re.compile(r"task:[a-z0-9_-]{1,32}")
_SLOT = re.compile(r"[a-z0-9][a-z0-9_.:-]{0,63}")
_MAX_PROJECT_ID = 256


@dataclass(frozen=True)
class Draft:
    """A memory someone wants to store, before the gate has looked at it."""

    content: str
    type: str
    source: str
    scope: str = "global"  # "global" | "project" | "task:<kind>"
    project_id: str | None = None
    expires_at: datetime | None = None  # aware UTC
    confirmed: bool = False  # the user explicitly confirmed this (e.g. a queued candidate)
    slot: str | None = None  # given by caller/extractor; else derived
    applies: str | None = None  # "always" | "relevant", given by caller/extractor; else derived


@dataclass(frozen=True)
class GateDecision:
    """The verdict. It never contains the draft's content, so it is safe to log."""

    allowed: bool
    reasons: tuple[str, ...]
    source: str
    sensitivity: str
    expires_at: datetime | None
    slot: str | None
    applies: str = "relevant"
    topics: tuple[str, ...] = ()
    says_change: bool = False  # ``policy.says_change`` of the content


def _scope_ok(scope: str) -> bool:
    return scope in ("global", "project") or _TASK_SCOPE.fullmatch(scope) is not None


def _project_id_ok(project_id: str | None) -> bool:
    return (
        project_id is not None
        and 0 < len(project_id.strip()) <= _MAX_PROJECT_ID
        and project_id.isprintable()
    )


def check_write(
    draft: Draft, policy: Policy, now: datetime, *, duplicate: bool = False
) -> GateDecision:
    """Decide whether ``draft`` may be stored, collecting every reason it may not."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("check_write needs an aware 'now' (the injected clock's time)")
    reasons: set[str] = set()

    type_spec = policy.types.get(draft.type)
    source_spec = policy.sources.get(draft.source)
    if type_spec is None or source_spec is None:
        reasons.add("invalid")

    content = draft.content if isinstance(draft.content, str) else ""
    if not content.strip() or len(content) > policy.limits.max_content_chars:
        reasons.add("invalid")

    if not _scope_ok(draft.scope):
        reasons.add("invalid")
    needs_project = draft.scope == "project" or (
        type_spec is not None and type_spec.requires_project
    )
    if needs_project and not _project_id_ok(draft.project_id):
        reasons.add("invalid")
    if draft.project_id is not None and not _project_id_ok(draft.project_id):
        reasons.add("invalid")

    expires_at: datetime | None = None
    if draft.expires_at is not None:
        if draft.expires_at.tzinfo is None or draft.expires_at.utcoffset() is None:
            reasons.add("invalid")
        elif draft.expires_at <= now:
            reasons.add("invalid")
        else:
            expires_at = draft.expires_at.astimezone(UTC)
    elif type_spec is not None:
        # a goal or plan lasts as long as the time it names ("tomorrow", "明年"), else its
        # type's lifetime; a wish said for a span ("接下来三天回复短一点") as long as the span
        ends = policy.horizons.until(content, draft.type, now.astimezone(UTC))
        if type_spec.ttl is not None:
            expires_at = (
                ends if ends is not None and ends > now else (now + type_spec.ttl).astimezone(UTC)
            )
        elif ends is not None and ends > now:
            expires_at = ends

    slot = draft.slot
    if slot is not None and not _SLOT.fullmatch(slot):
        reasons.add("invalid")
        slot = None

    # Sensitivity: only the level leaves this function, never the findings' text.
    level = scan(content, policy).level if content else "low"
    if not policy.sensitivity.may_store(level):
        reasons.add("sensitive")

    confirmed = draft.confirmed or (source_spec is not None and source_spec.is_confirmation)
    tier = type_spec.tier if type_spec is not None else None
    if (draft.source == "model_inference" or tier == "inference") and not confirmed:
        reasons.add("model_inference")
    if tier == "session" or (content and is_one_time(content, policy)):
        reasons.add("one_time")
    if source_spec is not None and source_spec.store == "on_confirmation" and not confirmed:
        reasons.add("unconfirmed")
    if duplicate:
        reasons.add("duplicate")

    stored_source = draft.source
    if source_spec is not None and confirmed and source_spec.confirmed_as is not None:
        stored_source = source_spec.confirmed_as

    if slot is None and content and "sensitive" not in reasons:
        slot = derive_slot(content, policy, draft.type if type_spec is not None else None)

    applies = draft.applies
    if applies is not None and applies not in APPLIES:
        reasons.add("invalid")
        applies = None
    if applies is None:
        applies = derive_applies(content, policy, draft.type, slot, draft.scope)

    ordered = tuple(r for r in REASONS if r in reasons)
    return GateDecision(
        allowed=not ordered,
        reasons=ordered,
        source=stored_source,
        sensitivity=level,
        expires_at=expires_at,
        slot=slot,
        applies=applies,
        topics=tuple(memory_topics(content, policy, draft.type, slot))
        if "sensitive" not in reasons
        else (),
        says_change=says_change(content, policy) if "sensitive" not in reasons else False,
    )
