"""The declarative memory policy: typed, strictly validated, loaded from YAML.

Product behaviour lives in the package's ``policies/default.yaml`` (the knobs),
``policies/rules.yaml`` (the rule library) and ``policies/requests.yaml`` (example requests
of the memory topics they call for) so that a reader can learn what memgate stores,
forgets and recalls without opening Python. An operator's overlay (``MEMGATE_POLICY``) is
merged onto them: mappings key by key, lists replaced whole. This module gives the merged
policy a schema, refuses anything it does not understand (naming the file, line and key),
classifies text by the policy's rules, and offers a few accessors the rest of the gateway uses.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, NoReturn, get_args

import ahocorasick  # type: ignore[import-not-found]
import opencc
import rjieba  # type: ignore[import-not-found]
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    model_validator,
)

from gateway import __version__
from gateway.memory.textsearch import STOPWORDS, name_words, people, tokens

__all__ = [
    "DETECTOR_NAMES",
    "LEVELS",
    "TIERS",
    "VALIDATOR_NAMES",
    "AppliesSpec",
    "ArchiveSpec",
    "CandidatesSpec",
    "ConflictSpec",
    "DedupSpec",
    "EntropySpec",
    "FusionWeights",
    "LaneSpec",
    "Level",
    "LimitsSpec",
    "MiningRuleSpec",
    "MiningSpec",
    "OneTimeSpec",
    "PatternSpec",
    "Policy",
    "PolicyError",
    "RecallSpec",
    "RelevanceSpec",
    "ResemblanceSpec",
    "RuleSpec",
    "SensitivitySpec",
    "SlotResemblanceSpec",
    "SlotSpec",
    "SourceSpec",
    "Tier",
    "TopicSpec",
    "TypeSpec",
    "change_may_replace",
    "change_may_replace_named",
    "change_names",
    "change_subjects",
    "default_policy_path",
    "derive_applies",
    "derive_slot",
    "general_question",
    "is_one_time",
    "level_at_least",
    "load_policy",
    "memory_topics",
    "names_a_thing",
    "names_project",
    "normalize",
    "one_valued_slots_named",
    "parse_policy",
    "says_change",
    "shares_a_name",
    "shipped_policy_paths",
    "standing_by_words",
    "topics_of",
    "without_project",
]

Tier = Literal["long_term", "time_limited", "session", "inference"]
Level = Literal["low", "medium", "high"]
StoreMode = Literal["always", "on_confirmation"]
# Built-in detectors are detect-secrets plugins, adapted in gateway/memory/sensitivity.py.
DetectorName = Literal[
    "aws",
    "azure_storage",
    "basic_auth",
    "discord",
    "github",
    "gitlab",
    "jwt",
    "keyword",
    "mailchimp",
    "npm",
    "openai",
    "private_key",
    "pypi",
    "sendgrid",
    "slack",
    "square_oauth",
    "stripe",
    "telegram",
    "twilio",
]
ValidatorName = Literal[
    "luhn", "prc_id_checksum", "phone", "credential_value", "code_credential", "jwt"
]

TIERS: tuple[str, ...] = get_args(Tier)
LEVELS: tuple[str, ...] = get_args(Level)  # ordered from least to most sensitive
DETECTOR_NAMES: frozenset[str] = frozenset(get_args(DetectorName))
VALIDATOR_NAMES: frozenset[str] = frozenset(get_args(ValidatorName))

# Sources the gate refers to by name; a policy without them cannot express the product rules.
REQUIRED_SOURCES = ("user_stated", "user_confirmed", "model_inference")

Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
NonEmpty = Annotated[str, StringConstraints(min_length=1)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveInt = Annotated[int, Field(gt=0)]


_SHIPPED = Path(__file__).resolve().parent.parent / "policies"


def default_policy_path() -> Path:
    """The knobs of the policy shipped inside the package (package data)."""
    return _SHIPPED / "default.yaml"


def shipped_policy_paths() -> tuple[Path, ...]:
    """The files that together form the shipped policy, in merge order."""
    return (
        _SHIPPED / "rules.yaml",
        _SHIPPED / "requests.yaml",
        _SHIPPED / "fitted.yaml",
        _SHIPPED / "default.yaml",
    )


def level_at_least(level: str, minimum: str) -> bool:
    """Compare sensitivity levels by their order in ``LEVELS``."""
    return LEVELS.index(level) >= LEVELS.index(minimum)


class PolicyError(ValueError):
    """A policy file that cannot be trusted; the message says where and why."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TypeSpec(_Model):
    """A kind of memory and how long it lives."""

    tier: Tier
    ttl_days: PositiveInt | None = None
    requires_project: bool = False
    description: str = ""

    @property
    def ttl(self) -> timedelta | None:
        return timedelta(days=self.ttl_days) if self.ttl_days is not None else None


class SourceSpec(_Model):
    """Where a memory came from decides whether it may be stored and recalled."""

    store: StoreMode
    recall: bool
    is_confirmation: bool = False
    confirmed_as: Name | None = None
    description: str = ""


class PatternSpec(_Model):
    """One sensitivity detector: either a regex written in the policy or a built-in one."""

    name: Name
    level: Level
    regex: NonEmpty | None = None
    detector: DetectorName | None = None
    group: Annotated[int, Field(ge=0)] = 0
    validator: ValidatorName | None = None
    requires: tuple[NonEmpty, ...] = ()
    requires_digits: Annotated[int, Field(ge=0)] = 0
    description: str = ""

    @cached_property
    def compiled(self) -> re.Pattern[str] | None:
        return re.compile(self.regex) if self.regex is not None else None

    @cached_property
    def hints(self) -> tuple[str, ...]:
        return tuple(h.lower() for h in self.requires)


class EntropySpec(_Model):
    """High-entropy tokens that no named pattern explains are treated as unknown secrets."""

    enabled: bool = True
    level: Level = "high"
    min_length: Annotated[int, Field(ge=8)] = 20
    threshold: Annotated[float, Field(gt=0.0, le=8.0)] = 3.7
    max_wordlike_fraction: Fraction = 0.6
    hex_min_length: Annotated[int, Field(ge=8)] = 32
    hex_threshold: Annotated[float, Field(gt=0.0, le=8.0)] = 3.0
    skip_url_paths: bool = True
    ignore: tuple[NonEmpty, ...] = ()

    @cached_property
    def ignore_regexes(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(r) for r in self.ignore)


class SensitivitySpec(_Model):
    store_levels: tuple[Level, ...]
    inject_levels: tuple[Level, ...]
    credential_stopwords: tuple[NonEmpty, ...] = ()
    entropy: EntropySpec = EntropySpec()
    patterns: tuple[PatternSpec, ...]

    def may_store(self, level: str) -> bool:
        return level in self.store_levels

    def may_inject(self, level: str) -> bool:
        return level in self.inject_levels

    @cached_property
    def stopwords(self) -> frozenset[str]:
        return frozenset(w.casefold() for w in self.credential_stopwords)


class RuleSpec(_Model):
    """A regex with examples it must match; the loader checks the examples."""

    regex: NonEmpty
    examples: tuple[str, ...] = ()
    description: str = ""
    # where a topic's pattern is tried on every request: words (lower-case) one of which a
    # text must hold for the regex to be tried at all, a substring test that spares a scan
    needs: tuple[NonEmpty, ...] = ()

    def tried_on(self, lowered: str) -> bool:
        """Whether the regex is worth trying on a text (lower-cased) by its ``needs``."""
        return self._needed is None or self._needed.search(lowered) is not None

    @cached_property
    def _needed(self) -> re.Pattern[str] | None:
        # one search for any of the words (a substring each): the same test as looking
        # for each in turn, without a Python step per word on every request
        return re.compile("|".join(map(re.escape, self.needs))) if self.needs else None

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.regex)


class OneTimeSpec(_Model):
    patterns: tuple[RuleSpec, ...]
    not_one_time: tuple[str, ...] = ()


class ChangesSpec(_Model):
    """How a user says that something about them changed ("I no longer ...", "训练改成 ...").
    Such a topical memory replaces the most similar older topical memory of its scope and
    tier (a lasting fact another, a plan another) that shares a topic with it (at least
    ``conflict.change_similarity`` close): the newer wins on subjects no slot names (a
    training split, a hobby given up). Never an older one about a ``lasting`` topic ("I
    stopped eating sugar" does not end "I'm diabetic"), nor by a change of someone else's
    (``others``: "my husband quit smoking"). Recall also leaves out an older memory a change
    may replace when a request brings both (``Recaller``). Texts in ``not_examples`` must
    match no pattern."""

    patterns: tuple[RuleSpec, ...]
    # slots whose value a change of habit may still end, as it ends a memory in no slot: a
    # way of eating gives way to a change for the user's health ("啤酒也戒了" after "我不挑食")
    ends_slots: tuple[Name, ...] = ()
    # Someone's end, naming them in a ``who`` group ("Biscuit died last week", "we had to put
    # Biscuit down", "外婆去年去世了"): such a change ends an older memory naming them, which
    # a name alone never does ("Sold the Jazz so Noah's chair fits" leaves Noah's chair).
    # The older memory must write the name as someone's (``someone_ended``).
    ends_someone: tuple[RuleSpec, ...] = ()
    # One thing's names in several languages (a medicine: "aspirin", "阿司匹林"): a change
    # naming it in one ends an older memory naming it in another ("Cardiologist took me off
    # the aspirin" after "我每天晚上吃一片阿司匹林"), as the same name does (``names_a_thing``).
    same_things: tuple[tuple[NonEmpty, ...], ...] = ()
    not_examples: tuple[str, ...] = ()

    @cached_property
    def _things(self) -> tuple[re.Pattern[str], ...]:
        # each thing's names as one regex; a Latin name as a whole word ("statin" is not in
        # "statistics")
        return tuple(
            re.compile("|".join(_keyword_regex(name.lower()) for name in group))
            for group in self.same_things
        )

    def same_thing_named(self, older: str, newer: str) -> bool:
        """Whether both texts (already normalized and lower-cased) name one of
        ``same_things``, in either language."""
        return any(thing.search(older) and thing.search(newer) for thing in self._things)


def _keyword_regex(keyword: str) -> str:
    # ASCII keywords get ASCII-only boundaries so that "用FastAPI" matches: Python's \b treats
    # CJK characters as word characters and would not see a boundary there. The words of a
    # phrase may be written apart, hyphenated or joined: "day trip", "day-trip", "no-sugar".
    body = r"[\s-]*".join(re.escape(part) for part in keyword.split())
    if keyword.isascii():
        return rf"(?<![A-Za-z0-9_]){body}(?![A-Za-z0-9_])"
    return body


