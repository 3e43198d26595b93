"""Mining: turn the user's latest chat message into candidate memories (pure logic, no Redis).

Only the latest *user* message is mined: earlier turns were mined when they were latest, the
assistant's answer is never evidence about the user, and system/tool messages (which carry
memgate's own injected memories) are never read. The message is split into sentences
(Chinese 。！？； and English .!?; plus line breaks); each sentence is matched against the
bilingual rule table in the policy's ``mining`` section, which also says what counts as a
question, a correction, a "remember that" and a horizon: this module is only the mechanism.
Every proposal then goes through the write gate (``check_write``), the one place that decides
what may be stored: secrets and one-time instructions come back as refusals, never as proposals.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from gateway.memory.gate import Draft, check_write
from gateway.memory.policy import Policy, RuleSpec, is_one_time, normalize
from gateway.memory.records import content_key
from gateway.wire import new_user_text

__all__ = [
    "Extractor",
    "MineResult",
    "Proposal",
    "extract",
    "extract_rules",
    "horizon_of",
    "mining_key",
    "screen",
    "split_sentences",
]

# A fixed reference time for gate checks when the caller does not pass the clock's "now":
# the refusal reasons the miner uses (sensitive, one_time, model_inference, invalid) never
# depend on it, and it keeps this module free of wall-clock reads.
_REFERENCE_NOW = datetime(2000, 1, 1, tzinfo=UTC)

_REDACTED = "[REDACTED:"

# Gate reasons that a queued candidate resolves (the user confirms it), and the order in which
# the others are reported.
_RESOLVED_BY_CONFIRMATION = ("model_inference", "unconfirmed")
_OUTCOME_FOR = (
    ("sensitive", "refused_sensitive"),
    ("one_time", "refused_one_time"),
    ("invalid", "invalid"),
)


@dataclass(frozen=True, slots=True)
class Proposal:
    """A candidate memory: what the user said, typed and scoped, not yet stored."""

    content: str
    type: str
    scope: str = "global"
    project_id: str | None = None
    slot: str | None = None
    sensitivity: str = "low"
    source: str = "user_stated"
    applies: str | None = None  # "always" | "relevant"; the gate derives it when not given
    applies_said: bool = False  # the extractor said how it applies (else the policy derived it)
    is_correction: bool = False
    horizon: str | None = None  # "next week", "3月" ... for goals and plans, as the user said it
    evidence: str = ""  # the user sentence it came from (callers redact before storing)
    rule: str = ""  # which rule matched, for traces and debugging

    @property
    def is_inference(self) -> bool:
        return self.source == "model_inference"


@dataclass(slots=True)
class MineResult:
    proposals: list[Proposal] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # outcomes: refused_sensitive, ...


# Sentence ends: CJK punctuation always; ASCII . ! ? ; only before whitespace or the end (so
# "Next.js", "3.5" and URLs stay whole); and line breaks.
_SENTENCE_END = re.compile(r"[。！？；!?;]+|\.+(?=\s|$)|\n+")
_STRIP = " \t\r\n\"'“”‘’「」『』()（）[]【】,，、:："
_TRAILING = re.compile(r"[\s。！？；!?;.,，、~～…]+$")


def split_sentences(text: str) -> list[tuple[str, str]]:
    """Sentences with their terminator (which tells a question apart), in order."""
    out: list[tuple[str, str]] = []
    pos = 0
    for m in _SENTENCE_END.finditer(text):
        body = text[pos : m.start()].strip()
        if body:
            out.append((body, m.group().strip()))
        pos = m.end()
    tail = text[pos:].strip()
    if tail:
        out.append((tail, ""))
    return out


def mining_key(text: str) -> str:
    """A key for "near-verbatim the same text": width, case, spaces and punctuation ignored."""
    folded = unicodedata.normalize("NFKC", text)
    kept = "".join(ch for ch in folded if not unicodedata.category(ch).startswith(("P", "Z")))
    return content_key(kept)


def _is_question(body: str, end: str, policy: Policy) -> bool:
    if "?" in end or "？" in end:
        return True
    folded = normalize(body)
    return any(rule.compiled.search(folded) for rule in policy.mining.questions)


def _clean(text: str) -> str:
    text = _TRAILING.sub("", text.strip(_STRIP))
    return text.strip(_STRIP)


def _folded(text: str) -> str:
    """``text`` as the rules read it (``normalize``) where that keeps every character in its
    place, so that a match's span cuts the user's own words; else the text as written."""
    folded = normalize(text)
    return folded if len(folded) == len(text) else text


def _strip_prefix(text: str, rules: Iterable[RuleSpec]) -> tuple[str, bool]:
    """``text`` without the first of ``rules`` that matches its start (read as the rules
    read it: "記住，" is "记住，"), and whether one did; the rest keeps the user's words."""
    folded = _folded(text)
    for rule in rules:
        m = rule.compiled.match(folded)
        if m and text[m.end() :].strip():
            return text[m.end() :], True
    return text, False


def _match_rule(text: str, policy: Policy) -> tuple[str, str] | None:
    rule = policy.mining.rule_for(normalize(text))
    return (rule.name, rule.type) if rule is not None else None


