"""Recall's decisions on candidates already found: the checks, relevance and the selection
under the policy's counts and token budget. Pure: no Redis, no embedder, no clock of its own,
so each rule is unit-tested on hand-made candidates (``tests/test_selection.py``); the
recaller (``gateway.memory.recall``) finds the candidates and applies what this decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from gateway.memory import inject
from gateway.memory.identity import Identity
from gateway.memory.policy import (
    FittedRelevanceSpec,
    Policy,
    RecallSpec,
    names_project,
    normalize,
    plain_words,
)
from gateway.memory.records import Memory
from gateway.memory.textsearch import name_words, opens_with_someone, romanized
from gateway.memory.textsearch import tokens as text_tokens

if TYPE_CHECKING:  # a type only: this module sends nothing to Redis
    from gateway.storage.store import Hit

STANDING, TOPICAL = "standing", "topical"


@dataclass(slots=True)
class Candidate:
    memory: Memory
    vector: float
    text: float
    fused: float
    text_norm: float = 0.0
    typicality: float = 0.0  # discounted from ``fused`` (gateway.memory.typicality)
    lane: str = TOPICAL
    topics: tuple[str, ...] = ()  # topics shared with the request
    # about other topics than the request's: both have topics, and none is shared or reached
    off_topic: bool = False
    # topics the request calls for by resemblance (recall.relevance.resembled), none shared
    resembled: tuple[str, ...] = ()
    shared_terms: int = 0
    shared_name: bool = False  # names someone or somewhere the request names
    # written in the other language than the request (one in Chinese, the other not)
    other_language: bool = False
    # how likely the request needs it (recall.relevance.fitted); None: not worked out
    fitted: float | None = None
    decision: str = "dropped"
    reason: str | None = None

    def to_trace(self) -> dict[str, Any]:
        m = self.memory
        return {
            "id": m.id,
            "type": m.type,
            "scope": m.scope,
            "project_id": m.project_id,
            "source": m.source,
            "slot": m.slot,
            "applies": m.applies or "relevant",
            "lane": self.lane,
            "scores": {
                "vector": round(self.vector, 4),
                "text": round(self.text, 4),
                "text_norm": round(self.text_norm, 4),
                "fused": round(self.fused, 4),
                "typicality": round(self.typicality, 4),
            },
            "topics": list(self.topics),
            "off_topic": self.off_topic,
            "resembled": list(self.resembled),
            "shared_terms": self.shared_terms,
            "shared_name": self.shared_name,
            "other_language": self.other_language,
            "fitted": None if self.fitted is None else round(self.fitted, 4),
            "decision": self.decision,
            "reason": self.reason,
        }


def score(hit: Hit, spec: RecallSpec, typicality: float = 0.0) -> Candidate:
    """The recaller's fused score (the benchmarks rank with it too); ``typicality``: the
    memory's (``gateway.memory.typicality``), 0 when not known."""
    # BM25 s maps to s / (s + c): bounded like cosine and query-independent, so the
    # keyword bar keeps its meaning (c is recall.text_saturation in the policy).
    c = spec.text_saturation
    text_norm = hit.text / (hit.text + c) if hit.text > 0 else 0.0
    fused = spec.weights.vector * max(hit.vector, 0.0) + spec.weights.text * text_norm
    fused -= spec.typicality.weight * typicality  # why: gateway.memory.typicality
    return Candidate(hit.memory, hit.vector, hit.text, fused, text_norm, typicality=typicality)


def in_scope(memory: Memory, ident: Identity) -> bool:
    if memory.scope == "global":
        return True
    if memory.scope == "project":
        return bool(ident.project_id) and memory.project_id == ident.project_id
    if memory.scope.startswith("task:"):
        return ident.task is not None and memory.scope == f"task:{ident.task}"
    return False


def specificity(memory: Memory) -> int:
    """A task-scoped memory is more specific than a project one, which is more than global."""
    if memory.scope.startswith("task:"):
        return 2
    return 1 if memory.scope == "project" else 0


def when(memory: Memory) -> float:
    moment = memory.confirmed_at or memory.updated_at or memory.created_at
    return moment.timestamp() if moment else 0.0