class SlotSpec(_Model):
    """What a memory is about, so that two values for the same subject can conflict.

    ``values: one`` (answer language, a project's framework): a newer memory replaces the
    older whatever the wording; ``many`` (format rules): memories coexist unless they say
    nearly the same thing (``conflict.similarity_many``).
    """

    name: Name
    description: str = ""
    values: Literal["one", "many"] = "one"
    keywords: tuple[NonEmpty, ...] = ()
    patterns: tuple[RuleSpec, ...] = ()
    # a text matching one of these is not about the slot, whatever else matches ("moved
    # to JetBrains Rider" is not a new home; "my boss is deaf" is not the user's need)
    unless: tuple[RuleSpec, ...] = ()
    # Nor is a text moving to a value these slots list (``keywords``): "moved over to
    # PyCharm" or "换到 Supabase 了" is a tool's change, and no list of tools has to be kept
    # twice. A tool named otherwise ("moved to Seattle to work at AWS") is no move to it.
    unless_moving_to: tuple[Name, ...] = ()
    types: tuple[Name, ...] = ()
    # A memory of one of these types that no slot's rules place is about this slot: a
    # length wish in words no rule lists ("最近忙疯了，回答尽量短") still replaces the older
    # length wish. A type names at most one slot. Not a text matching ``unless`` or
    # ``of_types_unless``: a wish for some answers only ("讲历史的时候可以展开讲讲") is no
    # wish for all of them, and replaces none.
    of_types: tuple[Name, ...] = ()
    of_types_unless: tuple[RuleSpec, ...] = ()
    # When set, the only topics a memory of this slot takes from its words (besides the
    # topics naming the slot): a job's trade is not the user's life ("UX designer at a
    # health-tech startup" is no health fact, "line cook at Denny's" no food preference).
    # Names the policy has no topic of are passed over (an overlay may replace the topics).
    topics: tuple[Name, ...] | None = None
    # A one-valued slot's values by name, tried in order (diet: vegan, vegetarian, ...): a
    # newer memory replaces an older one only when the two do not name the same value, so
    # "I follow a raw vegan diet" and "I'm vegan, no honey either" both stand.
    options: dict[Name, RuleSpec] = {}
    # A one-valued slot's separate subjects by name, tried on a ``normalize``d text
    # (``project_tool``: a project's site, docs, videos, model): a newer memory naming some
    # replaces only older ones naming one of them too, or none, so "the promo videos are cut
    # in DaVinci" leaves "the docs are built with Sphinx"; a memory naming none ("moved it
    # all to Astro") replaces every older one.
    aspects: dict[Name, RuleSpec] = {}
    # Keywords that name the slot, not a value of it ("编辑器", "ORM", "citation style"): they
    # find the slot but say nothing of which value (``restates``).
    generic: tuple[str, ...] = ()
    # A newer memory of this slot that says something changed ends the older ones of these
    # slots too: leaving a job ends the hours of it ("Left nursing! 现在在学校做行政" ends "I work
    # night shifts as an ICU nurse"). Without a change ("I work at Google") they stand.
    change_ends: tuple[Name, ...] = ()
    examples: tuple[str, ...] = ()
    not_examples: tuple[str, ...] = ()

    def option(self, text: str) -> str | None:
        """The first of ``options`` the text names (``text`` already normalized), else None."""
        return next(
            (name for name, rule in self.options.items() if rule.compiled.search(text)), None
        )

    def same_value(self, a: str, b: str) -> bool:
        """Whether two texts of this slot name the same one of its options."""
        value = self.option(normalize(a))
        return value is not None and value == self.option(normalize(b))

    def keywords_named(self, text: str) -> frozenset[str]:
        """The ``keywords`` of this slot a text names, lower-cased ("pytest", "sqlite"), but
        for the ``generic`` ones, which name the slot rather than a value of it."""
        if self.keyword_regex is None:
            return frozenset()
        found = {m.group().lower() for m in self.keyword_regex.finditer(normalize(text))}
        return frozenset(found - self._generic_lowered)

    @cached_property
    def _generic_lowered(self) -> frozenset[str]:
        return frozenset(g.lower() for g in self.generic)

    def restates(self, older: str, newer: str) -> bool:
        """Whether the newer text names the very values of this slot the older names, by its
        keywords ("dash 的子命令都配 pytest 测试" after "dash: Python, Typer, pytest"):
        the same value said again, with something else, is no new one. Naming fewer is a
        choice made ("dash uses MySQL" after "Postgres or MySQL?"), so both must name the
        same. Patterns are not read here: what they match may hold no value ("moved to")."""
        named = self.keywords_named(newer)
        return bool(named) and named == self.keywords_named(older)

    def values_named(self, text: str) -> frozenset[str]:
        """What of this slot a text names, as written (lower-cased): its keywords (but the
        ``generic`` ones) and what its patterns take ("mysql", "provider")."""
        folded = normalize(text)
        found = {
            m.group().lower() for rule in self.patterns for m in rule.compiled.finditer(folded)
        }
        return frozenset(found) | self.keywords_named(text)

    def aspects_of(self, text: str) -> frozenset[str]:
        """The ``aspects`` a ``normalize``d text names."""
        return frozenset(name for name, rule in self.aspects.items() if rule.compiled.search(text))

    def apart(self, a: str, b: str) -> bool:
        """Whether two texts of this slot name ``aspects`` and none in common."""
        if not self.aspects:
            return False
        named_a = self.aspects_of(normalize(a))
        named_b = self.aspects_of(normalize(b))
        return bool(named_a) and bool(named_b) and not named_a & named_b

    @cached_property
    def keyword_regex(self) -> re.Pattern[str] | None:
        if not self.keywords:
            return None
        # longest first, so "JetBrains Rider" is read whole, not as "JetBrains"
        ordered = sorted(self.keywords, key=len, reverse=True)
        return re.compile("|".join(_keyword_regex(k) for k in ordered), re.IGNORECASE)

    @cached_property
    def keyword_hints(self) -> tuple[str, ...]:
        # The first word of each keyword, lower-cased: a cheap substring pre-check.
        return tuple(dict.fromkeys(k.split()[0].lower() for k in self.keywords))

    @cached_property
    def said(self) -> tuple[str, ...]:
        """Its examples and its patterns': how people state a value of it."""
        return (*self.examples, *(e for rule in self.patterns for e in rule.examples))

    @cached_property
    def moved_to_regex(self) -> re.Pattern[str] | None:
        # one of ``keywords`` right after a word of moving to it: "to", "onto", "换到", "改用"
        if not self.keywords:
            return None
        values = "|".join(_keyword_regex(k) for k in self.keywords)
        return re.compile(
            rf"(?i)(?<![a-z])(?:to|onto|into)\s+(?:the\s+)?(?:{values})"
            rf"|(?:换成|换到|换了|改用|改成|转到|转用|迁到|迁移到|搬到)\s*(?:{values})"
        )

    def moved_to(self, text: str) -> bool:
        """Whether a ``normalize``d text moves to one of ``keywords``."""
        regex = self.moved_to_regex
        return regex is not None and regex.search(text) is not None

    def holds(self, memory_type: str | None) -> bool:
        """Whether a memory of this type may be in this slot (any, when not known)."""
        return memory_type is None or not self.types or memory_type in self.types

    def refuses(self, text: str) -> bool:
        """Whether an ``unless`` rule refuses a ``normalize``d text."""
        return any(rule.compiled.search(text) for rule in self.unless)

    def matches(self, text: str, lowered: str | None = None) -> bool:
        """Whether the text is about this slot; ``lowered`` is ``text.lower()`` if known."""
        if self.refuses(text):
            return False
        kw = self.keyword_regex
        if kw is not None:
            low = text.lower() if lowered is None else lowered
            if any(h in low for h in self.keyword_hints) and kw.search(text):
                return True
        return any(rule.compiled.search(text) for rule in self.patterns)


class TopicSpec(_Model):
    """A subject area that links a memory to the requests it matters to although they
    share no words ("allergic to peanuts" and "plan a dinner menu" are both ``food``)."""

    name: Name
    description: str = ""
    keywords: tuple[NonEmpty, ...] = ()
    patterns: tuple[RuleSpec, ...] = ()
    # a text matching one of these is not about the topic whatever else matches: what a
    # rabbit may eat is no question about the user's food
    unless: tuple[RuleSpec, ...] = ()
    # requests of these topics are about a memory of this one too (a health condition
    # matters to a workout plan)
    reaches: tuple[Name, ...] = ()
    # a memory about this topic is not about these, though its words say them too: a
    # child's school year is the child's, but it matters to a request about the child or the
    # family, not to every day out a young child's age matters to. Requests keep both.
    displaces: tuple[Name, ...] = ()
    # a memory in one of these slots is about this topic whatever its words ("我在字节跳动做
    # 推荐算法" is about work although it names no job word)
    slots: tuple[Name, ...] = ()
    # a memory holds it by its patterns and slots, not by its keywords, which are signs for
    # requests only: the weather in a request is about where the user lives, the weather in
    # "偏头痛，天气一变就犯" is about a headache; "I live in", "flying to Porto" say it
    keywords_for_requests: bool = False
    # a memory about it is never ended by one that says something changed (ChangesSpec): a
    # condition outlasts a change of habit, and another person's facts are theirs
    lasting: bool = False
    # about someone else (a child, a partner): what changed for them ends nothing of the
    # user's ("my husband quit smoking" leaves "I smoke after dinner" as it was)
    others: bool = False
    # memory types that hold this topic whatever their words: every live plan and goal is on
    # the user's agenda, so a request to plan the user's week meets each of them
    held_by: tuple[Name, ...] = ()
    # memory types that may hold this topic (none: any); a request may always be about it.
    # A day of the week links a plan for that day to a request about it, not a weekly habit.
    types: tuple[Name, ...] = ()
    examples: tuple[str, ...] = ()
    not_examples: tuple[str, ...] = ()

    @cached_property
    def _words(self) -> frozenset[str]:
        # One plain ASCII word each: a set lookup per request word (a regex alternation of
        # every keyword costs a scan per position, on the request path).
        return frozenset(k.lower() for k in self.keywords if _PLAIN_WORD.fullmatch(k.lower()))

    @cached_property
    def _phrases(self) -> dict[str, re.Pattern[str]]:
        """Other ASCII keywords by their longest word: only the phrases whose word a text
        holds (a substring check) are tried, with their boundaries (one alternation of every
        phrase would be tried at each position of every text holding any of the words)."""
        by_hint: dict[str, list[str]] = {}
        for k in self.keywords:
            if k.isascii() and not _PLAIN_WORD.fullmatch(k.lower()):
                by_hint.setdefault(_hint(k), []).append(_keyword_regex(k))
        return {h: re.compile("|".join(rs), re.IGNORECASE) for h, rs in by_hint.items()}

    @cached_property
    def _cjk(self) -> tuple[str, ...]:
        # matched inside the lower-cased text, so that an accented Latin word counts at a
        # sentence's start too ("Rhône especially")
        return tuple(k.lower() for k in self.keywords if not k.isascii())

    def matches(
        self, text: str, lowered: str | None = None, words: frozenset[str] | None = None
    ) -> bool:
        """Whether ``text`` (NFKC-folded) is about this topic; ``lowered`` and ``words`` (its
        plain ASCII words, see ``plain_words``) are computed once by a caller testing many
        topics."""
        low = text.lower() if lowered is None else lowered
        found = plain_words(low) if words is None else words
        # each phrase is tried only where its word stands (matches_beyond_keywords); what
        # ``unless`` names is left out once the topic matched, as topics_of does
        return (
            bool(found & self._words)
            or any(k in low for k in self._cjk)
            or self.matches_beyond_keywords(text, hinted=True, lowered=low)
        ) and not self.excluded(text, low)

    def excluded(self, text: str, lowered: str) -> bool:
        """Whether one of ``unless`` matches the text (``lowered``: it lower-cased)."""
        return any(r.compiled.search(text) for r in self.unless if r.tried_on(lowered))

    def phrase_found(self, text: str, lowered: str) -> bool:
        """Whether one of its multi-word keywords is in the text, each tried only if the
        text (``lowered``: lower-cased) holds its longest word."""
        return any(phrase.search(text) for hint, phrase in self._phrases.items() if hint in lowered)

    def matches_beyond_keywords(self, text: str, *, hinted: bool, lowered: str) -> bool:
        """Its multi-word keywords and its patterns (its plain and CJK keywords aside);
        ``hinted``: the text may hold the longest word of one of its phrases (False skips
        them; each is tried only where its word stands); ``lowered``: the text lower-cased,
        for the phrases' words and the patterns' ``needs``."""
        if hinted and self.phrase_found(text, lowered):
            return True
        return any(r.compiled.search(text) for r in self.patterns if r.tried_on(lowered))


_PLAIN_WORD = re.compile(r"[a-z0-9]+")


def _hint(phrase: str) -> str:
    """The word a text must hold for ``phrase`` to be looked for: its longest content word
    (the last of equals), the rarest, so that "at work" or "what should I order" is tried
    only on a text that holds "work" or "order"."""
    words = phrase.lower().split()
    content = [w for w in words if w not in STOPWORDS] or words
    return max(reversed(content), key=len)


def plain_words(lowered: str) -> frozenset[str]:
    """The plain ASCII words of lower-cased text, with plural words also in the singular
    ("serums" finds "serum"): topic keywords are matched against them."""
    words = set(_PLAIN_WORD.findall(lowered))
    for word in list(words):
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            words.add(word[:-1])
            if word.endswith("es"):
                words.add(word[:-2])
            if word.endswith("ies"):
                words.add(word[:-3] + "y")
    return frozenset(words)


class ResemblanceSpec(_Model):
    """Standing by resemblance: a memory whose writer did not say how it applies, that no
    rule makes standing and that has no one-valued slot, of one of ``types`` and global
    scope, is standing when it reads like the policy's examples of standing wishes
    (``always``) more than like its examples of topical facts (``relevant``): of its
    ``neighbours`` nearest examples most are standing ones, the nearest standing one is at
    least ``similarity`` close, and at least ``margin`` closer than the nearest topical one.
    Wishes about answers come in more wordings than rules can list ("Stop flattering me",
    "别拍马屁"); the examples carry the meaning across words and languages
    (``gateway.memory.resemblance``).
    """

    neighbours: PositiveInt = 7
    similarity: Fraction = 0.45
    margin: Fraction = 0.15
    types: tuple[Name, ...] = ()  # none: off
    always: tuple[NonEmpty, ...] = ()
    relevant: tuple[NonEmpty, ...] = ()


class SlotResemblanceSpec(_Model):
    """A slot by resemblance: a memory of one of ``types`` that no slot's rules place,
    whose writer named no slot, takes one of ``slots`` when it reads like that slot's
    examples (its ``examples`` and its patterns') more than like anything else: the nearest
    of that slot's examples is at least ``similarity`` close (cosine), and at least
    ``margin`` closer than the nearest example of any other slot, any slot's
    ``not_examples`` or ``unless`` examples and ``applies.resemblance.relevant``; and the
    slot's ``types`` and ``unless`` rules allow it. A one-valued subject changed
    back comes in more wordings than rules list ("哎还是中文吧，英文读着太吃力了",
    "Swap the miles for kilometres from now on"); without its slot the newer memory
    would leave the older one standing (``gateway.memory.resemblance``).
    """

    similarity: Fraction = 0.6
    margin: Fraction = 0.2
    types: tuple[Name, ...] = ()  # none: off
    slots: tuple[Name, ...] = ()


class AppliesSpec(_Model):
    """How a memory applies when its writer does not say.

    ``always``: a standing memory, injected into every request in its scope whatever the
    request is about (answer language, format, accessibility, a project's stack).
    ``relevant``: only when the request is about it (an allergy when food comes up).
    A memory is standing when its scope kind or its slot is listed or a pattern matches its
    words (a wish about answers: "我是聋人，回答请用简单的书面语" is about the answers' tone),
    but for one in a slot of ``worked_in``: what the user works in (an editor, an OS, a
    spreadsheet program: "写代码都用 VS Code") is no wish about answers however it is
    worded, and reaches the requests of its topic;
    otherwise, when one of ``relevant`` matches its words it applies when relevant, whatever
    its type (the shipped rules list none; an operator may keep a kind of need topical);
    otherwise it is standing when its type is listed, and else it gets ``default``.
    """

    default: Literal["always", "relevant"] = "relevant"
    types: tuple[Name, ...] = ()
    slots: tuple[Name, ...] = ()
    worked_in: tuple[Name, ...] = ()
    scopes: tuple[Literal["project", "task"], ...] = ()
    relevant: tuple[RuleSpec, ...] = ()
    patterns: tuple[RuleSpec, ...] = ()
    not_examples: tuple[str, ...] = ()
    resemblance: ResemblanceSpec = ResemblanceSpec()


