"""Text classification driven by the policy: one-time instructions, slots, how a memory
applies, and topics.

All are plain regex/keyword rules from ``policies/default.yaml`` so that product behaviour is
readable data; the rules are written to work on Chinese text, which has no spaces.
"""

from __future__ import annotations

import unicodedata

from gateway.policy import Policy, plain_words

__all__ = [
    "derive_applies",
    "derive_slot",
    "is_one_time",
    "normalize",
    "standing_by_words",
    "topics_of",
]


_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def normalize(text: str) -> str:
    """Fold what people type into what the rules are written for.

    NFKC turns full-width letters and digits (ＦａｓｔＡＰＩ, １２３) into ASCII; phones type
    curly apostrophes ("let’s"), the rules use straight ones.
    """
    return unicodedata.normalize("NFKC", text).translate(_APOSTROPHES)


def is_one_time(text: str, policy: Policy) -> bool:
    """True when the text is an instruction for this turn or conversation only."""
    if not text:
        return False
    folded = normalize(text)
    return any(rule.compiled.search(folded) for rule in policy.one_time.patterns)


def derive_slot(text: str, policy: Policy, memory_type: str | None = None) -> str | None:
    """The first slot (in policy order) whose rules match; None when the text has none.

    With ``memory_type``, slots restricted to other types are skipped.
    """
    if not text:
        return None
    folded = normalize(text)
    lowered = folded.lower()
    for slot in policy.slots:
        if memory_type is not None and slot.types and memory_type not in slot.types:
            continue
        if slot.matches(folded, lowered):
            return slot.name
    return None


def standing_by_words(text: str, policy: Policy) -> bool:
    """Whether the words make a memory a standing instruction ("always give complete code")."""
    folded = normalize(text)
    return any(rule.compiled.search(folded) for rule in policy.applies.patterns)


def derive_applies(
    text: str, policy: Policy, memory_type: str, slot: str | None, scope: str
) -> str:
    """``always`` or ``relevant`` for a memory whose writer did not say (see ``AppliesSpec``)."""
    spec = policy.applies
    scope_kind = "task" if scope.startswith("task:") else scope
    if (
        memory_type in spec.types
        or (slot is not None and slot in spec.slots)
        or scope_kind in spec.scopes
        or standing_by_words(text, policy)
    ):
        return "always"
    return spec.default


def topics_of(text: str, policy: Policy) -> list[str]:
    """The policy's topics the text is about, in policy order."""
    if not text:
        return []
    folded = normalize(text)
    lowered = folded.lower()
    words = plain_words(lowered)
    return [topic.name for topic in policy.topics if topic.matches(folded, lowered, words)]
