"""Mining: turn the user's latest chat message into candidate memories (pure logic, no Redis).

Only the latest *user* message is mined: earlier turns were mined when they were latest, the
assistant's answer is never evidence about the user, and system/tool messages (which carry
memgate's own injected memories) are never read. The message is split into sentences
(Chinese 。！？； and English .!?; plus line breaks); each sentence is matched against a small
bilingual rule table. Every proposal then goes through the write gate (``check_write``), the
one place that decides what may be stored: secrets and one-time instructions come back as
refusals, never as proposals.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from .classify import is_one_time, normalize
from .gate import Draft, check_write
from .policy import Policy
from .records import content_key

__all__ = [
    "RULES",
    "Extractor",
    "MineResult",
    "Proposal",
    "extract",
    "extract_rules",
    "horizon_of",
    "latest_user_text",
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


# --------------------------------------------------------------------------------------------
# The rule table: (name, type, regex). The first rule that matches a sentence gives its type.
# ASCII words use explicit look-arounds, not \b (see the note at the top of default.yaml).

_A = r"(?<![A-Za-z])"
_Z = r"(?![A-Za-z])"

_CORRECTION = (
    re.compile(rf"(?i)^\s*(?:{_A}no{_Z}|{_A}nope{_Z}|{_A}wrong{_Z}|that'?s (?:wrong|not "
               rf"(?:right|true|correct))|not anymore|correction)\s*[,，:：!！.]\s*"),
    re.compile(rf"(?i)^\s*(?:actually|i meant)\s*[,，:：]?\s*(?=(?:i|my|we|our){_Z})"),
    re.compile(r"^\s*(?:不对|不是的|不是|错了|说错了|你记错了|搞错了|纠正一下|更正一下|更正)"
               r"\s*[，,:：!！。]?\s*"),
)
_REMEMBER = (
    re.compile(rf"(?i)^\s*(?:please\s+)?(?:remember|note|keep in mind|don'?t forget)"
               rf"(?:\s+that)?{_Z}\s*[:：,，]?\s*"),
    re.compile(r"^\s*(?:请)?(?:你要|帮我)?(?:记住|记一下|记下|记好)(?:了)?\s*[:：,，]?\s*"),
)
_FILLER = re.compile(rf"(?i)^\s*(?:(?:oh|ok|okay|well|btw|by the way|also|and|so|hi|hey)"
                     rf"{_Z}\s*[,，]?\s*|(?:嗯|哦|对了|另外|还有|顺便说一下|顺便)\s*[，,]?\s*)+")

_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|"
           "december")
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_HORIZON = re.compile(
    rf"(?i){_A}(?:next (?:week|month|year|weekend|{_DAYS})|tomorrow|this (?:weekend|week|month|"
    rf"summer|winter|spring|autumn|fall|year)|in (?:{_MONTHS})|in \d+ (?:days?|weeks?|months?)|"
    rf"by (?:the end of )?(?:{_MONTHS}|next \w+|the end of \w+)|on (?:{_DAYS}))"
    r"|下(?:个)?(?:周|星期|礼拜|月)[一二三四五六日天]?|明天|后天|明年|今年|年底|月底|周末|过几天|"
    r"(?:\d{1,2}|[一二三四五六七八九十]{1,3})月(?:份|底|初)?"
)

RULES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (name, type_, re.compile(regex))
    for name, type_, regex in (
        # accessibility needs
        ("accessibility_en", "accessibility",
         rf"(?i){_A}(?:colou?r[- ]?blind|dyslexi[ac]|visually impaired|low vision|screen reader|"
         rf"hard of hearing|deaf|(?:larger?|bigger|big) (?:font|text)|high contrast|adhd|"
         rf"partially sighted){_Z}"),
        ("accessibility_zh", "accessibility",
         r"色盲|色弱|视力(?:不好|差)|视障|弱视|读屏|屏幕阅读器|大字号|字(?:体)?大一点|听力不好|"
         r"听障|阅读障碍|老花眼|高对比度"),
        # how answers should look
        ("format_en", "format",
         rf"(?i){_A}(?:(?:always|please|use|using|prefer|give me|format|put|write)(?:\s+\w+)?"
         rf"\s+(?:in\s+|with\s+|as\s+)?(?:bullet(?:ed)?[- ]?points?|bullets|markdown|tables?|"
         rf"numbered lists?|code blocks?|headings|plain text|json|latex)|(?:no|without|avoid|"
         rf"don'?t use|never use) (?:any )?(?:emojis?|markdown|tables|bullet points|headings)"
         rf"){_Z}"),
        ("format_zh", "format",
         r"(?:用|使用|以|要|都)(?:表格|列表|分点|markdown|Markdown|代码块|纯文本|要点)|"
         r"分点(?:回答|列出|说明|写)|(?:不要|别|不用)(?:用|加)?(?:表情|emoji|markdown|Markdown|"
         r"表格|注释)|代码不要加注释"),
        # lasting wishes and likes
        ("preference_en", "preference",
         rf"(?i){_A}(?:i (?:really |much |strongly )?(?:prefer|like|love|hate|dislike|enjoy|"
         rf"don'?t like|can'?t stand)|my favou?rite|from now on|(?:please )?always|"
         rf"(?:please )?never|(?:answer|reply|respond|write|talk) (?:to me )?in (?:english|"
         rf"chinese|mandarin|japanese|korean|french|german|spanish)){_Z}"),
        ("preference_zh", "preference",
         r"以后|今后|从现在(?:开始|起)|往后|一律|始终|总是|每次都|我(?:比较|更|很|最)?"
         r"(?:喜欢|偏好|习惯|爱|讨厌|不喜欢|受不了)|我最爱|请用.{1,8}(?:回答|回复)|"
         r"(?:回答|回复)(?:都|请)?(?:用|使用)"),
        # goals (things worked towards) and plans (near-term arrangements)
        ("goal_en", "goal",
         rf"(?i){_A}(?:i'?m|i am|we'?re|we are) (?:preparing|studying|training|working|aiming|"
         rf"trying|practi[cs]ing) (?:for|to|towards?|hard)|{_A}my (?:goal|aim|target) is|"
         rf"{_A}i (?:want|hope|need|plan) to (?:learn|become|pass|get better|improve|master|"
         rf"finish|lose|run)|{_A}i'?m learning{_Z}"),
        ("goal_zh", "goal",
         r"备考|(?:在|正在)?准备(?:考|参加)?.{0,12}(?:考试|雅思|托福|GRE|考研|面试|比赛)|"
         r"目标是|我想(?:学会|考过|考上|通过|成为|提高|练好)|(?:正在|在)学(?!校)|我要考"),
        ("plan_en", "plan",
         rf"(?i){_A}(?:(?:i'?m|i am|we'?re|we are) (?:going to|going|travel(?:l)?ing|flying|"
         rf"moving|visiting|leaving|heading)|i(?:'ll| will| plan to| am planning to| intend to)"
         rf" (?:go|travel|fly|move|visit|be in|be away|attend)){_Z}"),
        ("plan_zh", "plan",
         r"(?:下(?:个)?(?:周|星期|礼拜|月)|明天|后天|明年|周末|过几天|月底|年底).{0,16}"
         r"(?:去|要|出差|旅行|旅游|搬|回|飞|参加|开会|考试|面试|休假)|(?:打算|计划|准备)(?:去|到|"
         r"搬|出差|旅行)"),
        # facts about the current project
        ("project_en", "project",
         rf"(?i){_A}(?:(?:this|our|the) (?:project|repo|repository|codebase|app|service|backend|"
         rf"frontend|api|team)|we) (?:uses?|is (?:built|written) (?:with|in|on)|runs? on|"
         rf"(?:are |is )?using|switched to|migrated to|moved to|deploys? (?:to|on)|is based on|"
         rf"relies on|targets?){_Z}"),
        ("project_zh", "project",
         r"(?:这个|本|该|我们的?|咱们的?)(?:项目|仓库|代码库|后端|前端|服务|系统|工程)"
         r"(?:里|中|现在|目前)?(?:都)?(?:用|使用|采用|基于|是用|跑在|部署在|改用|换成)|"
         r"我们(?:现在|目前)?(?:用|使用|采用)(?:的是)?"),
        # stable facts about the user
        ("profile_en", "profile",
         rf"(?i){_A}(?:my name is|my name'?s|call me|i live in|i'?m based in|i am based in|"
         rf"i moved to|i work (?:as|at|for|in)|i'?m (?:a|an) |i am (?:a|an) |i (?:now |mostly |"
         rf"mainly |usually )?(?:use|code in|write in|program in)|i'?m (?:now )?using|"
         rf"my (?:timezone|time zone|cat|dog|pet|wife|husband|partner|son|daughter|birthday)|"
         rf"i'?m on (?:macos|windows|linux|ubuntu)|i have (?:a|an|two|three) ){_Z}"),
        ("profile_zh", "profile",
         r"我叫|我的名字|叫我|我住在|我(?:现在)?(?:住|生活|定居)在|我搬到|我在.{1,10}(?:工作|上班)|"
         r"我是(?:一[名个位])?|我(?:现在|平时|一般|主要|日常)(?:都)?(?:用|使用|写)|我用的是|"
         r"我(?:现在)?用的是|我在用|我的(?:时区|操作系统|编辑器|猫|狗|宠物|生日|老婆|老公|孩子)|"
         r"我有(?:一|两|三)(?:只|个|条)"),
    )
)

_QUESTION_EN = re.compile(
    r"(?i)^\s*(?:do|does|did|can|could|would|will|is|are|was|were|what|who|whom|whose|where|"
    r"when|why|how|which|should|shall|have|has|may|might|am|isn'?t|aren'?t|don'?t|doesn'?t|"
    r"won'?t|wouldn'?t|couldn'?t)(?![A-Za-z])"
)
_QUESTION_ZH = re.compile(
    r"(?:吗|么|呢|嘛|什么|哪里|哪儿|哪个|多少|几[个点号])\s*$|^(?:请问|为什么|怎么|如何|是否|"
    r"能不能|可不可以|要不要|有没有|是不是|你还记得|你记得)|是不是|对不对|好不好|行不行|有没有"
)

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
        body = text[pos:m.start()].strip()
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


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: only text parts are the user's words
        return "\n".join(
            str(part.get("text", "")) for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text")
        )
    return ""


def latest_user_text(messages: Sequence[dict[str, Any]]) -> str | None:
    """The text of the request's last message when it is the user's, else None.

    When the last message is a tool result or an assistant prefill, the latest user message was
    already mined with the request that ended with it.
    """
    if not messages:
        return None
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        return None
    text = _text_of(last.get("content"))
    return text if text.strip() else None


def _is_question(body: str, end: str) -> bool:
    if "?" in end or "？" in end:
        return True
    folded = normalize(body)
    return bool(_QUESTION_EN.search(folded) or _QUESTION_ZH.search(folded))


def _clean(text: str) -> str:
    text = _TRAILING.sub("", text.strip(_STRIP))
    return text.strip(_STRIP)


def _strip_prefix(text: str, patterns: Iterable[re.Pattern[str]]) -> tuple[str, bool]:
    for pattern in patterns:
        m = pattern.match(text)
        if m and text[m.end():].strip():
            return text[m.end():], True
    return text, False


def _match_rule(text: str) -> tuple[str, str] | None:
    folded = normalize(text)
    for name, type_, pattern in RULES:
        if pattern.search(folded):
            return name, type_
    return None


def screen(proposal: Proposal, policy: Policy, now: datetime | None = None, *,
           allow_inferences: bool = True) -> tuple[Proposal | None, str | None]:
    """Pass a proposal through the write gate: (proposal with slot/sensitivity, None) when it
    may be queued, else (None, outcome). A model inference may be queued, marked as such,
    because the queue is exactly where it waits for the user's confirmation."""
    draft = Draft(content=proposal.content, type=proposal.type, source=proposal.source,
                  scope=proposal.scope, project_id=proposal.project_id, slot=proposal.slot)
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
        content=proposal.content, type=proposal.type, scope=proposal.scope,
        project_id=proposal.project_id, slot=decision.slot, sensitivity=decision.sensitivity,
        source=proposal.source, is_correction=proposal.is_correction, horizon=proposal.horizon,
        evidence=proposal.evidence, rule=proposal.rule,
    )
    return screened, None