class MiningRuleSpec(RuleSpec):
    """One row of the miner's rule table: a sentence its regex matches is a ``type`` memory."""

    name: Name
    type: Name


_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        (
            "january jan 一",
            "february feb 二",
            "march mar 三",
            "april apr 四",
            "may 五",
            "june jun 六",
            "july jul 七",
            "august aug 八",
            "september sep sept 九",
            "october oct 十",
            "november nov 十一",
            "december dec 十二",
        )
    )
    for name in names.split()
}
_NUMERALS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "twelve": 12,
    "半": 0.5,
    "一": 1,
    "两": 2,
    "二": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
    "十": 10,
}


def _count(word: str) -> float | None:
    """A small count as users write it: 3, three, 三, 十二, 两 (None: not one)."""
    word = word.strip().lower()
    if word.isdigit():
        return int(word)
    if word in _NUMERALS:
        return _NUMERALS[word]
    # 十二, 二十, 三十一: a count or a day of the month in Chinese numerals, up to 三十九 (the
    # rules that read a count take no numeral after 百 or 千: "一百二十天" is no twenty)
    tens, ten, units = word.partition("十")
    if ten and tens in ("", "二", "三") and (not units or units in tuple("一二三四五六七八九")):
        return (_NUMERALS[tens] if tens else 1) * 10 + (_NUMERALS[units] if units else 0)
    return None


def _month_end(year: int, month: int) -> datetime:
    """The first instant after ``month`` of ``year`` (UTC): the month's end."""
    return datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)


class HorizonRule(RuleSpec):
    """A time a goal or plan names and how long it lasts from then on. Exactly one of:
    ``days`` after it was saved (times the count its ``n`` or ``m`` group names, if it has
    one: a regex names no group twice, so a second alternative's count is ``m``),
    ``month_end`` (the end of the month it was saved in, 0, or of the next, 1; or the end of
    its ``by_day`` for a part of it: "下个月初", the 10th), ``year_end``
    (likewise for the calendar year), ``named_month`` (the end of the next month its
    ``month`` group names: "in March", "3月"; of that year's, if a ``year`` group names one),
    ``month`` (the end of the next such month, for a holiday always in it: "国庆", 10).
    A named month with a ``day`` group is a date ("due June 28", "6月28日"): it ends when
    that day does. ``day_of_month``: a day its ``day`` group names without a month ("on the
    20th", "20号"), the next such day. Calendar ends are UTC's. Every match counts and the
    latest end wins, so "from June 20 to June 27" lasts until the 27th is over."""

    days: PositiveInt | None = None
    # a span counted from when it was said ("for the next three days", "接下来两周"): a
    # wish of any type said for it lapses with it (``HorizonsSpec.spell_types``)
    spell: bool = False
    month_end: Literal[0, 1] | None = None
    # with ``month_end``: the part of that month named ("下个月初", "early next month"), so the
    # end is this day of it instead of the month's last
    by_day: Annotated[int, Field(ge=1, le=28)] | None = None
    year_end: Literal[0, 1] | None = None
    named_month: bool = False
    day_of_month: bool = False
    month: Annotated[int, Field(ge=1, le=12)] | None = None

    def until(self, text: str, saved: datetime) -> datetime | None:
        """When a memory saved at ``saved`` whose text this rule matches ends (None: the
        rule does not match, or its count or month is not one it can read)."""
        ends = [end for found in self.compiled.finditer(text) if (end := self._end(found, saved))]
        return max(ends) if ends else None

    def _end(self, found: re.Match[str], saved: datetime) -> datetime | None:
        if self.days is not None:
            n: float | None = 1
            groups = found.groupdict()
            if "n" in groups or "m" in groups:  # "m": a second alternative's count
                n = _count(groups.get("n") or groups.get("m") or "")
            return saved + timedelta(days=self.days * n) if n else None
        if self.month_end is not None:
            if self.by_day is not None:
                # the end of that day: the month's first instant, by_day days on
                end = _month_end(saved.year, saved.month - 1 + self.month_end)
                end += timedelta(days=self.by_day)
                if end > saved:
                    return end
                # a part of this month already past names no earlier end than the month's
            return _month_end(saved.year, saved.month + self.month_end)
        if self.year_end is not None:
            return datetime(saved.year + 1 + self.year_end, 1, 1, tzinfo=UTC)
        if self.month is not None:
            return _next_month_end(saved, self.month, found.group(0))
        if self.day_of_month:
            day_said = found.group("day")
            return _next_day_end(saved, int(day_said)) if day_said else None
        month = _MONTHS.get((found.group("month") or "").lower())
        if month is None and (found.group("month") or "").isdigit():
            month = int(found.group("month"))
        if month is None or not 1 <= month <= 12:
            return None
        year = found.groupdict().get("year")
        day = found.groupdict().get("day")
        if day:
            number = _count(day)
            if number is None or number != int(number):
                return None
            return _day_end(saved, int(year) if year else None, month, int(number))
        if year:  # "by June 2028", "2028年3月前": that year's month
            end = _month_end(int(year), month)
            return end if end > saved else None
        return _next_month_end(saved, month, found.group(0))


def _day_end(saved: datetime, year: int | None, month: int, day: int) -> datetime | None:
    """The end of a date: of ``year`` if given (None once past), else the next such day (a
    date already past is next year's); None for a day the month does not have."""
    for at in (year,) if year else (saved.year, saved.year + 1):
        try:
            end = datetime(at, month, day, tzinfo=UTC) + timedelta(days=1)
        except ValueError:
            return None
        if end > saved:
            return end
    return None


# how many days before the day a memory is saved a day of the month it names is read as
# past rather than next month's
_DAY_JUST_PAST = 10


