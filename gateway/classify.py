"""Text classification driven by the policy: one-time instructions and memory slots.

Both are plain regex/keyword rules from ``policies/default.yaml`` so that product behaviour is
readable data; the rules are written to work on Chinese text, which has no spaces.
"""

from __future__ import annotations

import unicodedata

from gateway.policy import Policy

__all__ = ["derive_slot", "is_one_time", "normalize"]


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
