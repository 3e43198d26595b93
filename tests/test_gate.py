"""The write gate's decision table: what may be stored, under which source, until when."""

from __future__ import annotations

import inspect
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gateway.memory.gate
import gateway.memory.policy
import gateway.memory.sensitivity
from gateway.memory.gate import REASONS, Draft, GateDecision, check_write
from gateway.memory.policy import Policy, default_policy_path, load_policy, parse_policy
from tests.secret_corpus import BENIGN, CONTACTS, SECRET_VALUES

pytestmark = pytest.mark.unit  # no Redis, servers or browsers

POLICY = load_policy()
NOW = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
DAY = timedelta(days=1)


def decide(content: str = "I prefer concise answers", **kw: Any) -> GateDecision:
    duplicate = kw.pop("duplicate", False)
    fields: dict[str, Any] = {"type": "preference", "source": "user_stated", **kw}
    return check_write(Draft(content=content, **fields), POLICY, NOW, duplicate=duplicate)


# --- the table ------------------------------------------------------------------------------
# id: (content, draft fields, reasons, stored source, days until expiry, when it expires, or None)

US, UC, MI = "user_stated", "user_confirmed", "model_inference"
ONE_TIME, SENSITIVE = ("one_time",), ("sensitive",)
PROJECT = {"type": "project", "scope": "project", "project_id": "memgate"}

# fmt: off
TABLE: dict[str, tuple[str, dict[str, Any], tuple[str, ...], str, int | datetime | None]] = {
    # long-term types never expire on their own
    "preference": ("I prefer concise answers", {}, (), US, None),
    "accessibility": ("I am colour-blind", {"type": "accessibility"}, (), US, None),
    "format": ("代码不要加注释", {"type": "format"}, (), US, None),
    "profile": ("我住在杭州", {"type": "profile"}, (), US, None),
    # time-limited types get their TTL from the policy
    "project": ("project uses FastAPI", PROJECT, (), US, 365),
    "goal": ("准备雅思考试", {"type": "goal"}, (), US, 30),
    "plan": ("moving to Berlin", {"type": "plan"}, (), US, 14),
    # ... or from the time a goal or plan names
    "plan next month": ("moving to Berlin next month", {"type": "plan"}, (), US,
                        datetime(2025, 5, 1, tzinfo=UTC)),
    # how answers sound and how long they are: lasting wishes when saved as such ...
    "tone": ("be blunt with me", {"type": "tone"}, (), US, None),
    "length": ("keep replies under 150 words", {"type": "length"}, (), US, None),
    # ... and one-time when said for now, whatever the type
    "tone for now": ("be playful now", {"type": "tone"}, ONE_TIME, US, None),
    "length today": ("keep it short today", {"type": "length", "confirmed": True}, ONE_TIME, US,
                     None),
    "length this time": ("这次简短一点", {"type": "length"}, ONE_TIME, US, None),
    # session types are never stored, whatever the source or confirmation
    "roleplay": ("you are a pirate", {"type": "roleplay", "source": "admin"}, ONE_TIME, "admin",
                 None),
    "session": ("answer in French", {"type": "session"}, ONE_TIME, US, None),
    # inference-tier types need the user's confirmation
    "inference": ("seems to be a student", {"type": "inference"}, (MI,), US, None),
    "inference confirmed": ("is a student", {"type": "inference", "confirmed": True}, (), US,
                            None),
    "inference by user_confirmed": ("is a student", {"type": "inference", "source": UC}, (), UC,
                                    None),
    # every source
    "user_stated": ("I use Neovim", {}, (), US, None),
    "user_confirmed": ("I use Neovim", {"source": UC}, (), UC, None),
    "admin": ("I use Neovim", {"source": "admin"}, (), "admin", None),
    "import": ("I use Neovim", {"source": "import"}, (), "import", None),
    "model_inference": ("probably uses Neovim", {"source": MI}, (MI, "unconfirmed"), MI, None),
    "model_inference confirmed": ("uses Neovim", {"source": MI, "confirmed": True}, (), UC, None),
    "model_inference plan confirmed": ("下周去上海出差",
                                       {"source": MI, "type": "plan", "confirmed": True},
                                       (), UC, 14),
    # one-time instructions, in both languages, are refused even when confirmed
    "one_time en": ("keep it short this time", {}, ONE_TIME, US, None),
    "one_time en confirmed": ("just the answer this time", {"confirmed": True}, ONE_TIME, US,
                              None),
    "one_time zh": ("这次简短一点", {}, ONE_TIME, US, None),
    "one_time zh confirmed": ("这个问题用英文回答", {"source": UC}, ONE_TIME, UC, None),
    "one_time curly apostrophe": ("let’s roleplay an interview", {}, ONE_TIME, US, None),
    "one_time full-width": ("ＫＥＥＰ ＩＴ ＳＨＯＲＴ ＴＨＩＳ ＴＩＭＥ", {}, ONE_TIME, US, None),
    # "this time" of a trip is no instruction for this answer
    # ... and a trip at National Day lasts until October is over
    "trip this time zh": ("国庆再去成都，这次住春熙路附近", {"type": "plan"}, (), US,
                          datetime(2025, 11, 1, tzinfo=UTC)),
    "trip this time en": ("Seeing my parents in March, flying this time instead of the train",
                          {"type": "plan"}, (), US, datetime(2025, 4, 1, tzinfo=UTC)),
    "trip this time en after": ("Back in Porto next month, this time we're staying in Foz",
                                {"type": "plan"}, (), US, datetime(2025, 5, 1, tzinfo=UTC)),
    "exam this time zh": ("这次期末想考进年级前十", {"type": "goal"}, (), US, 30),
    # a move whose destination follows "this time"; a language after it is still an answer's
    "move this time en": ("Relocating again in May, this time to Rotterdam", {"type": "plan"}, (),
                          US, datetime(2025, 6, 1, tzinfo=UTC)),
    "one_time into a language": ("translate it this time to German", {}, ONE_TIME, US, None),
    "one_time to a purpose": ("Keep it short this time to save tokens", {}, ONE_TIME, US, None),
    # a lasting fact or wish said with "now" or "today" is no wish for now
    "fact now": ("Keep in mind I'm vegetarian now", {"type": "profile"}, (), US, None),
    "wish from today": ("Keep answers brief from today", {"type": "length"}, (), US, None),
    "holiday this time en": ("Going back to Berlin - a proper holiday this time with my partner",
                             {"type": "plan"}, (), US, 14),
    "this time it is zh": ("换了份工作，这次是做运营", {"type": "profile"}, (), US, None),
    "persistent zh": ("以后都用中文回答", {}, (), US, None),
    "persistent en": ("From now on, always answer in English", {}, (), US, None),
    # secrets are refused even when confirmed; contact details are fine
    "sensitive en": ("my password is Tr0ub4dor&3", {}, SENSITIVE, US, None),
    "sensitive zh": ("我的身份证号是110105199003071239", {"type": "profile"}, SENSITIVE, US, None),
    "sensitive confirmed": ("密码是abc12345", {"confirmed": True}, SENSITIVE, US, None),
    "medium": ("我的手机号是13812345678", {"type": "profile"}, (), US, None),
    # duplicates are the store's call
    "duplicate": ("I prefer concise answers", {"duplicate": True}, ("duplicate",), US, None),
    # everything at once, in canonical order
    "all reasons": ("这次用这个密钥 sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
                    {"source": MI, "scope": "team", "duplicate": True},
                    ("sensitive", MI, "one_time", "unconfirmed", "duplicate", "invalid"), MI, None),
}
# fmt: on