def _next_day_end(saved: datetime, day: int) -> datetime | None:
    """The end of the next ``day`` of a month after ``saved``: this month's if it is still
    to come, else the next month that has it. A day up to ten days before ``saved`` is one
    just past ("20号面试挂了" said on the 25th), which names no end (None)."""
    if 0 < saved.day - day <= _DAY_JUST_PAST:
        return None
    for ahead in range(3):
        index = saved.month - 1 + ahead
        try:
            end = datetime(saved.year + index // 12, index % 12 + 1, day, tzinfo=UTC)
        except ValueError:
            continue
        if end + timedelta(days=1) > saved:
            return end + timedelta(days=1)
    return None


def _next_month_end(saved: datetime, month: int, said: str) -> datetime:
    """The end of the next ``month``: one already past is next year's, and "next December"
    said in December is next year's too."""
    ahead = month < saved.month or (month == saved.month and said.lower().startswith("next"))
    return _month_end(saved.year + ahead, month)


class UndatedRule(RuleSpec):
    """A kind of goal or plan that lasts ``days`` after it was saved when it names no time;
    only memories of ``types`` (none: every type horizons end), so that a plan to "cut down on
    the guest list" stays a plan."""

    days: PositiveInt
    types: tuple[Name, ...] = ()


class HorizonsSpec(_Model):
    """When a goal or plan ends, by the time its words name: "tomorrow" ends in days, "明年"
    at the end of next year. A memory of one of ``types`` that names none keeps its type's
    ``ttl_days``, unless it is of a kind ``undated`` gives a lifetime; one that names several
    lasts until the latest. An explicit expiry given with the memory wins."""

    types: tuple[Name, ...]
    rules: tuple[HorizonRule, ...]
    # types that last until changed, unless said for a span of time: "接下来三天都在赶稿，
    # 回复越短越好" is a wish for three days, "keep answers short" one for good
    spell_types: tuple[Name, ...] = ()
    # a wish of those types that says it holds every time or from now on lasts until
    # changed, whatever span it also names ("每次总结这周的工作，都用三段式")
    spell_unless: tuple[RuleSpec, ...] = ()
    # a goal or plan of ``types`` that names no time may still last longer than its type's
    # ttl by its kind: a habit being changed ("trying to cut down on sugar") is a season's
    # work, not a month's. Consulted only when no rule above matched; the longest wins.
    undated: tuple[UndatedRule, ...] = ()
    not_examples: tuple[str, ...] = ()

    @cached_property
    def _spell_rules(self) -> tuple[HorizonRule, ...]:
        return tuple(rule for rule in self.rules if rule.spell)

    def until(self, text: str, memory_type: str, saved: datetime) -> datetime | None:
        """When a memory of ``memory_type`` saved at ``saved`` ends by the horizon its
        ``text`` names (None: its type's default applies, or for a type of ``spell_types``,
        it lasts until changed). A date or a month names when a plan happens, so it ends
        only the types of ``types``; a span (``HorizonRule.spell``) ends either, unless the
        wish says it holds every time (``spell_unless``)."""
        if not text or (memory_type not in self.types and memory_type not in self.spell_types):
            return None
        folded = normalize(text)
        if memory_type in self.types:
            rules = self.rules
        elif _matches_folded(self.spell_unless, folded, folded.lower()):
            return None
        else:
            rules = self._spell_rules
        ends = [end for rule in rules if (end := rule.until(folded, saved)) is not None]
        if not ends and memory_type in self.types:
            lowered = folded.lower()
            ends = [
                saved + timedelta(days=rule.days)
                for rule in self.undated
                if (not rule.types or memory_type in rule.types)
                and rule.tried_on(lowered)
                and rule.compiled.search(folded)
            ]
        return max(ends) if ends else None


class MiningSpec(_Model):
    """Which sentences of a user message become candidate memories (see ``gateway/memory/mine.py``).

    Every regex is a ``RuleSpec``: its examples, if any, are checked at load.
    """

    questions: tuple[RuleSpec, ...]
    filler: RuleSpec
    corrections: tuple[RuleSpec, ...]
    remember: tuple[RuleSpec, ...]
    rules: tuple[MiningRuleSpec, ...]
    fallback_type: Name
    horizon: RuleSpec

    def rule_for(self, text: str) -> MiningRuleSpec | None:
        """The first rule whose regex matches ``text`` (already normalized), else None."""
        for rule in self.rules:
            if rule.compiled.search(text):
                return rule
        return None


class FusionWeights(_Model):
    vector: Fraction
    text: Fraction


class GeneralQuestionsSpec(_Model):
    """Requests that ask how the world is, not what the user should do: "Why do dogs wag
    their tails?", "婚礼抛捧花的传统是怎么来的？". A request matching one of ``asks`` and
    none of ``about_the_user`` (a word for the user or their household, or one asking for
    advice) gets no topical memory but one naming someone or something the request names:
    the user's old beagle does not belong in an answer about dogs in general, however
    close in meaning the two are. Standing memories still apply. `examples` must be
    general; `not_examples` must not."""

    asks: tuple[RuleSpec, ...] = ()
    about_the_user: tuple[RuleSpec, ...] = ()
    examples: tuple[str, ...] = ()
    not_examples: tuple[str, ...] = ()


class WritingSpec(_Model):
    """Requests to write a text for someone to read (a note, an email, a listing, a card,
    names for a game): what the text is about (a house for sale, food in the office fridge,
    a broken water heater) is the readers' business, not the user's life, so a memory is
    linked to it by a shared topic only through one of ``links``: who writes or is written
    to (a child, a partner, the user's work) and when (next week's leave). Every other test
    stands: meaning, shared words, a name, a plan due within days. `examples` must be such
    requests; `not_examples` must not (a packing list or a meal plan is for the user).
    ``links`` the policy has no topic of are passed over (an overlay may replace the
    topics)."""

    asks: tuple[RuleSpec, ...] = ()
    links: tuple[Name, ...] = ()
    examples: tuple[str, ...] = ()
    not_examples: tuple[str, ...] = ()


class RequestExample(_Model):
    """A request, the memory topics whose memories would shape a good answer to it although
    it does not name them (``topics``), and those a reader might link to it that would not
    (``not_topics``)."""

    text: NonEmpty
    topics: tuple[Name, ...] = ()
    not_topics: tuple[Name, ...] = ()


class ResembledTopicsSpec(_Model):
    """Memory topics a request takes from the example requests it reads like.

    A request's words name its own topics; which of the user's memories matter to it is a
    further step that words often do not take ("what could I put out for the book club?"
    says nothing of a sesame allergy, three days in Chongqing nothing of a knee bad on
    steps). Of the request's ``neighbours`` nearest ``examples`` (cosine of meaning), a topic
    is taken when the share of them naming it in ``topics``, less the share naming it in
    ``not_topics``, is at least ``share``. A topical memory about a topic so taken is
    relevant when its meaning is at least ``min_similarity`` close: a topic alone, with an
    unrelated meaning, is no link, and a topic such as health holds facts of every kind.
    Where the request's words link nothing (in a project, a work task, a question about how
    the world is) this does not either; a text to write takes only ``writing.links``. The
    topics in ``words_only``, those held by type (the agenda) and those the policy has none
    of (an overlay may replace the topics) are never taken. No examples: off.
    """

    neighbours: PositiveInt = 5
    share: Annotated[float, Field(gt=0.0, le=1.0)] = 0.4
    min_similarity: Annotated[float, Field(ge=-1.0, le=1.0)] = 0.2
    # topics only the request's own words may give: when a plan is (this Thursday, next
    # week) is said, never a matter of meaning; topics held by type (the agenda) neither
    words_only: tuple[Name, ...] = ()
    examples: tuple[RequestExample, ...] = ()


class SomeoneCloseSpec(_Model):
    """A memory about someone the user names ("Kai 最近迷上了手冲咖啡", "Doudou loves
    dinosaurs") for a request about someone close to the user (one of ``topics``: a
    boyfriend's birthday present, a grandson's birthday wish): the request says "my
    boyfriend", the memory his name, and which of the user's people is which the memories
    rarely say. Relevant at the likelihood ``at`` (none: never), unless the memory is about
    one of ``not_about`` (a pet's name reads like a person's). Names of either list the
    policy has no topic of are passed over."""

    topics: frozenset[Name] = frozenset()
    not_about: frozenset[Name] = frozenset()
    at: Annotated[float, Field(gt=0.0, le=1.0)] | None = None


class FittedRelevanceSpec(_Model):
    """A relevance fitted to written scenarios (``gateway.memory.fitted``): one weight a
    dimension of ``embedder``'s vectors for their products, one for the memory's vector and
    one for the request's alone, directions of the request and of the memory whose products
    add to them (``request_factors``, ``memory_factors``), and a ``bias``, from which a
    topical memory's likelihood of being needed by a request follows. Where the request's
    words may link the user's life at all (not for a memory of the user's life in a project,
    in a task of ``meaning_only_in_tasks`` or in a question about how the world is), a
    memory at least ``add_at`` likely is relevant, one about other topics than the request's
    only at ``add_off_topic_at`` and when it shares with the request no word a topic or slot
    reads as a subject (about other topics the two use it in two senses, and the shared word
    lifts the likelihood: Java the island, Java at work), and one below ``drop_below`` is
    not, unless it is in a slot linked by a topic naming the slot (or in one no topic
    names), a name both write links it, or it shares a topic with the request that is not
    one of ``drop_through``: broad topics (food, health) hold facts of every kind, where a
    shared topic says little. Below ``drop_shared_below`` any shared topic but a ``narrow``
    one says as little (a stray word links what the user does as often as its meaning does);
    a narrow one (a pacemaker and airport security) is a need the fit does not know better.
    Nor is a memory of one of the ``kept`` topics sharing a topic with the request dropped
    (an allergy, where food is shared). Names of these lists the policy has no topic of are
    passed over (an overlay may replace the topics). Weights for another embedder than the
    gateway's, or none: off."""

    embedder: str = ""
    weights: tuple[float, ...] = ()
    # what the memory's and the request's vector say alone (none: the products only)
    memory_weights: tuple[float, ...] = ()
    request_weights: tuple[float, ...] = ()
    # directions of the request and of the memory whose products add to the likelihood, one
    # row of each a direction (none: no term across dimensions)
    request_factors: tuple[tuple[float, ...], ...] = ()
    memory_factors: tuple[tuple[float, ...], ...] = ()
    bias: float = 0.0
    add_at: Annotated[float, Field(gt=0.0, le=1.0)] = 0.6
    # ... and one about other topics than the request's at this likelihood, or ``add_at`` if
    # higher (none: never)
    add_off_topic_at: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    drop_below: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.15
    drop_through: tuple[Name, ...] = ()
    # ... but a memory of one of these topics sharing a topic with the request is never
    # dropped by ``drop_below`` nor ``drop_shared_below``: an allergy is what a shared food
    # topic is there for, which the fit does not read from its wording
    kept: frozenset[Name] = frozenset()
    # ... and a memory sharing only other topics than ``narrow`` ones is not relevant below
    # this likelihood (none: never): a topic of what the user or the family does (study,
    # music, the children) holds facts of every kind too, which a likelihood this low says
    # the request does not need; a narrow one (a hearing aid for a phone call) is a need
    # the fit does not know better
    drop_shared_below: Annotated[float, Field(ge=0.0, lt=1.0)] | None = None
    narrow: frozenset[Name] = frozenset()
    someone_close: SomeoneCloseSpec = SomeoneCloseSpec()

    @model_validator(mode="after")
    def _consistent(self) -> FittedRelevanceSpec:
        if self.drop_below >= self.add_at:
            raise ValueError("drop_below must be below add_at")
        if self.drop_shared_below is not None and self.drop_shared_below > self.drop_below:
            raise ValueError("drop_shared_below must not be above drop_below")
        if self.weights and not self.embedder:
            raise ValueError("weights need the embedder they were fitted for")
        alone = (*self.memory_weights, *self.request_weights)
        factors = [v for row in (*self.request_factors, *self.memory_factors) for v in row]
        if not all(math.isfinite(w) for w in (*self.weights, *alone, *factors, self.bias)):
            raise ValueError("weights and bias must be finite numbers")
        for name, values in (("memory", self.memory_weights), ("request", self.request_weights)):
            if values and self.weights and len(values) != len(self.weights):
                raise ValueError(f"{name}_weights need one weight a dimension, as weights")
        if len(self.request_factors) != len(self.memory_factors):
            raise ValueError("request_factors and memory_factors need as many rows")
        rows = (*self.request_factors, *self.memory_factors)
        if rows and not self.weights:
            raise ValueError("factors need the weights they were fitted with")
        if any(len(row) != len(self.weights) for row in rows):
            raise ValueError("every row of the factors needs one value a dimension, as weights")
        return self


class RelevanceSpec(_Model):
    """Whether a topical memory is relevant at all; the weights only order the relevant ones.

    Every test is independent of the index (no BM25 score decides), so a bar keeps its
    meaning as the index grows or mixes tenants.
    """

    similarity: Fraction
    shared_terms: PositiveInt
    shared_terms_min_similarity: Fraction
    off_topic_similarity: Fraction
    topic_min_similarity: Annotated[float, Field(ge=-1.0, le=1.0)]
    # A memory written in the other language than the request (one in Chinese, the other
    # not) meets the similarity bars (``similarity``, ``off_topic_similarity``) this much
    # lower: the local embedder rates the same pair of meanings lower across languages than
    # within one, and a memory in the other language shares no words or names to make up
    # for it.
    other_language_discount: Annotated[float, Field(ge=0.0, le=0.2)] = 0.0
    # a memory naming someone or somewhere the request names too ("Lily", "Toronto": a
    # word both write capitalised away from a sentence's start) is relevant unless its
    # meaning is opposed (topic_min_similarity)
    shared_name: bool = False
    # A memory said for the coming days (saved at most this many days before it ends: a race
    # this Sunday, the dentist on Wednesday) is relevant on one content word it shares with
    # the request, meaning not opposed (topic_min_similarity): what the user is about to do
    # is what they most likely ask about ("the Great North Run this Sunday" for "the night
    # before a half marathon"). About other topics than the request's, the word must be one
    # no topic or slot reads as a subject ("python") and the meaning not unrelated
    # (shared_terms_min_similarity). A memory's span is read from when it was saved. 0: off.
    due_within_days: Annotated[int, Field(ge=0)] = 0
    # In a request naming a project, a memory of the user's life (global scope) is relevant
    # on its meaning alone (``similarity``): the request's words there describe what the
    # project is about (a recipe app is "about" food), not the user, so a shared topic, word
    # or name says nothing of whether a nut allergy matters to a page layout.
    meaning_only_in_projects: bool = False
    # ... but for the user's tools, in a project or in a task of ``meaning_only_in_tasks``:
    # a memory in one of these topics' slots (an editor, an OS, a framework) that shares the
    # topic with the request is about how the user works on any project's code ("switched
    # to VS Code" for setting up a debugger in a project). Names the policy has no topic of
    # are passed over (an overlay may replace the topics).
    tools_in_projects: tuple[Name, ...] = ()
    # Likewise in a request naming one of these tasks ("work"): a handover of patients'
    # health or a class handout is the work's subject, not the user's, so the user's bad back
    # or a son's PhD does not reach it by a shared topic; a job fact close in meaning still
    # does, and so does a plan of the coming days the request names by a word no topic
    # reads as a subject (``due_within_days``: "the agency call"). Not a task about the
    # user's own life ("travel": the kids go on the ski trip).
    meaning_only_in_tasks: tuple[Name, ...] = ()
    # In a project, though, a memory of one of these types (a plan, a goal) that names the
    # project the request is sent with ("Goal: launch the raftbook booking flow by the end
    # of July", for the coming weeks' plan of raftbook; ``names_project``) is about that
    # work, while it runs and with a meaning not unrelated (``shared_terms_min_similarity``:
    # a one-word id is often an everyday word, "shop"). The fitted relevance is read for
    # no memory of the user's life in a project or such a task; tried for plans, it rated a
    # dated goal of the user's life (a wedding to lose weight for) about as likely for a
    # week's work as the work's own deadlines.
    project_plans: frozenset[Name] = frozenset()
    general_questions: GeneralQuestionsSpec = GeneralQuestionsSpec()
    writing: WritingSpec = WritingSpec()
    resembled: ResembledTopicsSpec = ResembledTopicsSpec()
    fitted: FittedRelevanceSpec = FittedRelevanceSpec()


class LaneSpec(_Model):
    max: Annotated[int, Field(ge=0)]


class TopicalLaneSpec(LaneSpec):
    # Past ``max``, up to ``close_max`` when the further memories rank within
    # ``close_within`` of the best one: no arbitrary cut between memories that fit the
    # request about equally well.
    close_max: Annotated[int, Field(ge=0)] = 0
    close_within: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    # ... or within ``fresh_within`` when the memory brings a topic of the request that none
    # of those taken so far shares: another side of the request, not a second memory of one
    fresh_within: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    # ... or, when no more than ``close_max`` pass relevance, for one the fitted relevance
    # rates at least this likely (FittedRelevanceSpec; none: never): a cut is there to keep
    # the best of many, and a short list has none to spare
    sure_at: Annotated[float, Field(gt=0.0, le=1.0)] | None = None


class TypicalitySpec(_Model):
    """How typical a memory is of requests in general, discounted from its ranking score.

    A memory close to many everyday requests ("resources that need a subscription") would
    otherwise come first for every request of its topic and crowd out the one that fits
    this request. Its typicality is the mean cosine to its ``neighbours`` nearest requests of
    ``requests`` (a sample of what people ask), worked out when the memory is written, edited
    or moved to another model (``gateway.memory.typicality``); its ranking score loses
    ``weight`` times that. It only orders memories already found relevant: no relevance bar
    reads it.
    """

    weight: Fraction = 0.0
    neighbours: PositiveInt = 5
    requests: tuple[NonEmpty, ...] = ()


class RecallSpec(_Model):
    max_memories: PositiveInt
    token_budget: PositiveInt
    standing: LaneSpec
    topical: TopicalLaneSpec
    relevance: RelevanceSpec
    weights: FusionWeights
    text_saturation: Annotated[float, Field(gt=0.0)] = 1.0
    topic_bonus: Fraction = 0.0
    typicality: TypicalitySpec = TypicalitySpec()
    candidate_pool: PositiveInt
    # The keyword-and-topic search's pool: every memory of the request's topics should reach
    # the ranking, not the first few the index returns (never fewer than candidate_pool).
    topic_pool: PositiveInt | None = None
    standing_pool: PositiveInt
    trace_ttl_days: PositiveInt
    trace_preview_chars: Annotated[int, Field(ge=0, le=200)] = 0
    # Past this the answer goes without memory (counted); bounds what a hung Redis costs.
    time_budget_ms: Annotated[int, Field(gt=0, le=60_000)] = 1000


class DedupSpec(_Model):
    similarity: Fraction


class ConflictSpec(_Model):
    similarity: Fraction
    similarity_many: Fraction
    change_similarity: Fraction


class ArchiveSpec(_Model):
    retention_days: PositiveInt


class CandidatesSpec(_Model):
    ttl_days: PositiveInt


class LimitsSpec(_Model):
    max_content_chars: PositiveInt


class Policy(_Model):
    """The whole policy. Build it with ``load_policy``; never mutate it."""

    version: Literal[1]
    types: dict[Name, TypeSpec]
    sources: dict[Name, SourceSpec]
    sensitivity: SensitivitySpec
    one_time: OneTimeSpec
    changes: ChangesSpec
    slots: tuple[SlotSpec, ...]
    slot_resemblance: SlotResemblanceSpec = SlotResemblanceSpec()
    applies: AppliesSpec
    topics: tuple[TopicSpec, ...]
    horizons: HorizonsSpec
    mining: MiningSpec
    recall: RecallSpec
    dedup: DedupSpec
    conflict: ConflictSpec
    archive: ArchiveSpec
    candidates: CandidatesSpec
    limits: LimitsSpec

    _origin: str = PrivateAttr(default="<policy>")

    @property
    def origin(self) -> str:
        """The file (or label) this policy was loaded from, for logs and errors."""
        return self._origin

    def type(self, name: str) -> TypeSpec:
        try:
            return self.types[name]
        except KeyError:
            raise KeyError(f"unknown memory type {name!r}") from None

    def has_type(self, name: str) -> bool:
        return name in self.types

    def tier(self, type_name: str) -> str:
        return self.type(type_name).tier

    def ttl_for(self, type_name: str) -> timedelta | None:
        """Default lifetime for a type; None means it does not expire on its own."""
        return self.type(type_name).ttl

    def source(self, name: str) -> SourceSpec:
        try:
            return self.sources[name]
        except KeyError:
            raise KeyError(f"unknown memory source {name!r}") from None

    def has_source(self, name: str) -> bool:
        return name in self.sources

    @property
    def recallable_sources(self) -> frozenset[str]:
        return frozenset(name for name, spec in self.sources.items() if spec.recall)

    def types_in_tier(self, tier: str) -> tuple[str, ...]:
        return tuple(name for name, spec in self.types.items() if spec.tier == tier)

    def slot(self, name: str) -> SlotSpec:
        for spec in self.slots:
            if spec.name == name:
                return spec
        raise KeyError(f"unknown slot {name!r}")

    def topics_reaching(self, request_topics: list[str]) -> frozenset[str]:
        """Memory topics that matter to a request about ``request_topics``: the same ones,
        and those that reach one of them. A request that names who it is about ("a day walk
        with my dad") is not about anyone else: another person's topic reaches it only by
        being named too, or by reaching one named (a grown child's are a child's): a son's
        exams are nothing to that walk, though a child's facts matter to a day out."""
        wanted = frozenset(request_topics)
        known = self._reaching
        found = known.get(wanted)
        if found is None:
            # every recall asks, with a few combinations of topics between them all
            if len(known) >= 4096:
                known.clear()
            named = wanted & self.others_topics
            found = known[wanted] = frozenset(
                t.name
                for t in self.topics
                if t.name in wanted
                or (
                    wanted.intersection(t.reaches)
                    and not (named and t.others and not named.intersection(t.reaches))
                )
            )
        return found

    @cached_property
    def _reaching(self) -> dict[frozenset[str], frozenset[str]]:
        return {}

    @cached_property
    def topics_basis(self) -> str:
        """A short digest of what a memory's topics and change reading are derived from
        (the topics, the slots, the change patterns and the release's matching code):
        stored memories read on another basis are read again
        (``Memories.follow_topic_rules``)."""
        rules = [t.model_dump(mode="json") for t in self.topics]
        rules += [s.model_dump(mode="json") for s in self.slots]
        rules += [r.model_dump(mode="json") for r in self.changes.patterns]
        text = __version__ + json.dumps(rules, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @cached_property
    def topic_keywords(self) -> TopicKeywords:
        return TopicKeywords.of(self.topics)

    @cached_property
    def slots_in_order(self) -> tuple[SlotSpec, ...]:
        """The slots in the order ``derive_slot`` tries them: standing ones first."""
        standing = set(self.applies.slots)
        return tuple(sorted(self.slots, key=lambda s: s.name not in standing))

    def both_stand(self, slot: str, older: str, newer: str) -> bool:
        """Whether two memories of a one-valued slot both stand: they are about different
        aspects of it (``SlotSpec.aspects``), or state the same one of its values (an option,
        or the very keywords the older names), which neither does when it says it changed
        ("I stopped doing keto" names keto too)."""
        spec = self.slot(slot)
        return spec.apart(older, newer) or (
            (spec.same_value(older, newer) or spec.restates(older, newer))
            and not says_change(older, self)
            and not says_change(newer, self)
        )

    def move_keeps(self, slot: str, older: str, newer: str) -> bool:
        """Whether a project's move whose main slot is another one keeps an older fact of
        ``slot`` it names too: it names the same value ("数据库还是 MySQL", "still
        Provider"), or another aspect of the slot."""
        spec = self.slot(slot)
        return spec.apart(older, newer) or bool(spec.values_named(older) & spec.values_named(newer))

    @cached_property
    def lasting_topics(self) -> frozenset[str]:
        """Topics whose memories no change statement ends (``TopicSpec.lasting``)."""
        return frozenset(t.name for t in self.topics if t.lasting)

    @cached_property
    def others_topics(self) -> frozenset[str]:
        """Topics about someone else, whose changes are theirs (``TopicSpec.others``)."""
        return frozenset(t.name for t in self.topics if t.others)

    @cached_property
    def displacing_topics(self) -> tuple[TopicSpec, ...]:
        """Topics whose memories hold no topic they displace (``TopicSpec.displaces``)."""
        return tuple(t for t in self.topics if t.displaces)

    @cached_property
    def request_keyword_topics(self) -> tuple[TopicSpec, ...]:
        """Topics a memory does not hold by their keywords (``keywords_for_requests``)."""
        return tuple(t for t in self.topics if t.keywords_for_requests)

    @cached_property
    def held_topics(self) -> frozenset[str]:
        """Topics a memory holds by its type alone (``TopicSpec.held_by``), not its words."""
        return frozenset(t.name for t in self.topics if t.held_by)

    @cached_property
    def keywords(self) -> frozenset[str]:
        """The words the topics and slots read as a subject, in either language (lower case,
        one word each: a phrase is never one shared word): a memory about other topics than
        the request's that shares one uses it in another sense ("Java" the island, Java at
        work). A compound the word splitter cuts ("苹果手机" is split in two) never matches
        a word of a text."""
        keywords = [k for t in self.topics for k in t.keywords]
        keywords += [k for s in self.slots for k in s.keywords]
        return frozenset(k.lower() for k in keywords if " " not in k)

    @cached_property
    def vocabulary(self) -> frozenset[str]:
        """The single words the topics and slots name in Latin letters ("java", "python",
        "rust"): written capitalised they are the names of things, not of the user's people
        and places."""
        return frozenset(k for k in self.keywords if k.isascii())

    @cached_property
    def one_valued_slots(self) -> frozenset[str]:
        return frozenset(s.name for s in self.slots if s.values == "one")

    @cached_property
    def slot_topics(self) -> dict[str, frozenset[str]]:
        """Each slot's topics: those that name it (``TopicSpec.slots``)."""
        named: dict[str, set[str]] = {}
        for topic in self.topics:
            for slot in topic.slots:
                named.setdefault(slot, set()).add(topic.name)
        return {slot: frozenset(topics) for slot, topics in named.items()}

    @cached_property
    def tool_slots(self) -> frozenset[str]:
        """The slots of the topics ``recall.relevance.tools_in_projects`` names (an editor,
        an OS, a spreadsheet program): what the user works with, whatever the project."""
        named = set(self.recall.relevance.tools_in_projects)
        return frozenset(slot for slot, topics in self.slot_topics.items() if topics & named)


# --------------------------------------------------------------------------------------------
# Classifying text by the policy's rules: one-time instructions, slots, how a memory applies,
# topics. The rules are written to work on Chinese text, which has no spaces.


_T2S = opencc.OpenCC("t2s")

# Spoken Cantonese and northern words for "I", "of", "have not", "see" ... read as the Mandarin
# the rules are written in ("我哋搬咗屋" is "我们搬了屋", "俺有糖尿病" is "我有糖尿病"), one
# character each. Not those that are Mandarin words or names too: 係 (folded to 系, as in
# 关系), 唔 ("唔该" is thanks), 俾 (俾斯麦), 咩 (a lamb's 咩咩), 乜 (a surname).
_DIALECT = str.maketrans(
    {
        "俺": "我",
        "哋": "们",
        "佢": "他",
        "嘅": "的",
        "咗": "了",
        "冇": "没",
        "喺": "在",
        "睇": "看",
        "嚟": "来",
        "啲": "些",
        "揾": "找",
        "攞": "拿",
        "瞓": "睡",
    }
)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
# A vulgar fraction after a number, as a decimal: NFKC would fold "3½" into "31⁄2", another age
_FRACTIONS = re.compile(r"(\d)([½¼¾])")
_DECIMALS = {"½": ".5", "¼": ".25", "¾": ".75"}


def _decimal(m: re.Match[str]) -> str:
    return m.group(1) + _DECIMALS[m.group(2)]


def normalize(text: str) -> str:
    """Fold what people type into what the rules are written for.

    NFKC turns full-width letters and digits (ＦａｓｔＡＰＩ, １２３) into ASCII; phones type
    curly apostrophes ("let’s"), the rules use straight ones; and the rules' Chinese is
    Simplified, so Traditional characters are converted (OpenCC's t2s: "幫我出五題化學題" is
    "帮我出五题化学题"), and a few spoken Cantonese and northern words read as Mandarin
    (``_DIALECT``).
    """
    if not text.isascii():
        text = _FRACTIONS.sub(_decimal, text)
    folded = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES)
    return folded if folded.isascii() else _T2S.convert(folded).translate(_DIALECT)


def matches_any(rules: Sequence[RuleSpec], text: str) -> bool:
    """Whether one of ``rules`` matches the folded text (each tried only where its ``needs``
    are met)."""
    folded = normalize(text)
    return _matches_folded(rules, folded, folded.lower())


def _matches_folded(rules: Sequence[RuleSpec], folded: str, lowered: str) -> bool:
    return any(rule.compiled.search(folded) for rule in rules if rule.tried_on(lowered))


def is_one_time(text: str, policy: Policy) -> bool:
    """True when the text is an instruction for this turn or conversation only."""
    return bool(text) and matches_any(policy.one_time.patterns, text)


def derive_slot(text: str, policy: Policy, memory_type: str | None = None) -> str | None:
    """The first slot whose rules match; else the slot ``memory_type`` is of
    (``SlotSpec.of_types``); None when neither. Slots that make a
    memory standing (``applies.slots``) come first, then the others, each in policy order:
    "keep answers short, I read them on my phone" is a wish about answers that mentions a
    phone, not a fact about the phone.

    With ``memory_type``, slots restricted to other types are skipped.
    """
    if not text:
        return None
    first = next(_slots_taking(text, policy, memory_type), None)
    if first is not None:
        return first.name
    if memory_type is not None:
        folded = normalize(text)
        lowered = folded.lower()
        for slot in policy.slots:
            if memory_type in slot.of_types:
                refused = (*slot.unless, *slot.of_types_unless)
                return None if _matches_folded(refused, folded, lowered) else slot.name
    return None


def one_valued_slots_named(text: str, policy: Policy, memory_type: str) -> list[str]:
    """Every one-valued slot whose rules take the text, in ``derive_slot``'s order: a
    project's move names several of its values at once ("后端迁到了 Flask + MySQL" names its
    framework and its database), where ``derive_slot`` keeps the first."""
    return [s.name for s in _slots_taking(text, policy, memory_type) if s.values == "one"]


def _slots_taking(text: str, policy: Policy, memory_type: str | None) -> Iterator[SlotSpec]:
    """The slots whose rules take the text, in ``derive_slot``'s order (lazily: the first
    is often all a caller wants); with ``memory_type``, not those restricted to other types."""
    folded = normalize(text)
    lowered = folded.lower()
    for slot in policy.slots_in_order:
        if slot.holds(memory_type) and _slot_takes(slot, folded, lowered, policy):
            yield slot


def _slot_takes(slot: SlotSpec, folded: str, lowered: str, policy: Policy) -> bool:
    """Whether the slot's rules place a ``normalize``d text, which moves to no value of the
    slots it yields to (``SlotSpec.unless_moving_to``)."""
    return slot.matches(folded, lowered) and not any(
        policy.slot(named).moved_to(folded) for named in slot.unless_moving_to
    )


def says_change(text: str, policy: Policy) -> bool:
    """Whether the text says that something about the user changed (``ChangesSpec``),
    someone's end included."""
    changes = policy.changes
    return matches_any(changes.patterns, text) or matches_any(changes.ends_someone, text)


def change_names(newer: str, older: str) -> bool:
    """Whether a newer memory that says something changed ("别用表格了，改成分点列表") names
    what an older one of its many-valued slot says ("对比类的问题用表格回答"): a word of more
    than one character in common ("用" and "a" are in every such rule). The caller has
    checked that the newer one ``says_change``."""
    named = {t for t in tokens(newer) if len(t) > 1}
    return bool(named.intersection(tokens(older)))


# a particular thing's name: mixed case or digits ("VRay", "AirPods", "80D")
_PRODUCT = re.compile(r"[a-z][A-Z]|[A-Za-z]\d|\d[A-Za-z]")
# lowercase words this long that no topic lists are mostly names of particular things
# ("warfarin", "donepezil", "evernote"); shorter ones are everyday words
_LONG_WORD = 6


def names_a_thing(newer: str, older: str, policy: Policy) -> bool:
    """Whether a newer memory that says something changed names a particular thing an older
    one names, so the change is about it whatever else either says: a medicine ("took her
    off donepezil" after "My wife takes donepezil"), a tool ("ChessBase我不用了" after "我用
    ChessBase 管理棋谱"), a vehicle ("sold the Silverado"). A word of a topic or slot names a
    subject, not a thing ("knee", "儿子", "coffee": a change of habit about the knee does not
    end the bad knee), nor does someone's name ("Sold the Jazz ... so Noah's chair fits"
    leaves "Noah is 11 and uses a power chair"); a Chinese word counts only as a noun of
    the older text, an English one only as a name, a product code or a long word; either
    may be named in another language (``ChangesSpec.same_things``). The caller has checked
    that the newer one ``says_change``. A person's or a pet's name (``people``) counts only
    where the newer one says their end (``someone_ended``: "Biscuit died last week")."""
    newer_n, older_n = normalize(newer), normalize(older)
    if someone_ended(newer_n, older_n, policy):
        return True
    newer_folded = newer_n.lower()
    if policy.changes.same_thing_named(older_n.lower(), newer_folded):
        return True
    newer_words = set(tokens(newer))
    names = name_words(older).inside | name_words(newer).inside
    named_people = people(older)
    for word, tag in rjieba.tag(older_n):
        if not (tag.startswith("n") or tag == "eng"):
            continue
        lowered = word.strip().lower()
        if (
            len(lowered) < 2
            or lowered in STOPWORDS
            or not lowered.isalnum()
            or lowered in named_people
        ):
            continue
        if lowered.isascii():
            thing = lowered in names or bool(_PRODUCT.search(word)) or len(lowered) >= _LONG_WORD
            if not thing or lowered not in newer_words:
                continue
        elif lowered not in newer_folded:
            continue
        if lowered in policy.vocabulary or topics_of(lowered, policy):
            continue
        return True
    return False


# a word written with a capital or a digit: "JSON", "Google Docs", "Wade-Giles", "v24"
_WRITTEN_NAME = re.compile(r"(?<![A-Za-z0-9.+-])[A-Za-z][A-Za-z0-9.+-]*")


def _names_written(text: str) -> dict[str, bool]:
    """Each word of the text written with a capital or a digit (no stopword), and whether
    it is written so inside a sentence, where a capital is no sentence's."""
    found: dict[str, bool] = {}
    for match in _WRITTEN_NAME.finditer(text):
        word = match.group().rstrip(".+-")
        if len(word) < 2 or word.lower() in STOPWORDS:
            continue
        before = text[: match.start()].rstrip()
        inside = bool(before) and before[-1] not in ".!?:;。！？：；"
        marked = any(c.isdigit() for c in word) or any(c.isupper() for c in word[1:])
        if marked or word[0].isupper():
            found[word] = found.get(word, False) or inside or marked
    return found


def without_project(text: str, project_id: str) -> str:
    """The text with a project's name left out, as its id or each part of it ("kestrel-web":
    "kestrel", "web"): every fact of a project names it, so its name is no particular thing
    two facts have in common (nor is a name in Chinese, "潭江桥": ``shares_a_name`` reads
    none)."""
    parts = {project_id, *(p for p in _id_parts(project_id) if len(p) > 2)}
    for part in sorted(parts, key=len, reverse=True):
        text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(part)}(?![A-Za-z0-9])", " ", text, flags=re.I)
    return text