def screen(
    proposal: Proposal,
    policy: Policy,
    now: datetime | None = None,
    *,
    allow_inferences: bool = True,
) -> tuple[Proposal | None, str | None]:
    """Pass a proposal through the write gate: (proposal with slot/sensitivity, None) when it
    may be queued, else (None, outcome). A model inference may be queued, marked as such,
    because the queue is exactly where it waits for the user's confirmation."""
    draft = Draft(
        content=proposal.content,
        type=proposal.type,
        source=proposal.source,
        scope=proposal.scope,
        project_id=proposal.project_id,
        slot=proposal.slot,
        applies=proposal.applies,
    )
    decision = check_write(draft, policy, now or _REFERENCE_NOW)
    blocking = [r for r in decision.reasons if r not in _RESOLVED_BY_CONFIRMATION]
    for reason, outcome in _OUTCOME_FOR:
        if reason in blocking:
            return None, outcome
    if blocking:  # a reason the miner has no outcome for (e.g. duplicate): not queueable
        return None, "invalid"
    if "model_inference" in decision.reasons and not allow_inferences:
        return None, "refused_inference"
    screened = Proposal(
        content=proposal.content,
        type=proposal.type,
        scope=proposal.scope,
        project_id=proposal.project_id,
        slot=decision.slot,
        sensitivity=decision.sensitivity,
        source=proposal.source,
        applies=decision.applies,
        applies_said=proposal.applies_said or proposal.applies is not None,
        is_correction=proposal.is_correction,
        horizon=proposal.horizon,
        evidence=proposal.evidence,
        rule=proposal.rule,
    )
    return screened, None


def horizon_of(content: str, policy: Policy) -> str | None:
    """When a goal or plan is due, as the user said it ("next week", "下周"), else None."""
    folded = _folded(content)
    m = policy.mining.horizon.compiled.search(folded)
    return content[m.start() : m.end()].strip() if m else None


def extract(
    messages: Sequence[dict[str, Any]],
    *,
    project_id: str | None,
    injected_texts: Sequence[str] = (),
    policy: Policy,
    injected_keys: Iterable[str] = (),
    now: datetime | None = None,
) -> MineResult:
    """Mine the latest user message for candidate memories.

    ``injected_texts`` (or their ``mining_key``s in ``injected_keys``) are the memories memgate
    injected into this request: a sentence repeating one of them is never proposed again.
    ``now`` is the injected clock's time; the refusals do not depend on it.
    """
    result = MineResult()
    text = new_user_text(messages)
    if text is None:
        return result
    injected = set(injected_keys) | {mining_key(t) for t in injected_texts if t}
    mining = policy.mining
    seen: set[str] = set()
    for body, end in split_sentences(text):
        if _is_question(body, end, policy) or body.endswith((":", "：")):
            continue  # questions, and lead-ins to what follows ("here is my key:"), say nothing
        if _REDACTED in body:  # the job carries the message with its secrets already redacted
            result.refused.append("refused_sensitive")
            continue
        filler = mining.filler.compiled.match(_folded(body))
        sentence = (body[filler.end() :] if filler else body) or body
        rest, is_correction = _strip_prefix(sentence, mining.corrections)
        rest, is_remember = _strip_prefix(rest, mining.remember)
        content = _clean(rest)
        if not content:
            continue
        if mining_key(content) in injected or mining_key(body) in injected:
            continue
        matched = _match_rule(content, policy)
        if matched is not None:
            rule, type_ = matched
        elif is_remember or is_correction:
            rule, type_ = ("remember" if is_remember else "correction"), mining.fallback_type
        else:
            # Not memory-worthy, but secrets and one-time wishes are still counted as refused.
            probe = Proposal(
                content=content,
                type="session" if is_one_time(content, policy) else "profile",
                evidence=body,
            )
            _, outcome = screen(probe, policy, now)
            if outcome in ("refused_sensitive", "refused_one_time"):
                result.refused.append(outcome)
            continue
        scope, project = "global", None
        if type_ == "project":
            if project_id:
                scope, project = "project", project_id
            else:
                type_ = "profile"  # no project to attach it to: a plain global fact
        horizon = horizon_of(content, policy) if type_ in ("goal", "plan") else None
        proposal = Proposal(
            content=content,
            type=type_,
            scope=scope,
            project_id=project,
            is_correction=is_correction,
            horizon=horizon,
            evidence=body,
            rule=rule,
        )
        screened, outcome = screen(proposal, policy, now)
        if outcome is not None:
            result.refused.append(outcome)
            continue
        assert screened is not None
        key = mining_key(screened.content)
        if key in seen:
            continue
        seen.add(key)
        result.proposals.append(screened)
    return result


class Extractor(Protocol):
    """What the mining worker calls with one job: the latest user message (already redacted)
    in, gate-screened proposals and counted refusals out. ``injected_keys`` are the
    ``mining_key``s of the memories injected into that request: never proposed again."""

    async def __call__(
        self,
        text: str,
        *,
        project_id: str | None,
        task: str | None,
        injected_keys: Collection[str],
        policy: Policy,
        now: datetime,
    ) -> MineResult: ...


async def extract_rules(
    text: str,
    *,
    project_id: str | None,
    task: str | None,
    injected_keys: Collection[str],
    policy: Policy,
    now: datetime,
) -> MineResult:
    """The default extractor: the policy's bilingual rule table (``extract``), offline and cheap."""
    return extract(
        [{"role": "user", "content": text}],
        project_id=project_id,
        policy=policy,
        injected_keys=injected_keys,
        now=now,
    )
