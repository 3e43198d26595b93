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
from functools import lru_cache
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
# Words that take "'s" as a contraction or a common possessive, not as someone's name
# ("She's", "Let's", "Today's").
_NOT_OWNERS = STOPWORDS | frozenset(
    "let here today tonight tomorrow yesterday work life everyone everything nothing nobody "
    "someone something everybody somebody mum mom dad one".split()
)


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


# A doubled character is a child's or a pet's name ("朵朵", "乐乐", "壮壮") where it is no
# everyday word: kin, adverbs, a verb tried once ("看看"), a sound. Written after a relative
# or a pet ("孙女朵朵", "我家狗狗叫壮壮") it is one for sure; anywhere else it is a weaker sign,
# as a capitalised word opening an English sentence is.
_DOUBLED = re.compile(r"([\u4e00-\u9fff])\1")
_KIN_BEFORE = re.compile(
    r"(?:孙女|孙子|外孙女|外孙|儿子|女儿|闺女|孩子|宝宝|侄子|侄女|外甥女|外甥|老大|老二|小儿子|小女儿|"
    r"大儿子|大女儿|狗狗|猫猫|小狗|小猫|狗|猫|叫|名叫|小名|乳名)$"
)
_DOUBLED_WORDS = frozenset(
    "妈妈 爸爸 哥哥 姐姐 弟弟 妹妹 爷爷 奶奶 姥姥 姥爷 婆婆 公公 叔叔 伯伯 舅舅 姑姑 婶婶 太太 "
    "宝宝 娃娃 狗狗 猫猫 虫虫 天天 年年 月月 日日 夜夜 时时 刻刻 人人 家家 处处 个个 样样 次次 "
    "刚刚 常常 渐渐 往往 仅仅 偏偏 纷纷 默默 匆匆 悄悄 轻轻 静静 微微 淡淡 深深 紧紧 久久 区区 "
    "慢慢 好好 快快 早早 多多 稍稍 略略 白白 明明 实实 满满 大大 小小 高高 长长 远远 暖暖 "
    "看看 试试 想想 说说 聊聊 走走 听听 问问 等等 谢谢 拜拜 哈哈 呵呵 嘻嘻 嘿嘿 嗯嗯 哦哦 啦啦 "
    "咚咚 滴滴 叮叮 哗哗 星星 猩猩 蛐蛐 蝈蝈 饽饽 乖乖 平平 安安 头头 点点 丁丁 溜溜 嘟嘟 "
    "层层 步步 声声 句句 字字 件件 条条 张张 本本 块块 片片 滚滚 团团 绵绵 蒙蒙 哒哒 "
    "逛逛 尝尝 泡泡 转转 偷偷 单单 简简 玩玩 摸摸 抱抱 亲亲 拍拍 揉揉 擦擦 洗洗 吃吃 喝喝 睡睡 "
    "坐坐 躺躺 跑跑 跳跳 写写 读读 练练 学学 碰碰 歇歇 瞧瞧 找找 翻翻 动动 查查 算算 理理 改改 "
    "弄弄 打打 闹闹 哭哭 笑笑 散散 晒晒 聚聚 逗逗 遛遛".split()
)


def _doubled(text: str) -> tuple[set[str], set[str]]:
    """Doubled-character names: those after a relative or a pet, and the rest."""
    sure: set[str] = set()
    weak: set[str] = set()
    for m in _DOUBLED.finditer(text):
        name = m.group()
        if name in _DOUBLED_WORDS:
            continue
        (sure if _KIN_BEFORE.search(text, 0, m.start()) else weak).add(name)
    return sure, weak - sure


class Names(NamedTuple):
    """The capitalised words of a text: ``inside`` a sentence (names: "Leo", "Toronto") and
    ``opening`` one and nowhere else ("Leo has a book report", but also "Write" or "Help")."""

    inside: frozenset[str]
    opening: frozenset[str]