def _id_parts(project_id: str) -> list[str]:
    """A project id's words ("kestrel-web": "kestrel", "web")."""
    return [p for p in re.split(r"[-_.\s]+", project_id) if p]


def names_project(text: str, project_id: str) -> bool:
    """Whether the text names the project by its id, written with its separators, others
    or none between its words ("kestrel-web", "Kestrel Web", "kestrel_web", "KestrelWeb"),
    case aside; not a part of the id alone ("web"), nor the id inside a longer one
    ("kestrel-web-v2"). A one-word id is often an everyday word too ("shop", "notes"):
    what reads it says what else must hold (RelevanceSpec.project_plans)."""
    parts = [re.escape(p) for p in _id_parts(project_id)]
    if not parts:
        return False
    name = r"[-_.\s]?".join(parts)
    edge = r"[A-Za-z0-9]|[-_.][A-Za-z0-9]"
    found = re.search(rf"(?<![A-Za-z0-9])(?<![A-Za-z0-9][-_.]){name}(?!{edge})", text, flags=re.I)
    return found is not None


def shares_a_name(newer: str, older: str) -> bool:
    """Whether two texts write one name alike ("JSON", "Google Docs", "Gatsby"): with a
    capital or a digit inside it, or a capital that one of them writes inside a sentence
    (two sentences that open with "We" share no name)."""
    a, b = _names_written(newer), _names_written(older)
    return any(a[word] or b[word] for word in a.keys() & b.keys())