@pytest.mark.parametrize(
    ("content", "fields", "reasons", "source", "days"),
    [pytest.param(*row, id=name) for name, row in TABLE.items()],
)
def test_decision_table(
    content: str,
    fields: dict[str, Any],
    reasons: tuple[str, ...],
    source: str,
    days: int | datetime | None,
) -> None:
    decision = decide(content, **fields)
    assert decision.reasons == reasons
    assert decision.allowed is (reasons == ())
    assert decision.source == source
    expected = NOW + days * DAY if isinstance(days, int) else days
    assert decision.expires_at == expected


def test_the_table_covers_every_tier_source_and_reason() -> None:
    rows = TABLE.values()
    types = {fields.get("type", "preference") for _, fields, *_ in rows}
    sources = {fields.get("source", US) for _, fields, *_ in rows}
    reasons = {r for _, _, found, *_ in rows for r in found}
    assert {POLICY.tier(t) for t in types} == {"long_term", "time_limited", "session", "inference"}
    assert types >= set(POLICY.types)
    assert sources == set(POLICY.sources)
    assert reasons == set(REASONS)


# --- invalid drafts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reasons"),
    [
        # "this time" of a plan says who or where this time, not how to answer once
        ("下周去汉诺威，这次豆包送宠物酒店，10天", ()),
        ("CKA 考試訂在 7 月 10 號，這次一定要過。", ()),
        ("这次简短一点", ONE_TIME),
        # ... but a wish about this answer is one, however it is said
        ("这次一定用英文回答我", ONE_TIME),
        ("这次送我一首诗吧", ONE_TIME),
    ],
)
def test_this_time_in_a_plan_is_no_one_time_wish(content: str, reasons: tuple[str, ...]) -> None:
    assert decide(content, type="plan").reasons == reasons
    assert decide(content, type="goal").reasons == reasons


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"type": "mood"}, id="unknown type"),
        pytest.param({"source": "rumour"}, id="unknown source"),
        pytest.param({"content": ""}, id="empty"),
        pytest.param({"content": " \n\t "}, id="blank"),
        pytest.param({"content": "很长" * 1001}, id="too long"),
        pytest.param({"scope": "team"}, id="unknown scope"),
        pytest.param({"scope": "task:"}, id="empty task kind"),
        pytest.param({"scope": "task:Code-Review"}, id="task kind charset"),
        pytest.param({"scope": "task:" + "a" * 33}, id="task kind too long"),
        pytest.param({"scope": "task:写作"}, id="task kind not ascii"),
        pytest.param({"scope": "project"}, id="project scope without project_id"),
        pytest.param({"scope": "project", "project_id": "  "}, id="blank project_id"),
        pytest.param({"type": "project"}, id="project type without project_id"),
        pytest.param({"expires_at": NOW - DAY}, id="expired"),
        pytest.param({"expires_at": NOW}, id="expires now"),
        pytest.param({"expires_at": datetime(2030, 1, 1)}, id="naive expiry"),
        pytest.param({"slot": "Has Spaces"}, id="bad slot"),
    ],
)
def test_invalid_drafts(fields: dict[str, Any]) -> None:
    content = fields.pop("content", "I prefer concise answers")
    decision = decide(content, **fields)
    assert decision.reasons == ("invalid",)
    assert not decision.allowed


def test_content_at_the_limit_is_valid() -> None:
    assert decide("好" * POLICY.limits.max_content_chars).allowed


@pytest.mark.parametrize("scope", ["global", "project", "task:code_review", "task:a", "task:x-1"])
def test_valid_scopes(scope: str) -> None:
    assert decide("I prefer concise answers", scope=scope, project_id="p1").allowed


def test_project_id_is_allowed_without_project_scope() -> None:
    assert decide("uses FastAPI", type="project", project_id="p1").allowed


# --- expiry ----------------------------------------------------------------------------------


def test_explicit_expiry_wins_over_the_type_ttl() -> None:
    until = NOW + 3 * DAY
    assert decide("moving next week", type="plan", expires_at=until).expires_at == until