def first_failure(
    cand: Candidate,
    policy: Policy,
    ident: Identity,
    now: datetime,
    terms: frozenset[str],
    names: frozenset[str] = frozenset(),
    leading: frozenset[str] = frozenset(),
    *,
    general: bool = False,
    close: bool = False,
) -> str | None:
    """The first check ``cand`` fails (its drop reason), or None. ``terms`` and ``names``:
    the request's content words and names; ``leading``: capitalised words opening its
    sentences, names only where a memory writes them capitalised too; ``general``: the
    request asks how the world is, not about the user (``policy.general_question``);
    ``close``: it is about someone close to the user (``SomeoneCloseSpec``). Conflicts and
    sensitivity are judged by the recaller afterwards; a paused user's recall never gets
    here."""
    m = cand.memory
    if m.expires_at is not None and m.expires_at <= now:
        return "expired"
    if not in_scope(m, ident):
        return "scope"
    if not policy.has_source(m.source) or not policy.source(m.source).recall:
        return "source"
    if cand.lane == TOPICAL and not relevant(
        cand,
        policy.recall,
        terms,
        names,
        leading,
        in_project=bool(ident.project_id),
        task=ident.task,
        general=general,
        close=close,
        project_plan=_project_plan(m, ident, policy.recall.relevance.project_plans),
        due=_due(m, policy.recall.relevance.due_within_days),
        subject_words=policy.vocabulary,
        keywords=policy.keywords,
        tool_slots=policy.tool_slots,
        slot_topics=policy.slot_topics,
    ):
        return "threshold"
    if m.status != "active" or m.superseded_by:
        return "superseded"
    return None


def _project_plan(memory: Memory, ident: Identity, types: frozenset[str]) -> bool:
    """A plan or goal of the user's life (``RelevanceSpec.project_plans``) naming the project
    the request is sent with."""
    return (
        ident.project_id is not None
        and memory.scope == "global"
        and memory.type in types
        and names_project(memory.content, ident.project_id)
    )


def _due(memory: Memory, within_days: int) -> bool:
    """Said for the coming days: saved at most ``within_days`` before it ends (a race this
    Sunday, the dentist on Wednesday); 0 turns the test off."""
    return (
        within_days > 0
        and memory.expires_at is not None
        and memory.created_at is not None
        and memory.expires_at - memory.created_at <= timedelta(days=within_days)
    )