# Recall reads the names of each candidate memory on every request that names someone, and
# the same memories come back request after request: their names are read once. The result
# is immutable, so sharing it is safe.
@lru_cache(maxsize=8192)
def name_words(text: str) -> Names:
    """One pass over ``text`` for both kinds of capitalised words, lowercased as ``tokens``
    gives them (and not all in capitals). A word opening a sentence as someone's ("Theo's
    birthday is coming up", not "She's" or "Let's") counts as one inside it. Chinese
    nicknames, and doubled characters after a relative or a pet, count as names inside a
    sentence; other doubled characters as names opening one. "Python" in a question is a
    name, "ball python" in a memory is not, so a name links two texts only where both write
    it as one; a memory's sentences often open with one ("Lily has a nut allergy"), so there
    both kinds count."""
    inside: set[str] = set()
    opening: set[str] = set()
    if not text.isascii():
        sure, weak = _doubled(text)
        inside = _nicknames(text) | sure
        opening = weak
    for sentence in _SENTENCES.split(text):
        for i, raw in enumerate(_WORD.findall(sentence)):
            word = raw.removesuffix("'s").removesuffix("’s")
            if len(word) >= 3 and word.isalpha() and word[0].isupper() and word[1:].islower():
                # someone's, opening a sentence, is someone: "Theo's birthday is coming up"
                # (not a contraction: "She's", "Let's", "Today's")
                owned = word != raw and word.lower() not in _NOT_OWNERS
                (opening if i == 0 and not owned else inside).add(word.lower())
    return Names(frozenset(inside - _NOT_NAMES), frozenset(opening - inside - _NOT_NAMES))


# Chinese capitalises no word of its own: a capitalised word written against Chinese
# ("Pepper 最近不爱吃饭", "Pepper，最近…", "周末带Biscuit去海边") names someone or something,
# where an English sentence opening with one says no more than that it opens ("Write a poem
# about 春天"). English words mixed into Chinese are often ordinary ones ("Review 一下",
# "Sorry 我来晚了"): those are no names.
_CAPITALISED = re.compile(r"(?<![A-Za-z])[A-Z][a-z]{2,}(?![A-Za-z])")
_HAN_SIDE = re.compile(r"[\u4e00-\u9fff，。！？；：、（）“”‘’《》]")
_MIXED_IN = frozenset(
    "review check help write sorry okay hello thanks please yes fine cool nice update fix "
    "debug test deploy merge push pull commit call meeting email ping sync follow note "
    "plan list share send open close save print copy paste delete search".split()
)


@lru_cache(maxsize=8192)
def names_in_han(text: str) -> frozenset[str]:
    """Capitalised words written against Chinese characters or punctuation, lowercased as
    ``tokens`` gives them, but for ordinary English words mixed in: a request's names where
    its sentences are Chinese (``name_words`` reads one opening a sentence as no name). Only
    a request's: what a memory says of a thing it names is read by ``name_words`` alone."""
    if text.isascii():
        return frozenset()
    found: set[str] = set()
    for m in _CAPITALISED.finditer(text):
        before = text[: m.start()].rstrip(" ")[-1:]
        after = text[m.end() :].removeprefix("'s").lstrip(" ")[:1]
        if _HAN_SIDE.match(before) or _HAN_SIDE.match(after):
            found.add(m.group().lower())
    return frozenset(found) - _NOT_NAMES - _MIXED_IN


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")


@lru_cache(maxsize=8192)
def mostly_han(text: str) -> bool | None:
    """Written in Chinese: at least as many Chinese characters as Latin words (a character
    is about a word), so a Chinese sentence naming tools or places in English still counts
    ("我在用 Visual Studio Code 写 TypeScript"), an English one with a Chinese dish does not
    ("I love 小笼包 from Din Tai Fung"). None for a text with neither ("2024", "👍")."""
    han = len(_HAN.findall(text))
    words = len(_LATIN_WORD.findall(text))
    if not han and not words:
        return None
    return han >= words