# saved on NOW (1 March 2025, 09:30 UTC)
HORIZONS = [
    ("dentist tomorrow at 9", "plan", NOW + 2 * DAY),
    ("明天一早要去批发市场进货", "plan", NOW + 2 * DAY),
    ("后天要去医院复查", "plan", NOW + 3 * DAY),
    # today, unless it is when something starts: then the type's lifetime
    ("今天下午带孙女去打疫苗，提醒我带上接种本", "plan", NOW + 2 * DAY),
    ("Picking up the new glasses this afternoon", "plan", NOW + 2 * DAY),
    ("I'm starting keto today", "goal", NOW + 30 * DAY),
    ("从今天开始每天跑步", "goal", NOW + 30 * DAY),
    ("Starting a two-week juice cleanse today", "goal", NOW + 14 * DAY),
    # a weekday it holds until or is due by
    ("Taper week: keeping every run under 8 km until Sunday's race", "goal", NOW + 7 * DAY),
    ("Need to get the report done by Friday", "plan", NOW + 7 * DAY),
    # ... but not a weekday that comes back every week, nor a today said for good
    ("no coffee on workdays, Monday till Friday", "goal", NOW + 30 * DAY),
    ("This morning my doctor told me to cut out sugar for good", "goal", NOW + 30 * DAY),
    # a challenge named after its month ends with it, whatever year it says
    ("Doing Dry January this year, no booze at all", "goal", datetime(2026, 2, 1, tzinfo=UTC)),
    ("this weekend we're hosting my in-laws", "plan", NOW + 7 * DAY),
    ("这周末要给店里做个大扫除", "plan", NOW + 7 * DAY),
    ("周五要交报告", "plan", NOW + 7 * DAY),
    ("I'm flying to Tokyo next week", "plan", NOW + 14 * DAY),
    ("下个礼拜三面试", "plan", NOW + 14 * DAY),
    # something that runs for weeks, starting this week
    ("signed up for a 6-week pottery course, starts this Thursday", "plan", NOW + 42 * DAY),
    # a weekday before a word is no month: "下周一月考"
    ("下周一月考", "plan", NOW + 14 * DAY),
    # a count of days or weeks ahead, and something that runs for days
    ("the logo is due in 3 days", "plan", NOW + 3 * DAY),
    ("接了个设计的单子，三天后就要交", "plan", NOW + 3 * DAY),
    ("接下来五天每天都要加班", "plan", NOW + 5 * DAY),
    ("the pitch is three days from now", "plan", NOW + 3 * DAY),
    ("demo day is three weeks from today", "plan", NOW + 21 * DAY),
    ("Starting a 10-day sugar-free challenge today!", "goal", NOW + 10 * DAY),
    ("报了个21天打卡计划", "goal", NOW + 21 * DAY),
    ("I work out 3 days a week", "goal", NOW + 30 * DAY),
    # a season named alone: at most half a year ahead
    ("I'm moving to Tromsø in the autumn for a two-year postdoc", "plan", NOW + 183 * DAY),
    ("秋天去香港读研", "plan", NOW + 183 * DAY),
    ("每周三天去健身房", "goal", NOW + 30 * DAY),
    ("no sugar for the next two weeks", "goal", NOW + 14 * DAY),
    ("接下来两周每天背单词", "goal", NOW + 14 * DAY),
    # a holiday always in one month; how long a trip lasts is no horizon
    ("国庆打算带老婆自驾去云南玩一周", "plan", datetime(2025, 11, 1, tzinfo=UTC)),
    ("Christmas at my sister's this year", "plan", datetime(2026, 1, 1, tzinfo=UTC)),
    ("hosting Thanksgiving for 12 this year", "plan", datetime(2026, 1, 1, tzinfo=UTC)),
    ("五一想去云南玩五天", "plan", datetime(2025, 6, 1, tzinfo=UTC)),
    # school holidays and Spring Festival end with their month, whatever year they say
    ("寒假打算带俩孩子去亚布力滑雪", "plan", datetime(2026, 3, 1, tzinfo=UTC)),
    ("今年暑假想带俩孩子去大连看海", "plan", datetime(2025, 9, 1, tzinfo=UTC)),
    ("over the Easter holidays we're visiting Gran", "plan", datetime(2025, 5, 1, tzinfo=UTC)),
    # a year-end report is a report's name: its deadline is the month it names
    (
        "Need to get the year-end reserves report done by the end of March.",
        "plan",
        datetime(2025, 4, 1, tzinfo=UTC),
    ),
    ("close the books by year-end", "plan", datetime(2026, 1, 1, tzinfo=UTC)),
    # a holiday with no month of its own keeps this year's end; after Spring Festival is no
    # Spring Festival; a holiday that brings someone home is no plan for it
    ("今年中秋回老家", "plan", datetime(2026, 1, 1, tzinfo=UTC)),
    ("今年春节后打算换工作", "plan", datetime(2026, 1, 1, tzinfo=UTC)),
    ("等放寒假带孩子去滑雪", "plan", datetime(2026, 3, 1, tzinfo=UTC)),
    (
        "have to finish the tax return by the end of the month",
        "plan",
        datetime(2025, 4, 1, tzinfo=UTC),
    ),
    # ... or its start or middle, on the 10th or the 20th; this month's start said on its
    # first day is still to come
    ("下个月初店里搞周年庆", "plan", datetime(2025, 4, 11, tzinfo=UTC)),
    ("下个月底店里搞周年庆", "plan", datetime(2025, 5, 1, tzinfo=UTC)),
    ("the exam is early next month", "plan", datetime(2025, 4, 11, tzinfo=UTC)),
    ("下个月中旬交房", "plan", datetime(2025, 4, 21, tzinfo=UTC)),
    ("the move is mid-next month", "plan", datetime(2025, 4, 21, tzinfo=UTC)),
    ("这个月初要交开题报告", "plan", datetime(2025, 3, 11, tzinfo=UTC)),
    ("这个月中旬去体检", "plan", datetime(2025, 3, 21, tzinfo=UTC)),
    ("下个月中心医院有义诊", "plan", datetime(2025, 5, 1, tzinfo=UTC)),
    # a month's middle is not every word after 中 ("中考", "中秋"); a start said as when
    # something begins names no end (the type's lifetime holds)
    ("下个月中考", "plan", datetime(2025, 5, 1, tzinfo=UTC)),
    ("下个月中秋节回老家", "plan", datetime(2025, 5, 1, tzinfo=UTC)),
    ("the deadline is early this month", "plan", datetime(2025, 3, 11, tzinfo=UTC)),
    ("in the middle of next month we move", "plan", datetime(2025, 4, 21, tzinfo=UTC)),
    ("From the start of next month I'm training for a marathon", "goal", NOW + 30 * DAY),
    ("从下个月初开始每天跑步", "goal", NOW + 30 * DAY),
    ("getting married in 3 months", "plan", NOW + 93 * DAY),
    ("三个月内减掉十斤", "goal", NOW + 93 * DAY),
    ("半年内考出证书", "goal", NOW + 183 * DAY),
    # a count of years ahead: a goal that long stays that long
    ("我们想五年内还清房贷，每个月多还两千", "goal", NOW + 5 * 365 * DAY),
    ("pay off the car within two years", "goal", NOW + 2 * 365 * DAY),
    ("我们在存钱，这一年能省则省", "goal", datetime(2026, 1, 1, tzinfo=UTC)),
    # days left
    ("雅思还有三天就考了，紧张死", "plan", NOW + 3 * DAY),
    ("two days to go until the move", "plan", NOW + 2 * DAY),
    # a goal that takes a year or more by its kind
    (
        "Saving for a house deposit, keeping fun spending under $400 a month",
        "goal",
        NOW + 365 * DAY,
    ),
    ("想专门给女儿攒大学的钱", "goal", NOW + 365 * DAY),
    ("我在备考 CPA，还剩审计和税法两科没过", "goal", NOW + 365 * DAY),
    (
        "Booked a dark-sky trip to Namibia for the second half of August",
        "plan",
        datetime(2025, 9, 1, tzinfo=UTC),
    ),
    # "down the road" is a place, not a time
    ("Trying the new Thai place down the road this Friday", "plan", NOW + 7 * DAY),
    # a goal for the long run lasts two years
    (
        "Long-term I want my English good enough to work as a nurse in the UK",
        "goal",
        NOW + 730 * DAY,
    ),
    ("长远来看想自己开家咖啡店", "goal", NOW + 730 * DAY),
    ("I want to read 30 books this year", "goal", datetime(2026, 1, 1, tzinfo=UTC)),
    ("我在减肥，目标是年底前减到60公斤", "goal", datetime(2026, 1, 1, tzinfo=UTC)),
    ("打算明年春天带全家去新疆自驾", "plan", datetime(2027, 1, 1, tzinfo=UTC)),
    ("saving for a new roof by next summer", "goal", datetime(2027, 1, 1, tzinfo=UTC)),
    ("the conference is in June", "plan", datetime(2025, 7, 1, tzinfo=UTC)),
    ("十二月底前交论文", "goal", datetime(2026, 1, 1, tzinfo=UTC)),
    # a month already past this year is next year's; a year named is that year's
    ("ski trip in February", "plan", datetime(2026, 3, 1, tzinfo=UTC)),
    ("next March we renovate the kitchen", "plan", datetime(2026, 4, 1, tzinfo=UTC)),
    ("buying a flat by June 2028", "goal", datetime(2028, 7, 1, tzinfo=UTC)),
    ("2028年3月前买房", "goal", datetime(2028, 4, 1, tzinfo=UTC)),
    # a date ends when its day does; a range at its last day; a date past is next year's
    ("report cards are due March 28", "plan", datetime(2025, 3, 29, tzinfo=UTC)),
    ("in Chiang Mai from March 20 to March 27", "plan", datetime(2025, 3, 28, tzinfo=UTC)),
    ("visa interview on 3rd of April", "plan", datetime(2025, 4, 4, tzinfo=UTC)),
    ("4月10日之前要交期末成绩", "plan", datetime(2025, 4, 11, tzinfo=UTC)),
    ("dentist Feb 3", "plan", datetime(2026, 2, 4, tzinfo=UTC)),
    # a month named before what happens in it: "the October exam", "a May wedding"
    ("Working towards the October IELTS exam", "goal", datetime(2025, 11, 1, tzinfo=UTC)),
    ("Signed up for the November half marathon", "plan", datetime(2025, 12, 1, tzinfo=UTC)),
    # ... not one already past, nor a name
    ("Run a sub-4 marathon; I did the October one in 4:20 last year", "goal", NOW + 30 * DAY),
    ("Help our June plan her wedding", "goal", NOW + 30 * DAY),
    # ... in Chinese numerals as well as figures
    ("四月十二号飞成都，待两周", "plan", datetime(2025, 4, 13, tzinfo=UTC)),
    ("十月一日全家去北京", "plan", datetime(2025, 10, 2, tzinfo=UTC)),
    ("三月二十九号交开题报告", "plan", datetime(2025, 3, 30, tzinfo=UTC)),
    ("周五八月二号出发", "plan", datetime(2025, 8, 3, tzinfo=UTC)),
    ("十二月三十一号前交齐材料", "plan", datetime(2026, 1, 1, tzinfo=UTC)),
    ("新学期4月1号开学", "plan", datetime(2025, 4, 2, tzinfo=UTC)),
    # a day the month does not have names no end (the type's lifetime holds); twenty days
    # are twenty, a hundred and twenty none this reads
    ("二月三十号交房", "plan", NOW + 14 * DAY),
    ("二十天后出发去西藏", "plan", NOW + 20 * DAY),
    ("一百二十天后出发", "plan", NOW + 14 * DAY),
    # a wish said for these two weeks lapses with them; a fact of the user said with a time
    # is an event, not a span ("started a new job this week" holds)
    ("这两个星期回复都简短点，在赶项目", "preference", NOW + 14 * DAY),
    ("I started a new job at Google this week", "profile", None),
    ("我这两周刚搬到上海", "profile", None),
    # a monthly cap kept is a goal of a year
    ("We're trying to keep groceries under $900 a month", "goal", NOW + 365 * DAY),
    ("I'm saving up to fly home to Vietnam, need about $2,000", "goal", NOW + 365 * DAY),
    # a day of the month alone: this month's if still to come, else the next month's; how
    # long the trip lasts no end before it; a house number or a metro line no day
    ("Flying to Lisbon on the 20th for five days", "plan", datetime(2025, 3, 21, tzinfo=UTC)),
    ("20号上午面试", "plan", datetime(2025, 3, 21, tzinfo=UTC)),
    ("rent's due on the 1st, then I move", "plan", datetime(2025, 3, 2, tzinfo=UTC)),
    ("moving out by the 31st", "plan", datetime(2025, 4, 1, tzinfo=UTC)),
    ("Rose Lane 18号下周日有 open house", "plan", NOW + 14 * DAY),
    ("明天去3号航站楼接人", "plan", NOW + 2 * DAY),
    ("Tomorrow the meeting is on the 5th floor", "plan", NOW + 2 * DAY),
    # a band's name is no month: "五月天" (Mayday)
    ("这周末去看五月天演唱会", "plan", NOW + 7 * DAY),
    # "may" the verb, a cycle, are no time
    ("this may sound silly but I want to learn to swim", "goal", NOW + 180 * DAY),
    ("三个周期以后再看", "plan", NOW + 14 * DAY),
    # several times: the latest
    ("下周开始准备，年底前考完驾照", "goal", datetime(2026, 1, 1, tzinfo=UTC)),
    # no time, a time it starts from: the type's lifetime
    ("去上海出差", "plan", NOW + 14 * DAY),
    ("准备雅思考试", "goal", NOW + 30 * DAY),
    ("从明天开始每天跑五公里", "goal", NOW + 30 * DAY),
    ("starting next week I'm running every morning", "goal", NOW + 30 * DAY),
    # a plan that comes back every week: a season's routine
    ("每周五晚上打羽毛球", "plan", NOW + 90 * DAY),
    ("I go to the gym every Friday", "plan", NOW + 90 * DAY),
    # only goals and plans: a project's facts keep its lifetime
    ("we ship the new API next month", "project", NOW + 365 * DAY),
]