def someone_ended(newer: str, older: str, policy: Policy) -> bool:
    """Whether a newer memory says the end of someone the older one writes of
    (``ChangesSpec.ends_someone``): a name in Latin letters the older one writes as
    someone's or inside a sentence ("our dog Biscuit", "my grandmother Rose"), a Chinese
    one it holds ("我家旺财十三岁了"). Both texts already ``normalize``d."""
    ended = {
        found.group("who")
        for rule in policy.changes.ends_someone
        for found in rule.compiled.finditer(newer)
        if found.group("who")
    }
    if not ended:
        return False
    written = people(older) | name_words(older).inside
    return any(who.lower() in written if who.isascii() else who in older for who in ended)


def change_subjects(topics: Sequence[str], policy: Policy) -> frozenset[str]:
    """The subjects a change statement of ``topics`` may end an older memory about: its
    worded topics but ``lasting`` ones (which no change ends), none if it is about someone
    else (``others``: their change is theirs). A change for the user's health ("啤酒也戒了")
    may end a habit ("我不挑食，啥都能吃")."""
    worded = frozenset(topics) - policy.held_topics
    if worded & policy.others_topics:
        return frozenset()
    return worded - policy.lasting_topics


def change_may_replace(
    subjects: frozenset[str],
    memory_type: str,
    old_type: str,
    old_slot: str | None,
    old_applies: str | None,
    old_topics: Sequence[str],
    policy: Policy,
) -> bool:
    """Whether a change statement about ``subjects`` (``change_subjects``) of ``memory_type``
    may replace an older memory: a topical one of the same tier (a lasting preference or
    profile fact another, a plan another) without a slot (or in one of ``ends_slots``),
    about one of those subjects and about no ``lasting`` topic. Which one it replaces is
    the caller's measure (the most similar when written; the one recalled beside it)."""
    return (
        bool(subjects)
        and (not old_slot or old_slot in policy.changes.ends_slots)
        and old_applies != "always"
        and policy.tier(old_type) == policy.tier(memory_type)
        and bool(subjects & set(old_topics))
        and not policy.lasting_topics & set(old_topics)
    )


def change_may_replace_named(
    topics: Sequence[str],
    memory_type: str,
    old_type: str,
    old_applies: str | None,
    old_topics: Sequence[str],
    policy: Policy,
) -> bool:
    """Whether a change statement of ``topics`` and ``memory_type`` that names a thing an
    older memory names (``names_a_thing``) may replace it: a topical one of the same tier,
    about everyone the change is about (a change of someone else's ends only their facts),
    whatever its slot or topics, a lasting one too (a medicine switched)."""
    others = set(topics) & policy.others_topics
    return (
        old_applies != "always"
        and policy.tier(old_type) == policy.tier(memory_type)
        and others <= set(old_topics)
    )


def general_question(text: str, policy: Policy) -> bool:
    """Whether a request asks how the world is, not about the user (``GeneralQuestionsSpec``)."""
    spec = policy.recall.relevance.general_questions
    if not spec.asks:
        return False
    folded = normalize(text)  # once for both rule lists: this runs on every request
    lowered = folded.lower()
    return _matches_folded(spec.asks, folded, lowered) and not _matches_folded(
        spec.about_the_user, folded, lowered
    )


def asks_for_writing(text: str, policy: Policy) -> bool:
    """Whether a request asks to write a text for someone to read (``WritingSpec``)."""
    return matches_any(policy.recall.relevance.writing.asks, text)


def standing_by_words(text: str, policy: Policy) -> bool:
    """Whether the words make a memory a standing instruction ("always give complete code")."""
    return matches_any(policy.applies.patterns, text)


def derive_applies(
    text: str, policy: Policy, memory_type: str, slot: str | None, scope: str
) -> str:
    """``always`` or ``relevant`` for a memory whose writer did not say (see ``AppliesSpec``)."""
    spec = policy.applies
    scope_kind = "task" if scope.startswith("task:") else scope
    if (
        scope_kind in spec.scopes
        or (slot is not None and slot in spec.slots)
        or (slot not in spec.worked_in and standing_by_words(text, policy))
    ):
        return "always"
    if matches_any(spec.relevant, text):
        return "relevant"
    if memory_type in spec.types:
        return "always"
    return spec.default


# What a string found in a text stands for (``TopicKeywords.substrings``): a CJK keyword of
# a topic, the longest word of some of a topic's phrases, a word one of a pattern's ``needs``.
_KEYWORD, _HINT, _NEED = 0, 1, 2


@dataclass(frozen=True)
class TopicKeywords:
    """Every topic's keywords indexed by what a text is scanned for, so that a request costs
    a lookup per word and one pass over its characters instead of a scan per keyword per
    topic: topic detection runs on every recall. Decides exactly as ``TopicSpec.matches``
    (a test holds the two equal)."""

    by_word: dict[str, tuple[int, ...]]  # plain keyword -> topics (by position)
    # Every string looked for inside the lower-cased text (CJK keywords, phrases' longest
    # words, patterns' needs), each with what it stands for: (_KEYWORD, topic), (_HINT,
    # phrase) or (_NEED, pattern). One Aho-Corasick pass finds them all wherever they
    # start; None when there are none.
    substrings: Any
    # every topic's phrases (``TopicSpec._phrases``) and patterns, numbered: (topic, regex);
    # the patterns that need nothing are tried on every text
    phrases: tuple[tuple[int, re.Pattern[str]], ...]
    patterns: tuple[tuple[int, re.Pattern[str]], ...]
    need_nothing: tuple[int, ...]

    @staticmethod
    def of(topics: Sequence[TopicSpec]) -> TopicKeywords:
        by_word: dict[str, list[int]] = {}
        found: dict[str, list[tuple[int, int]]] = {}
        phrases: list[tuple[int, re.Pattern[str]]] = []
        patterns: list[tuple[int, RuleSpec]] = []
        for i, topic in enumerate(topics):
            for rule in topic.patterns:
                for need in rule.needs:
                    found.setdefault(need, []).append((_NEED, len(patterns)))
                patterns.append((i, rule))
            for word in topic._words:
                by_word.setdefault(word, []).append(i)
            for keyword in topic._cjk:
                found.setdefault(keyword, []).append((_KEYWORD, i))
            for hint, phrase in topic._phrases.items():
                found.setdefault(hint, []).append((_HINT, len(phrases)))
                phrases.append((i, phrase))
        substrings = None
        if found:
            substrings = ahocorasick.Automaton()
            for string, stands_for in found.items():
                substrings.add_word(string, tuple(dict.fromkeys(stands_for)))
            substrings.make_automaton()
        return TopicKeywords(
            {word: tuple(values) for word, values in by_word.items()},
            substrings,
            tuple(phrases),
            tuple((topic, rule.compiled) for topic, rule in patterns),
            tuple(n for n, (_, rule) in enumerate(patterns) if not rule.needs),
        )

    def read(
        self, lowered: str, words: frozenset[str]
    ) -> tuple[set[int], dict[int, list[re.Pattern[str]]]]:
        """For a lower-cased text and its plain words: the topics (by position) one of whose
        plain or CJK keywords it holds, and by topic, the regexes worth trying on it: the
        phrases whose longest word it holds (as a substring, as a phrase's regex may join
        words: "icecream") and the patterns one of whose ``needs`` it holds or that need
        nothing (``RuleSpec.tried_on`` for every pattern at once)."""
        hit: set[int] = set()
        by_word = self.by_word
        for word in words:
            hit.update(by_word.get(word, ()))
        kinds: tuple[set[int], set[int], set[int]] = (hit, set(), set(self.need_nothing))
        if self.substrings is not None:
            for _, stands_for in self.substrings.iter(lowered):
                for kind, number in stands_for:
                    kinds[kind].add(number)
        tried: dict[int, list[re.Pattern[str]]] = {}
        for numbers, regexes in ((kinds[_HINT], self.phrases), (kinds[_NEED], self.patterns)):
            for number in numbers:  # the order tried decides nothing: any one that matches
                topic, regex = regexes[number]
                if topic not in hit:
                    tried.setdefault(topic, []).append(regex)
        return hit, tried


def topics_of(text: str, policy: Policy, memory_type: str | None = None) -> list[str]:
    """The policy's topics the text is about, in policy order; for a memory of
    ``memory_type``, only those its type may hold (``TopicSpec.types``)."""
    if not text:
        return []
    folded = normalize(text)
    lowered = folded.lower()
    hit, tried = policy.topic_keywords.read(lowered, plain_words(lowered))
    topics = policy.topics
    out: list[str] = []
    for i in sorted(hit.union(tried)):
        topic = topics[i]
        if (
            (memory_type is None or not topic.types or memory_type in topic.types)
            and (i in hit or any(regex.search(folded) for regex in tried[i]))
            and not (topic.unless and topic.excluded(folded, lowered))
        ):
            out.append(topic.name)
    return out


def memory_topics(text: str, policy: Policy, memory_type: str, slot: str | None) -> list[str]:
    """A memory's topics: those of its words its type may hold (and its slot, if it limits
    them, ``SlotSpec.topics``), those naming its slot and those its type always holds, in
    policy order. Of its words' topics, not those another of them displaces
    (``TopicSpec.displaces``); its slot or its type may still hold one."""
    found = set(topics_of(text, policy, memory_type))
    if found and policy.request_keyword_topics:
        folded = normalize(text)
        lowered = folded.lower()
        found -= {
            t.name
            for t in policy.request_keyword_topics
            if t.name in found
            and not t.matches_beyond_keywords(folded, hinted=False, lowered=lowered)
        }
    spec = next((s for s in policy.slots if s.name == slot), None) if slot else None
    if spec is not None and spec.topics is not None:
        found &= set(spec.topics)
    found -= {d for t in policy.displacing_topics if t.name in found for d in t.displaces}
    return [
        t.name
        for t in policy.topics
        if t.name in found or (slot and slot in t.slots) or memory_type in t.held_by
    ]


# --------------------------------------------------------------------------------------------
# Loading


Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class _Layer:
    filename: str
    root: yaml.Node | None
    data: dict[Any, Any]