def horizon_of(content: str) -> str | None:
    """When a goal or plan is due, as the user said it ("next week", "下周"), else None."""
    m = _HORIZON.search(normalize(content))
    return m.group().strip() if m else None


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
    text = latest_user_text(messages)
    if text is None:
        return result
    injected = set(injected_keys) | {mining_key(t) for t in injected_texts if t}
    seen: set[str] = set()
    for body, end in split_sentences(text):
        if _is_question(body, end) or body.endswith((":", "：")):
            continue  # questions, and lead-ins to what follows ("here is my key:"), say nothing
        if _REDACTED in body:  # the job carries the message with its secrets already redacted
            result.refused.append("refused_sensitive")
            continue
        sentence = _FILLER.sub("", body, count=1) or body
        rest, is_correction = _strip_prefix(sentence, _CORRECTION)
        rest, is_remember = _strip_prefix(rest, _REMEMBER)
        content = _clean(rest)
        if not content:
            continue
        if mining_key(content) in injected or mining_key(body) in injected:
            continue
        matched = _match_rule(content)
        if matched is not None:
            rule, type_ = matched
        elif is_remember or is_correction:
            rule, type_ = ("remember" if is_remember else "correction"), "profile"
        else:
            # Not memory-worthy, but secrets and one-time wishes are still counted as refused.
            probe = Proposal(content=content, type="session" if is_one_time(content, policy)
                             else "profile", evidence=body)
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
        horizon = horizon_of(content) if type_ in ("goal", "plan") else None
        proposal = Proposal(content=content, type=type_, scope=scope, project_id=project,
                            is_correction=is_correction, horizon=horizon, evidence=body,
                            rule=rule)
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

    async def __call__(self, text: str, *, project_id: str | None, task: str | None,
                       injected_keys: Collection[str], policy: Policy,
                       now: datetime) -> MineResult: ...


async def extract_rules(text: str, *, project_id: str | None, task: str | None,
                        injected_keys: Collection[str], policy: Policy,
                        now: datetime) -> MineResult:
    """The default extractor: the bilingual rule table (``extract``), offline and cheap."""
    return extract([{"role": "user", "content": text}], project_id=project_id, policy=policy,
                   injected_keys=injected_keys, now=now)