@pytest.mark.parametrize(
    ("saved", "text", "until"),
    [
        # next month's when this month's is past, a month without the day skipped, the
        # year turned; a day just past names no end
        (
            datetime(2026, 12, 20, tzinfo=UTC),
            "dentist on the 5th",
            datetime(2027, 1, 6, tzinfo=UTC),
        ),
        (datetime(2026, 1, 31, 12, tzinfo=UTC), "20号面试", datetime(2026, 2, 21, tzinfo=UTC)),
        (
            datetime(2026, 2, 1, tzinfo=UTC),
            "moving out by the 30th",
            datetime(2026, 3, 31, tzinfo=UTC),
        ),
        (datetime(2026, 6, 25, tzinfo=UTC), "20号面试挂了", None),
    ],
)
def test_a_day_of_the_month_alone_is_the_next_such_day(
    saved: datetime, text: str, until: datetime | None
) -> None:
    assert POLICY.horizons.until(text, "plan", saved) == until


@pytest.mark.parametrize(
    ("text", "memory_type", "until"),
    [
        # a habit being changed that names no time holds for a season, not a goal's month
        ("I'm trying to cut right down on sugar", "goal", NOW + 90 * DAY),
        ("最近在少吃主食，晚饭只吃菜", "goal", NOW + 90 * DAY),
        # a monthly cap on spending kept is a goal of a year, unless it names a time
        ("摩托车相关的开销每个月不超过1500块", "goal", NOW + 365 * DAY),
        ("接下来三个月每个月开销不超过3000", "goal", NOW + 93 * DAY),
        # a plan is no habit
        ("Cut down on the guest list for the party", "plan", None),
        ("想换个每月流量不超过30G的便宜套餐", "plan", None),
        # ... a span or a year it names still decides
        ("接下来两周我在控糖，甜的一口都不碰", "goal", NOW + 14 * DAY),
        ("I'm trying to cut down on red meat this year", "goal", datetime(2026, 1, 1, tzinfo=UTC)),
        # a diet kept for now is a habit being changed
        ("I'm doing low-carb right now, trying to stay under 50g a day", "goal", NOW + 90 * DAY),
        ("Doing keto for two weeks", "goal", NOW + 14 * DAY),
        # a health figure brought down by what one eats is a season's habit
        ("打算少吃点咸的，把血压控制下来", "goal", NOW + 90 * DAY),
        ("Working on lowering my cholesterol with more oats and beans", "goal", NOW + 90 * DAY),
        # an entrance or civil-service exam is months of work: a year, unless it names a time
        ("在准备考研，想考本校的软件工程", "goal", NOW + 365 * DAY),
        (
            "Getting ready for the civil service exam, two hours every evening",
            "goal",
            NOW + 365 * DAY,
        ),
        ("考公笔试下个月就考了", "goal", datetime(2025, 5, 1, tzinfo=UTC)),
        ("考研初试定在 10 月", "goal", datetime(2025, 11, 1, tzinfo=UTC)),
        # ... not a word that holds those characters, nor a course's own exams
        ("想多参考编程高手的开源项目", "goal", None),
        ("在思考公司以后的方向", "goal", None),
        ("打算在中国考驾照", "goal", None),
        ("打算在美国考驾照", "goal", None),
        ("等高考公布成绩再决定", "goal", None),
        ("Revising for my master's exams every night", "goal", None),
        # a skill or language being learnt is half a year's work, unless it names a time
        ("Teaching myself Welsh, ten minutes every morning", "goal", NOW + 180 * DAY),
        ("在自学吉他，每晚弹四十分钟", "goal", NOW + 180 * DAY),
        ("I want to get better at chess", "goal", NOW + 180 * DAY),
        (
            "Learning to knit before the baby comes in September",
            "goal",
            datetime(2025, 10, 1, tzinfo=UTC),
        ),
        ("我在学车", "goal", NOW + 180 * DAY),
        # ... not a place of learning, a classroom, a workbook, a talk rehearsed, a degree done,
        # giving up
        ("I want to practice my presentation for the board meeting", "goal", None),
        ("我大学主要学的是会计", "goal", None),
        ("实在学不会就算了", "goal", None),
        ("在学校门口接孩子要注意什么", "goal", None),
        ("在学习区放一张大桌子", "goal", None),
        ("要练习册的答案", "goal", None),
        # a total kept to for something big is half a year's goal
        ("装修总预算控制在十五万以内", "goal", NOW + 180 * DAY),
        ("Total budget for the garden redo is £8k, keep it under that", "goal", NOW + 180 * DAY),
        ("I want a budget laptop for uni", "goal", None),
        # one set for an age or for retirement is a year's, however far off the age
        ("我想在六十岁之前把车贷还清", "goal", NOW + 365 * DAY),
        ("Want to be mortgage-free before I retire", "goal", NOW + 365 * DAY),
        ("paying off the flat by age 55", "goal", NOW + 365 * DAY),
        ("Goal: a sub-45 10k, I'm 45 now", "goal", None),
        ("旧系统退休前要迁完", "goal", None),
        # a goal of another kind keeps its type's month; a wish is no goal
        ("I want to run a marathon", "goal", None),
        ("cut down on the jargon in your answers", "preference", None),
    ],
)
def test_a_habit_being_changed_lasts_a_season_unless_it_names_a_time(
    text: str, memory_type: str, until: datetime | None
) -> None:
    assert POLICY.horizons.until(text, memory_type, NOW) == until


