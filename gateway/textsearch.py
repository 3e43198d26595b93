"""Text for RediSearch's full-text field, the same way for documents and for queries.

RediSearch's default tokenizer splits on spaces and punctuation, which leaves a Chinese
sentence as one long token. Segmenting with jieba first (rjieba, offline) gives Chinese
text word tokens that both the index and the query see identically; English is lowercased.
"""

from __future__ import annotations

import re

import rjieba  # type: ignore[import-not-found]

_WORD = re.compile(r"\w", re.UNICODE)


def tokens(text: str) -> list[str]:
    out: list[str] = []
    for token in rjieba.cut_for_search(text):
        token = token.strip().lower()
        if token and _WORD.search(token):
            out.append(token)
    return out


def search_text(text: str) -> str:
    return " ".join(tokens(text))