def relevant(
    cand: Candidate,
    spec: RecallSpec,
    terms: frozenset[str],
    names: frozenset[str] = frozenset(),
    leading: frozenset[str] = frozenset(),
    *,
    in_project: bool = False,
    task: str | None = None,
    general: bool = False,
    close: bool = False,
    project_plan: bool = False,
    due: bool = False,
    subject_words: frozenset[str] = frozenset(),
    keywords: frozenset[str] = frozenset(),
    tool_slots: frozenset[str] = frozenset(),
    slot_topics: Mapping[str, frozenset[str]] = MappingProxyType({}),
) -> bool:
    """Related in meaning, about a topic of the request, naming someone or somewhere the
    request names (in either script: ``_names_meet``), about someone the user names where
    the request is about someone ``close`` (``SomeoneCloseSpec``), a plan naming the
    project the request is sent with (``project_plan``: RelevanceSpec.project_plans), or
    sharing several content words with a meaning that is not unrelated (one, for a memory
    said for the coming days: ``due``; ``subject_words`` are the words the topics and
    slots read as subjects, which such a memory about other topics may not share alone;
    ``keywords`` every word they read so, in either language). ``slot_topics``: the topics
    naming each slot (``Policy.slot_topics``); a slot it lacks, every slot when it is left
    empty, is one no topic names.

    None of these depends on the index (a BM25 score does), and one shared incidental
    word ("python" the pet, "Python" the language) is not enough (but for a plan of the
    coming days, in a word no topic reads as a subject); a memory in the
    other language (no shared words) is judged on its meaning and topics. A memory about
    other topics than the request's needs a closer meaning: a shared word, or a word with
    two senses across languages ("苹果手机" and apples in the garden), lifts the similarity
    of texts about different things. A ``general`` request (how the world is, not the user)
    is met only by a name both write. Where the request's words may link the user's life,
    how likely written scenarios make the memory needed (``cand.fitted``,
    FittedRelevanceSpec) can make it relevant, or not, before the tests that follow it.
    """
    bar = spec.relevance
    # in a project or a task the request's words describe the project or the work, not the
    # user (RelevanceSpec): no topic, name or shared words link a memory of the user's life,
    # but for a plan of the coming days a task's request names (the `due` test below)
    # ... but for the user's tools (RelevanceSpec.tools_in_projects, ``tool_slots`` their
    # topics' slots): an editor, an OS or a spreadsheet program is how the user works on any
    # project's code and in any coding task; a diet or a home a stray word ties to code is not
    tool = cand.memory.slot in tool_slots and any(t in bar.tools_in_projects for t in cand.topics)
    in_code = (
        cand.memory.scope == "global" and in_project and bar.meaning_only_in_projects and not tool
    )
    linked = not in_code and (
        cand.memory.scope != "global" or task not in bar.meaning_only_in_tasks or tool
    )
    # the embedder rates a pair of texts across languages lower than the same pair in one
    # (RelevanceSpec.other_language_discount); not where meaning alone links the user's life
    # to a project's or a task's request, whose words describe the work
    across = bar.other_language_discount if cand.other_language and linked else 0.0
    if (
        linked
        and bar.shared_name
        and (names or leading)
        and cand.vector >= bar.topic_min_similarity
    ):
        # a name both write ("Leo", "Toronto"): the memory is about whom or where the request
        # is, whatever else either is about (``_names_meet``)
        cand.shared_name = _names_meet(cand, names, leading, bar.shared_terms_min_similarity)
        if cand.shared_name:
            return True
    if general:
        # how the world is ("Why do dogs wag their tails?"): the user's own dog is no part
        # of the answer, however close in meaning; only a name the request names links
        return False
    if project_plan and cand.vector >= bar.shared_terms_min_similarity:
        # in a project, what the user works towards there, naming it ("launch the raftbook
        # booking flow by July"), is about that work, its meaning not unrelated: a one-word
        # id is often an everyday word too (RelevanceSpec.project_plans)
        return True
    if linked and cand.fitted is not None:
        # what written scenarios say of requests and memories like these (FittedRelevanceSpec):
        # a memory they make likely needed is relevant; one about other topics than the
        # request's only when they make it likelier still: a kind of memory many requests
        # need (a night shift for a running plan, a partner who eats nothing spicy for a
        # week's trip). Not when it shares a word a topic or slot reads as a subject: about
        # other topics, the two use it in two senses, and the shared word lifts what the fit
        # reads (Java the island and Java at work). Any other shared word links like the
        # meaning does ("week": night shifts all next week, for next week's meals)
        off_bar = bar.fitted.add_off_topic_at
        if cand.fitted >= bar.fitted.add_at and not cand.off_topic:
            return True
        if (
            cand.off_topic
            and off_bar is not None
            and cand.fitted >= max(off_bar, bar.fitted.add_at)
            and not _subject(_shared(cand, terms), keywords)
        ):
            return True
        # a request about someone close (a boyfriend's present) and a memory about someone
        # the user names ("Kai 最近迷上了手冲咖啡"): which of the user's people is which the
        # memories rarely say, so the likelihood decides, at its own bar (SomeoneCloseSpec)
        someone = bar.fitted.someone_close
        if (
            close
            and someone.at is not None
            and cand.fitted >= someone.at
            and someone.not_about.isdisjoint(cand.memory.topics)
            and (who := opens_with_someone(cand.memory.content)) is not None
            and who not in keywords
        ):
            return True
        # ... and one they make unlikely is not, but for a memory in a slot, which says where
        # the user lives, works or what they use, linked by a topic naming the slot (the
        # weather "here", format-on-save in an editor; not where the user lives for the
        # children's homework) or in a slot no topic names (the language the user codes
        # in), and one sharing a topic with the request that says more than the fit: only
        # a broad one (drop_through) says little, and any but a narrow one (a pacemaker and
        # airport security) little more at a lower likelihood (drop_shared_below). Nor one
        # the request must not miss (an allergy where food is shared: the fit reads its
        # wording, not what it means for a menu)
        if _unlikely(cand, cand.fitted, bar.fitted, slot_topics):
            return False
    if linked and cand.resembled and cand.vector >= bar.resembled.min_similarity:
        # about a topic that requests like this one call for ("下个月去重庆玩三天" and a knee
        # bad on steps), with a meaning close enough: such a topic holds facts of every kind
        return True
    if due and not in_code and cand.text > 0 and cand.vector >= bar.topic_min_similarity:
        # said for the coming days (RelevanceSpec.due_within_days): the user's next event,
        # named. About other topics than the request's, or asked in a task (whose words
        # describe the work), the word must be one no topic or slot reads as a subject
        # ("python", "java": the pet python's vet visit this weekend is no Python question)
        # and the meaning not unrelated: "the agency call" at work meets "Call with the
        # Hamburg agency this Friday". A project's words describe its code, whatever the
        # user's plans share with them.
        shared = _shared(cand, terms)
        if shared and (
            (linked and not cand.off_topic)
            or (cand.vector >= bar.shared_terms_min_similarity and bool(shared - subject_words))
        ):
            return True
    if cand.off_topic:
        # About something else and linked by words: a shared word lifts the similarity too
        # ("我家养了条球蟒，英文叫 ball python" against a Python question), so one is not
        # enough; and its bar is never below the plain one, whatever an overlay sets.
        if cand.text > 0 and _shared_terms(cand, terms) < bar.shared_terms:
            return False
        if cand.vector >= max(bar.off_topic_similarity, bar.similarity) - across:
            return True
        return linked and cand.text > 0 and cand.vector >= bar.shared_terms_min_similarity
    if cand.vector >= bar.similarity - across:
        return True
    if not linked:
        return False
    if cand.topics and cand.vector >= bar.topic_min_similarity:
        return True
    if cand.text > 0 and cand.vector >= bar.shared_terms_min_similarity:
        return _shared_terms(cand, terms) >= bar.shared_terms
    return False