def load_policy(path: str | Path | None = None) -> Policy:
    """The shipped policy with the overlay file at ``path`` (if any) merged onto it."""
    layers = _shipped_layers()
    if path is not None:
        layers.append(_read(Path(path), str(path)))
    return _build(layers)


def parse_policy(text: str, filename: str = "<policy>") -> Policy:
    """The shipped policy with an overlay given as text merged onto it; ``filename`` only
    labels error messages."""
    layers = _shipped_layers()
    layers.append(_layer(text, filename))
    return _build(layers)


def _shipped_layers() -> list[_Layer]:
    """The package's policy files, parsed once per process while they are unchanged (a layer
    is never modified: merging builds new mappings)."""
    layers = []
    for file in shipped_policy_paths():
        try:
            stat = file.stat()
        except OSError:
            layers.append(_read(file, str(file)))  # names the file in the error
            continue
        layers.append(_read_unchanged(file, stat.st_mtime_ns, stat.st_size))
    return layers


@lru_cache(maxsize=8)
def _read_unchanged(file: Path, mtime_ns: int, size: int) -> _Layer:
    return _read(file, str(file))


def _read(file: Path, label: str) -> _Layer:
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"{label}: cannot read policy: {exc.strerror or exc}") from None
    return _layer(text, label)


def _layer(text: str, filename: str) -> _Layer:
    root, data = _compose(text, filename)
    problems: list[tuple[Loc, str]] = []
    _check_duplicate_keys(root, (), problems)
    layer = _Layer(filename, root, data if isinstance(data, dict) else {})
    if problems:
        _raise([layer], problems)
    if data is not None and not isinstance(data, dict):
        raise PolicyError(f"{filename}:1: the policy must be a YAML mapping")
    return layer


class _Whole(NamedTuple):
    """Keys of a mapping that belong together: a layer setting any of them replaces them
    all, and must set ``needs`` among them (``why`` says so to whoever did not)."""

    members: frozenset[str]
    needs: str
    why: str


# A fit written by another form of `memgate fit relevance` (weights and a bias only) is not
# merged with the shipped fit's other weights into a model neither fitted, and a layer
# meaning to drop the fit's directions alone does not turn the fit off unasked.
_TOGETHER: dict[tuple[str, ...], _Whole] = {
    ("recall", "relevance", "fitted"): _Whole(
        frozenset(
            {
                "embedder",
                "weights",
                "memory_weights",
                "request_weights",
                "request_factors",
                "memory_factors",
                "bias",
            }
        ),
        "weights",
        "a fit's keys are replaced together: set weights too (an empty list turns the fit off)",
    ),
}


def _parts_of_a_whole(layers: list[_Layer]) -> Iterator[tuple[Loc, str]]:
    """A layer setting some of the keys that go together (``_TOGETHER``) but not the one
    they need."""
    for path, whole in _TOGETHER.items():
        for layer in layers:
            node: Any = layer.data
            for key in path:
                node = node.get(key) if isinstance(node, dict) else None
            if isinstance(node, dict) and whole.needs not in node:
                given = sorted(whole.members.intersection(node))
                if given:
                    yield (*path, given[0]), whole.why


def _merge(base: Any, over: Any, path: tuple[str, ...] = ()) -> Any:
    """Mappings merge key by key, but for keys that belong together (``_TOGETHER``);
    anything else (lists included) is replaced whole."""
    if isinstance(base, dict) and isinstance(over, dict):
        merged = dict(base)
        whole = _TOGETHER.get(path)
        if whole is not None and whole.members.intersection(over):
            for key in whole.members:
                merged.pop(key, None)
        for key, value in over.items():
            merged[key] = _merge(merged[key], value, (*path, str(key))) if key in merged else value
        return merged
    return over


def _build(layers: list[_Layer]) -> Policy:
    data: dict[Any, Any] = {}
    for layer in layers:
        data = _merge(data, layer.data)
    problems: list[tuple[Loc, str]] = list(_parts_of_a_whole(layers))
    try:
        policy = Policy.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            loc = tuple(p for p in err["loc"] if p != "[key]")
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown key (not part of the policy schema)"
            problems.append((loc, msg))
    if problems:
        _raise(layers, problems)
    problems.extend(_cross_check(policy))
    if problems:
        _raise(layers, problems)
    policy._origin = layers[-1].filename
    return policy


# libyaml is faster and keeps the same node marks; fall back to pure Python without it.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _compose(text: str, filename: str) -> tuple[yaml.Node | None, Any]:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise PolicyError(f"{filename}:{line}: invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise PolicyError(f"{filename}:1: invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return node, data


def _check_duplicate_keys(node: yaml.Node | None, loc: Loc, out: list[tuple[Loc, str]]) -> None:
    # PyYAML silently keeps the last of two equal keys; a policy must not hide a rule that way.
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = str(key.value)
            if name in seen:
                out.append(((*loc, name), "duplicate key"))
            seen.add(name)
            _check_duplicate_keys(value, (*loc, name), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_duplicate_keys(item, (*loc, i), out)


def _child(node: yaml.Node, part: str | int) -> tuple[int, yaml.Node] | None:
    """The line of ``part`` under ``node`` (1-based) and its value node, if it is there."""
    if isinstance(node, yaml.MappingNode):
        matches = [(k, v) for k, v in node.value if str(k.value) == str(part)]
        if not matches:
            return None
        # The last occurrence: for duplicate keys that is the offending one.
        key, value = matches[-1]
        return int(key.start_mark.line) + 1, value
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int):
        if not 0 <= part < len(node.value):
            return None
        item = node.value[part]
        return int(item.start_mark.line) + 1, item
    return None


def _locate(layers: list[_Layer], loc: Loc) -> tuple[str, int]:
    """The file and line that gave the merged value at ``loc`` (or its deepest present
    parent), following the merge: the topmost layer wins, and a value that is not a mapping
    hides the layers below it."""
    nodes = [(layer.filename, layer.root) for layer in layers if layer.root is not None]
    if not nodes:
        return layers[-1].filename, 1
    filename, line = nodes[-1][0], nodes[-1][1].start_mark.line + 1
    for part in loc:
        found = [(name, child) for name, node in nodes if (child := _child(node, part))]
        if not found:
            break
        filename, (line, top) = found[-1]
        nodes = [(filename, top)]
        if isinstance(top, yaml.MappingNode):
            for name, (_, node) in reversed(found[:-1]):
                if not isinstance(node, yaml.MappingNode):
                    break
                nodes.insert(0, (name, node))
    return filename, line


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


def _raise(layers: list[_Layer], problems: list[tuple[Loc, str]]) -> NoReturn:
    found = [(*_locate(layers, loc), _dotted(loc), msg) for loc, msg in problems]
    order = {layer.filename: i for i, layer in enumerate(layers)}
    lines = sorted(dict.fromkeys(found), key=lambda item: (-order[item[0]], item[1]))
    raise PolicyError("\n".join(f"{file}:{line}: {key}: {msg}" for file, line, key, msg in lines))


def _regex_problem(regex: str) -> str | None:
    try:
        re.compile(regex)
    except re.error as exc:
        return f"invalid regular expression: {exc}"
    return None


def _cross_check(policy: Policy) -> Iterator[tuple[Loc, str]]:
    """Rules that span fields: references between sections, regexes, examples."""
    yield from _check_types(policy)
    yield from _check_sources(policy)
    yield from _check_sensitivity(policy)
    yield from _check_rules(policy)
    yield from _check_mining(policy)
    yield from _check_horizons(policy)
    recall = policy.recall
    if not math.isclose(recall.weights.vector + recall.weights.text, 1.0, abs_tol=1e-9):
        yield ("recall", "weights"), "vector and text weights must add up to 1"
    if recall.candidate_pool < recall.max_memories:
        yield ("recall", "candidate_pool"), "must be at least recall.max_memories"
    typical = recall.typicality
    if typical.weight and len(typical.requests) < typical.neighbours:
        yield (
            ("recall", "typicality", "requests"),
            f"needs at least recall.typicality.neighbours ({typical.neighbours}) requests",
        )
    yield from _check_applies(policy)
    yield from _check_topics(policy)


def _check_types(policy: Policy) -> Iterator[tuple[Loc, str]]:
    if not policy.types:
        yield ("types",), "at least one memory type is required"
    for name in sorted(policy.recall.relevance.project_plans - policy.types.keys()):
        yield ("recall", "relevance", "project_plans"), f"unknown memory type {name!r}"
    for name, spec in policy.types.items():
        if spec.tier == "time_limited" and spec.ttl_days is None:
            yield ("types", name, "tier"), "a time_limited type needs ttl_days"
        if spec.tier != "time_limited" and spec.ttl_days is not None:
            yield ("types", name, "ttl_days"), f"only time_limited types expire ({spec.tier})"


def _check_sources(policy: Policy) -> Iterator[tuple[Loc, str]]:
    for required in REQUIRED_SOURCES:
        if required not in policy.sources:
            yield ("sources",), f"source {required!r} must be declared"
    for name, spec in policy.sources.items():
        if spec.confirmed_as is not None and spec.confirmed_as not in policy.sources:
            yield ("sources", name, "confirmed_as"), f"unknown source {spec.confirmed_as!r}"
    inference = policy.sources.get("model_inference")
    if inference is not None:
        if inference.store != "on_confirmation":
            yield (
                ("sources", "model_inference", "store"),
                "model inferences may only be stored after the user confirms them",
            )
        if inference.recall:
            yield ("sources", "model_inference", "recall"), "model inferences are never recalled"


def _check_sensitivity(policy: Policy) -> Iterator[tuple[Loc, str]]:
    sens = policy.sensitivity
    for i, level in enumerate(sens.store_levels):
        if level == "high":
            yield ("sensitivity", "store_levels", i), "high-sensitivity text is never stored"
    for i, level in enumerate(sens.inject_levels):
        if level == "high":
            yield ("sensitivity", "inject_levels", i), "high-sensitivity text is never injected"
    for i, regex in enumerate(sens.entropy.ignore):
        problem = _regex_problem(regex)
        if problem:
            yield ("sensitivity", "entropy", "ignore", i), problem
    for i, pat in enumerate(sens.patterns):
        loc: Loc = ("sensitivity", "patterns", i)
        if (pat.regex is None) == (pat.detector is None):
            yield loc, "give exactly one of 'regex' or 'detector'"
            continue
        if pat.regex is not None:
            problem = _regex_problem(pat.regex)
            if problem:
                yield (*loc, "regex"), problem
                continue
            assert pat.compiled is not None
            if pat.group > pat.compiled.groups:
                yield (*loc, "group"), f"the regex has only {pat.compiled.groups} group(s)"
        elif pat.group:
            yield (*loc, "group"), "'group' only applies to a regex"


def _check_rules(policy: Policy) -> Iterator[tuple[Loc, str]]:
    rules_ok = True
    for i, rule in enumerate(policy.one_time.patterns):
        problem = _regex_problem(rule.regex)
        if problem:
            rules_ok = False
            yield ("one_time", "patterns", i, "regex"), problem
            continue
        for j, example in enumerate(rule.examples):
            if not rule.compiled.search(example):
                yield ("one_time", "patterns", i, "examples", j), "the regex does not match it"
    seen: set[str] = set()
    slot_names = {s.name for s in policy.slots}
    placed: dict[str, str] = {}
    for i, slot in enumerate(policy.slots):
        if slot.name in seen:
            yield ("slots", i, "name"), f"slot {slot.name!r} is declared twice"
        seen.add(slot.name)
        if not slot.keywords and not slot.patterns:
            yield ("slots", i), "a slot needs keywords or patterns"
        for key in ("patterns", "unless"):
            for j, rule in enumerate(getattr(slot, key)):
                problem = _regex_problem(rule.regex)
                if problem:
                    rules_ok = False
                    yield ("slots", i, key, j, "regex"), problem
                else:
                    for k, example in enumerate(rule.examples):
                        if not rule.compiled.search(example):
                            loc: Loc = ("slots", i, key, j, "examples", k)
                            yield loc, "the regex does not match it"
        for name, rule in slot.options.items():
            problems = list(_check_rule(rule, ("slots", i, "options", name)))
            rules_ok = rules_ok and not any(loc[-1] == "regex" for loc, _ in problems)
            yield from problems
        if slot.options and slot.values != "one":
            yield ("slots", i, "options"), "only a one-valued slot names its values"
        for name, rule in slot.aspects.items():
            yield from _check_rule(rule, ("slots", i, "aspects", name))
        if slot.aspects and slot.values != "one":
            yield ("slots", i, "aspects"), "only a one-valued slot has aspects"
        listed = {k.lower() for k in slot.keywords}
        for j, word in enumerate(slot.generic):
            if word.lower() not in listed:
                yield ("slots", i, "generic", j), f"not one of the slot's keywords: {word!r}"
        for j, ended in enumerate(slot.change_ends):
            if ended not in slot_names or ended == slot.name:
                yield ("slots", i, "change_ends", j), f"not another slot: {ended!r}"
        for j, yielded in enumerate(slot.unless_moving_to):
            if yielded not in slot_names or yielded == slot.name:
                yield ("slots", i, "unless_moving_to", j), f"not another slot: {yielded!r}"
            elif not policy.slot(yielded).keywords:
                yield ("slots", i, "unless_moving_to", j), f"slot {yielded!r} lists no keywords"
        for j, type_name in enumerate(slot.types):
            if type_name not in policy.types:
                yield ("slots", i, "types", j), f"unknown memory type {type_name!r}"
        for j, rule in enumerate(slot.of_types_unless):
            yield from _check_rule(rule, ("slots", i, "of_types_unless", j))
        for j, type_name in enumerate(slot.of_types):
            if type_name not in policy.types:
                yield ("slots", i, "of_types", j), f"unknown memory type {type_name!r}"
            elif type_name in placed:
                yield ("slots", i, "of_types", j), f"{type_name} is of slot {placed[type_name]}"
            placed.setdefault(type_name, slot.name)

    if not rules_ok:
        return
    for i, example in enumerate(policy.one_time.not_one_time):
        if is_one_time(example, policy):
            yield ("one_time", "not_one_time", i), "a one_time pattern matches it"
    changes_ok = True
    for i, rule in enumerate(policy.changes.patterns):
        problems = list(_check_rule(rule, ("changes", "patterns", i)))
        changes_ok = changes_ok and not any(loc[-1] == "regex" for loc, _ in problems)
        yield from problems
    named: set[str] = set()
    for i, group in enumerate(policy.changes.same_things):
        if len(group) < 2:
            yield ("changes", "same_things", i), "a thing needs two names or more"
        for j, name in enumerate(group):
            if name.lower() in named:
                yield ("changes", "same_things", i, j), f"{name!r} names another thing too"
            named.add(name.lower())
    for i, rule in enumerate(policy.changes.ends_someone):
        problems = list(_check_rule(rule, ("changes", "ends_someone", i)))
        changes_ok = changes_ok and not any(loc[-1] == "regex" for loc, _ in problems)
        yield from problems
        if not problems and "who" not in rule.compiled.groupindex:
            yield ("changes", "ends_someone", i, "regex"), "name whose end it says: (?P<who>...)"
    general = policy.recall.relevance.general_questions
    yield from _check_request_rules(
        {"asks": general.asks, "about_the_user": general.about_the_user},
        (general.examples, general.not_examples),
        lambda text: general_question(text, policy),
        ("recall", "relevance", "general_questions"),
        "a general question",
    )
    writing = policy.recall.relevance.writing
    yield from _check_request_rules(
        {"asks": writing.asks},
        (writing.examples, writing.not_examples),
        lambda text: asks_for_writing(text, policy),
        ("recall", "relevance", "writing"),
        "a request to write",
    )
    for i, example in enumerate(policy.changes.not_examples):
        if changes_ok and says_change(example, policy):
            yield ("changes", "not_examples", i), "a change pattern matches it"
    for i, slot in enumerate(policy.slots):
        for j, example in enumerate(slot.examples):
            got = derive_slot(example, policy)
            if got != slot.name:
                yield ("slots", i, "examples", j), f"derives slot {got!r}, not {slot.name!r}"
        for j, example in enumerate(slot.not_examples):
            folded = normalize(example)
            if _slot_takes(slot, folded, folded.lower(), policy):
                yield ("slots", i, "not_examples", j), f"slot {slot.name!r} matches it"