@pytest.mark.parametrize(("content", "memory_type", "until"), HORIZONS)
def test_a_goal_or_plan_lasts_as_long_as_the_time_it_names(
    content: str, memory_type: str, until: datetime | None
) -> None:
    fields: dict[str, Any] = PROJECT if memory_type == "project" else {"type": memory_type}
    assert decide(content, **fields).expires_at == until


@pytest.mark.parametrize(
    ("content", "memory_type", "until"),
    [
        # a wish said for a span from now lapses with it
        ("接下来三天都在赶稿，回复越短越好", "format", NOW + 3 * DAY),
        ("for the next two weeks answer me in English", "preference", NOW + 14 * DAY),
        ("这几天回复短一点", "preference", NOW + 4 * DAY),
        ("这周忙，回答简短点", "format", NOW + 7 * DAY),
        ("keep it brief this week, I'm swamped", "format", NOW + 7 * DAY),
        # a standing rule naming a time is no span: it lasts until changed
        ("Always reply to clients within 2 days", "preference", None),
        ("周报放近7天的数据", "format", None),
        ("周报一律按“本周进展 / 风险 / 下周计划”三段写", "format", None),
        ('Start every status update with "This week:"', "format", None),
        ("每次总结这周的工作，都用三段式", "format", None),
        ("Every Friday, ask me what went well this week", "preference", None),
        ("以后都用中文回答，这周我开始学中文了", "preference", None),
        ("从这周开始我只喝无糖的", "preference", None),
        ("我喜欢这周边的小咖啡馆", "preference", None),
        ("每天早上给我看未来三天的天气预报", "format", None),
        # ... while a plan said for a span ends with it, every day or not
        ("接下来三天每天早上六点起床背单词", "plan", NOW + 3 * DAY),
        ("I love Christmas music", "preference", None),
        ("我周五不上班，那天别提醒我工作", "preference", None),
        ("Keep answers short", "format", None),
    ],
)
def test_a_wish_said_for_a_span_lasts_as_long(
    content: str, memory_type: str, until: datetime | None
) -> None:
    decision = decide(content, type=memory_type)
    assert decision.allowed and decision.expires_at == until


def test_a_time_already_past_gives_the_type_lifetime() -> None:
    """A horizon read as ending before the memory is saved never refuses or expires it."""
    late = datetime(2025, 12, 31, 23, 0, tzinfo=UTC)
    decision = check_write(
        Draft("finish the report by the end of the month", "plan", US), POLICY, late
    )
    assert decision.expires_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert decision.allowed


def test_explicit_expiry_on_a_long_term_type_is_kept() -> None:
    until = NOW + 400 * DAY
    assert decide("I prefer tea until summer", expires_at=until).expires_at == until


def test_expiry_is_returned_in_utc() -> None:
    shanghai = timezone(timedelta(hours=8))
    until = datetime(2025, 3, 10, 8, 0, tzinfo=shanghai)
    decision = decide("下周去上海出差", type="plan", expires_at=until)
    assert decision.expires_at == until
    assert decision.expires_at is not None and decision.expires_at.utcoffset() == timedelta(0)


def test_ttl_counts_from_the_injected_clock_in_any_timezone() -> None:
    tokyo_now = NOW.astimezone(timezone(timedelta(hours=9)))
    decision = check_write(Draft("复习计划", "plan", "user_stated"), POLICY, tokyo_now)
    assert decision.expires_at == NOW + 14 * DAY
    assert decision.expires_at is not None and decision.expires_at.tzinfo == UTC


