"""Text for RediSearch's full-text field, the same way for documents and for queries.

RediSearch's default tokenizer splits on spaces and punctuation, which leaves a Chinese
sentence as one long token. Segmenting with jieba first (rjieba, offline) gives Chinese
text word tokens that both the index and the query see identically; English is lowercased.

Stopwords are removed here, not left to RediSearch: besides making the BM25 part about
content words, this avoids a RediSearch 2.10 crash on OR-queries that mix several of its
default stopwords with other terms (``@f:(and | in | units)`` takes the server down).
"""

from __future__ import annotations

import re
from typing import NamedTuple

import rjieba  # type: ignore[import-not-found]

_NOT_ALNUM = re.compile(r"[\W_]+", re.UNICODE)
_MAX_TOKENS = 64

# RediSearch's default English stopwords: they must never reach a query (see above).
REDISEARCH_DEFAULT = frozenset(
    "a is the an and are as at be but by for if in into it no not of on or such that their "
    "then there these they this to was will with".split()
)
# Function words that carry no topic in either language.
EXTRA = frozenset(
    "i me my you your we our he she him her its what which who whom how why when where do "
    "does did can could should would shall may might must have has had am were been being "
    "please about so than too very just also any some all from up out".split()
) | frozenset(
    "的 了 是 我 你 他 她 它 我们 你们 他们 吗 呢 吧 啊 和 与 在 也 都 就 还 又 这 那 "
    "这个 那个 一个 什么 怎么 请 把 被 给 对 要 会 能 有 没 不 很".split()
)
STOPWORDS = REDISEARCH_DEFAULT | EXTRA


def tokens(text: str) -> list[str]:
    """Lowercased letter/digit runs only: no punctuation ever reaches a RediSearch query."""
    out: list[str] = []
    for piece in rjieba.cut_for_search(text):
        for token in _NOT_ALNUM.sub(" ", piece).lower().split():
            if token not in STOPWORDS:
                out.append(token)
    return out


# Names: capitalised words that are not the first of their sentence ("Leo", "Toronto",
# "Lily's"). Words that are capitalised wherever they stand are no names of the user's world.
_SENTENCES = re.compile(r"[.!?。！？:：;；\n]+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
_NOT_NAMES = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april "
    "may june july august september october november december english chinese mandarin "
    "japanese korean french german spanish italian portuguese russian christmas easter "
    "the this that there these those what which when where why how and but also please "
    "thanks thank mr mrs ms dr".split()
)


# Chinese has no capitals; what marks a person there is a nickname: 小/老/阿 and one
# character ("小美", "老周", "阿杰"). With a common surname it is one ("小林", "老王");
# otherwise one the dictionary knows is a word ("小心", "老师", "阿姨"). Neither is one
# where it begins a longer word ("小朋友", "小红书") or ends one with the character
# before it ("改小一点").
_NICKNAME = re.compile(r"[小老阿][\u4e00-\u9fff]")
_SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程"
    "苏魏吕丁任沈姚卢姜崔钟谭陆汪范金廖贾夏韦付白邹孟熊秦邱尹薛闫段雷侯史陶黎贺顾毛郝龚邵钱"
    "覃武戴莫孔"
)
_NUMERALS = frozenset("一二三四五六七八九十百千万两几")
_UNLISTED_WORDS = frozenset({"小红书"})  # longer words the dictionary lacks


def _nicknames(text: str) -> set[str]:
    found: set[str] = set()
    for m in _NICKNAME.finditer(text):
        start, end = m.span()
        nick = m.group()
        if (
            nick[1] in _NUMERALS
            or (nick[1] not in _SURNAMES and rjieba.has_word(nick))
            or any(
                rjieba.has_word(longer) or longer in _UNLISTED_WORDS
                for longer in (text[start : end + n] for n in (1, 2) if end + n <= len(text))
            )
            or (start > 0 and rjieba.has_word(text[start - 1 : start + 1]))
        ):
            continue
        found.add(nick)
    return found


class Names(NamedTuple):
    """The capitalised words of a text: ``inside`` a sentence (names: "Leo", "Toronto") and
    ``opening`` one and nowhere else ("Leo has a book report", but also "Write" or "Help")."""

    inside: frozenset[str]
    opening: frozenset[str]


def name_words(text: str) -> Names:
    """One pass over ``text`` for both kinds of capitalised words, lowercased as ``tokens``
    gives them (and not all in capitals); Chinese nicknames count as names inside a
    sentence. "Python" in a question is a name, "ball python" in a memory is not, so a name
    links two texts only where both write it as one; a memory's sentences often open with
    one ("Lily has a nut allergy"), so there both kinds count."""
    inside: set[str] = _nicknames(text) if not text.isascii() else set()
    opening: set[str] = set()
    for sentence in _SENTENCES.split(text):
        for i, word in enumerate(_WORD.findall(sentence)):
            word = word.removesuffix("'s").removesuffix("’s")
            if len(word) >= 3 and word.isalpha() and word[0].isupper() and word[1:].islower():
                (opening if i == 0 else inside).add(word.lower())
    return Names(frozenset(inside - _NOT_NAMES), frozenset(opening - inside - _NOT_NAMES))


# Someone, not something: a sentence's subject ("Noah is 11") or a relative's or a pet's
# name ("my son Noah", "our dog Biscuit").
_PERSON = re.compile(
    r"(?:^|[.!?;。！？；]\s*)([A-Z][a-z]+)(?:'s)? (?:is|has|was|had|turns|goes|loves|hates|"
    r"can't|won't|just|and)\b"
    r"|(?i:\b(?:my|our|his|her|their) (?:[a-z]+ )?(?:son|daughter|kid|child|wife|husband|"
    r"partner|boyfriend|girlfriend|brother|sister|mum|mom|dad|father|mother|friend|dog|cat|"
    r"puppy|kitten|grandson|granddaughter|nephew|niece) )([A-Z][a-z]+)"
)


def people(text: str) -> frozenset[str]:
    """The names of people (and pets) a text speaks of, lowercased: "Noah is 11" and "my son
    Noah" name Noah, "I use Evernote" names no one."""
    return frozenset(w.lower() for found in _PERSON.findall(text) for w in found if w)


def search_text(text: str) -> str:
    """Distinct content tokens, capped so a huge message cannot build a huge query."""
    return " ".join(list(dict.fromkeys(tokens(text[:4000])))[:_MAX_TOKENS])