def _check_rule(rule: RuleSpec, loc: Loc) -> Iterator[tuple[Loc, str]]:
    problem = _regex_problem(rule.regex)
    if problem:
        yield (*loc, "regex"), problem
        return
    for j, example in enumerate(rule.examples):
        if not rule.compiled.search(example):
            yield (*loc, "examples", j), "the regex does not match it"
        elif not rule.tried_on(normalize(example).lower()):
            yield (*loc, "examples", j), "it holds none of the rule's needs"
    for j, word in enumerate(rule.needs):
        if word != word.lower():
            yield (*loc, "needs", j), "must be lower-case (it is looked for in lower-cased text)"


def _check_request_rules(
    rules: dict[str, tuple[RuleSpec, ...]],
    examples: tuple[tuple[str, ...], tuple[str, ...]],
    reads: Callable[[str], bool],
    loc: Loc,
    what: str,
) -> Iterator[tuple[Loc, str]]:
    """The rules that read a kind of request (``what``), each checked, and then, when every
    regex compiles, the requests that must read as one and those that must not."""
    compiled = True
    for key, group in rules.items():
        for i, rule in enumerate(group):
            problems = list(_check_rule(rule, (*loc, key, i)))
            compiled = compiled and not any(p[-1] == "regex" for p, _ in problems)
            yield from problems
    if not compiled:
        return
    must, must_not = examples
    for i, example in enumerate(must):
        if not reads(example):
            yield (*loc, "examples", i), f"not {what} by these rules"
    for i, example in enumerate(must_not):
        if reads(example):
            yield (*loc, "not_examples", i), f"{what} by these rules"


def _check_horizons(policy: Policy) -> Iterator[tuple[Loc, str]]:
    spec = policy.horizons
    for i, name in enumerate(spec.types):
        if name not in policy.types:
            yield ("horizons", "types", i), f"unknown memory type {name!r}"
        elif policy.types[name].tier != "time_limited":
            yield ("horizons", "types", i), f"only time_limited types expire ({name})"
    for i, name in enumerate(spec.spell_types):
        if name not in policy.types:
            yield ("horizons", "spell_types", i), f"unknown memory type {name!r}"
        elif name in spec.types:
            yield ("horizons", "spell_types", i), f"{name} already ends by every rule"
    for i, unless in enumerate(spec.spell_unless):
        yield from _check_rule(unless, ("horizons", "spell_unless", i))
    for i, undated in enumerate(spec.undated):
        yield from _check_rule(undated, ("horizons", "undated", i))
        for j, name in enumerate(undated.types):
            if name not in spec.types:
                yield ("horizons", "undated", i, "types", j), f"{name} is not in horizons.types"
    saved = datetime(2026, 1, 15, tzinfo=UTC)
    for i, rule in enumerate(spec.rules):
        loc: Loc = ("horizons", "rules", i)
        ways = [rule.days is not None, rule.month_end is not None, rule.year_end is not None]
        ways += [rule.named_month, rule.day_of_month, rule.month is not None]
        if sum(ways) != 1:
            kinds = "days, month_end, year_end, named_month, day_of_month, month"
            yield loc, f"needs exactly one of {kinds}"
            continue
        if rule.by_day is not None and rule.month_end is None:
            yield (*loc, "by_day"), "by_day is a day of the month month_end names"
            continue
        problems = list(_check_rule(rule, loc))
        yield from problems
        if problems:
            continue
        groups = rule.compiled.groupindex
        if rule.named_month and "month" not in groups:
            yield (*loc, "regex"), "a named_month rule needs a (?P<month>...) group"
        elif rule.day_of_month and "day" not in groups:
            yield (*loc, "regex"), "a day_of_month rule needs a (?P<day>...) group"
        elif "day" in groups and not (rule.named_month or rule.day_of_month):
            yield (
                (*loc, "regex"),
                "only a named_month or day_of_month rule reads a (?P<day>...) group",
            )
        elif ("n" in groups or "m" in groups) and rule.days is None:
            yield (*loc, "regex"), "only a days rule counts (?P<n>...) or (?P<m>...)"
        elif rule.spell and rule.days is None:
            yield (*loc, "spell"), "a span is counted in days"
        else:
            for j, example in enumerate(rule.examples):
                if rule.until(normalize(example), saved) is None:
                    yield (*loc, "examples", j), "names no count or month the rule can read"
    for j, text in enumerate(spec.not_examples):
        for rule in spec.rules:
            if not _regex_problem(rule.regex) and rule.compiled.search(normalize(text)):
                yield ("horizons", "not_examples", j), f"matches {rule.regex!r}"
                break


def _check_mining(policy: Policy) -> Iterator[tuple[Loc, str]]:
    mining = policy.mining
    for key in ("questions", "corrections", "remember"):
        for i, rule in enumerate(getattr(mining, key)):
            yield from _check_rule(rule, ("mining", key, i))
    yield from _check_rule(mining.filler, ("mining", "filler"))
    yield from _check_rule(mining.horizon, ("mining", "horizon"))
    if mining.fallback_type not in policy.types:
        yield ("mining", "fallback_type"), f"unknown memory type {mining.fallback_type!r}"
    rules_ok = True
    seen: set[str] = set()
    for i, rule in enumerate(mining.rules):
        if rule.name in seen:
            yield ("mining", "rules", i, "name"), f"rule {rule.name!r} is declared twice"
        seen.add(rule.name)
        if rule.type not in policy.types:
            yield ("mining", "rules", i, "type"), f"unknown memory type {rule.type!r}"
        problem = _regex_problem(rule.regex)
        if problem:
            rules_ok = False
            yield ("mining", "rules", i, "regex"), problem
    if not rules_ok:
        return
    # Like slot examples: an example must be typed by its own rule, which an earlier rule
    # in the table would prevent, because the first match wins.
    for i, rule in enumerate(mining.rules):
        for j, example in enumerate(rule.examples):
            folded = normalize(example)
            if not rule.compiled.search(folded):
                yield ("mining", "rules", i, "examples", j), "the regex does not match it"
                continue
            first = mining.rule_for(folded)
            if first is not rule:
                assert first is not None
                yield (
                    ("mining", "rules", i, "examples", j),
                    f"rule {first.name!r} matches it first, not {rule.name!r}",
                )


def _check_applies(policy: Policy) -> Iterator[tuple[Loc, str]]:
    spec = policy.applies
    for i, name in enumerate(spec.types):
        if name not in policy.types:
            yield ("applies", "types", i), f"unknown memory type {name!r}"
    slots = {s.name for s in policy.slots}
    for i, name in enumerate(spec.slots):
        if name not in slots:
            yield ("applies", "slots", i), f"unknown slot {name!r}"
    for i, name in enumerate(spec.worked_in):
        if name not in slots:
            yield ("applies", "worked_in", i), f"unknown slot {name!r}"
    for i, name in enumerate(policy.changes.ends_slots):
        if name not in slots:
            yield ("changes", "ends_slots", i), f"unknown slot {name!r}"
    for i, rule in enumerate(spec.relevant):
        yield from _check_rule(rule, ("applies", "relevant", i))
    ok = True
    for i, rule in enumerate(spec.patterns):
        problems = list(_check_rule(rule, ("applies", "patterns", i)))
        ok = ok and not any(loc[-1] == "regex" for loc, _ in problems)
        yield from problems
    if ok:
        for i, text in enumerate(spec.not_examples):
            if standing_by_words(text, policy):
                yield ("applies", "not_examples", i), "a pattern matches it"
    by_words = policy.slot_resemblance
    for i, name in enumerate(by_words.types):
        if name not in policy.types:
            yield ("slot_resemblance", "types", i), f"unknown memory type {name!r}"
    for i, name in enumerate(by_words.slots):
        if name not in slots:
            yield ("slot_resemblance", "slots", i), f"unknown slot {name!r}"
        elif name not in policy.one_valued_slots:
            yield ("slot_resemblance", "slots", i), f"slot {name!r} holds many values"
        elif not policy.slot(name).said:
            yield ("slot_resemblance", "slots", i), f"slot {name!r} has no examples"
    like = spec.resemblance
    for i, name in enumerate(like.types):
        if name not in policy.types:
            yield ("applies", "resemblance", "types", i), f"unknown memory type {name!r}"
    if like.types:
        for key in ("always", "relevant"):
            if len(getattr(like, key)) < like.neighbours:
                yield (
                    ("applies", "resemblance", key),
                    f"needs at least applies.resemblance.neighbours ({like.neighbours}) examples",
                )


def _check_topics(policy: Policy) -> Iterator[tuple[Loc, str]]:
    seen: set[str] = set()
    ok = True
    for i, topic in enumerate(policy.topics):
        if topic.name in seen:
            yield ("topics", i, "name"), f"topic {topic.name!r} is declared twice"
        seen.add(topic.name)
        if not topic.keywords and not topic.patterns:
            yield ("topics", i), "a topic needs keywords or patterns"
        listed: set[str] = set()
        for j, keyword in enumerate(topic.keywords):
            if keyword.lower() in listed:
                yield ("topics", i, "keywords", j), f"keyword {keyword!r} is listed twice"
            listed.add(keyword.lower())
        names = {t.name for t in policy.topics}
        for key in ("reaches", "displaces"):
            for j, other in enumerate(getattr(topic, key)):
                if other not in names:
                    yield ("topics", i, key, j), f"unknown topic {other!r}"
        for key in ("types", "held_by"):
            for j, type_name in enumerate(getattr(topic, key)):
                if type_name not in policy.types:
                    yield ("topics", i, key, j), f"unknown memory type {type_name!r}"
        slot_names = {s.name for s in policy.slots}
        for j, slot_name in enumerate(topic.slots):
            if slot_name not in slot_names:
                yield ("topics", i, "slots", j), f"unknown slot {slot_name!r}"
        for key in ("patterns", "unless"):
            for j, rule in enumerate(getattr(topic, key)):
                problems = list(_check_rule(rule, ("topics", i, key, j)))
                ok = ok and not any(loc[-1] == "regex" for loc, _ in problems)
                yield from problems
    loc = ("recall", "relevance", "resembled", "examples")
    for i, example in enumerate(policy.recall.relevance.resembled.examples):
        named = [*example.topics, *example.not_topics]
        if len(set(named)) < len(named):
            yield (*loc, i), "a topic is listed twice"
    if not ok:
        return
    for i, topic in enumerate(policy.topics):
        for j, text in enumerate(topic.examples):
            if topic.name not in topics_of(text, policy):
                yield ("topics", i, "examples", j), f"is not about {topic.name!r}"
        for j, text in enumerate(topic.not_examples):
            if topic.name in topics_of(text, policy):
                yield ("topics", i, "not_examples", j), f"is about {topic.name!r}"