def _unlikely(
    cand: Candidate,
    likely: float,
    fit: FittedRelevanceSpec,
    slot_topics: Mapping[str, frozenset[str]],
) -> bool:
    """Whether the fitted relevance's low ``likely`` outweighs what links ``cand``
    (``relevant`` says why): no slot's own topic, no kept memory, and only broad topics
    under ``drop_below`` or no narrow one under ``drop_shared_below``."""
    slot, shared = cand.memory.slot, cand.topics
    if slot is not None:
        naming = slot_topics.get(slot)
        if naming is None or not naming.isdisjoint(shared):
            return False
    if shared and fit.kept.intersection(cand.memory.topics):
        return False
    if likely < fit.drop_below and all(t in fit.drop_through for t in shared):
        return True
    shared_bar = fit.drop_shared_below
    return shared_bar is not None and likely < shared_bar and fit.narrow.isdisjoint(shared)


def _names_meet(
    cand: Candidate, names: frozenset[str], leading: frozenset[str], unrelated: float
) -> bool:
    """Whether the request names someone or somewhere the memory names. ``names`` are the
    request's names; ``leading`` capitalised words opening its sentences, a weaker sign
    ("Reading" the town and "Reading comprehension"), as is a memory's word opening a
    sentence ("Write" and "Help" open many). Written alike (the keyword search found the
    word: ``cand.text``), a weak sign of the request's counts only where the memory writes
    the word inside a sentence ("My son Leo is dyslexic") and the meanings are not
    ``unrelated``. One text may write the name in Chinese and the other in pinyin
    ("糖糖周末来我家" and "My granddaughter Tangtang is three"), which shares no word: two
    writings of one name are one sign, so a weak one counts beside a strong one, not two
    weak ones."""
    written = name_words(cand.memory.content)
    theirs = written.inside | written.opening
    if cand.text > 0 and (
        not names.isdisjoint(theirs)
        or (cand.vector >= unrelated and not leading.isdisjoint(written.inside))
    ):
        return True

    def across(asked: frozenset[str], named: frozenset[str]) -> bool:
        return not (romanized(asked).isdisjoint(named) and asked.isdisjoint(romanized(named)))

    return across(names, theirs) or across(leading, written.inside)