def test_now_must_be_aware() -> None:
    with pytest.raises(ValueError, match="aware"):
        check_write(Draft("x", "preference", "user_stated"), POLICY, datetime(2025, 3, 1))


def test_time_comes_only_from_the_argument() -> None:
    for module in (gateway.memory.gate, gateway.memory.policy, gateway.memory.sensitivity):
        source = inspect.getsource(module)
        for call in ("datetime.now", "datetime.utcnow", "date.today", "time.time("):
            assert call not in source, (module.__name__, call)


# --- slots ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "slot"),
    [
        ("project uses Flask", "framework"),
        ("项目改用 FastAPI 了", "framework"),
        ("回答用英文", "language"),
        # the script alone, and a name closed by an emoji
        ("客户都在大陆了，以后改用简体", "language"),
        ("升职了，以后叫我张总👍", "name"),
        # who the user lives with, said first; a relative's home is theirs
        ("我和老公一直住在厦门，离海边不远", "location"),
        ("我爸妈住在厦门", None),
        ("Always answer in English", "language"),
        ("我叫李雷", "name"),
        ("I like hiking", None),
        # notes typed without a subject, and other everyday wordings
        ("Live in Bristol, Bishopston", "location"),
        ("住在南京鼓楼", "location"),
        ("Finally done with the move, we're in Austin now!", "location"),
        ("Actually everybody calls me Bobby, use that from now on", "name"),
        ("大家都叫我老周", "name"),
        ("医生叫我少吃盐", None),
        ("use km not miles please", "units"),
        ("For recipes give me cups and ounces, I don't own a scale", "units"),
        ("talk to me casually like a mate, not like a customer service bot", "tone"),
        ("Explain things like I'm a junior dev, don't assume I know git internals", "tone"),
        ("Ruby won't touch anything with tomatoes in it", None),
        ("Ruby is my main language", "programming_language"),
        ("My mum calls me every night", None),
        ("朋友叫我一起去爬山", None),
        ("Living in fear of the deadline", None),
        ("I've been so emotionally drained lately", None),
        ("give me grams of protein per meal", None),
        # what someone speaks is not the answers' language; what the user asks for is
        ("我老婆是日本人，在家说日语多", None),
        ("跟我说中文就行", "language"),
        # a vehicle the firm gives, and working for oneself
        ("firm swapped me onto a Volvo FH, still finding my way round the dash", "car"),
        ("自由职业 设计师兼程序员", "job"),
        # homes, names and phones in everyday words
        ("家住广州天河", "location"),
        ("home port is Plymouth, Sutton Harbour", "location"),
        ("actually just Kat. Katherine feels like I'm in trouble", "name"),
        ("I use an Android, Samsung S10", "phone"),
        ("我啥都吃，不挑食", "diet"),
        ("我在一家 logistics 公司做 HR", "job"),
        ("my van is a 2012 Ford Transit, diesel", "car"),
        ("我的中文老师叫我多用中文写日记", None),
        ("算了还是短点吧，太长了我根本看不完", "length"),
        ("scratch the CR-V - we picked up a used Model Y last weekend", "car"),
        # a post begun, a field worked in, a transfer, a full-time trade; an IDE by name
        ("Started my lectureship at UCL in January", "job"),
        ("I work in child protection for the county council", "job"),
        ("我已经调到医院做医务社工了", "job"),
        ("我转岗做产品经理了，现在负责增长方向", "job"),
        ("我是全职笔译，主要接法律合同", "job"),
        ("My wife started her new job", None),
        ("我写代码一直用 RStudio", "editor"),
        # pets named after keys are no indentation
        ("家里两只猫，一只叫 Tab 一只叫 Space", None),
        # a role now held at a named firm, part-time work, a shift, a commute, a move by a
        # named place (the user's, not a relative's), units named with a currency
        ("Qualified!! Now an associate in the employment team at Hartley & Co", "job"),
        ("Working part-time as a barista while I apply for jobs", "job"),
        ("我跑白班，早六点出车晚六点交班", "shift"),
        ("I get the 7:40 train into work every morning", "commute"),
        ("Gave up on the train, I drive in these days.", "commute"),
        ("We've done it — moved up to a cottage outside Oban", "location"),
        (
            "We've sold up and moved to a bungalow in Harrogate to be closer to our daughter",
            "location",
        ),
        ("My daughter moved to a flat in Leeds", None),
        ("Dave sold up and moved to Spain", None),
        ("I'm now a regular at Costa", None),
        ("Started a job search after the layoffs", None),
        ("I work in bed for an hour every morning", None),
        ("Jake finished his degree. Now an engineer at Arup", None),
        ("I research positron emission at CERN", None),
        ("算钱算路程都用人民币和公里，别给我美元英里", "units"),
        # a transfer told with the work now done, a full-time post somewhere, freelancing
        # now, the boxes unpacked in a named city
        ("今年转到小学去了，教一年级语文", "job"),
        ("我是律所里的全职法律翻译", "job"),
        ("Quit the law firm! Freelancing now, mostly patents", "job"),
        ("Finally unpacked the last boxes in Denver, new city new me", "location"),
        ("我女儿转到实验小学去了，教她的老师很好", None),
        ("Since moving to Vancouver I'd rather see km and °C", "units"),
        ("我是一家电商公司的后端工程师", "job"),
        ("我是这家店的老顾客", None),
        # smoking or not, the user's own; a home bought somewhere
        ("我一天大概抽半包烟", "smoking"),
        ("Three months without a single cigarette now!", "smoking"),
        ("My dad smokes forty a day", None),
        ("我们在闵行七宝买了房，上个月刚搬进去", "location"),
        ("我儿子在杭州买了房", None),
        # a shift changed to, a post begun on a date, a lead held, a post at an agency, a
        # business opened, a move told by the new home; melatonin on some nights is no shift
        ("换到晚班了，下午三点一直开到半夜", "shift"),
        ("I take melatonin on nights I can't switch off", None),
        ("Done my last shift behind the wheel! Starting as a depot controller on Monday", "job"),
        ("Got promoted! I'm the infrastructure team lead now", "job"),
        ("Got the job!! I'm a lettings negotiator at a small agency in Clapham", "job"),
        ("I'm a regular at a café in Soho", None),
        ("I finally opened my own little salon in March!", "job"),
        ("Finally moved! Now in a flat in Headingley, Leeds", "location"),
        ("My wife is now in a flat in Leeds", None),
        # the move done to a named place, a switch to Rider, a start on a weekday, going indie
        ("We finally did the move up to Edinburgh last month", "location"),
        ("最近彻底转投 Rider 了，开 Unity 项目顺手太多", "editor"),
        ("Quit the warehouse!! Started as a dental assistant this Monday", "job"),
        ("Left Hollowpine in March — I'm full-time indie on my own game now", "job"),
        ("I love indie games", None),
        ("Keep things warm and chatty with me, I don't like it too stiff and formal", "tone"),
        # the keys to a home in a named place, a business of one's own, a head's post now
        ("Finally got the keys to a ground-floor bungalow in Bath!", "location"),
        ("We got the keys to a holiday cottage for the week", None),
        ("今年春天自己出来开了一家幼儿园，现在是园长了", "job"),
        ("我老公自己开了一家店", None),
        # foods taken up again say the way of eating changed
        ("怀孕以后医生让我多补蛋白，鸡蛋和鱼我现在都吃了", "diet"),
        ("我老公鸡蛋和鱼现在都吃了", None),
        # a move typed as a note, a manager now, an officer's post, units asked for by name;
        # a phone platform jumped to is no job, too many miles no units
        ("Packed up and moved to Dover so I can train in the Channel properly", "location"),
        ("Got promoted! I'm project manager now, running three sites", "job"),
        ("I'm the safety officer on a tunnelling project", "job"),
        ("Got myself a Pixel 8, finally jumped ship to Android", "phone"),
        ("Miles and mph for me please, I'm old school", "units"),
        ("That's too many miles for me", None),
        # a move by the whole family, a school's post by what is taught, a post just begun;
        # catching one's breath is no tone
        ("上个月全家搬到杭州了，还在适应", "location"),
        ("我在一所小学教音乐，学生都是一到三年级", "job"),
        ("Just started at a secondary school, teaching Years 7 to 11 now", "job"),
        ("My son just started at a secondary school", None),
        ("我女儿在一所小学教音乐", None),
        ("孩子午睡一点到三点，那是我唯一能喘口气的时候", None),
        # someone else, a textbook, a room opened, foods one can't afford, a quantity asked for
        ("My sister got the keys to a flat in Leeds", None),
        ("Got the keys to a holiday cottage in Devon for half term", None),
        ("小王现在是组长了", None),
        ("小李自己开了一家花店", None),
        ("我自己开了一个会议室，大家进来吧", None),
        ("我在看高中教材", None),
        ("海鲜现在也吃不起了", None),
        ("Can you convert 10 miles for me, please?", None),
        # a currency code that is a word, an engine's name as a word; someone else's move, a
        # company's, living together; a question, not a name
        ("Write the backend in PHP", "programming_language"),
        ("This deadline is unreal", None),
        ("Team unity matters more than the tools", None),
        ("他退休后搬到厦门了", None),
        ("公司年后搬到深圳了", None),
        ("我们俩住在一起三年了", None),
        ("这叫我怎么办😭", None),
        # the name to use asked for as "my name" or as what people call the user, units
        # switched "me" to, a move exclaimed with where follows, 搬家到, a diet said short;
        # not a name used somewhere, someone else's move, a moved meeting, a veggie dish
        ("Could you use my proper name, Annelise? Anni is only for family", "name"),
        ("just Fitz is fine — it's what everybody on the team calls me", "name"),
        ("Please use my name on the booking", None),
        ("Switch me to kilos and cm please, the clinic uses them", "units"),
        ("Moved at last!! New flat is just off Gloucester Road", "location"),
        ("We finally moved — Hove now, five minutes from the sea", "location"),
        ("Finally downsized, a little terrace in Frome", "location"),
        ("My brother finally moved! He's in Frome now", None),
        ("Moved the meeting to Friday, the office is in Leeds", None),
        ("开春搬家到滨江了，离公司近", "location"),
        ("Gone fully veggie since March", "diet"),
        ("Veggie burgers are my go-to", None),
        ("Should I use my full name or initials on my CV?", None),
        ("We go veggie on Mondays", None),
        ("我们搬家去宜家买了好多东西", None),
        # where the user lives said from a farm, with whom, how far from a town, a place of
        # one's own found, a house sold for a flat, a season before a move; the editor named
        # by a beginner's IDE or switched to with 换
        ("We live on a sheep farm just outside Dunedin", "location"),
        ("I live with my grandparents in Tartu while I study", "location"),
        ("We're about twenty minutes north of Kelowna, up the lake", "location"),
        ("Finally got my own place!! Vallila, top floor, tiny balcony", "location"),
        ("We sold up and bought a bungalow in Tenby", "location"),
        ("冬天搬滨江去了，离公司近", "location"),
        ("My sister lives with her husband in Leeds", None),
        ("Got my first house plant today", None),
        ("the course has us writing everything in Thonny", "editor"),
        ("上个月换 Cursor 了，插件都装好了", "editor"),
        # a short name set against the long one; the family moved to a named place; a
        # move, then a home bought near work (a company named after the move)
        ("Jo from now on please, Josephine is what my gran calls me", "name"),
        ("Alex is fine, no need for Alexander", "name"),
        ("Monday works, not Tuesday", None),
        ("Python is fine, not Perl", "programming_language"),
        ("We moved the whole family up to Inverness last spring", "location"),
        ("搬家了，现在在河东买了套小房子，走路到公司十分钟", "location"),
        ("公司搬家了，现在在望京", None),
        # a lease signed, where follows; not a lease signed on a day
        ("Signed the lease - Kallio, two minutes from the tram", "location"),
        ("We signed the lease on Friday", None),
        # not a lease signed with a remark, a short name beside another person's, a trip's
        # distance, living with a condition, a move-in day, the kids moved to a school, a day
        # at the hospital after a move, a new bar called Reaper
        ("Signed the lease! Mum cried", None),
        ("Dave works nights, Daniel works days", None),
        ("Mark is fine with the plan, Martin disagrees", None),
        ("I'm about an hour from Boston, should arrive at 5", None),
        ("I live with anxiety in May every year", None),
        ("Got my own place. Sunday I move in", None),
        ("We moved the kids to St Mary's school", None),
        ("搬完家了，现在在医院陪我妈", None),
        ("We went to Reaper, the new bar downtown", None),
        # a meeting or an office moved, data in sync, a migration-free change: no tool
        ("Moved the meeting from Tuesday to Thursday", None),
        ("Moved the office from Leeds to Manchester", None),
        ("The app keeps the data in sync across devices", None),
        ("This PR has no database migrations", None),
        ("Moved to Reaper last year, not looking back", "daw"),
        # a project's data told as kept in a file is its database; a job held for years at
        # a named firm is the job; notes kept on paper are neither
        ("tracker 的记录都存在 log.json 里", "database"),
        ("The readings are kept in a results.csv file for now", "database"),
        ("我把成绩记在本子上", None),
        ("I've been a data engineer at Northwind for six years", "job"),
        ("I've been a member at the climbing gym for two years", None),
        # a site's host named beside its generator; Python's own editor, written as its name
        ("docs site: Jekyll, deployed to GitHub Pages", "hosting"),
        ("I only write Python in IDLE", "editor"),
        ("The build server sat idle all weekend", None),
        # a membership held for years, results a benchmark writes, a status in capitals
        ("I've been a gym member at PureGym for five years", None),
        ("benchmark results are written to a JSON file", None),
        ("worker pods show status IDLE", None),
        # a project's data moved to an online sheet is its store; a name shared with a
        # language, said of a person, is no language
        ("报名数据已经挪到飞书表格里了", "database"),
        ("Julia is obsessed with horse books", None),
        ("Swift is my cat's name", None),
    ],
)
def test_slot_is_derived_from_the_content(content: str, slot: str | None) -> None:
    assert decide(content, type="project", project_id="p").slot == slot