# Someone, not something: a sentence's subject ("Noah is 11") or a relative's or a pet's
# name ("my son Noah", "our dog Biscuit").
_PERSON = re.compile(
    r"(?:^|[.!?;。！？；]\s*)([A-Z][a-z]+)(?:'s)? (?:is|has|was|had|turns|goes|loves|hates|"
    r"can't|won't|just|and)\b"
    r"|(?i:\b(?:my|our|his|her|their) (?:[a-z]+ )?(?:son|daughter|kid|child|wife|husband|"
    r"partner|boyfriend|girlfriend|brother|sister|mum|mom|dad|father|mother|friend|dog|cat|"
    r"puppy|kitten|grandson|granddaughter|nephew|niece) )([A-Z][a-z]+)"
)


@lru_cache(maxsize=8192)
def romanized(names: frozenset[str]) -> frozenset[str]:
    """The Chinese names among ``names`` in pinyin without tones, run together, as English
    writes them ("糖糖": "tangtang", "阿杰": "ajie", "悦悦": "yueyue"): a name one text writes
    in Chinese and the other in English is one name. Most name sets hold no Chinese name:
    those cost no lookup, and pypinyin is imported only once one does."""
    chinese = [name for name in names if _HAN.search(name)]
    if not chinese:
        return frozenset()
    from pypinyin import lazy_pinyin

    return frozenset("".join(lazy_pinyin(name)) for name in chinese)


# Someone a memory opens with, as what it is about: "Kai is a dive instructor", "Oisín's
# obsessed with sharks", "Lin Xiao loves cats", "Kai 最近迷上了手冲咖啡". A capitalised word
# followed by a verb, by someone's thing ("Xiaoyu's winter break") or by Chinese; not a
# contraction ("Coriander's a no", "Let's"), and in English not a word ending in -ing
# ("Fishing is how I unwind"; "Tingting 最近迷恐龙" is someone).
_OPENING_NAME = re.compile(
    r"\s*(?P<name>[A-Z][a-zà-ÿ]{1,15})(?: [A-Z][a-zà-ÿ]{1,15})?"
    r"(?:(?:'s|’s) (?!(?:a|an|the|my|our|no|not|what|how|been|got|gone)\b)"
    r"|(?P<han>\s?(?=[\u4e00-\u9fff，、：]))"
    r"| (?=(?:is|was|has|had|turns|turned|loves|likes|hates|adores|gets|takes|teaches|plays|"
    r"practi[sc]es|already|always|never|still|really|just|can't|won't|prefers|wants|works|"
    r"lives|studies|communicates|goes|keeps|needs|sings|reads|eats|collects|wears)\b))"
)
_NAME_TAGS = frozenset({"nr", "nrt", "nrfg"})


@lru_cache(maxsize=8192)
def opens_with_someone(text: str) -> str | None:
    """The name of someone the text opens with as what it is about, lowercased, in English
    or in Chinese ("豆豆最近迷恐龙": a doubled character no everyday word; "子轩喜欢打篮球": a
    name the dictionary tags as one); None if it opens otherwise. A word of the user's
    topics may still open it ("Astrophotography is my thing"): the caller checks those."""
    found = _OPENING_NAME.match(text)
    if found:
        word = found.group("name").lower()
        if (
            (word.endswith("ing") and found.group("han") is None)
            or word in _NOT_OWNERS
            or word in _NOT_NAMES
        ):
            return None
        return word
    start = text.lstrip()
    if _DOUBLED.match(start):
        return None if start[:2] in _DOUBLED_WORDS else start[:2]
    nick = _NICKNAME.match(start)
    if nick and nick.group() in _nicknames(start[:4]):
        return nick.group()
    tagged = rjieba.tag(start[:12])
    if tagged and tagged[0][1] in _NAME_TAGS and len(tagged[0][0]) >= 2:
        return str(tagged[0][0])
    return None


def people(text: str) -> frozenset[str]:
    """The names of people (and pets) a text speaks of, lowercased: "Noah is 11" and "my son
    Noah" name Noah, "I use Evernote" names no one."""
    return frozenset(w.lower() for found in _PERSON.findall(text) for w in found if w)


def search_text(text: str) -> str:
    """Distinct content tokens, capped so a huge message cannot build a huge query."""
    return " ".join(list(dict.fromkeys(tokens(text[:4000])))[:_MAX_TOKENS])