def _shared(cand: Candidate, terms: frozenset[str]) -> frozenset[str]:
    """The distinct content words the memory shares with the request, their count kept
    for the trace; worked out only when a test needs them (it tokenises the memory)."""
    shared = terms.intersection(text_tokens(cand.memory.content))
    cand.shared_terms = len(shared)
    return shared


def _subject(words: frozenset[str], keywords: frozenset[str]) -> bool:
    """Whether one of ``words`` (as the text splits) is one of ``keywords``, in the form the
    topics read: Traditional as Simplified, full width as ASCII, a plural as its singular."""
    for word in words:
        folded = normalize(word).lower()
        if folded in keywords or not keywords.isdisjoint(plain_words(folded)):
            return True
    return False


def _shared_terms(cand: Candidate, terms: frozenset[str]) -> int:
    return len(_shared(cand, terms))


@dataclass(slots=True)
class Selection:
    """What one request gets: the memories, and their lines for the memory message."""

    injected: list[Memory] = field(default_factory=list)
    standing_lines: list[str] = field(default_factory=list)
    fact_lines: list[str] = field(default_factory=list)


def select(candidates: Sequence[Candidate], spec: RecallSpec, model: str) -> Selection:
    """Topical survivors first (best first, up to ``topical.max``, or ``close_max`` while
    they rank within ``close_within`` of the best, or ``fresh_within`` for one sharing a
    topic with the request that none taken so far shares, or for one the fit rates at
    least ``sure_at`` likely when no more than ``close_max`` pass: a short list has none
    to spare), then standing ones (narrowest scope, then newest, up to ``standing.max``),
    all within ``max_memories`` and the token budget. Marks each candidate left out with its reason
    (``limit`` or ``budget``) and each one taken as injected."""
    # both blocks' headings counted from the start: the message may need only one
    used = inject.token_count([], [], model)
    alive = [c for c in candidates if c.reason is None]
    chosen = Selection()
    topical = [c for c in alive if c.lane == TOPICAL]
    standing = sorted(
        (c for c in alive if c.lane == STANDING),
        key=lambda c: (specificity(c.memory), when(c.memory)),
        reverse=True,
    )
    close = spec.topical
    # a topical memory past topical.max still fits when it ranks close to the best one
    close_bar = topical[0].fused - close.close_within if topical else 0.0
    # ... and further when it brings a subject of the request that none taken so far covers
    # (a knee injury beside two fitness preferences for a workout plan)
    fresh_bar = topical[0].fused - max(close.fresh_within, close.close_within) if topical else 0.0
    # ... and, when only a few pass, for one the fit is sure of (a third food rule for a
    # dinner menu, a padel habit beside an ankle sprain for ankle exercises)
    sure = close.sure_at if len(topical) <= close.close_max else None
    for lane, group, lines in (
        (TOPICAL, topical, chosen.fact_lines),
        (STANDING, standing, chosen.standing_lines),
    ):
        lane_max = spec.topical.max if lane == TOPICAL else spec.standing.max
        taken = 0
        covered: set[str] = set()
        for cand in group:
            fresh = bool(cand.topics) and not covered.intersection(cand.topics)
            over = taken >= lane_max and not (
                lane == TOPICAL
                and taken < close.close_max
                and (
                    cand.fused >= (fresh_bar if fresh else close_bar)
                    or (sure is not None and cand.fitted is not None and cand.fitted >= sure)
                )
            )
            if over or len(chosen.injected) >= spec.max_memories:
                cand.reason = "limit"
                continue
            line = inject.line_for(cand.memory)
            cost = inject.line_tokens(line, model)
            if used + cost > spec.token_budget:
                cand.reason = "budget"
                continue
            used += cost
            taken += 1
            covered.update(cand.topics)
            cand.decision = "injected"
            chosen.injected.append(cand.memory)
            lines.append(line)
    return chosen