@pytest.mark.parametrize(
    ("content", "type_", "slot"),
    [
        # the program a user keeps sheets in, and a switch to another; learning one is no
        # switch, and a project's sheet is its store, not the user's program
        ("我平时做表格都用 WPS", "preference", "spreadsheet_app"),
        (
            "Moved over to Excel 365 this spring, please drop the WPS steps",
            "preference",
            "spreadsheet_app",
        ),
        ("在学 Excel 管库存", "goal", None),
        ("The quiz keeps its scores in a Google Sheet now", "project", "project_tool"),
        # an access need asking for short lines is no length wish a later one replaces
        ("我眼神不好，回复里不要用表格，每行写短一点", "accessibility", "output_format"),
        ("Keep replies brief, 150 words max", "length", "length"),
        # sketches on television are no shape of answers; an allergy ruling out a diet's
        # cheese is no diet
        ("I never miss the New Year gala sketches", "profile", None),
        ("Use simple sketches when you explain a layout", "preference", "output_format"),
        ("Allergic to soy too, so soy-based vegan cheese is out", "profile", None),
        ("Gone fully vegan since March, no dairy at all", "profile", "diet"),
        # moved into a named home; not someone else's move
        ("去年秋天搬进了 Hove 的一个海边公寓", "profile", "location"),
        ("我女儿搬进了学校附近的公寓", "profile", None),
        ("外婆去年搬进了镇上的养老院", "profile", None),
        # a diet's own products are the diet; a program left for code, a word processor
        ("I'm vegan, so I only buy vegan products", "profile", "diet"),
        ("I switched from Excel to Python for my data analysis", "profile", "programming_language"),
        ("I write my novels in LibreOffice", "profile", None),
        # a trade said of oneself in any word for one; a membership is none
        ("我是镇上一家面包店的烘焙师", "profile", "job"),
        ("我是健身房的会员", "profile", None),
        ("我是这个家庭的一员", "profile", None),
        ("我是游戏里的法师", "profile", None),
        # a site generator and a mini-program's cloud store, named in English
        ("We rewrote the docs site in Astro last month", "project", "project_tool"),
        ("Hugo is handling QA for the release", "project", None),
        (
            "Bookings are stored in a Cloud Development database",
            "project",
            "database",
        ),
    ],
)
def test_a_slot_depends_on_the_type_and_the_words(
    content: str, type_: str, slot: str | None
) -> None:
    extra = {"project_id": "p"} if type_ == "project" else {}
    assert decide(content, type=type_, **extra).slot == slot


def test_slot_from_the_caller_wins() -> None:
    assert decide("project uses Flask", slot="backend.framework").slot == "backend.framework"


def test_flask_and_fastapi_share_a_slot() -> None:
    a = decide("project uses Flask", type="project", project_id="p")
    b = decide("project uses FastAPI", type="project", project_id="p")
    assert a.slot == b.slot == "framework"


# --- secrets never leak -----------------------------------------------------------------------


@pytest.mark.parametrize(("text", "secret"), SECRET_VALUES)
def test_secrets_are_refused_and_never_echoed(text: str, secret: str) -> None:
    for source in ("user_stated", "model_inference", "admin"):
        decision = decide(text, source=source, confirmed=True)
        assert "sensitive" in decision.reasons
        assert decision.sensitivity == "high"
        assert secret not in repr(decision)
        assert decision.slot is None


@pytest.mark.parametrize("text", CONTACTS)
def test_contact_details_may_be_stored(text: str) -> None:
    decision = decide(text, type="profile")
    assert decision.allowed and decision.sensitivity == "medium"


# --- the policy decides --------------------------------------------------------------------


def _policy_with(old: str, new: str) -> Policy:
    text = default_policy_path().read_text(encoding="utf-8")
    assert text.count(old) == 1
    return parse_policy(text.replace(old, new), "test.yaml")


def test_a_source_can_be_made_to_need_confirmation() -> None:
    policy = _policy_with(
        "  import:\n    store: always\n", "  import:\n    store: on_confirmation\n"
    )
    draft = Draft("I use Neovim", "preference", "import")
    assert check_write(draft, policy, NOW).reasons == ("unconfirmed",)
    confirmed = check_write(replace(draft, confirmed=True), policy, NOW)
    assert confirmed.allowed and confirmed.source == "import"


def test_medium_can_be_refused_by_policy() -> None:
    policy = _policy_with("  store_levels: [low, medium]", "  store_levels: [low]")
    decision = check_write(Draft("我的手机号是13812345678", "profile", "user_stated"), policy, NOW)
    assert decision.reasons == ("sensitive",) and decision.sensitivity == "medium"


def test_ttl_follows_the_policy() -> None:
    policy = _policy_with("    ttl_days: 14\n", "    ttl_days: 3\n")
    decision = check_write(Draft("去上海出差", "plan", "user_stated"), policy, NOW)
    assert decision.expires_at == NOW + 3 * DAY


# --- properties ------------------------------------------------------------------------------

drafts = st.builds(
    Draft,
    content=st.sampled_from(BENIGN + [t for t, _ in SECRET_VALUES] + CONTACTS + ["这次简短一点"]),
    type=st.sampled_from([*POLICY.types, "unknown"]),
    source=st.sampled_from([*POLICY.sources, "unknown"]),
    scope=st.sampled_from(["global", "project", "task:code", "bad"]),
    project_id=st.sampled_from([None, "p1"]),
    expires_at=st.sampled_from([None, NOW + DAY, NOW - DAY]),
    confirmed=st.booleans(),
    slot=st.sampled_from([None, "framework"]),
)


@settings(max_examples=300)
@given(draft=drafts, duplicate=st.booleans())
def test_decisions_are_consistent(draft: Draft, duplicate: bool) -> None:
    decision = check_write(draft, POLICY, NOW, duplicate=duplicate)
    assert decision.allowed is (decision.reasons == ())
    assert list(decision.reasons) == [r for r in REASONS if r in decision.reasons]
    assert ("duplicate" in decision.reasons) is duplicate
    assert decision == check_write(draft, POLICY, NOW, duplicate=duplicate)  # deterministic
    for _, secret in SECRET_VALUES:
        assert secret not in repr(decision)
    if decision.allowed:
        assert POLICY.tier(draft.type) not in ("session",)
        assert POLICY.sensitivity.may_store(decision.sensitivity)
        assert decision.source in POLICY.sources
        assert decision.source != "model_inference"
        if POLICY.tier(draft.type) == "time_limited":
            assert decision.expires_at is not None and decision.expires_at > NOW
