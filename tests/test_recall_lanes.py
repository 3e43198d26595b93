"""Recall in two lanes: standing memories reach every request in their scope, topical ones
only when relevant; one-valued subjects keep the newest; the memory message says what each
part is. End to end through the openai SDK, plus the scenario set's floors."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from gateway.memory.candidates import CandidateQueue
from gateway.memory.embed import LocalEmbedder
from gateway.memory.identity import Identity
from gateway.memory.inject import FACTS, STANDING, render
from gateway.memory.memories import Memories
from gateway.memory.mine import Proposal, screen
from gateway.memory.policy import (
    Policy,
    derive_applies,
    load_policy,
    memory_topics,
    parse_policy,
    topics_of,
)
from gateway.memory.recall import LARGE_USER, Recaller
from gateway.memory.scenario_eval import Runner, load_scenarios, report, tally
from gateway.storage.store import Store
from tests.conftest import Gateway
from tests.test_recall import User, memory_message

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy()


def ask(me: User, text: str, *, project: str | None = None, task: str | None = None) -> Any:
    client = openai.OpenAI(base_url=me.gw.base_url, api_key=me.key, max_retries=0)
    headers = {"X-Memory-User": me.headers["x-memory-user"]}
    if project:
        headers["X-Project-Id"] = project
    if task:
        headers["X-Memory-Task"] = task
    return client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", extra_headers=headers, messages=[{"role": "user", "content": text}]
    )


def memory(me: User, mid: str) -> dict[str, Any]:
    return dict(httpx.get(f"{me.gw.base_url}/memories/{mid}", headers=me.headers).json())


# --- how a memory applies ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "type_", "scope", "want"),
    [
        ("以后都用中文回答我", "preference", "global", "always"),
        ("From now on always use metric units", "preference", "global", "always"),
        ("给代码的时候请给出完整的上下文", "preference", "global", "always"),
        ("Always include type hints in Python code", "preference", "global", "always"),
        ("I'm colour-blind", "accessibility", "global", "always"),
        ("No emojis please", "format", "global", "always"),
        ("Please call me Alex", "profile", "global", "always"),
        ("I prefer short answers", "preference", "global", "always"),
        ("This repo uses FastAPI", "project", "project", "always"),
        ("Sign emails as Li", "preference", "task:work", "always"),
        # a time zone, like units, shapes every time an answer gives
        (
            "I'm on Berlin time, so give any times in CET/CEST please",
            "preference",
            "global",
            "always",
        ),
        ("I'm allergic to peanuts", "profile", "global", "relevant"),
        ("我养了一只猫叫麻薯", "profile", "global", "relevant"),
        ("I love jazz", "preference", "global", "relevant"),
        ("I always eat breakfast at seven", "preference", "global", "relevant"),
        ("我在备考雅思", "goal", "global", "relevant"),
        ("I'm moving to Berlin next month", "plan", "global", "relevant"),
        # style words about something else are not answer style
        ("I prefer tabs over spaces", "preference", "global", "always"),
        ("Be more casual with me", "preference", "global", "always"),
        ("I have a fear of caves and enclosed spaces", "preference", "global", "relevant"),
        ("I avoid betting on sports, even in a casual manner", "preference", "global", "relevant"),
        ("我喜欢轻松一点的徒步路线", "preference", "global", "relevant"),
        # ringing in the ears is a health fact, not a need every answer must meet
        ("Mild tinnitus, worse at night", "profile", "global", "relevant"),
        ("有点耳鸣，晚上安静的时候明显", "profile", "global", "relevant"),
    ],
)
def test_how_a_memory_applies_by_default(
    policy: Policy, text: str, type_: str, scope: str, want: str
) -> None:
    from gateway.memory.policy import derive_slot

    slot = derive_slot(text, policy, type_)
    assert derive_applies(text, policy, type_, slot, scope) == want


# Instructions about how every answer should be, worded apart from the policy's examples, in
# both languages and under the type a writer most often gives them ("preference"); and facts
# that mention the same words without being such an instruction.
STANDING_IN_OTHER_WORDS = [
    "Please reply in Spanish from now on",
    "When you draft emails for me, sign them 'Cheers, Tom'.",
    "Friendly but not gushing, please.",
    "Keep things warm and friendly when you talk to me.",
    "I'm hard of hearing and rely on captions, so summarize audio in text",
    "Give me code in TypeScript unless I say otherwise.",
    "Warm is good but not cheesy. I hate over-the-top sentimental stuff",
    "写东西别太煽情",
    "use km not miles please",
    "Actually everybody calls me Bobby, use that from now on",
    "I'd like all your answers in German",
    "Use British spelling",
    "I prefer answers with concrete examples",
    "Give me the answer first, then the explanation",
    "Please don't use markdown headers",
    "Respond in plain text, no formatting",
    "Explain things like I'm five",
    "Avoid technical jargon when you explain things to me",
    "Please cite your sources",
    "Keep responses short and sweet",
    "Keep answers under about 150 words",
    "Be blunt with me, no sugarcoating",
    "Keep it relaxed with me and skip the corporate jargon",
    "Address me as Dr. Chen",
    "Use Celsius for temperatures",
    "Show prices in euros",
    "Dates in DD/MM/YYYY format please",
    "Use 24-hour time",
    "I'm dyslexic, so use short sentences and simple words",
    "I have low vision, please use large clear headings",
    "Write code with snake_case names",
    "Comment every function you write",
    "Use type annotations in all TypeScript code",
    "Summarize at the end of every answer",
    "以后用英文回复我",
    "请用繁体字回答",
    "不要用表情符号",
    "说话直接一点，别绕弯子",
    "叫我小李就行",
    "温度用摄氏度，距离用公里",
    "日期格式用年月日",
    "我有阅读障碍，请用短句",
    "代码里变量名用驼峰命名",
    "先说结论再展开",
    "回答控制在三百字以内",
    "我不喜欢长篇大论，答案尽量控制在一屏以内",
    "请用口语化的方式解释",
    # a wish about answers that mentions a device is still about answers
    "keep answers short pls, I mostly read them on my phone on the train",
    "Use simplified Chinese, never traditional characters",
    "Explain things to me like I'm a complete beginner",
    "说话直接一点，不用客套",
    "Explain tech stuff as if I'm not a developer",
    "说话别夹英文单词，我看不懂",
    "讲东西说大白话，别整那些专业名词，我退休前是开餐馆的",
    "Please keep explanations beginner friendly, I'm really not a techy person",
    "Never use exclamation marks, and don't open with stuff like 'Great question'.",
    "Don't over-explain things to me. Senior dev, skip the basics.",
    "Whenever you cite anything, use APA 7th edition, with DOIs where available.",
    "Use British spelling throughout. I'm a UK solicitor, American spellings drive me up the wall",
    "Write TypeScript for me, never plain JS",
    "My little scripts are all Python, keep it that way — I don't know any other language",
    "别写太长，代码配一两句说明就够了",
    "Don't write too much, a line or two with the code is enough",
    # asked for in a third language
    "Contéstame en español por favor, es mi primer idioma.",
    "Réponds-moi toujours en français, s'il te plaît",
    "Antworte mir bitte auf Deutsch",
    "日本語で答えてください",
]
TOPICAL_WITH_THOSE_WORDS = [
    "My son is dyslexic",
    "My grandmother loves sentimental old films",
    "I hate cheesy rom-coms",
    "这家菜太油腻了",
    "医生叫我少吃盐",
    "我儿子有阅读障碍",
    "I work with dates and figures in Excel",
    "I had a 12-hour shift yesterday",
    "I read a lot of books with my kids",
    "I mostly write data-processing scripts in Python with pandas",
    "I love cooking Sichuan food, mapo tofu is my signature",
    "Of course I still play the cello",
    "My grandma needs hearing aids",
    "Our users rely on screen readers",
    "我们的用户很多是色弱",
    "My boss is deaf",
    "I'm writing a paper on ADHD in adults",
    "我室友有多动症",
    "我是视障人士的志愿者",
    "I prefer to be direct with my kids",
    "I like to stay warm in winter",
    "我喜欢开门见山的人",
    "I hate long-winded meetings",
    "我不喜欢长篇大论的电影",
    "我爸总是长篇大论",
    "I prefer buying milk in gallons",
    "我喜欢用升降桌",
    "I prefer to go back to Spanish lessons in autumn",
    "Mi hija habla en inglés con sus amigos",
    "Mi madre me escribe en español",
    "I mostly write Python",
    "I'm a full-time wheelchair user",
    "I'm doing some volunteer work for Oxfam",
    "我不想写太长的日记",
    "Ma fille parle en anglais avec ses amis",
    "I don't write that much these days since the baby",
    "老板一句话就可以让我加班到半夜",
    "I listen to Taylor Swift and nothing else",
    "这事儿一两句说不清",
    "I keep dates like birthdays in a notebook",
    "The figures in euros were higher than I expected",
    "I got an answer with no explanation from my bank",
    "我们公司的代码风格很乱",
    "超市的价格用人民币标",
    "我习惯24小时制的闹钟",
    "我一般晚上九点以后才有空写代码",  # "after nine", not "from now on"
    "I'm allergic to latex, so nitrile gloves only",  # latex, not LaTeX
]


# the user's hearing where it decides how things can be done (calls, audio, video): an access
# need like sight or reading, whatever the memory's type
HEARING = [
    ("I wear a hearing aid, phone calls are a nightmare", "profile"),
    ("I'm hard of hearing, phone calls are really tough for me", "accessibility"),
    ("I struggle with the telephone since my hearing went, email is easier", "accessibility"),
    ("我左耳听力不好，戴着助听器，视频最好有字幕", "accessibility"),
    ("耳朵有点背，打电话老听不清", "profile"),
]

# ... said bare, a fact of the hearing topic: relevant where sound is part of the request
HEARING_BARE = [
    "I wear a hearing aid in my left ear",
    "I'm pretty much deaf-ish on the left side.",
    "Lost most of the hearing in my left ear after a monitor blew",
    "我左耳听力不太好。",
    "我戴助听器，右耳基本听不见",
]


@pytest.mark.parametrize(
    ("text", "slot"),
    [
        ("开的哈弗H6，烧油的", "car"),
        # knots in the shoulders, a metronome, a bicycle ridden are no units or vehicle; a
        # motorbike by its model, an e-scooter ridden are; a table for answers stays a format
        ("My shoulders are always in knots", None),
        ("我每天用节拍器练琴", None),
        ("I ride a road bike about 200 km every week", None),
        ("I ride a Brompton I bought in 2019", None),
        ("I ride a Honda CB500X", "car"),
        ("我平时骑的是雅迪电动车", "car"),
        ("请把答案写在表格里给我", "output_format"),
        # units at sea
        ("Sailing distances in nautical miles please, and speeds in knots", "units"),
        ("出海的距离都按海里算", "units"),
        # a home rented now, near somewhere or in Chinese; a car rented is no home
        ("Finished my placement and now rent a studio near Stokes Croft", "location"),
        ("毕业后一直在杭州，现在在滨江租房住", "location"),
        ("I rent a car near the airport whenever I fly home", None),
        ("我不太想租房住，想攒钱买", None),
        # an instrument's sound and a nickname others use are no wish about answers
        ("My cello is an old workshop one, a little nasal in tone", None),
        ("My guitar has a warm tone", None),
        # ... though a wish about answers may hold such letters inside another word
        ("Keep a formal tone, for example in replies to my landlord", "tone"),
        ("现在年轻人都租房住，我也一样", None),
        ("pls call me Jo", "name"),
        ("My bandmates call me the metronome", None),
        # a move as a clause of its own, a home's keys; a studio that moved is no home
        ("本科毕业了，已经搬到曼彻斯特开始读研", "location"),
        ("把家搬到天津滨海新区了，离港口近", "location"),
        ("Just got the keys to our first house in Brampton!!", "location"),
        ("工作室已经搬到深圳南山了，上个月刚搬完", None),
        # an occupation at a named employer, teaching somewhere, a rota given
        ("I'm a dental assistant at Bright Smile Dental", "job"),
        ("我从诊所出来了，现在在医学院教口腔解剖", "job"),
        ("Starting Monday as a junior QA engineer at a fintech company", "job"),
        ("They've put me on lates now, 2 till 10", "shift"),
        # a wish for both a length and a shape takes the one-valued length
        ("Changed my mind - keep it brief from now on, bullet points are fine", "length"),
        ("I'm a children's social worker in Bristol.", "job"),
        ("My editor wants the school-funding series filed by the end of next month.", None),
        # ... but the user's own editor is the one they code in
        ("My editor is Neovim", "editor"),
        # earbuds by a camera maker are no camera
        ("AirPods 丢了，现在用的是索尼 WF-1000XM5", None),
        ("I've got a Nissan Leaf", "car"),
        ("traded the Leaf in for a diesel Skoda Octavia estate", "car"),
        # a shop the user runs is no car, cooking for oneself no job
        ("我开的是一家水果店", None),
        ("I only cook for myself and my kitchen is tiny, one induction hob and no oven", None),
        ("我是自由摄影师，平时接人像和城市风光", "job"),
        # where a relative lives; a move told without "我"; a game, not a phone
        ("我姐姐一家住在墨尔本", None),
        ("上个月刚搬到苏州工业园区了，还在适应", "location"),
        # a move after a turn of life: "毕业以后", "结婚后"
        ("毕业以后搬到杭州了，租的房子离公司很近", "location"),
        ("下周要打公司内部的王者荣耀比赛，我被分去打野", None),
        ("ok stop with the Spanish, go back to English, it's too hard for me", "language"),
        ("开学回成都了，住川大江安校区宿舍", "location"),
        # a school year moved up to is no move, a grandchild's class no shift
        ("moved up to Y6 in september, SATs year eek", None),
        ("我家外孙女今年刚满五岁，在上中班", None),
        ("Please don't talk down to me. Plain, straight answers are what I like.", "tone"),
        ("My checking account is with Wells Fargo", "bank"),
        ("moved all my banking over to Monzo this spring", "bank"),
        ("closed everything at Wells, all my banking is with Alliant credit union now", "bank"),
        ("换了三星S24，安卓还在慢慢适应", "phone"),
        ("搬家了，现在住苏州工业园区", "location"),
        ("I live in Neovim", "editor"),
        ("换了晚班，现在只能晚上9点以后跑了", "shift"),
        ("started driving a school bus for the council this month", "job"),
        ("家里车是飞度，后备箱特别小", "car"),
        ("右眼黄斑变性，看小字特别费劲", "accessibility"),
        ("回伦敦了，住 Hackney", "location"),
        ("I live outside Duluth, Minnesota.", "location"),
        ("I live about 15 miles outside Dodge City, Kansas", "location"),
        ("上个月刚从成都搬到杭州了，住在西湖区", "location"),
        # a car traded in or bought used by its year; not a laptop
        ("Sold the Civic and bought a used 2016 Tacoma", "car"),
        ("Traded in the Camry, got a used 2020 Kia Niro EV last week!", "car"),
        ("bought a used 2018 MacBook Pro", "os"),
        # a job quit and the new one, told without "我"
        ("火锅店的活辞了，现在在一家西餐厅做帮厨", "job"),
        # a camera, and a camera changed; where the user studies is where they live
        ("我用的是尼康 D750，配一支 24-120", "camera"),
        ("D750 已经出掉了，换成了富士 X-T5，镜头是 16-80", "camera"),
        ("My body is a Sony A7 IV and my widest lens is a 20mm f/1.8.", "camera"),
        # the audio workstation, and a move to Reaper (a word otherwise); not a producer's
        ("I mix everything in Logic Pro", "daw"),
        ("switched over to Reaper in the spring, way lighter", "daw"),
        ("My producer only uses Ableton", None),
        ("我在杭州读研，住在学校附近", "location"),
        ("Traded the Ranger in - I've got a 2022 RAV4 hybrid now.", "car"),
        ("Sold the Yaris! Now driving a used Tesla Model 3.", "car"),
        # back in a city, a district lived in; a grandchild living with the user and
        # teaching oneself are no address
        ("交换结束啦，我已经回到台北了，住在大安区", "location"),
        ("孙女跟我住，今年上三年级", None),
        ("我在自学吉他", None),
        (
            "Moved into my dorm in Osaka, exchange semester runs until the end of February.",
            "location",
        ),
        # where secrets are kept is no hosting
        ("Work rule: never put secrets in .env files, we use AWS Secrets Manager", None),
        ("moved into a 2 bed flat in Croydon, finally", "location"),
        ("最近忙爆，回答控制在五行以內就好", "length"),
        ("说话温柔一点，别用那种命令的口气", "tone"),
        # a naming rule for a project's data names no database
        ("云数据库的集合名统一小写加下划线，比如 order_items", None),
        # a bank, a bike or a hospital bed names no length or home; others' moves and jobs
        # are theirs; a car bought is no job
        ("我的日常开销不超过五千，银行卡在招行", None),
        ("想买辆不超过两千的自行车", None),
        ("现在住院了，下周手术", None),
        ("目前住酒店，下周找房", None),
        ("周末带娃去上海，住 Hyatt", None),
        ("My son moved into a flat in Bristol", None),
        ("I just started driving a Tesla", None),
        ("He just started working at a bakery", None),
        ("closed my account at the gym", None),
        ("银行卡在抽屉里", None),
        ("工资卡是建设银行的", "bank"),
        # an appointment is no job; a car swapped in is the car, a computer is not
        ("dentist on the 3rd", None),
        ("老捷达卖了，换了台比亚迪秦PLUS的插混", "car"),
        ("换了台新电脑", None),
        ("换白班了，早八点到下午五点", "shift"),
        # the name to use, set against one not to; a language set against another is no name
        ("it's Jo, not Joanna", "name"),
        ("It's Python, not Java", "programming_language"),
        ("drive a 2012 Ford Focus, manual", "car"),
        ("换车了，比亚迪秦PLUS纯电版", "car"),
        ("换了车位", None),
        ("drive a forklift at the depot", None),
        # retiring ends a job; a laptop retired or a father's retirement does not
        ("上个月正式退休了！终于不用打卡了", "job"),
        ("I retired the old laptop", None),
        ("我爸退休了", None),
        # what pairs with a phone says nothing of which phone it is
        ("I wear Phonak hearing aids, they pair with my phone over Bluetooth", "accessibility"),
        ("my phone's a Samsung Galaxy A14, daughter picked it", "phone"),
        # where the user lives, in more wordings; a role begun is the user's job, not a son's
        ("we just moved out west to Vancouver for my wife's new job", "location"),
        ("我们现在住在新西兰奥克兰", "location"),
        ("signed a lease in Mississauga, near Square One", "location"),
        ("我们去年去过奥克兰", None),
        ("started last month as QA Lead at a fintech startup in Hyderabad", "job"),
        ("My son started last month as an intern at Google", None),
        ("开的是一台2015年的捷达", "car"),
        # yarn to knit with is no package manager: the shop is the user's work
        ("i run a small yarn shop on shopify", "job"),
        # a car seat, a babysitter wanted, a bookcase carried home, unpaid work
        ("We don't have a car seat for the baby yet", None),
        ("I'm looking for a part-time babysitter for Tuesdays", None),
        ("周末去了趟宜家，从宜家搬回一个书架", None),
        ("I'm doing some pro bono work for Oxfam", None),
        ("I use yarn for package management", "package_manager"),
        # a job quit some time ago, told without "我"; a wish to quit is no change
        ("图书馆那份工上个月辞了，现在全职带孙子", "job"),
        ("这份工作太累了，真想辞了", None),
        ("我们班的班主任辞了", None),
        ("这份工作先不辞了", None),
        ("We don't do the motivational talks at work anymore", None),
        # treatment at a hospital is no post there; a family moved together; a manner to
        # leave out
        ("我在北医三院做试管，挂号太难了", None),
        ("上个月举家搬到杭州了，新学校这边刚上任", "location"),
        # working for oneself is a post
        ("I'm a full-time solo indie dev, my two apps are my whole income", "job"),
        ("Left Hale & Brook — it's my own practice now, just me and one assistant", "job"),
        ("去年底自己出来单干了，在镇上开了家自己的药房", "job"),
        # gig work is a job; someone else's is not the user's
        ("我在成都送外卖，骑电动车，一天跑十个钟", "job"),
        ("I drive for Uber most nights", "job"),
        ("I'm a jazz singer-songwriter, touring pubs this summer", "job"),
        ("我老公送外卖，天天很晚回家", None),
        ("Should I drive for Uber on weekends for extra cash?", None),
        ("I'm a singer in the church choir on Sundays", None),
        # joining a club is no new job; joining a company is
        ("I joined a masters swim club last month.", None),
        ("I just joined a startup as a PM", "job"),
        # a move back to a home town of a longer name, a room rented now, a weatherboard;
        # someone else's move back is theirs
        ("退休后搬回开平赤坎老家了，屋后有块地。", "location"),
        ("搬出来了, 现在在 Bishan 租房间, 跟两个 flatmates 住", "location"),
        ("We finally moved into the old weatherboard in Coburg last month!", "location"),
        ("Yuting moved back to Taipei for work, so now we're long distance", None),
        # a name no longer to use
        ("Stop calling me 张总 lol, just Leo", "name"),
        # a home named in Latin letters, rented or shared now
        ("我们上个月搬到 Leith 了，就在 the Shore 旁边。", "location"),
        ("搬家了，现在住Markham。", "location"),
        ("moved out of the dorm, now sharing a flat near Xinjiekou with a roommate", "location"),
        ("Finally landed in Seattle! Renting a place in Bellevue near the new office.", "location"),
        ("我妈搬到 Leeds 了", None),
        # a move told by the season, a boat moored somewhere new; a name said with 就中
        ("今年开春搬到镇上住了，地还在村里种。", "location"),
        ("船现在挪到Limehouse Basin了，接下来几个月都停这儿。", "location"),
        ("叫俺老李就中，别整啥先生、老师的。", "name"),
        ("别叫李叔了，听着生分，以后叫老李就中。", "name"),
        ("医生叫我少吃盐就好", None),
        # not a name: a takeaway called, a doctor's word, calls at work; not a language or a
        # unit: a second foreign language, a cloned repository; not the user's home: parents'
        # move, a holiday rental, a hotel room, nights in an Airbnb, parents moving back
        ("别叫外卖了，自己做饭健康点", None),
        ("晚饭都叫外卖就行，别麻烦", None),
        ("医生说了，叫我少吃盐就好", None),
        ("Stop calling me at work, Mum", None),
        ("以后叫我咩咩", "name"),
        ("第二外语我想了想，还是日语好了", None),
        ("我用克隆的仓库跑了一遍测试", None),
        ("爸妈退休了，开春搬回乡下老家了", None),
        ("Renting a place in Lisbon for two weeks in August", None),
        ("Currently in a hotel room in Lisbon for the conference", None),
        ("目前在Airbnb住三晚，房东人很好", None),
        ("My parents sold the house and moved back to Ireland", None),
        ("I'm on Ubuntu; my sister lives in Leeds", "os"),
        ("I recently joined the infra team at Shopify", "job"),
        # a two-word name offered only beside a title or a name: not a drink
        ("Actually just Wei Ling is fine, the Dr. thing feels too stiff", "name"),
        ("Actually just Earl Grey is fine, no sugar", None),
        (
            "We finally got the keys and moved into the farmhouse just outside Hay-on-Wye!",
            "location",
        ),
        (
            "Please don't do the super cheerful 'stay positive!!' thing with me. Facts, straight",
            "tone",
        ),
        # a unit asked for by name, however briefly; a distance run is no unit wished for
        ("Kilometres again please, I've been back in NL long enough.", "units"),
        ("Give me acres and miles, that's how I think.", "units"),
        ("Give me torque specs in ft-lb, all my old workshop manuals use it.", "units"),
        ("以后气温水温都按°C说，别再给我换算成F了。", "units"),
        ("I ran 10 km again this morning", None),
        ("Give me 5 miles of flat trail near Leeds", None),
        # a home bought is where the user lives; a sister's, or a holiday place, is not
        (
            "Finally closed on a little place outside Fredericksburg! Hill Country life now.",
            "location",
        ),
        ("My sister bought a house in Leeds", None),
        ("We bought a place in Spain for holidays", None),
        # a frontend that is a framework now names the framework, whatever builds it
        ("portflow frontend is React + Vite now, migration finished", "frontend_framework"),
        ("switched the shop build from webpack to Vite, still Vue 3", "build_tool"),
        # a name to go by is said as one; a tool used is none; a relative's home is theirs
        ("Actually just go with Marco, everybody at the market calls me that anyway.", "name"),
        ("just use Slack, the team calls me there", None),
        ("moved out!! got a one-room in Mapo, 5 min walk from Hapjeong station", "location"),
        ("My daughter got a flat in Leeds", None),
        ("上个月搬家了，现在在松北，离冰雪大世界挺近。", "location"),
        ("朋友搬家了，现在在浦东", None),
        ("Go back to US units please - gallons, °F, pounds.", "units"),
        ("Finally bought a kitchen scale, so grams and °C from now on please.", "units"),
        ("Actually go back to acres and yards for land and fencing", "units"),
        ("We went back to miles of trail", None),
        ("Pounds please, I don't think in euros", None),
        ("Feet again, the plantar fasciitis is back.", None),
        ("Show me hot springs in NM", None),
        ("We decided to go with Emma for the baby, my name was almost Emma too", None),
        ("电话里信号不好，老是听不清", None),
        ("搬家了，现在在找工作", None),
        ("办公室搬家了，现在在望京SOHO", None),
        ("Got a room at Premier Inn near the airport for Friday", None),
        ("We bought a house in Leeds for my mum", None),
        # any answer language, not only the common ones; a language spoken is no wish
        ("Answer me in Thai from now on, please", "language"),
        ("以后用印尼语回答我", "language"),
        ("I speak Dutch at home with my wife", None),
        ("目标是年底能用泰语跟人砍价", None),
        # weights in 斤; half a 斤 of meat is no unit wished for
        ("说体重的时候用斤，公斤我算不过来", "units"),
        ("我每天吃半斤肉", None),
        # a name picked for oneself, not for a pet
        ("I've chosen my new name: it's Robin", "name"),
        ("We chose a name for the kitten: Mochi", None),
        # a project's data in a spreadsheet or a mini-program's cloud storage, its UI in
        # no framework or in jQuery, its state in a state library
        ("The club's tracker is kept in a Google Sheet", "database"),
        ("订单数据先放在云开发自带的数据库里", "database"),
        ("The app is native WeChat mini-program code", "frontend_framework"),
        ("官网前端还是 jQuery 写的", "frontend_framework"),
        ("Switched state management from Redux to Zustand", "state_management"),
        ("gigmap uses Provider for app state", "state_management"),
        ("Our internet provider is BT", None),
        # any currency by name; a real problem is no currency
        ("Quote prices in Colombian pesos from now on", "currency"),
        ("Show me the real numbers", None),
        # a move said as gone somewhere; a son's move, or a day's hauling, is none
        ("去年搬开发区去了，离单位近", "location"),
        ("我儿子搬开发区去了", None),
        ("昨天搬砖去了", None),
        # a name given in quotes, however long
        ("以后就喊我“烧烤大王”吧", "name"),
        ("医生叫我“少吃盐”", None),
        # a project's backend on a mini-program's cloud development, not a naming rule
        ("后端用的是微信云开发，云函数+云数据库", "database"),
        ("云数据库的集合名统一小写", None),
        # sizes and distances asked in a unit
        ("Give all dimensions in centimetres please", "units"),
        ("还是说斤吧，公斤我换算不过来", "units"),
        # a unit gone back to, said short; running again is no unit
        ("Exams are done, back to miles and pounds please", "units"),
        ("I'm back to running 5 km please don't judge", None),
        # land the user is on now, a house settled on; a weekend on a farm is a visit
        ("We're on 40 acres outside Armidale now", "location"),
        ("Settled on a little house in Fremantle, moving next month", "location"),
        ("We're on a farm near Dublin for the weekend", None),
        # a project's data in one big workbook
        ("The ledger keeps everything in one big Excel workbook", "database"),
        # the language named first, a nickname to use, Bahasa
        ("From now on English only, I need the practice", "language"),
        ("From now on, English lessons twice a week for my son", None),
        ("Actually use my nickname, Bear", "name"),
        ("Use my nickname generator for the game", None),
        ("Tolong pakai Bahasa Indonesia saja - answer in Bahasa please", "language"),
        # a language named as food, a thing or what one speaks with someone else; a told-to
        # quote; a name for something else; a fact measured; a unit in passing; a person
        # called Rand; a stay for an event; a job hauling; one's own spreadsheet; a recoil
        ("Use Greek yogurt instead of sour cream", None),
        ("I use Polish on my boots every week", None),
        ("I talk to my grandma in Tagalog every Sunday", None),
        ("女儿用意大利语唱歌特别好听", None),
        ("教练叫我“多喝水”", None),
        ("I picked a new name for this blog: Slow Crumbs", None),
        ("My height in cm is 172", None),
        ("Ankle's fine now, back to miles on the canal path most mornings", None),
        ("荔枝按斤算的，二十块一斤", None),
        ("跟我说米饭怎么煮", None),
        ("I always show my drafts to Rand before sending", None),
        ("We settled on a cottage near Whitby for Easter", None),
        ("We're on a farm near Dublin for my placement this month", None),
        ("最近搬快递去了，挣点辛苦钱", None),
        ("My budget is kept in a Google Sheet", None),
        ("数据分析课用的是云开发平台", None),
        ("My shotgun's recoil is too much for my shoulder", None),
        # a chilli is no Xiaomi phone
        ("我阳台上种了二十几盆二荆条和小米辣。", None),
        ("手机换成小米14了", "phone"),
    ],
)
def test_everyday_wordings_take_their_slot(policy: Policy, text: str, slot: str | None) -> None:
    from gateway.memory.policy import derive_slot

    assert derive_slot(text, policy, "profile") == slot


@pytest.mark.parametrize(
    ("text", "not_topic"),
    [
        ("我的理想是当老师", "vehicles"),
        ("结婚选个吉利的日子", "vehicles"),
        ("怎么去除衣服上的油渍", "transport"),
        ("cutting boards for the kitchen", "fitness"),
        # a reader left unused, an editor at a paper, a quiz team
        ("我喜欢看纸质书，Kindle 买了基本吃灰", "food"),
        ("I'm the night editor at a regional paper in Ohio.", "coding"),
        ("My flatmate runs our pub quiz team.", "food"),
        # an old furnace, a library as a place, a port side, a meeting run
        ("Our first house came with a 30-year-old oil furnace", "child"),
        ("I bike to the library where I work, about 6 km each way.", "coding"),
        ("she has serious prop walk to port in reverse", "coding"),
        ("I'm nervous about running my first coordination meeting on Thursday", "fitness"),
        # raising a limit a little, the first day of the new year: no school year
        ("手机银行的转账限额怎么调高一点？", "study"),
        # puffing from effort, a tablet to read on or for the dishwasher, an old hen for the pot,
        # a concert's start, a quiz question, a tyre size, road salt, a regular dog sitter, a
        # round of interviews sailed through, a pager's alerts, a gym membership or volunteering
        # for years, words or steps capped
        ("爬了五楼就气喘吁吁的", "health"),
        ("I read on a tablet every night before bed", "health"),
        ("Put one dishwasher tablet a day in the machine", "health"),
        ("炖老母鸡汤放什么料", "livestock"),
        ("The concert starts at 8pm, where should we eat before", "timetable"),
        ("这题考DP还是贪心", "study"),
        ("What tyre pressure for 195/65 R15", "health"),
        ("road salt under my car", "food"),
        ("Our dog sitter comes every weekday at noon", "travel"),
        ("I've sailed through the first round of interviews", "boats"),
        ("alert fatigue from the on-call pager", "health"),
        ("在这家健身房做了五年的会员", "work"),
        ("我做了一年的义工", "work"),
        ("回答最多500字", "budget"),
        ("每天最多走两万步", "budget"),
        ("体重控制在一百二十斤以内", "budget"),
        # cups of coffee or sessions a week capped are no budget; a dog called Skipper is no
        # boat, a cockpit no car
        ("每天最多喝两杯咖啡，多了睡不着", "budget"),
        ("上班太忙，一周最多练三次", "budget"),
        ("Our dog Skipper hates thunder", "boats"),
        ("以前开飞机，驾驶舱里特别吵", "vehicles"),
        # a score or a date with a slash is no blood pressure
        ("The match ended 120/95 after extra time", "health"),
        ("Can we move the call to 12/05?", "health"),
        # weekdays are no job, a pet bird flying about no trip, a tablet every night no device
        ("下周的工作日早饭怎么安排省事", "work"),
        ("Our budgies fly around the lounge every evening, which plants are safe?", "travel"),
        ("I take half a metformin tablet every night", "gadgets"),
        # furniture moved to a room is no move of home
        ("帮我想想怎么把旧书桌搬到书房去", "where_to_live"),
        ("准备把冰箱搬到厨房", "where_to_live"),
        # a matter seen to, a strength, a browser, a strained relationship, a home region, a
        # fly, a sales training: no dish, board, music, health, altitude, trip or workout
        ("这件事你帮我料理一下", "food"),
        ("补齐短板，发挥长板", "sports"),
        ("What's the difference between Opera and Chrome?", "music"),
        ("I strained my relationship with my boss", "health"),
        ("我老家在黄土高原", "altitude"),
        ("苍蝇飞来飞去看着烦", "travel"),
        ("Write an agenda for our sales training session", "fitness"),
        # answering in a language, a classmate's English: no language being learnt
        ("以后都用中文回答我", "language_learning"),
        ("我同学的英语比我好多了", "language_learning"),
        ("帮我把体检报告翻译成英文", "language_learning"),
        ("推荐一本经济学的英文入门书", "language_learning"),
        ("学生交上来的英语作文帮我批改一下", "language_learning"),
        # spending less time is no budget
        ("How do I spend less time on my phone?", "budget"),
        ("大年初一去拜年", "study"),
        # a menu on a screen, a marketing campaign, a phrase about being annoyed
        ("Excel 里怎么给一列加下拉菜单？", "food"),
        ("帮我整理一份上个月私域拉新活动的复盘框架", "outings"),
        ("帮我写这周的周报，主要做了618活动的素材", "outings"),
        ("explain the difference between weather and climate", "where_to_live"),
        ("American spellings drive me up the wall", "vehicles"),
        ("back up my argument", "gadgets"),
        ("moving from Jira to Linear", "where_to_live"),
        ("she turns 40 on Friday", "child"),
        ("I booked Friday off work", "travel"),
        # training an immune system or a puppy, coaching a team: no ride; the user's own
        # childhood is no child of theirs
        ("Explain how vaccines train the immune system.", "transport"),
        ("How do I train my puppy to sit?", "transport"),
        ("I coach my daughter's U10 soccer team", "transport"),
        ("I played piano for ten years as a kid.", "child"),
        # pots and pans are no syndrome; a pet named after a food is no meal
        ("best pots and pans for induction", "health"),
        ("我养了一只玄凤鹦鹉，叫芝士", "food"),
        ("车是一辆金杯小面包", "food"),
        ("帮我做个表格，对比一下三种手机套餐的月租和流量。", "food"),
        ("Explain the difference between active and passive bass pickups", "vehicles"),
        ("I'm a type 2 person, I like structure", "health"),
        # gig work is no concert, a function band no code, a sea bass no instrument
        ("I do gig work for Deliveroo in the evenings", "music"),
        ("We booked a function band for the wedding", "coding"),
        ("Caught a sea bass off the pier", "music"),
        ("Fix the race condition in the worker", "fitness"),
        ("The herd mentality in markets worries me", "livestock"),
        ("我快三十岁了", "child"),
        ("看见拖拉机就走不动道", "mobility"),
        ("What's the best way to repair rust holes in the floor pan?", "coding"),
        ("What's the plot of the film about?", "garden"),
        ("Biscuit is 10 weeks old, our new puppy", "child"),
        ("Rent is 2 months overdue", "child"),
        ("我家狗狗快三岁了", "child"),
        ("16 gigs of RAM should be plenty", "music"),
        ("I just bought a 2021 MG ZS EV", "health"),
        ("We focused on bass fishing this year", "music"),
        ("hay fever is awful this spring", "livestock"),
        ("It's a race to the bottom on price", "fitness"),
        ("I spent a week on the React migration", "travel"),
        # a price is no age, a panda no cat, a pup's age no child's, a book not boring no
        # boredom, a time of life no studies, a teacher's parents' evening no child of hers
        ("Diesel's 1.65 a litre right now", "child"),
        ("下个月想去成都看大熊猫", "pets"),
        # a chicken run is no meal, a dog's prey drive no driving
        ("best way to build a chicken run that's actually predator proof?", "food"),
        ("Nudel has a massive prey drive, she can't be off-lead", "vehicles"),
        ("佢又食言，唔好信佢", "food"),
        ("今日日食几点开始", "food"),
        ("How do I grow my newsletter from 5k to 10k subscribers? Should I run ads?", "fitness"),
        ("Which track sessions should I attend at PyCon?", "fitness"),
        ("How should the features be fed into the model?", "food"),
        ("I'm starting to be fed up with my job", "food"),
        ("scale the team from 5k to 10k users, plan?", "fitness"),
        # a flea market is no pet's, a chilli no phone
        ("这个周末附近有什么跳蚤市场可以逛吗？想淘点旧餐具", "pets"),
        ("我阳台上种了二十几盆二荆条和小米辣。", "gadgets"),
        ("What treats can I use to train my 5-month-old pup?", "child"),
        ("帮我给女儿挑几本暑假读的书，别太无聊的。", "free_time"),
        ("I've been vegetarian since college", "study"),
        ("Parents' evening is next Thursday, I need to prep the Year 11 data", "child"),
        ("Pollen count's meant to be high on Saturday", "garden"),
        ("家门口装了个监控探头", "health"),
        ("Plan my lunch breaks at the office", "travel"),
        # tablets of a medicine are no device, pigs no pets, fireworks set off no trip
        ("I take my blood pressure tablets every morning with breakfast", "gadgets"),
        ("家里养了两头猪，一头叫大黑一头叫二黑", "pets"),
        ("We set off fireworks in the garden", "travel"),
        ("I used to play rugby at uni", "study"),
        ("The AC in my cab is busted, driving me nuts", "food"),
        ("我最喜欢的鸟是戴胜", "pets"),
        ("7x24小时在线客服", "outings"),
        ("Fireworks were set off in the park", "travel"),
        ("我家抽油烟机坏了", "health"),
        ("经济高速发展", "transport"),
        ("他探头往外看了一眼", "health"),
        ("芝麻大的小事", "food"),
        ("My oldest friend is visiting", "child"),
        ("Prices went through the roof", "home"),
        ("coffee is the fuel that keeps me going", "vehicles"),
        ("greenhouse gas emissions", "garden"),
        ("我下班上地铁的时候总是很挤", "study"),
        ("How do I move my photos to the cloud?", "transport"),
        ("a three-year-old MacBook", "child"),
        ("The film premiere is on Friday", "creator"),
        ("高考倒计时100天", "occasions"),
        ("opened my own bank account", "business"),
        ("I always write with a fountain pen", "crafts"),
        # a boat's draft is no food, a hotel's ballroom no dancing, a dip no dance
        ("我这船吃水1米8，低潮的时候进出港要特别小心", "food"),
        ("Compare a converted barn, a hotel ballroom and a walled garden", "fitness"),
        ("Chips and salsa for the party", "fitness"),
        ("Write a note for our cafe's website on how customers can book a table", "outings"),
        # a stroke in the pool, an assembly line, going up to bed, an old-school manner
        ("I had a great stroke rate in the pool", "health"),
        ("流水线上班三班倒", "business"),
        ("Heading up to bed now", "travel"),
        ("Miles for me please, I'm old school", "study"),
        # a grape is no snake; words inside other words or idioms take no topic
        ("蛇龙珠是一种酿酒葡萄", "pets"),
        ("以上分析有没有问题？", "games"),
        ("建一个子目录，再起一个子进程", "body"),
        ("这道题好困难", "sleep"),
        ("下个月去葡萄牙旅行", "food"),
        ("我在汉堡工作了三年", "food"),
        ("我工作家庭两头忙", "books"),
        ("帮我画架构图", "arts"),
        ("帮我画个系统结构图", "photography"),
        ("网站很久没更新了，这个框架不太灵活", "mobility"),
        ("动态规划算法怎么入门", "purchase"),
        ("南京东路有什么好吃的", "purchase"),
        ("模型剪枝和量化", "garden"),
        ("Java 的双亲委派模型", "parent"),
        ("在家母乳喂养", "parent"),
        ("内存泄漏怎么排查", "gadgets"),
        ("回滚需要手工部署吗", "crafts"),
        ("墙上钉钉子", "software"),
        ("如何培养女性领导力", "child"),
        ("这一周天天加班", "weekend"),
        ("每月住房费用", "lodging"),
        ("新一季度的销售目标", "creator"),
        ("这代码写得太业余了", "free_time"),
        ("开水泡面", "health"),
        ("我打听不到他的消息", "hearing"),
        ("出港航班延误了", "boats"),
        ("看蜘蛛侠电影", "pests"),
        ("去看球鞋", "sports"),
        ("接下来几天天气怎么样", "agenda"),
        ("房产经纪人说这套房很抢手", "work"),
        ("Can you tidy up this function?", "housework"),
        ("Dusting off my old Python scripts", "housework"),
        ("create a tween with GSAP", "child"),
        ("My agent keeps calling the wrong tool", "work"),
        ("set up a SOCKS proxy", "clothing"),
        ("an accordion component in React", "music"),
        ("the game keeps stuttering", "speaking"),
        ("Back on my feet after the layoff", "mobility"),
        ("had a stroke of luck", "health"),
        ("He walks in the door", "fitness"),
        ("give this ship a wide berth", "boats"),
        ("crafting a cover letter", "crafts"),
        ("stack unwinding in C++", "free_time"),
        ("The plot has a huge twist", "garden"),
        ("Lock the app in portrait mode", "photography"),
        ("second-hand smoke", "purchase"),
        ("Heading over to the Settings tab", "travel"),
        ("A WebRTC voice call demo", "hearing"),
        ("Buy fish from the market", "fishing"),
        # a dining room's furniture, a kitchen's fittings and a screen's menu are no meal
        ("饭厅想放个餐边柜，多高合适？", "food"),
        ("my kitchen cupboard door won't stay shut", "food"),
        ("微信老是弹出菜单，怎么关掉", "food"),
        # a shop's takings, a framework contract, a masters swim club, a child's routine, a
        # place to get to on race morning
        ("Suggest a dashboard layout for weekly shop sales by product category", "food"),
        ("Call with the agency this Friday about a possible framework contract", "coding"),
        ("I joined a masters swim club last month.", "study"),
        ("两岁小孩的睡前流程怎么安排比较好？", "agenda"),
        ("Tips for race morning? When should I get to transition?", "money"),
        # a rash is no beehive, a time of life no studies now
        ("I'm allergic to penicillin, found out in college when I broke out in hives.", "garden"),
        ("I'm allergic to penicillin, found out in college when I broke out in hives.", "study"),
        # a kitchen timer, rabbits named like food
        ("我自己备课喜欢用番茄钟。", "food"),
        ("Two house rabbits, Mochi and Tofu.", "food"),
        ("Mochi and Tofu are our rabbits.", "food"),
        # words of those topics in another sense: an eclipse, a promotion's step, medical care
        # away from home, a date string, Pikachu, Palo Alto, a documentary's animals, the MCU,
        # a gas fitter, an out-of-office reply, a meeting room, spare tickets, containers that
        # run services, rainfall, a journal, key phrases, a video's frame rate
        ("日食什么时候能看到？", "food"),
        ("这次晋升让他上了一个台阶", "mobility"),
        ("异地就医怎么报销", "partner"),
        ("How do I parse a date string in Python?", "partner"),
        ("皮卡丘是什么属性的宝可梦", "vehicles"),
        ("I live in Palo Alto", "music"),
        ("Why do animals hibernate in winter?", "livestock"),
        ("What order should I watch the MCU movies in?", "coding"),
        ("I'm a gas fitter by trade", "fitness"),
        ("Set up an out-of-office reply while I'm away", "pets"),
        ("下午到三楼会议室开会", "travel"),
        ("I have 2 spare tickets for Saturday", "money"),
        ("Kubernetes: a growing number of services running in containers", "garden"),
        ("Rainfall of 10-20 mm expected", "photography"),
        ("I record in my journal every day", "creator"),
        ("Extract the key phrases from this paragraph", "language_learning"),
        ("This 30fps video looks choppy", "games"),
        # the back seat or the back garden is no back
        ("Coffee all over my back seat, how do I get it out of the fabric?", "mobility"),
        ("my back garden floods every winter", "mobility"),
        ("Make me a playlist for a 6 hour drive to the coast", "exertion"),
        ("Our flight was delayed 7 hours, what am I owed?", "exertion"),
        # a model's training, a bag's weight limit, an appliance that will not drain, a
        # backup's hours, support tickets
        ("My training loss stops going down after epoch 3", "fitness"),
        ("My checked bag needs to be under 23 kg", "fitness"),
        ("How do I get the dishwasher to drain?", "exertion"),
        ("My hard drive backup takes 10 hours", "exertion"),
        ("I have tickets in Jira to close before Friday", "outings"),
        # a resident assistant, Derby the town, a project's kick-off
        ("My RA said quiet hours start at 11", "health"),
        ("I'm an RA in the chemistry lab", "health"),
        ("I grew up in Derby", "sports"),
        ("Set up the project kick-off for Monday", "sports"),
        # a resident assistant met, a grip on money, an idea planted, a poet, benefits of a
        # language, an account opened, a walk by the estuary; a housing estate's age
        ("I met with my RA today about the dorm noise", "health"),
        ("I need a better grip on my finances", "handedness"),
        ("We need to plant the idea early with investors", "garden"),
        ("Robert Frost is my favourite poet", "garden"),
        ("What are the benefits of TypeScript?", "place"),
        ("We went for a walk along the estuary", "boats"),
        ("the grim reaper came for my plants", "music"),
        ("小区今年五岁了，绿化还行", "child"),
        # a lunar new year's day, a boss, a driving school's marks, a teacher at a school
        ("孩子初二去外婆家拜年", "child_school"),
        ("公司老大要求每月考核成绩", "child_school"),
        ("女儿的驾校成绩出来了", "child_school"),
        ("My daughter works as a high school teacher", "child_school"),
        ("my 7 year old son is reading chapter books in English now", "grown_child"),
    ],
)
def test_ordinary_words_do_not_take_a_new_topic(policy: Policy, text: str, not_topic: str) -> None:
    assert not_topic not in topics_of(text, policy)


@pytest.mark.parametrize(("text", "kind"), HEARING)
def test_the_users_hearing_applies_always_whatever_its_type(
    policy: Policy, text: str, kind: str
) -> None:
    from gateway.memory.policy import derive_slot

    slot = derive_slot(text, policy, kind)
    assert slot == "accessibility"
    assert derive_applies(text, policy, kind, slot, "global") == "always"
    assert derive_applies(text, policy, kind, slot, "task:support") == "always"


@pytest.mark.parametrize("text", HEARING_BARE)
def test_the_users_hearing_said_bare_is_a_topical_fact(policy: Policy, text: str) -> None:
    from gateway.memory.policy import derive_slot

    slot = derive_slot(text, policy, "profile")
    assert slot is None
    assert derive_applies(text, policy, "profile", slot, "global") == "relevant"
    assert "hearing" in topics_of(text, policy, "profile")
    # ... and reached where sound is part of the request: a call or a video call to make
    for request in (
        "I need to call the bank about a blocked card",
        "job interview over Zoom next week",
        "打给银行客服怎么说",
    ):
        assert "hearing" in topics_of(request, policy), request


@pytest.mark.parametrize(
    "text",
    [
        "I'm hard of hearing. Don't tell me to 'just ring them' - give me a written option",
        "I'm hard of hearing so phone calls are a nightmare - point me to chat or email options",
        "deaf in one ear - never suggest I phone anyone, give me an email or chat route instead",
        # a wish about the answers' words or tone, from a user who is deaf
        "I'm Deaf and BSL is my first language, so keep the English simple",
        "我是聋人，回答请用简单的书面语",
    ],
)
def test_a_hearing_need_that_says_how_to_answer_applies_always(policy: Policy, text: str) -> None:
    from gateway.memory.policy import derive_slot

    slot = derive_slot(text, policy, "accessibility")
    assert derive_applies(text, policy, "accessibility", slot, "global") == "always"


def test_the_users_hearing_meets_every_request_someone_elses_only_a_call(gateway: Gateway) -> None:
    me = User(gateway)
    hearing = me.remember("I wear a hearing aid, phone calls are a nightmare", type="profile")
    reading = me.remember("I'm dyslexic, short sentences please", type="accessibility")
    gran = me.remember("我奶奶耳朵背得厉害，打电话基本听不清", type="profile")
    both = sorted([hearing, reading])
    assert (
        sorted(me.injected(ask(me, "My pension statement never arrived. How do I get a copy?")))
        == both
    )
    assert sorted(me.injected(ask(me, "Plan a three-course Sunday lunch for ten"))) == both
    raw = ask(me, "What's a good way to keep in touch with my gran? She lives two towns over.")
    assert sorted(me.injected(raw)) == sorted([*both, gran])


@pytest.mark.parametrize("text", STANDING_IN_OTHER_WORDS)
def test_instructions_in_other_words_apply_always(policy: Policy, text: str) -> None:
    from gateway.memory.policy import derive_slot

    slot = derive_slot(text, policy, "preference")
    assert derive_applies(text, policy, "preference", slot, "global") == "always"


@pytest.mark.parametrize("text", TOPICAL_WITH_THOSE_WORDS)
def test_facts_with_the_same_words_apply_when_relevant(policy: Policy, text: str) -> None:
    from gateway.memory.policy import derive_slot

    slot = derive_slot(text, policy, "profile")
    assert derive_applies(text, policy, "profile", slot, "global") == "relevant"


def test_a_memory_in_a_slot_is_about_the_slots_topic(policy: Policy) -> None:
    from gateway.memory.policy import derive_slot, memory_topics

    for text, slot, topic in [
        ("我在字节跳动做推荐算法", "job", "work"),
        ("I use VS Code for everything", "editor", "coding"),
        ("我男朋友叫阿杰", "partner", "partner"),
        # a trade that is also a hobby's domain meets a request in it
        ("我是自由摄影师，平时接人像和城市风光", "job", "photography"),
    ]:
        assert derive_slot(text, policy) == slot
        assert topic in memory_topics(text, policy, "profile", slot)
    # by its words alone it names no job
    assert "work" not in memory_topics("我在字节跳动做推荐算法", policy, "profile", None)


def test_every_live_plan_and_goal_is_on_the_agenda(policy: Policy) -> None:
    """A request to plan the user's time meets every live plan and goal, whatever it is
    about; a weekly habit stated as a fact is not on it."""
    from gateway.memory.policy import memory_topics

    assert "agenda" in memory_topics("准备十月份的半马，每周要跑三次", policy, "goal", None)
    assert "agenda" in memory_topics("Dentist on Tuesday", policy, "plan", None)
    assert "agenda" not in memory_topics("我每周三练瑜伽", policy, "profile", None)
    # a weekend habit is about what it does, a plan for Saturday is about the weekend too
    habit = memory_topics("周末喜欢去看话剧", policy, "profile", None)
    assert "weekend" not in habit and "outings" in habit
    assert "weekend" in memory_topics("周六约了朋友去看话剧", policy, "plan", None)
    # on the agenda by its type alone, a plan is not about something else than the request
    assert "agenda" in policy.held_topics


def test_a_rewrite_says_a_change_a_deletion_only_with_what_is_there_now(policy: Policy) -> None:
    from gateway.memory.policy import says_change

    assert says_change("前端已经全部重写成 React 了，jQuery 删干净了。", policy)
    assert says_change("把原来的 widget 全删了，现在 UI 是我自己写的小框架", policy)
    # a site rebuilt in something else, or a tool ripped out, however it is worded
    assert says_change("官网上个月用 Astro 重写了，部署在 Netlify", policy)
    assert says_change("Rebuilt the site in Astro over the summer", policy)
    assert says_change("Ripped Redux out of the app last sprint", policy)
    assert says_change("小红书不弄了，现在全挪到视频号", policy)
    # a project's data or code moved from one tool to another, or rewritten in one
    assert says_change("We moved the club's bookings from Trello to Notion", policy)
    assert says_change("Moved the shop data off Airtable into Postgres", policy)
    assert says_change("We rewrote the kiosk app in vue3", policy)
    assert not says_change("We moved the sofa from the lounge to the spare room", policy)
    for same in (
        "I rewrote my CV last night",
        "The engine was rebuilt in 2019",
        "把沙发挪到窗边了",
        "论文开头重写了三遍",
    ):
        assert not says_change(same, policy), same
    for once in (
        "电脑里的照片不小心全删了",
        "把浏览器缓存删干净就好了",
        "周末用了两天把简历重写了一遍",
    ):
        assert not says_change(once, policy), once


def test_an_allergy_matters_to_what_is_eaten_taken_or_touched(policy: Policy) -> None:
    """An allergy to a food, a medicine or a material is no condition a workout, a move or a
    trip must allow for: a medicine or a doctor's visit reaches it, a food question reaches a
    food allergy, clothes one to a material, and a sting, pollen or a condition beside it is
    still a matter of health."""

    def reached(request: str, memory: str) -> set[str]:
        return set(topics_of(memory, policy, "profile")) & policy.topics_reaching(
            topics_of(request, policy)
        )

    workout = "Put together a 4-week running plan, I can run 3 times a week"
    doctor = "嗓子疼还发烧38度5，明天去医院看门诊，要跟医生说些什么？"
    for allergy in ("Allergic to penicillin.", "我对贝类过敏。", "Latex allergy, pretty bad one."):
        assert not reached(workout, allergy), allergy
        assert reached(doctor, allergy), allergy
    assert "food" in reached("Plan a dinner menu for six this Saturday", "我对贝类过敏。")
    assert "clothing" in reached("What should I wear to a wedding?", "I'm allergic to wool")
    assert reached(workout, "I'm allergic to bee stings and carry an EpiPen")
    assert reached(workout, "Allergic to penicillin, and I have asthma")
    # an allergy to animals is about animals, not a doctor's visit
    assert not reached(doctor, "对猫过敏。")
    # a medicine allergy in Chinese (青霉素 is no mould), a condition beside an allergy, a
    # request asking about medicines, an EpiPen to pack
    assert not reached(workout, "我对青霉素过敏")
    assert reached(workout, "I have a heart condition and I'm allergic to penicillin")
    assert "health" in topics_of("I'm allergic to aspirin, what can I take for a headache?", policy)
    assert reached(
        "What should I pack for a week in Thailand?", "Allergic to nuts, carry an EpiPen."
    )


def test_topics_link_what_shares_no_words(policy: Policy) -> None:
    assert "food" in topics_of("I'm allergic to peanuts", policy)
    assert "food" in topics_of("Plan a dinner menu for six people this Saturday", policy)
    assert "food" in topics_of("帮我安排周六的晚餐菜单", policy)
    # "python" the pet is not "Python" the language
    assert topics_of("My pet is a ball python named Monty", policy) == ["pets"]
    # a genre is a taste in books as in films; dairy is food in either script
    assert {"books", "screen"} <= set(topics_of("Big fan of sci-fi, Becky Chambers mostly", policy))
    assert "food" in topics_of("我對乳製品不耐受", policy)
    assert "pets" not in topics_of("How do I read a JSON file in Python?", policy)
    # an editor's keys and edits are about code, where the user's editor matters; a
    # shortcut of the operating system or of the way to the shops is not
    for edit in (
        "how do i bind a shortcut to run just the test file i'm in?",
        "what's the shortcut to put a cursor on several lines at once?",
        "怎么把项目里的一个变量名全部改掉",
    ):
        assert "coding" in topics_of(edit, policy), edit
    for other in ("What is the shortcut to select all on a Mac?", "a shortcut to run to the shops"):
        assert "coding" not in topics_of(other, policy), other
    # working out a sum is no workout, a build's status no run, a treat for the cat no food
    # of the user's
    assert "fitness" not in topics_of("how do I work out depreciation on a tractor?", policy)
    assert "fitness" in topics_of("I work out three times a week", policy)
    assert "fitness" not in topics_of(
        "icons for builds: passing, failing, running, skipped", policy
    )
    assert "food" not in topics_of("is canned tuna ok as a treat for my cat?", policy)
    assert "food" not in topics_of("is chocolate toxic to dogs?", policy)
    assert "music" in topics_of("how do I save my voice over back to back gigs?", policy)
    assert "food" not in topics_of("家里的猫这两天都不怎么吃东西", policy)
    # leaving work is a time of day, not the job
    assert topics_of("每天下班都要打两把游戏", policy)[:1] == ["timetable"]
    assert "work" not in topics_of("每天下班都要打两把游戏", policy)
    # "at a stretch" is not a stretch, "work out how much" not a workout
    assert topics_of("How can I stay focused when I write for hours at a stretch?", policy) == []
    # a pet matters to furniture, plants and pest control, not to a leaking tap
    assert "pets" in policy.topics_reaching(["furnishings"])
    # where one lives decides what grows, not which sofa to buy
    assert "place" in policy.topics_reaching(["garden"])
    assert "place" not in policy.topics_reaching(["furnishings"])
    # ... and what to wear (a coat for a Harbin winter), as a condition does (feeling the
    # cold); a home city does not reach every work request
    assert {"place", "health"} <= policy.topics_reaching(["clothing"])
    assert "place" not in policy.topics_reaching(["work"])
    # a pet matters to moving house; a family trip does not reach one child's homework
    assert "pets" in policy.topics_reaching(["where_to_live"])
    # a job does not reach a moving-day checklist
    assert "work" not in policy.topics_reaching(["where_to_live"])
    assert "family" not in policy.topics_reaching(["child"])
    assert "study" in policy.topics_reaching(["language_learning"])
    # a memory about the user's husband does not reach a gift for their daughter; a memory
    # about any relative reaches a request about the whole family
    assert "partner" not in policy.topics_reaching(["child"])
    assert {"child", "partner", "parent", "sibling"} <= policy.topics_reaching(["family"])
    assert "pets" in policy.topics_reaching(["pests"])
    assert "pets" not in policy.topics_reaching(["home"])
    assert "fitness" in policy.topics_reaching(["fitness"]) and "health" in (
        policy.topics_reaching(["fitness"])
    )
    # what the user means to spend matters to what a request buys, books or goes out to;
    # not to a recipe. What the user wears goes into a bag.
    assert all("budget" in policy.topics_reaching([t]) for t in ("purchase", "travel", "outings"))
    assert "budget" not in policy.topics_reaching(["food"])
    assert "clothing" in policy.topics_reaching(["packing"])
    assert {"body"} <= policy.topics_reaching(["clothing"]) & policy.topics_reaching(["fitness"])
    assert "body" not in policy.topics_reaching(["food"])
    # a bad back or knee matters to exercise, a chair and whatever asks effort of the body (a
    # climb, a load, hours seated); not to a recipe, a dripping tap or a taxi app. A
    # wheelchair or a stick matters to any place to go. How the user gets about (no car)
    # shapes trips and days out.
    for topic in ("fitness", "furnishings", "exertion"):
        assert "mobility" in policy.topics_reaching([topic])
    for topic in ("food", "garden", "home", "travel", "outings", "transport"):
        assert "mobility" not in policy.topics_reaching([topic])
    for topic in ("garden", "home", "travel", "outings", "lodging"):
        assert "getting_around" in policy.topics_reaching([topic])
    assert "exertion" in topics_of("周末想去爬香山，有啥需要注意的？", policy)
    assert "exertion" in topics_of("写论文天天坐着，想换把椅子，有什么推荐？", policy)
    assert "exertion" not in topics_of("厨房水龙头一直滴水，是不是要换阀芯？", policy)
    assert "exertion" not in topics_of("Can you walk me through a case study?", policy)
    for other in (
        "Explain lifting state up in React",
        "Recommend some Star Trek episodes",
        "模型剪枝和量化有什么区别？",
        "蹲一个后续",
        "推荐一下上海的步行街",
        "Is this plan realistic for me, given my budget?",
    ):
        assert "exertion" not in topics_of(other, policy), other
    assert "exertion" in topics_of("打算周末去爬长城，怎么安排？", policy)
    assert "exertion" in topics_of("Any tips for a 12-hour flight to Singapore?", policy)
    assert "exertion" in topics_of(
        "下个月要坐十个小时大巴去西双版纳，路上怎么才能舒服一点？", policy
    )
    assert "exertion" in topics_of("去哈尔滨演出，坐火车得七八个钟头，路上要注意点啥？", policy)
    # a walker is a walking aid, a dog walker is not
    assert "getting_around" not in topics_of("We hired a dog walker for Biscuit", policy)
    assert "getting_around" in topics_of("I can't go anywhere without my cane", policy)
    # a nap or a bedtime is a fixed time in a plan of the user's days
    assert "sleep" in policy.topics_reaching(["timetable"])
    # a tight budget matters to how the user gets between places
    assert "budget" in policy.topics_reaching(["transport"])
    # a condition goes into the bag for a trip (medicines, a pacemaker card), but does not
    # reach every trip or game: a visa question, the offside rule
    assert "health" in policy.topics_reaching(["packing"])
    assert "health" not in policy.topics_reaching(["travel"]) | policy.topics_reaching(["sports"])
    assert "transport" in policy.topics_reaching(["travel"])
    # how the user gets about matters to a day out, and where they live to getting about
    assert "transport" in policy.topics_reaching(["outings"])
    assert "place" in policy.topics_reaching(["transport"])
    # a request about a child meets a grown one; the family's meals or a day out do not
    assert "grown_child" in policy.topics_reaching(["child"])
    assert not {"grown_child"} & (
        policy.topics_reaching(["family"]) | policy.topics_reaching(["outings"])
    )
    # a child's school year meets a request about the child or the family, not every trip,
    # day out or bag to pack that a young child's age matters to
    assert "child_school" in policy.topics_reaching(["child"]) & policy.topics_reaching(["family"])
    assert "child" in policy.topics_reaching(["outings"]) & policy.topics_reaching(["packing"])
    assert not {"child_school"} & (
        policy.topics_reaching(["outings"])
        | policy.topics_reaching(["packing"])
        | policy.topics_reaching(["travel"])
        | policy.topics_reaching(["lodging"])
    )
    # where the user lives matters to a mortgage or a tax return, not to what compound
    # interest or an ETF is
    assert "place" not in policy.topics_reaching(["money"])
    assert "place" in topics_of("how does a mortgage offset account work vs overpaying?", policy)
    assert "place" in topics_of("帮我算一下今年个税能退多少", policy)
    assert "place" not in topics_of("what does compound interest mean in practice?", policy)


@pytest.mark.parametrize(
    ("text", "topic", "not_topic"),
    [
        # getting ready for a trip is packing for it; getting ready for an interview is not
        ("去北京玩要准备些什么？", "packing", "work"),
        ("What do I need to prepare for a hiking trip in the Alps?", "packing", "work"),
        ("面试需要准备什么？", "work", "packing"),
        ("How should I prepare for my job interview?", "work", "packing"),
        # lodging, transport and activities are parts of a trip that a preference names apart
        ("I avoid hotels with a casino", "lodging", "transport"),
        ("帮我推荐几家上海的民宿", "lodging", "transport"),
        ("How do I get from the airport to the city centre?", "transport", "lodging"),
        ("我出差从来不坐网约车", "transport", "lodging"),
        ("What outdoor adventures should I try in Colorado?", "outings", "lodging"),
        # music, books, films and games are separate tastes
        ("I can't stand country music", "music", "screen"),
        ("推荐几首适合开车听的歌", "music", "games"),
        ("What new book should I read this summer?", "books", "music"),
        ("Help me book a flight to Tokyo", "transport", "books"),
        ("Which TV shows should I watch next?", "screen", "books"),
        ("我不喜欢看恐怖电影", "screen", "music"),
        ("What board games are good for a game night?", "games", "screen"),
        ("推荐几款主机游戏", "games", "screen"),
        # where to live is not where the user is this weekend
        ("I can't stand hot and humid climates", "where_to_live", "place"),
        ("想搬到一个生活成本低一点的城市", "where_to_live", "travel"),
        ("How do I reduce network traffic to my API?", "coding", "where_to_live"),
        # software bought, not software written
        ("I hate subscription software", "software", "coding"),
        ("推荐一款修图软件", "software", "coding"),
        ("What are some good rugs for my living room?", "home", "clothing"),
        ("I dislike reptiles as pets", "pets", "home"),
        # the home's repairs are not its furnishings, and a mouse in the kitchen is a pest
        ("How much paint do I need for the walls of a small bedroom?", "home", "furnishings"),
        ("I want a new sofa that survives a dog", "furnishings", "fitness"),
        ("家里厨房好像有老鼠，用什么办法驱鼠比较安全？", "pests", "gadgets"),
        ("I use a wireless mouse", "gadgets", "pests"),
        ("How do I work out how much paint the walls need?", "home", "fitness"),
        ("Python 里的装饰器是怎么工作的？", "coding", "work"),
        # a 3D printer's bed is not furniture; handicrafts are a hobby of their own
        ("Why won't my first layer stick to the print bed?", "gadgets", "furnishings"),
        ("我每天早上练半小时楷书", "crafts", "study"),
        # when, not what: a weekend question is not an outing
        ("周末想去吃火锅，点哪些菜比较好？", "weekend", "outings"),
        # everyday words of their domains: instruments, dishes, sports, consoles, hair and
        # skin care, loans and taxes, public speaking, seats and licences, shelves, a flight
        ("My daughter plays the violin", "music", "study"),
        ("我在学钢琴", "music", "coding"),
        ("I love sushi", "food", "travel"),
        ("我对虾过敏", "food", "pets"),
        ("Our oven is broken until Tuesday", "food", "gadgets"),
        ("Cricket season starts soon", "sports", "pets"),
        ("想买双新鞋周末打球穿", "sports", "outings"),
        ("I only have a PS5", "games", "gadgets"),
        ("下周去杭州见客户，帮我安排个住的地方", "lodging", "food"),
        ("I react badly to PPD in hair dye", "beauty", "health"),
        ("帮我推荐一款爽肤水", "beauty", "food"),
        ("我还有二十年房贷", "money", "home"),
        ("What do I need for my self-assessment tax return?", "money", "study"),
        ("I get nervous about public speaking", "work", "screen"),
        ("我只有坐靠窗的位置才睡得着", "transport", "health"),
        ("I don't have a driving licence", "transport", "study"),
        ("How can I put up some shelves in the lounge?", "furnishings", "home"),
        ("下个月要飞悉尼，十个多小时", "travel", "place"),
        ("Thinking of a long weekend in Zurich", "travel", "outings"),
        ("My 9-year-old needs some inspiration", "child", "study"),
        ("母亲节想给我妈一个惊喜", "parent", "food"),
        ("I tore my rotator cuff last year", "health", "fitness"),
        # a business the user runs, what ails them, a run, a car by its Chinese name,
        # a class to teach, a flight with its date, an event in a city
        ("How should I price a nail-trim-only service?", "business", "health"),
        ("I run a small ceramics studio, mostly mugs", "business", "work"),
        ("I've got a sore throat and a fever, what can I take?", "health", "food"),
        ("跑完长距离之后吃什么恢复比较快？", "fitness", "travel"),
        ("我开的是特斯拉", "vehicles", "gadgets"),
        ("帮我出五道化学选择题，给高二学生用", "study", "coding"),
        ("下个月8号飞巴黎，待一周", "travel", "transport"),
        ("Conference in Lisbon from the 10th to the 14th", "travel", "work"),
        ("How should I build an emergency fund?", "money", "work"),
        ("Going to a hot pot place tonight, what should I order?", "food", "place"),
        ("Lily has a tree nut allergy, carries an epipen", "food", "child"),
        ("我妈腿脚不太好，走不了太多路", "health", "fitness"),
        ("can you give me a few Spanish phrases for ordering food?", "language_learning", "study"),
        ("日语的は和が到底怎么区分？", "language_learning", "travel"),
        ("I've been at my current company for five years", "work", "study"),
        ("双十一要不要入一个新的 Kindle？", "money", "work"),
        ("I started running last month", "fitness", "coding"),
        ("我们住在上海一套60平的老公房，没有电梯，六楼", "home", "partner"),
        ("I'm 1.75m and about 82kg", "fitness", "food"),
        ("周末想去爬黄山，有什么需要注意的？", "outings", "travel"),
        ("下周去台北，附近有什么必吃的小吃？", "travel", "transport"),
        ("周末家里请客，要提前准备些什么食材？", "food", "work"),
        ("I want to start running outside this winter", "place", "travel"),
        ("这周末附近有什么好看的展览吗？", "arts", "screen"),
        ("What should I look for when buying my first fountain pen?", "handedness", "study"),
        ("我是左撇子", "handedness", "health"),
        ("Recommend some Japanese TV dramas I could watch", "language_learning", "travel"),
        ("How do I find out which process is using port 8080?", "coding", "place"),
        ("打流感疫苗之前之后要注意些什么？", "health", "food"),
        ("Give me ideas for a revision lesson for my Year 11 group", "study", "coding"),
        ("Help me draft a to-do list for tomorrow", "agenda", "work"),
        ("给我排一个这周的时间表，我工作日晚上七点以后有空", "agenda", "fitness"),
        # Traditional Chinese reads as Simplified
        ("幫我出五題化學選擇題，給高二學生用", "study", "coding"),
        # a night shift keeps one awake; a food allergy does not
        ("I work night shifts at the hospital", "sleep", "food"),
        ("我对花生过敏", "food", "sleep"),
        # conditions and medicines by name, and what they matter to
        ("Prone to Achilles tendinopathy flare-ups on my right side", "health", "food"),
        ("I'm on warfarin for atrial fibrillation", "health", "coding"),
        ("最近在控糖，医生说我血糖有点高", "food", "work"),
        ("Can you suggest some stretches for tight hamstrings?", "fitness", "food"),
        ("Can you give me a daily practice routine for scales and arpeggios?", "music", "fitness"),
        ("Slugs are shredding my hostas. What actually works?", "garden", "food"),
        ("I keep waking up at 3am and can't fall back asleep", "sleep", "food"),
        ("Any ideas to boost sales this month? I'm stuck at around 70 total.", "business", "food"),
        ("How do I set up a keybinding that runs the test under my cursor?", "coding", "travel"),
        ("How much water should I drink on a 4-hour ride in summer?", "fitness", "vehicles"),
        ("Any tips for parallel parking in tight city spots?", "vehicles", "fitness"),
        ("which running shoes should I be looking at?", "fitness", "coding"),
        ("When's a good time to plant tomatoes outside?", "garden", "health"),
        ("Mia is turning 10 and is completely horse-obsessed", "child", "pets"),
        ("Got a rescue greyhound called Pip last month", "pets", "coding"),
        # where the user is for now is where "local" and "nearby" are
        ("In Seoul this week, staying near Hongdae", "place", "coding"),
        ("接下来两周在云南元阳，专门拍梯田", "place", "food"),
        ("下周要去成都开三天会", "travel", "work"),
        ("Off to Valencia on Friday for two weeks", "place", "coding"),
        ("后天飞昆明玩五天", "place", "work"),
        # a pet eating is the pet's business, not a question about the user's food
        ("what can a rabbit eat besides hay?", "pets", "food"),
        ("猫能吃酸奶吗", "pets", "food"),
        ("I have really flat feet and overpronate", "health", "home"),
        ("We rent a two-bed flat above a bakery", "home", "health"),
        ("Any tips for a moving-day checklist?", "home", "coding"),
        ("I shoot weddings on a Canon R6", "photography", "fitness"),
        ("怎么拍好夜景？我用的是微单", "photography", "food"),
        ("Help me write a best man speech", "speaking", "coding"),
        ("下周要做项目答辩，有点紧张", "speaking", "food"),
        ("I volunteer at a nursing home on Sundays", "parent", "health"),
        ("我在做一个手工皂品牌", "business", "food"),
        ("开了家小面馆，办的个体户执照", "business", "coding"),
        ("我在准备 PMP 考试", "study", "work"),
        ("Give me a 20-minute exercise plan for a hotel room", "fitness", "coding"),
        ("a system design question about rate limiters", "coding", "study"),
        ("how should I structure my mornings?", "agenda", "coding"),
        ("周末去水库钓鱼，用什么饵好？", "fishing", "food"),
        ("Build me a 3000 yd swim practice for Monday", "fitness", "coding"),
        ("what lunch will a 5yo and a 9yo both eat?", "child", "coding"),
        ("出门五天，家里的猫怎么办", "travel", "food"),
        ("卧室墙面刷什么漆好", "home", "food"),
        ("black spot on my roses again", "garden", "health"),
        ("便宜点的生日礼物推荐", "money", "coding"),
        ("I stream on Twitch most nights", "creator", "food"),
        ("帮我写这期视频的简介", "creator", "food"),
        ("need a new office chair, my back is killing me", "furnishings", "coding"),
        ("any tips for jet lag after a long-haul flight?", "travel", "coding"),
        ("We run a little florist on the high street", "business", "garden"),
        ("第一周辅食怎么安排", "child", "coding"),
        ("what should I set the heating to? the bills here are crazy", "place", "coding"),
        ("周末想吃火锅，离我近点的", "place", "coding"),
        ("阳台上种了几盆薄荷", "garden", "home"),
        ("四月去郊外观鸟要带什么", "outings", "pets"),
        ("家里的充电线老是被咬坏", "pets", "coding"),
        ("give me a 6 week program for my snatch", "fitness", "coding"),
        ("带孩子去苏州那天要带啥", "travel", "coding"),
        ("我们家养了二十只羊", "livestock", "pets"),  # a flock kept is livestock, no pet
        ("在工地上干活，包工头拖欠工资", "work", "coding"),
        ("my hands are cracked from the cold", "health", "coding"),
        ("我在成都春熙路附近开了家奶茶店", "business", "coding"),
        ("When I'm in Kyoto, what should I eat?", "travel", "coding"),
        ("每天走够一万步", "fitness", "coding"),
        ("我还在哺乳期", "health", "coding"),
        ("最近杨絮满天飞，出门怎么防护", "health", "travel"),
        ("I need a formula on the Totals sheet that sums each month", "coding", "food"),
        ("我是跑网约车的，一天开十个小时", "vehicles", "coding"),
        ("饭后散步多久合适", "fitness", "coding"),
        ("买不到郫县豆瓣，有什么调料能替代", "food", "coding"),
        ("在日本大阪留学两年", "place", "coding"),
        ("I have gout", "food", "coding"),
        ("想在家做扬州炒饭，给个详细做法", "food", "coding"),
        ("how do I rename a variable everywhere in a file?", "coding", "food"),
        ("邻居半夜还在装修，怎么沟通", "sleep", "coding"),
        ("在驾校练车，科目二总挂", "vehicles", "coding"),
        ("岳母下周过来住一个月", "food", "coding"),
        ("主要写 Go", "coding", "food"),
        ("quit the hotel!! running my own taco truck now", "business", "fitness"),
        ("帮我理一理，这几天有什么事要提前准备的？", "agenda", "coding"),
        ("新学期课表：周一周三全天满课", "timetable", "food"),
        ("how many cals should i be eating a day?", "fitness", "coding"),
        ("A new agency asked me for my rates. Can you draft a reply?", "business", "food"),
        ("有个客户问笔记本换块屏幕要多久", "gadgets", "food"),
        ("路考有啥容易挂的点", "vehicles", "food"),
        ("跑高速长途，怎么开最省钱", "vehicles", "coding"),
        ("broke up w tom :( seeing chris now", "partner", "food"),
        ("booked Tokyo, Nov 12-19, first time in Japan", "travel", "coding"),
        ("Moving from Leeds to Lisbon at the end of the month", "where_to_live", "coding"),
        (
            "kidney disease stage 3, renal dietitian says keep potassium and salt down",
            "health",
            "coding",
        ),
        ("switched to a Framework laptop running Fedora", "gadgets", "fitness"),
        ("六一快到了，送点啥礼物好？", "child", "coding"),
        ("our soil is heavy clay, drains terribly after rain", "garden", "coding"),
        ("右眼黄斑变性，看小字特别费劲", "health", "garden"),
        ("帮我列个出行要带的东西清单", "travel", "coding"),
        ("on a student visa, can only work 48 hrs a fortnight", "work", "food"),
        ("I get really bad motion sickness on winding roads", "travel", "coding"),
        ("he turns 8 on the 20th, having a party at home", "child", "coding"),
        ("we've started Ava on solids", "child", "coding"),
        ("up in Manchester for a work conference till friday", "place", "coding"),
        ("老公在仓库上夜班", "partner", "coding"),
        ("Make me a study schedule for the next 10 days", "agenda", "food"),
        ("how do I stop message previews showing on my lock screen?", "gadgets", "food"),
        # fitting something into the user's days, and the hours that shape it
        ("When's the best time for me to fit in the gym this week?", "timetable", "food"),
        ("Make me a 6 week plan to go from walking to running 5k", "timetable", "coding"),
        ("帮我排一个每天的复习计划", "timetable", "food"),
        ("白天在奶茶店打工，晚上六点以后才有空", "timetable", "coding"),
        ("started at a dental office front desk, Mon-Fri 8 to 5", "timetable", "food"),
        # local requests, and where the user lives or stays
        ("Find me a weekend Pilates class near home", "place", "coding"),
        ("my flat's in Sheffield, Kelham Island", "place", "coding"),
        ("这学期交换在慕尼黑，待到七月底", "place", "coding"),
        # the user's build decides what fits; feeling the cold is about what to wear
        ("身高165，偏瘦，肩比较窄", "body", "coding"),
        ("I'm 6'2 with long legs, always struggle with bike sizing", "body", "clothing"),
        ("had burnout last year, my therapist says no working past 7pm", "timetable", "food"),
        ("入门公路车买啥好 第一次买 不太懂", "purchase", "coding"),
        ("On the state pension, I try to keep presents to about twenty quid", "budget", "coding"),
        ("Birthday coming up for my grandchild, what could I get her?", "purchase", "coding"),
        ("Birthday coming up for my grandchild, what could I get her?", "child", "coding"),
        ("Lately everyone sounds muffled when I'm on a call", "hearing", "food"),
        ("Any good brunch spots around me for this weekend?", "place", "coding"),
        ("Do I need to worry about frost on the car tomorrow morning?", "place", "coding"),
        ("这周要去银行、修手机、再去趟车管所，帮我排一下时间", "timetable", "food"),
        ("water pressure in the upstairs shower dropped a lot", "home", "coding"),
        ("how do I search and replace a word across every file in my project?", "coding", "food"),
        # the user's back, joints and walking aids; the garden, furniture and home they meet
        ("Left hip got replaced 5 weeks ago, can't bend past 90 degrees", "mobility", "coding"),
        ("腰椎间盘突出，坐久了就疼得厉害", "mobility", "coding"),
        ("My mother-in-law moved in with us in March, she uses a walker", "mobility", "coding"),
        ("Freezing draught coming in round the windows", "home", "coding"),
        ("we're in a Victorian terrace, still got the original sash windows", "home", "coding"),
        ("We're ordering Thai tonight", "food", "coding"),
        ("What can I plant in my veggie patch this month?", "garden", "coding"),
        ("Build me a 6-week plan to bring my 1.5 mile time down", "fitness", "coding"),
        ("starting a graphic design master's in September", "study", "coding"),
        ("双胞胎三个月大了", "child", "coding"),
        ("没车，出门都是高铁地铁", "transport", "coding"),
        ("I have asthma and I'm allergic to dogs", "health", "coding"),
        # a hand condition and what is held in the hand; frostbite; a salty sweater and an
        # electrolyte plan; a derby on a screen; an interview to give; a pet while away; a
        # wind forecast on the water; the new parents' group is no one's parents
        ("RA in both hands, mornings are the worst", "health", "coding"),
        ("RA in my hands, mornings are the worst", "handedness", "coding"),
        ("左脚小拇趾冻伤过", "health", "coding"),
        ("I sweat a lot and get salt marks on my cap", "fitness", "coding"),
        ("gels or salt caps for a hot day out?", "fitness", "coding"),
        ("周末德比战，哪里看球气氛好？", "sports", "coding"),
        ("下周电台约我做个访谈，怎么准备？", "speaking", "coding"),
        ("出国两周，找人上门喂靠谱吗？", "pets", "coding"),
        ("Force 5 gusting 6 on Saturday, too much for me?", "boats", "coding"),
        ("a welcome note for new parents at the clinic", "child", "parent"),
        ("We get frost in June up here", "garden", "coding"),
        ("想跑一场越野赛，爬升大概两千米", "fitness", "coding"),
        # a child by a doubled name and an age, not a pet's; someone else's autism; a
        # freezing night for the garden
        ("乐乐今年五岁，最爱恐龙", "child", "pets"),
        ("豆豆三岁了，是只泰迪", "pets", "child"),
        ("小宇今年八岁，刚上二年级", "child", "pets"),
        ("糖糖两岁半，最爱看小动物", "child", "pets"),
        ("小白三岁了，是只萨摩耶", "pets", "child"),
        ("俺儿在部队服役，春节回不来", "grown_child", "child"),
        ("I have an L5-S1 disc bulge, no deadlifts", "mobility", "coding"),
        ("sickle cell trait, so I get checked before big climbs", "health", "coding"),
        ("在野狐上打到了2段，官子还是弱", "games", "coding"),
        ("我那辆雅迪越来越不经骑", "vehicles", "coding"),
        ("Studio Ghibli is my comfort watch", "screen", "coding"),
        ("Our son is autistic and hates loud places", "health", "coding"),
        ("Freeze warning tonight, anything I should cover?", "garden", "coding"),
        # a parrot's breed, a pigeon loft, a horse's shoes; teenagers and baby things; a shop
        # of one's own; a flat's stairs; a nursing degree; an exhibit; time on the bike
        ("Our African grey screams whenever we leave the room", "pets", "coding"),
        ("赛鸽出笼前要注意啥？", "pets", "coding"),
        ("How often should the farrier come out?", "livestock", "coding"),
        ("I've got two teenage girls who live on their phones", "child", "coding"),
        ("双十一想囤点母婴用品", "child", "coding"),
        ("Saving to open my own bakery in two years", "business", "coding"),
        ("Is a fourth-floor walk-up a bad idea long term?", "where_to_live", "coding"),
        ("Second year of my BSN now", "study", "coding"),
        ("参展作品要不要配中英文说明牌？", "arts", "coding"),
        ("Tips to climb better on the bike?", "fitness", "coding"),
        # a stitch on a run, a surf lesson, a yoga flow, classic skiing; a zither and a mixing
        # trick; a dachshund called by its breed; riding in the cold
        ("一跑快了就岔气怎么办", "fitness", "coding"),
        ("booked my first surf lesson for Sunday", "fitness", "coding"),
        ("Plan a 30 minute beginner flow for stiff hips", "fitness", "coding"),
        ("My guzheng keeps drifting", "music", "coding"),
        ("how do I sidechain the bed under a voiceover?", "music", "coding"),
        ("我家腊肠犬腰不好，能爬楼梯吗", "pets", "food"),
        ("Is it safe to ride on black ice with studded tyres?", "transport", "coding"),
        # grown children away at university or at work are not the family's children
        ("女儿在外地读大学", "grown_child", "child"),
        ("My son studies law in Coimbra", "grown_child", "child"),
        ("daughter is doing her PhD in Leeds", "grown_child", "child"),
        ("儿子在加拿大工作", "grown_child", "child"),
        ("女儿在读初二", "child", "grown_child"),
        # weddings, anniversaries and the speeches for them
        ("下个月大学室友结婚 我当伴郎", "occasions", "coding"),
        ("帮我写段伴郎致辞 别太肉麻", "occasions", "coding"),
        ("在哈尔滨", "place", "coding"),
        ("人在西安 住钟楼附近", "place", "coding"),
        ("money's tight, capping gifts at $30 each this year", "budget", "coding"),
        ("trying not to spend more than £50 on any bit of kit", "budget", "coding"),
        ("Pepper is a 30kg lab and she hates the cold", "pets", "coding"),
        ("每周二四上午去老年大学上书法课", "timetable", "coding"),
        ("20 mins max on weekdays", "timetable", "coding"),
        ("need new gloves for the ride in, what kind??", "clothing", "coding"),
        ("When's a sensible time to schedule a recurring call with my team?", "place", "food"),
        ("I always run cold, I need layers everywhere", "clothing", "coding"),
        ("业余爱好拍鸟", "photography", "pets"),
        # what the user means to spend; a gift is something to buy
        ("On a fixed income now, keep gift spending to $30 or less", "budget", "coding"),
        ("家里预算紧，出去玩每人别超过3000", "budget", "coding"),
        ("Any ideas what to get my niece for Christmas?", "purchase", "coding"),
        ("中秋快到了，回家给家里带点什么礼盒好？", "purchase", "coding"),
        # a chair to sit in all day, a move, a soak, the way to work, a retirement account
        ("想买把办公椅，预算一千以内，有什么推荐的吗？", "furnishings", "coding"),
        ("I'm moving flats next month, how should I plan the move?", "home", "travel"),
        ("周末想去泡温泉，有什么要注意的吗？", "health", "food"),
        (
            "What's the least painful way to get to the office during the strike?",
            "transport",
            "food",
        ),
        ("Explain the difference between a Roth IRA and a traditional IRA", "money", "coding"),
        ("我开的是一家水果店", "business", "vehicles"),
        ("What should I wear to work on Monday? It's supposed to be hot.", "work", "food"),
        ("What should I eat the night before a long training run?", "fitness", "coding"),
        ("帮我规划一个北疆十天的自驾路线。", "vehicles", "coding"),
        ("What perennials could I plant along the back fence this spring?", "garden", "food"),
        ("家里卫生间想做一些适老化改造，有哪些要点？", "mobility", "food"),
        ("Can you explain how a reverse mortgage works?", "home", "food"),
        ("我儿子今年高三，压力很大", "study", "food"),
        ("帮我准备一下跟新团队 leader 的第一次 1on1，聊些什么好？", "work", "food"),
        ("我的蓝卡快到期了，续签需要准备什么材料？", "work", "food"),
        ("How often should I rotate the tyres?", "vehicles", "food"),
        ("How do I set up autoformat on save?", "coding", "food"),
        ("Build me a 4-day upper/lower split.", "fitness", "food"),
        ("明天想去爬楚格峰，需要准备什么？", "outings", "food"),
        ("Any tips for setting up a more ergonomic home office?", "furnishings", "food"),
        ("my husband is doing keto at the moment, low carb everything", "food", "coding"),
        # a fixed time of the user's day meets a plan of their days
        ("my MS fatigue is worst after about 3pm", "timetable", "coding"),
        ("下午3点以后就犯困", "timetable", "coding"),
        # a spending cap is a budget, not the user's finances: where they live stays out
        ("想买把办公椅，预算一千以内，有什么推荐的吗？", "budget", "money"),
        # an event to walk, a sale a shop runs, somewhere to go, a graduate programme
        ("Signed up for a charity 5K walk for the hospice", "fitness", "money"),
        ("saving $5k for a car", "money", "fitness"),
        ("Holiday sale starts in two weeks: 20% off everything", "business", "fitness"),
        ("这周末有什么适合带孩子去的地方推荐吗？", "outings", "food"),
        ("Recommend a laptop for my grad program", "study", "food"),
        # what the user may eat: teeth, a cut in sugar, a target weight
        ("Dentist fitted a temporary crown - nothing sticky or hard", "food", "fitness"),
        ("老伴牙口不好，太硬的东西嚼不动", "food", "fitness"),
        ("Trying to cut way back on sugar for the rest of the year", "food", "fitness"),
        ("医生说这三个月要把体重控制下来，目标减到65公斤", "food", "money"),
        ("I use a walker when I'm out and about", "mobility", "food"),
        ("Is the night train to Vienna worth it?", "transport", "fitness"),
        # a syndrome in capitals, a place the user runs, a plan to jog, weight to drop,
        # a day at a desk
        ("I have POTS - standing up fast makes me dizzy", "health", "food"),
        ("I run a 4-room B&B up in the Vermont hills", "business", "food"),
        ("Put together a beginner walk/jog plan for me, 4 weeks.", "fitness", "food"),
        ("trying to drop 20 lbs, doc was on me about it", "fitness", "money"),
        ("basically at my desk 10 hours a day", "mobility", "food"),
        ("I really hate crowds, packed places make me anxious", "outings", "food"),
        # a phrase's words hyphenated ("day-trip", "no-sugar")
        ("Suggest a few day-trip ideas around Portland", "outings", "food"),
        ("Doing a 30-day no-sugar challenge, started it last week", "food", "fitness"),
        # the user's plans and to-dos, a restaurant by area, staying alert at the wheel,
        # how many children, somewhere near, emigrating
        (
            "What should I be focusing on this week to stay on track with my plans?",
            "agenda",
            "food",
        ),
        ("帮我列一下接下来要办的事情，按轻重缓急排一下", "agenda", "food"),
        ("推荐几个适合请朋友吃饭的餐厅类型或者区域", "place", "money"),
        ("Give me some tips for staying alert on long night drives.", "sleep", "food"),
        ("I have two boys, they're 6 and 9.", "child", "food"),
        ("周末想找个近点的地方吃早茶", "place", "money"),
        ("我打算明年移民加拿大，走技术移民", "travel", "food"),
        # a month's plan, a checklist of the next weeks, a runner's taper and tendons, a
        # pregnancy by its weeks and scans, a gear list, film to shoot, a horror flick,
        # the user's rhythm, a drive from home
        ("帮我排一个接下来一个月的练习计划。", "agenda", "food"),
        ("Help me put together a prep checklist for the next few weeks", "agenda", "food"),
        ("比赛前一周应该怎么减量？", "fitness", "money"),
        ("My left Achilles gets tight if I ramp up mileage too fast", "mobility", "vehicles"),
        ("IT band acts up after anything over 30 km", "mobility", "music"),
        ("I'm 26 weeks along now", "pregnancy", "food"),
        ("I'm 34 weeks with twins", "pregnancy", "food"),
        ("做四维彩超前要注意什么？需要空腹吗？", "pregnancy", "money"),
        ("What kind of paint should I use for the nursery walls?", "pregnancy", "food"),
        ("Help me build a gear list for my upcoming fishing trip.", "packing", "food"),
        ("I shoot film on weekends, mostly Portra 400", "photography", "screen"),
        ("我不敢看恐怖片，看完晚上睡不着", "screen", "food"),
        ("我是早起型的人，早上六点就醒", "sleep", "food"),
        ("这周末想去拍日落，有什么好的机位推荐？", "photography", "food"),
        ("Where can I photograph fall colours within a two-hour drive of home?", "place", "food"),
        ("I'm 71 and retired", "health", "food"),
        # weight in Chinese numerals, diabetes by its type, the user's line of work, the
        # hours the user can train, a weak wrist
        ("今年年底之前我想减掉五公斤", "food", "money"),
        ("I'm type 1, diagnosed when I was 12.", "health", "food"),
        ("我这行容易腰肌劳损，平时有什么预防的办法？", "work", "food"),
        ("I can only train on weekday evenings and Sunday mornings", "timetable", "food"),
        ("My left wrist is weak since I broke it in March", "mobility", "food"),
        # the way between two places, seasickness on it; damp laundry at home; a teaching
        # qualification
        ("What's the best way to get from Bangkok to Koh Tao?", "transport", "food"),
        ("I get seasick super easily, even on short boat rides", "transport", "food"),
        ("衣服在家总是晾不干，还有一股霉味，有什么办法？", "home", "food"),
        ("Got my CELTA in 2021, passed with Pass A", "work", "food"),
        # the standard's timestamps, not a camera's sensitivity
        (
            "Write a function that parses the ISO timestamps out of our logs",
            "coding",
            "photography",
        ),
        ("What ISO should I shoot at indoors?", "photography", "coding"),
        # boats and bees; a shift or a site is the user's work
        ("一个人驾驶帆船进港靠泊，有什么实用技巧？", "boats", "coding"),
        ("What paperwork do I need before sailing into Mexico?", "boats", "travel"),
        ("我后院放了三箱蜜蜂，去年刚开始养", "garden", "food"),
        ("quick breakfasts I can make before a 24-hour shift", "work", "sleep"),
        ("What should I pack for lunch on long days on site?", "work", "coding"),
        ("Can you plan my runs for this week?", "fitness", "coding"),
        ("What roof rack setup would work for carrying my kayaks?", "vehicles", "food"),
        # chess, skateboarding, a rig, a room redone, a voice to look after, a few books
        ("下个月要参加一个15+10的快棋赛，帮我制定一个四周的备赛计划。", "games", "coding"),
        ("我想开始练碗池和U池了，有什么需要注意的？", "sports", "food"),
        ("I run a 2020 Kenworth T680 pulling a Carrier reefer trailer", "vehicles", "food"),
        ("We're thinking of redoing our bathroom this spring.", "home", "coding"),
        ("录音前这段时间嗓子应该怎么保养？", "music", "food"),
        ("给我推荐几本讲声音设计和录音的书。", "books", "music"),
        ("My husband Raj has Parkinson's and his balance has gotten worse", "mobility", "games"),
        # dumplings, birds watched, an audax, case notes, a stream's titles and upload speed
        ("饺子馅怎么调才不会出水？", "food", "coding"),
        ("出发去看鸟之前，帮我列一下要准备的装备。", "outings", "pets"),
        ("Training for a 200 km audax later this spring.", "fitness", "food"),
        ("I keep falling behind on writing up case notes after home visits.", "work", "home"),
        ("Give me some stream title ideas for this week.", "games", "coding"),
        ("My upload speed is only about 8 Mbps on a good day.", "creator", "coding"),
        ("Suggest something to drink at the pub quiz tonight.", "food", "coding"),
        ("What should I be prioritizing in my work this week?", "work", "coding"),
        # a child by a spelled age, a climber's fingers, a GPU, a streaming PC
        ("Any ideas for a birthday present for my eleven-year-old?", "child", "coding"),
        ("Give me a six-week fingerboard plan.", "sports", "food"),
        ("My lab box has two RTX 4090s, 24GB each.", "gadgets", "pets"),
        ("My streaming PC has an RTX 3060 and 16GB of RAM.", "creator", "coding"),
        # a caravan, a bass, bike parts, drawing apps, a late snack, a dose, a game by name
        ("我们的房车是两铺位的小车，没有卫生间", "travel", "food"),
        ("What should we look for in a site for the caravan?", "vehicles", "coding"),
        ("I play 5-string bass, mostly session and function gigs", "music", "coding"),
        ("链条磨损得厉害，该换哪个型号？", "fitness", "food"),
        ("How do I set up a custom brush for inky line work?", "crafts", "coding"),
        ("饿了，推荐个宿舍能做的夜宵", "food", "coding"),
        ("I take lisinopril 10mg every morning", "health", "coding"),
        ("原神我已经卸载了，彻底不玩了", "games", "coding"),
        ("Ideas for a week in Wales with the grandkids?", "travel", "coding"),
        ("帮我挑几款适合老人用的餐具", "parent", "coding"),
        ("A client wants a fourth round of changes on the artwork", "business", "coding"),
        ("I got an offer for a summer internship off campus", "study", "food"),
        ("我家小的11个月了，晚上还要喝夜奶", "child", "coding"),
        ("What should I be getting done this week?", "agenda", "coding"),
        ("我的帐篷是两人的，睡袋是零下五度的", "travel", "food"),
        # farm animals, a race trained for, a small child's age, rest stops, a pregnancy
        ("今年夏天特别旱，草场不够吃了，怎么办？", "livestock", "coding"),
        ("What's the best way to keep chickens cool in a heatwave?", "livestock", "coding"),
        ("After the June race I'm building toward Berlin in September", "fitness", "coding"),
        ("我们家乐乐七月满四岁", "child", "coding"),
        ("Any rest areas on I-40 with a patch of grass?", "transport", "coding"),
        ("我怀二胎五个月了", "pregnancy", "coding"),
        ("戒烟三个月了，一根都没碰过", "health", "coding"),
        ("Help me plan my marking for next week", "work", "coding"),
        ("My sourdough starter has barely risen in three days", "food", "coding"),
        ("这周末想在上海看个展", "arts", "coding"),
        # insulin, a sensor, a plot, a welder, a typhoon, a patch covered, a client's visit
        ("Endo switched me to a different basal insulin", "health", "coding"),
        ("How do I get my CGM readings on my lock screen?", "health", "food"),
        ("Which fruit bushes would do well on my plot?", "garden", "coding"),
        ("My workshop has a two-post lift and a MIG welder", "crafts", "coding"),
        ("台风要来了，明天跑单要注意点啥？", "place", "coding"),
        ("I cover the Tottenham patch for adult social care", "work", "coding"),
        ("Help me plan my work week, what should I tackle first?", "agenda", "coding"),
        ("Should I rent or buy a suit for the wedding?", "clothing", "coding"),
        # a pet that comes along or waits at home, a journey's stops, a child's age said soon,
        # a roofer, a reno, a running watch, fuel, low sodium, a class taught, a week's
        # priorities, meetings over the next weeks, pollen, a glucose sensor, a school report
        ("Rosie comes on the road with me, she needs a walk every stop", "travel", "coding"),
        ("家里有只猫，出门超过两天就得找人上门喂", "travel", "coding"),
        ("He can't be left alone for more than a few hours", "travel", "coding"),
        ("What should I look for in a place to stop overnight on the A1?", "travel", "coding"),
        ("Leo turns 9 soon and he's obsessed with dinosaurs", "child", "coding"),
        ("What should I ask a roofer before I hire them?", "home", "coding"),
        ("I've got roughly $15k left in the reno budget", "home", "coding"),
        ("我的跑表是佳明 Forerunner 265", "gadgets", "coding"),
        ("Diesel's 1.65 a litre — what's this 900 km run going to cost me?", "vehicles", "child"),
        ("Doctor put me on low-sodium for the next month", "food", "coding"),
        ("帮我设计一节分数的练习课", "study", "coding"),
        ("Help me figure out my top priorities for this week.", "agenda", "coding"),
        (
            "Schedule calls with the photographer and the caterer over the next two weeks",
            "agenda",
            "coding",
        ),
        ("我花粉过敏挺严重的，尤其是草花粉", "garden", "coding"),
        ("I get awful hay fever, grass pollen is the worst", "outings", "coding"),
        ("我的探头老是贴到第七八天就翘边掉了", "health", "coding"),
        ("His school report says he lacks focus in class", "child", "coding"),
        # a list of the days' errands, a journey set off on, a weekly morning, a flock counted,
        # leaves eaten, vegetables grown, wine, a greenhouse, a supplier, a study, a bedroom on
        # a road, an e-scooter
        ("帮我列一下接下来几天要准备的事情，我怕忘了", "agenda", "coding"),
        ("Booked the West Highland Way, we set off in three weeks", "travel", "coding"),
        ("I do Tuesday mornings at the Sue Ryder shop", "timetable", "coding"),
        ("I keep 12 hens in a wooden coop down the bottom field", "livestock", "coding"),
        ("家里养了两头猪", "livestock", "coding"),
        ("白菜叶子上全是小洞洞，是什么虫子咬的？", "garden", "coding"),
        ("Growing pak choi and Chinese cabbage for the first time this year", "food", "coding"),
        ("I'm a French reds person, Rhône especially", "food", "coding"),
        ("Best way to keep the greenhouse tomatoes watered?", "garden", "coding"),
        ("跟供应商谈价格有什么技巧？", "business", "coding"),
        ("我书房朝西，下午太阳直射显示器", "home", "coding"),
        ("Our bedroom faces a busy road, lorries rumble past all night", "sleep", "coding"),
        ("Sold the Ninebot. Got myself a Pure Advance", "vehicles", "coding"),
        ("I finally opened my own little salon in March!", "business", "coding"),
        ("乐队散伙了，周五晚上空出来了", "timetable", "coding"),
        # beekeeping, allergens in Chinese, a home server, footage, the youngest child, low
        # ceilings, tickets at work, a business opened, things carried somewhere, a child by a
        # spelled age
        ("最近蜂群里的瓦螨好像又多起来了", "garden", "coding"),
        ("When should I put the first honey super on this year?", "garden", "coding"),
        ("我对芝麻过敏，还挺严重的", "food", "coding"),
        ("At home I've got a Raspberry Pi 4 and a Synology NAS", "gadgets", "coding"),
        ("How do I stabilise shaky handheld footage?", "creator", "coding"),
        ("My youngest is 3, so she can't sit through anything long", "child", "coding"),
        ("I'm six foot four and I hate low ceilings", "home", "coding"),
        ("How can I auto-assign incoming tickets to the right team?", "work", "coding"),
        ("How do I get 40 boxes of cupcakes to the Saturday market?", "transport", "coding"),
        ("Any ideas what to get a five-year-old boy for his birthday?", "child", "coding"),
        # medicines by name, local food, motorways, swimming gear and sessions, a landlord's
        # flats, a guest list, an app asked for, binoculars by their spec
        (
            "Topiramate gave me brain fog, so my neurologist switched me to propranolol",
            "health",
            "coding",
        ),
        ("下个月去东京开会，想尝尝当地美食", "food", "coding"),
        ("晚上我不跑高速，对面车灯一晃我就看不清", "transport", "coding"),
        ("I always need a neoprene cap and booties under 18°C", "clothing", "coding"),
        ("Can you build me a 4-week pool plan to get my 1500m time down?", "fitness", "coding"),
        ("这周末想去千岛湖野泳", "fitness", "coding"),
        ("I own two flats in Manchester, both let out to students", "home", "coding"),
        ("Our guest list is sitting at about 120 people", "occasions", "coding"),
        ("有什么好用的偏头痛记录 app 推荐吗？", "gadgets", "coding"),
        ("Treated myself to a Swarovski NL Pure 10x32", "outings", "coding"),
        # a child by name and age, an interview, a customer's order, a widget, seasickness
        ("Oscar is two and a half and still naps after lunch", "child", "coding"),
        ("Help me prepare for my upcoming interview", "work", "food"),
        ("A customer is asking when her order will ship", "business", "coding"),
        ("How do I put a widget on my home screen?", "gadgets", "coding"),
        ("I get queasy the first day out on a boat", "transport", "coding"),
        ("Plan family dinners for the rest of June", "agenda", "coding"),
        ("周末想去水库下船钓翘嘴", "fishing", "coding"),
        # everyday foods by name, dancing, blisters, something to watch, an easel, tides and
        # moorings, a walk that hurts, a restaurant picked, a time asked for
        ("Apples, pears and honey set my IBS off", "food", "coding"),
        ("早餐一般是燕麦加酸奶，再来点蓝莓", "food", "coding"),
        ("Any tips for surviving a full night of social dancing?", "fitness", "coding"),
        ("想学几个新的 salsa 转圈花样，有什么推荐吗？", "fitness", "coding"),
        ("I get blisters on the balls of my feet really easily", "health", "coding"),
        ("Recommend something for us to watch tonight, we're wiped out", "screen", "coding"),
        ("All I've got is a big heavy studio easel", "arts", "coding"),
        ("帮我查查明天我停船那儿的潮汐时间", "boats", "coding"),
        ("船挪到石浦港去了，那边泊位费便宜一半", "boats", "coding"),
        ("I only fish with handlines from the boat, no rods", "fishing", "coding"),
        ("walking more than 20 minutes at a time really hurts", "mobility", "coding"),
        ("Help me pick a restaurant in Manchester for our anniversary", "outings", "coding"),
        ("我周三白天想约朋友吃个饭，几点比较合适？", "timetable", "coding"),
        # a voice's range, a stroke and its therapy, a cane, cold water swimming, a podcast's
        # topics, a bedtime by the clock, a business's turnover, a journey to a named place
        ("I'm a baritone, comfortable from about G2 to E4", "music", "coding"),
        ("Since the stroke I struggle with words that start with P and B", "health", "coding"),
        ("Give me practice sentences for my speech exercises", "health", "coding"),
        ("I need my cane on grass or gravel", "mobility", "coding"),
        ("今年冬天想开始冬泳，怎么循序渐进比较安全？", "fitness", "coding"),
        ("帮我想十个下一季的选题方向", "creator", "coding"),
        ("我一般晚上11点睡，早上6点起", "sleep", "coding"),
        ("店里去年营业额大概120万", "business", "coding"),
        ("Heading up to the Scottish Highlands on the bike in June", "travel", "coding"),
        # walks and climbing gear, hours on one's feet, accompaniment, litter boxes, a
        # vineyard's grapes, swallowing, an agent, the coming week's work, a stair gate, a plot
        ("Any nice walks in the Peak District for this Saturday?", "fitness", "coding"),
        ("I always bring my own 70m rope and 14 quickdraws", "fitness", "coding"),
        ("I have to conduct a concert on my feet for two hours next month", "mobility", "coding"),
        ("How can I practise accompaniment for the school musical?", "music", "coding"),
        ("How many litter boxes do I actually need at home?", "pets", "coding"),
        ("我们酒庄主要种赤霞珠，还有一小块霞多丽", "food", "coding"),
        ("淑芬现在吞咽不太好，硬的东西容易呛着", "food", "coding"),
        ("帮我给经纪人发条微信，问问演出费谈得怎么样了", "work", "coding"),
        ("帮我排一下接下来这一周组里的活儿", "agenda", "coding"),
        ("楼梯安全门怎么选？", "child", "coding"),
        ("Off to Cornwall for a week, so my plot has to fend for itself", "garden", "coding"),
        # debugging, kanji, a triathlon's morning, bouldering, a climbing grade sent, where a
        # shop ships, a weight to get down to, a trade's insurance
        ("how do i set up breakpoint debugging for my flask app?", "coding", "food"),
        (
            "What's a realistic way to memorize kanji without burning out?",
            "language_learning",
            "coding",
        ),
        ("Any last-minute tips for race morning? What should I eat?", "fitness", "coding"),
        ("I boulder outdoors with two crash pads", "fitness", "coding"),
        ("目标：9月底前在野外红点一条7a。", "fitness", "coding"),
        ("Right now I only ship within the US and Canada", "business", "coding"),
        ("今年想把体重从68公斤减到60", "food", "coding"),
        ("Is it worth paying for professional indemnity insurance?", "work", "coding"),
        # a game's frame rate, a camera by its model or a photo's focus, exercises, pots to
        # grow in, heatstroke, a table saw, office chairs, where one records, swallowing
        ("赛博朋克2077画质怎么调能稳在100帧左右？", "games", "coding"),
        ("My kit: a Canon R7 with the 100-400mm.", "photography", "coding"),
        ("Tips for getting sharp photos of my kid's football match?", "photography", "coding"),
        ("Any exercises I can do on breaks during a 12 hour shift?", "fitness", "coding"),
        ("what veg could I realistically grow in pots this summer?", "garden", "coding"),
        ("夏天中午跑单太热了，怎么防中暑？", "health", "coding"),
        ("想入手一台台锯，家用的话推荐什么样的？", "crafts", "coding"),
        ("公司换工位了，我想自己配一套办公桌椅", "furnishings", "coding"),
        ("I record in a small bedroom with paper-thin walls", "creator", "coding"),
        ("Mum has trouble swallowing since the stroke", "food", "coding"),
        # futsal near the user's place, a walking plan, getting fitter, a date, a slippery
        # floor, altos, a video call with a grandson, flatmates' dishes, a veg plot, a pond
        ("any futsal courts near my place I can book for weekday nights?", "sports", "books"),
        ("any futsal courts near my place I can book for weekday nights?", "place", "books"),
        ("Make me a simple 4 week walking plan, I want to get my sugar down", "fitness", "coding"),
        ("Make me a simple 4 week walking plan, I want to get my sugar down", "food", "coding"),
        ("give me a 4-week plan to get fitter before the new season starts", "fitness", "coding"),
        ("any ideas for a date we can do over video call?", "partner", "coding"),
        ("Any tips to make our bathroom safer? The floor is slippery tile.", "mobility", "coding"),
        ("Can you suggest a 15-minute warm-up for a small group of altos?", "music", "coding"),
        ("同孙仔视频的时候画面成日卡住", "software", "coding"),
        ("one of the guys keeps leaving dirty dishes in the sink for days", "housework", "food"),
        ("renting in Bishan with flatmates", "housework", "food"),
        ("My veggie plot has choy sum, long beans and bitter melon", "garden", "coding"),
        ("One of the koi in our pond has a white fuzzy patch", "pets", "coding"),
        # an editor's jumps and embedded code, intervals and steps, stairs down a mountain, a
        # trip to meet clients, how far from home, a trade's tax, phrases for a trip, a cake
        ("go-to-definition can't find the HAL headers in my embedded C project", "coding", "food"),
        ("cheaper alternatives to nRF52840 for BLE?", "coding", "food"),
        ("what should I eat the night before an early interval session?", "fitness", "coding"),
        ("any ideas to sneak more walking into a school day?", "fitness", "coding"),
        ("下周想走峨眉山金顶那条线，下山全是台阶，要注意点啥？", "mobility", "coding"),
        ("下个月初去法兰克福 Eurobike，然后去阿姆斯特丹见客户", "travel", "coding"),
        ("whats a good weekend fishing spot within 2 hours of home?", "place", "coding"),
        ("what expenses should I be tracking this year for taxes?", "business", "coding"),
        ("Im leased on with Landstar now as an owner operator", "business", "coding"),
        (
            "going to Cancun in the fall, what phrases should I practice?",
            "language_learning",
            "coding",
        ),
        ("周末想烤个6寸戚风，给我一个不容易失败的配方", "food", "coding"),
        ("I like trails with streams and forest", "fitness", "coding"),
        # a meal whose dishes are washed after, a menu with the dogs around, uni again
        ("晚饭吃什么好？吃完不想洗碗", "food", "coding"),
        ("Planning a BBQ menu; our dogs Max and Bella will be around", "food", "coding"),
        ("I'm back at uni next week, exams in June", "study", "coding"),
        # Cantonese: kids, snacks, moving house, mahjong, a sister
        ("附近有冇啲適合帶細路去嘅周末活動？", "child", "coding"),
        ("聽日上大家姐度打牌，我想帶啲小食過去", "food", "coding"),
        ("聽日上大家姐度打牌，我想帶啲小食過去", "sibling", "coding"),
        ("搬屋前我想自己執埋啲書同廚具先入箱", "mobility", "coding"),
        ("我阿妹話我成日出銃，有冇啲防守技巧可以學？", "games", "coding"),
        # running taken up again, a career step, a coach's team, a van to rent, seasickness,
        # birdwatching, a poster talk, a graphics card, money to place, time away from home
        ("Give me a 4-week plan to start running again", "fitness", "coding"),
        (
            "Should I do a tax specialisation or a data analytics certificate next?",
            "work",
            "coding",
        ),
        ("赛季结束了，给小队员们买点什么小奖品好？", "sports", "coding"),
        ("要搬一台二手冰箱回餐馆，要不要租车？", "vehicles", "coding"),
        ("I get badly seasick, even on short RIB crossings.", "boats", "coding"),
        ("我每年夏天在 Isle of May 上数海鹦和三趾鸥。", "outings", "coding"),
        ("Help me prep a 3-minute pitch for my poster next week", "speaking", "coding"),
        ("is a 4060 Ti worth it over my 3060 for gaming?", "gadgets", "coding"),
        ("got 3000 extra this month. where should it go", "money", "coding"),
        ("What do we need to sort out at home before we go?", "pets", "coding"),
        ("first time at a pho place, what do i order", "food", "coding"),
        ("厨房吊柜想自己装，装高一点，我一个人能搞定吗", "mobility", "coding"),
        # a motorbike, a steamed bun, a pig farm, an animal off its food, a long-haul flight,
        # patrons, something to listen to
        ("Looking for a helmet intercom, I ride an adventure bike", "vehicles", "coding"),
        ("晚上想蒸一锅杂面馍，面跟水咋配比", "food", "coding"),
        ("这礼拜六打猪瘟疫苗，兽医上午来。", "livestock", "coding"),
        ("one of our farm animals stopped eating 2 days ago", "livestock", "coding"),
        ("We fly to Taipei on 2 July, our first long-haul with Lea.", "transport", "coding"),
        ("New goal: 300 patrons by the end of the year.", "creator", "coding"),
        ("need something to listen to during long inking sessions", "music", "coding"),
        # hunting, a genre or an étude, a season's end, a pet feeder, a clinical placement, a
        # snowplough, spring onions, an endocrinologist, a language test, solo parenting, a
        # coffee-shop order, a soup, a repair near home
        ("Elk season opens in three weeks, what should I pack?", "hunting", "coding"),
        ("下个月打猎要带什么装备？", "hunting", "coding"),
        ("Still house hunting in Leeds, any tips?", "home", "hunting"),
        ("Recommend some Cantopop from the 90s", "music", "coding"),
        ("这首练习曲左手总是跟不上", "music", "coding"),
        ("Ideas for the end-of-season do for the under-12s?", "sports", "coding"),
        ("出差一周，自动喂食器哪款靠谱？", "pets", "coding"),
        ("My clinical placement starts on a cardiac ward in May", "study", "coding"),
        ("The snowplow blade won't lift on the left side", "vehicles", "coding"),
        ("韭菜剪了一茬还会再长吗？", "garden", "coding"),
        ("Questions to bring to my endo appointment next week?", "health", "coding"),
        ("How long should I study for the TEF exam?", "language_learning", "coding"),
        ("Solo parenting this week while he's away, bedtime tips?", "child", "coding"),
        ("去星巴克点什么不会太甜？", "food", "coding"),
        ("周末想炖汤，有什么不油腻的方子？", "food", "coding"),
        ("Where can I get my sewing machine serviced?", "place", "coding"),
        ("how do I remove unused imports in one go?", "coding", "food"),
        # a child named with an age, not a pet; a dislocation, genres, childcare, care for a
        # parent at home, ice sculpture
        ("Noah (7) is scared of the dark", "child", "coding"),
        ("Sophie is eleven and hates maths", "child", "coding"),
        ("Noah六岁，怕黑", "child", "coding"),
        ("Our cat Pepper is eleven", "pets", "child"),
        ("我家猫Mango两岁了", "pets", "child"),
        ("Dislocated my kneecap skiing last winter", "health", "coding"),
        ("Recommend some amapiano for a road trip", "music", "coding"),
        ("How do I apply for the childcare subsidy?", "child", "coding"),
        ("Any tips for hiring a home carer?", "parent", "coding"),
        ("今年冰雕比赛我们队做龙", "arts", "coding"),
        # races and sessions by their kind, eating in Cantonese, being fed, a child by grade,
        # a hen's run, a dog's drive
        ("Get me ready for a 25k hill race with about 1500m of climb", "fitness", "coding"),
        ("a plan to get me from 5k to 10k? race is mid August", "fitness", "coding"),
        ("give me a speed session I can do on the track this week", "fitness", "coding"),
        ("下个礼拜去顺德玩两日，有咩必食嘅？", "food", "coding"),
        ("我唔食得太甜，甜得滯會頭痛。", "food", "coding"),
        ("what should I grab from 7-Eleven to stay awake and actually fed?", "food", "coding"),
        ("Which history curriculum would work for my 5th grader?", "child", "coding"),
        ("best way to build a chicken run that's actually predator proof?", "livestock", "food"),
        ("Nudel has a massive prey drive, she can't be off-lead", "pets", "vehicles"),
        # a goal by its time, distance, weight or grade, a training block, the day's walk;
        # a model's training time is none of them
        ("Hoping for sub-3:40 at the Dublin marathon", "fitness", "coding"),
        ("Signed up to run the bay 16k in spring", "fitness", "coding"),
        ("Want to finish the 42 km ski classic next winter", "fitness", "coding"),
        ("Goal: under 88kg before the wedding", "fitness", "coding"),
        ("Goal: under 88kg before the wedding", "food", "coding"),
        ("This year I want to redpoint a 5.12a at the local crag", "fitness", "coding"),
        ("Put together an 8-week training block, I can train three days a week", "fitness", "work"),
        ("snowed in all week, how do I keep up my morning walk?", "fitness", "coding"),
        # hours in one seat or standing, said around the journey or the event
        (
            "Flying Dubai to Auckland next week and it's over 17 hours, how do I cope?",
            "exertion",
            "coding",
        ),
        ("下个月回老家，二十几个小时的火车，要准备点啥", "exertion", "coding"),
        (
            "Doing a five-hour market stall on Sunday, how do I get through it comfortably?",
            "exertion",
            "coding",
        ),
        ("How do I cut my PyTorch model's training time to under 3 hours?", "coding", "fitness"),
        # food to bring or grill, tickets to a show, heavy things moved by hand
        ("I'm doing the nibbles for the quiz night, ideas?", "food", "coding"),
        ("Braai at ours on Sunday for eight, what should go on?", "food", "coding"),
        ("Just got tickets to see Fontaines D.C. in March!", "outings", "coding"),
        (
            "How do I get the old fridge down to the kerb without hurting myself?",
            "exertion",
            "coding",
        ),
        ("新买的书柜是自己装还是请师傅？", "exertion", "coding"),
        # a language practised, spending cut
        ("暑假每天陪女儿练半小时普通话", "language_learning", "coding"),
        ("How do I cut my spending on takeaways without noticing it?", "budget", "coding"),
        # a move of home ahead, a trip up high
        ("我们后年想举家搬去墨尔本，孩子上学怎么办", "where_to_live", "coding"),
        ("三月份要去高原徒步，怎么预防高反？", "altitude", "coding"),
        # an easy walk and a big clean ask effort of the body; training sessions, a packing
        # list, food for the road and a dish named 料理
        ("Plan me an easy walk along the canal for Sunday", "exertion", "coding"),
        ("周末家里要大扫除，怎么安排效率高", "exertion", "coding"),
        ("Plan next week's training sessions around my shifts", "fitness", "coding"),
        ("帮我列个周末野营的打包清单", "packing", "coding"),
        ("骑行一百公里，路上的补给带什么好", "food", "coding"),
        ("推荐几道简单的日式家常料理", "food", "coding"),
        # a folk fiddle, a Chinese opera, a board game, a seizure, a strained finger, a
        # sighthound, a longboard, K-dramas
        ("Which tunes suit a beginner fiddle player at a session?", "music", "coding"),
        ("想学几段京剧唱腔，从哪出戏开始好", "music", "coding"),
        ("How do I get better at xiangqi endgames?", "games", "coding"),
        ("I had a seizure last month, how long before I can drive?", "health", "coding"),
        ("打球时手腕拉伤了，要冰敷多久", "health", "coding"),
        ("家里的灵缇冬天要不要穿衣服", "pets", "coding"),
        ("Is a 9-foot longboard too big for a beginner?", "sports", "coding"),
        ("Recommend some K-dramas with good slow romance", "screen", "coding"),
        ("攀岩想练指力，一周练几次合适", "fitness", "coding"),
        # a sum kept to is a budget; a rock genre is music, a memoir a book, a sloop a boat,
        # bouldering indoors a sport, the gaokao study, a dance team fitness, days off a
        # weekend, a building's managing agent the home, what one shoots photography, opening
        # hours and a long shift the user's hours, a distance walked in one go fitness
        ("这次旅行每人控制在3000以内", "budget", "coding"),
        ("My favourite is post-rock, the long instrumental stuff", "music", "coding"),
        ("推荐几本飞行员写的回忆录", "books", "coding"),
        ("Is a 24-foot sloop enough for coastal cruising?", "boats", "coding"),
        ("I boulder indoors on Tuesdays; tips for my first outdoor session?", "sports", "coding"),
        ("He's bored now the gaokao is over", "study", "coding"),
        ("Write an invite for my dance team's summer picnic", "fitness", "coding"),
        ("I've got two days off midweek, any ideas?", "weekend", "coding"),
        ("How do I complain to our property management about a leak?", "home", "coding"),
        ("周末喜欢去郊外拍风光", "photography", "coding"),
        (
            "I open the stall at 7am and close at 4pm, when should I do my admin?",
            "timetable",
            "coding",
        ),
        ("想一口气走完12公里的环湖路，要怎么练", "fitness", "coding"),
        # breathlessness and lasting tiredness are health, a stipend money, an R plotting
        # library code, hens laying livestock, a day away the user's hours, prices a
        # business's; a blood pressure aimed at, a daily walk, years in a job, salt kept low
        ("运动完有点气喘，正常吗", "health", "coding"),
        ("I've been tired all the time since the baby came, is that normal?", "health", "coding"),
        ("我的博士补助够不够在伦敦生活", "money", "coding"),
        ("How do I reorder the bars in ggplot2?", "coding", "food"),
        ("家里的母鸡不下蛋了怎么办", "livestock", "coding"),
        ("How do I keep the cat happy when I'm away all day?", "timetable", "coding"),
        ("Time to raise prices on my custom portraits?", "business", "coding"),
        ("My target is 130/80 by summer, is that realistic?", "health", "coding"),
        ("每天早上在河边走一个小时，够不够", "fitness", "coding"),
        ("我退休前做了二十年的会计，现在想学点新东西", "work", "coding"),
        ("Is it fine to keep salt under 4 g a day when training?", "food", "coding"),
        # a sitter while away is a trip; a pension scheme is money; an exam by its initials,
        # free hours given over, a tablet of a medicine
        ("We have to hire a pet sitter next month, any tips?", "travel", "coding"),
        ("They fly back from Spain tomorrow", "travel", "coding"),
        ("帮我写一份工作日报", "work", "coding"),
        ("Are the fees on my superannuation too high?", "money", "coding"),
        ("儿子年底要考AMC，怎么准备", "study", "coding"),
        ("All my spare evenings go on revision until May", "free_time", "coding"),
        ("I take one levothyroxine tablet every morning", "health", "gadgets"),
        # a flight to see family, K-dramas to learn Korean by
        ("国庆带爸妈飞三亚看姑姑", "travel", "coding"),
        ("Do K-dramas with Korean subtitles help you learn?", "language_learning", "coding"),
        # weight to lose in pounds, a race time aimed at and exercises asked for are
        # fitness; a home breathing machine is health; a weak subject is study; light
        # pollution is photography; a calligraphy hand is a craft, no code; a language named
        # in Chinese is learnt; where to see a show or take a class asks where the user is;
        # working hours are the user's hours; a school holiday's dates are time to go away
        ("今年想再减掉 15 磅", "fitness", "coding"),
        ("今年想把十公里跑进五十分钟", "fitness", "coding"),
        ("What exercises can my dad do after his hip surgery?", "fitness", "coding"),
        ("坐飞机能带家用呼吸机吗", "health", "coding"),
        ("Geometry is my weakest subject", "study", "coding"),
        ("我家在市中心，光污染很严重，还能拍星星吗", "photography", "coding"),
        ("I've been doing clerical script for a year now", "crafts", "coding"),
        ("我想年底前把荷兰语学到能看报纸", "language_learning", "coding"),
        ("南京哪里能看昆曲演出？", "place", "coding"),
        ("Where can I take a beginners' pottery class on Saturdays?", "place", "coding"),
        ("上班朝九晚六，周六偶尔加班", "timetable", "coding"),
        ("孩子的寒假放到二月底", "travel", "coding"),
        # what to bring, a wedding to shoot, something fun to do, bills split, a low
        # ferritin, a surf trip, a Go rank, bloating, uric acid, flashcards, fuel on a ride,
        # honey taken off the hives, a boat paddled out, a shoulder that will not lift
        ("下周去云南，要带点什么？", "packing", "coding"),
        ("下个月要去杭州拍一场婚礼", "photography", "coding"),
        ("下班后想找点好玩的事做", "free_time", "coding"),
        ("水电费我们五五分", "money", "coding"),
        ("How do we split the bill fairly when one of us works from home?", "money", "coding"),
        ("Blood test says my ferritin is on the low side", "food", "coding"),
        ("Thinking of a surf trip to Morocco in March", "sports", "coding"),
        ("He's 12 kyu at Go now", "games", "coding"),
        ("吃完饭总是胀气，怎么回事", "health", "coding"),
        ("医生让我把尿酸控制住", "food", "coding"),
        ("I do twenty minutes of Anki before breakfast", "language_learning", "coding"),
        ("How should I fuel on a three-hour ride?", "food", "coding"),
        ("摇蜜需要什么工具", "garden", "coding"),
        ("Is it safe to take the kayak out in this wind?", "exertion", "coding"),
        ("右肩举不过头，做什么运动好", "mobility", "coding"),
        # frisbee and a lead grade are sport; a new car picked up, half-retired consulting, a
        # pet's prescription diet, a singing voice warmed up, phrases of a language, a
        # grandmother called 阿嬤, a relative staying (meals), weeding (effort), coffee by the
        # cup (sleep), a crop grown bigger
        ("每周三晚上练飞盘", "sports", "coding"),
        ("年底前想先锋爬 5.10d", "sports", "coding"),
        ("新车刚提车一周，磨合期要注意什么", "vehicles", "coding"),
        ("I'm semi-retired and do a bit of consulting", "work", "coding"),
        ("The vet put our cat on a prescription diet", "pets", "coding"),
        ("Any tips to warm up my voice before choir practice?", "music", "coding"),
        (
            "Teach me some Japanese phrases for ordering at a restaurant",
            "language_learning",
            "coding",
        ),
        ("教我几句简单的粤语，见家长用", "language_learning", "coding"),
        ("阿嬤下个月过八十大寿", "parent", "coding"),
        ("我妹妹下周来住我们家一个月", "food", "coding"),
        ("周末要给院子除草", "exertion", "coding"),
        ("I drink three cups of black coffee a day", "sleep", "coding"),
        ("番茄怎么种得更大更甜", "garden", "coding"),
        # bagpipes, a non-smoking room, a noisy table, a retired racing dog, a language
        # named in Chinese, money sent home, a licence just got, triglycerides, a language
        # of one's own to improve, a dive site, a component to write, a sheet's frozen row,
        # thin air, a walk on a mountain, a ride, a stone to lose, a French climbing grade
        ("风笛簧片怎么保养", "music", "coding"),
        ("I always ask for a non-smoking room", "lodging", "coding"),
        ("Tips for a noisy table at my cousin's wedding?", "hearing", "coding"),
        ("我家是一只退役赛犬", "pets", "coding"),
        ("威尔士语的过去时怎么变", "language_learning", "coding"),
        ("每个月给家里寄两千块", "money", "coding"),
        ("My son just got his licence, how do I help him practise?", "vehicles", "coding"),
        ("甘油三酯有点高", "food", "coding"),
        ("Help me get my Spanish up to scratch before the trip", "language_learning", "coding"),
        ("Which dive sites suit someone with an AOW cert?", "outings", "coding"),
        ("Build a small component that lists this week's rota shifts", "coding", "food"),
        ("表格往下翻，表头能固定住吗", "coding", "food"),
        ("去拉萨海拔高，要注意什么", "altitude", "coding"),
        ("周六想去紫金山走走", "exertion", "coding"),
        ("周末想骑一趟环湖，推荐条骑行路线", "exertion", "coding"),
        ("Hoping to shed a stone before Christmas", "fitness", "coding"),
        ("明年想红点第一条 6c+", "sports", "coding"),
        # a serve drilled, a living earned, a tribute gig, a startup left, sodium and a
        # coffee machine's steam wand, a diabetes tablet, a full-court game, the twins
        ("Give me serve drills for Tuesday practice", "sports", "home"),
        ("My students keep asking what people do for a living", "work", "coding"),
        ("Taking my brother to a tribute gig on Friday", "music", "coding"),
        ("Should I quit my startup for a job offer from a big firm?", "work", "coding"),
        ("医生说钠摄入要减半", "food", "budget"),
        ("德龙的蒸汽棒打奶泡老是粗", "food", "coding"),
        ("I'm on metformin, what breakfast keeps my sugar steady?", "food", "coding"),
        ("周六下午约了朋友打全场", "sports", "coding"),
        ("What should I plan for the twins' birthday?", "child", "coding"),
        ("What cake should I get for the boys' joint birthday?", "child", "coding"),
        # a cat's hairballs, two girls at home, a wheel to throw on, a tango class, a place
        # within reach of home
        ("猫吐毛球要紧吗", "pets", "coding"),
        ("学拉坯要准备什么工具", "crafts", "coding"),
        ("探戈课穿什么鞋好", "fitness", "coding"),
        ("Any lakes within an hour of home?", "place", "coding"),
    ],
)
def test_everyday_domains_have_topics_of_their_own(
    policy: Policy, text: str, topic: str, not_topic: str
) -> None:
    found = topics_of(text, policy)
    assert topic in found and not_topic not in found, found


@pytest.mark.parametrize(
    ("text", "topic"),
    [
        # a job held or once held, said in either language
        ("我是 UI 设计师，主要做电商网站", "work"),
        ("I was a school nurse in Leeds for 20 years", "work"),
        ("我当了二十年会计", "work"),
        ("Played the bagpipes since I was twelve", "music"),
        ("Got two stents fitted in 2023", "heart"),
        # a cost a month; a grown child away at university
        ("鱼缸的电费一个月要五十块", "money"),
        ("The allotment costs £12 a month", "money"),
        ("儿子在成都读大二", "grown_child"),
        # a daily tablet, a biologic, an iodine-free diet, an income, children by their ages
        ("每天睡前吃一片阿托伐他汀", "health"),
        ("Humira 一周一针", "health"),
        ("甲亢要忌碘，盐用无碘盐", "food"),
        ("My husband makes about 4k a month driving", "money"),
        ("The boys are 9 and 7 and mad about football", "child"),
    ],
)
def test_what_a_memory_is_about(policy: Policy, text: str, topic: str) -> None:
    from gateway.memory.policy import derive_slot

    slot = derive_slot(text, policy, "profile")
    assert topic in memory_topics(text, policy, "profile", slot)


@pytest.mark.parametrize(
    ("text", "not_topic"),
    [
        # a habit after a meal, one's own teenage years, playing in a bar, a sink's pipes,
        # a hook for a coat rack, a habit kept for years, a K-pop video watched
        ("Ava practises the cello every evening after dinner", "food"),
        ("我每周六晚上在清吧驻唱", "food"),
        ("The pipes under the sink are leaking", "music"),
        ("Help me build a hook for the coat rack", "coding"),
        ("I was a heavy smoker for ten years", "work"),
        ("Julia is obsessed with horse books", "fitness"),
        # "about" a month is no baby's age; sodium in milligrams is no budget; a child
        # at school somewhere is no reading; a drill plan is no tool
        ("猫粮一个月大概两百块", "child"),
        ("钠的摄入最好控制在2000毫克以内", "budget"),
        ("女儿在北京读书", "books"),
        ("Make me a drill plan for my second serve", "home"),
        # a fright, someone else's heart; a visa; a home town; a training plan's part; a
        # first-line indent; a licence to work; steps a month; a name; a ballet company; a
        # school for girls; news hard to take; a child who may study abroad one day
        ("I nearly had a heart attack when I saw the bill", "heart"),
        ("My father-in-law had a heart attack in May", "heart"),
        ("Trying to get my Spanish passport renewed", "language_learning"),
        ("I was a Londoner for 20 years", "work"),
        ("Add a strength component to my training plan", "coding"),
        ("首行缩进固定两个字符", "coding"),
        ("I finally got my license as a nurse", "vehicles"),
        ("每个月两万步", "money"),
        ("My daughter Piper is 6", "music"),
        ("周末去看中央芭蕾舞团的演出", "fitness"),
        ("I teach PE at the girls' school", "child"),
        ("It was hard to hear the news about my friend", "hearing"),
        ("女儿才上小学，以后想送她出国留学", "grown_child"),
        ("孩子读大一点的绘本比较好", "grown_child"),
        # toast by the slice, a jumper's bobbles, a steering wheel, greyhounds called the
        # girls, things made a week
        ("天天吃两片全麦面包当早饭", "health"),
        ("我的毛衣洗了几次就起毛球了", "pets"),
        ("I fell asleep on the wheel once and nearly crashed", "crafts"),
        ("Our girls are 2 and 5, both rescue greyhounds", "child"),
        ("I make about 3 a week and sell them at the market", "money"),
    ],
)
def test_words_that_only_look_like_a_topic(policy: Policy, text: str, not_topic: str) -> None:
    assert not_topic not in memory_topics(text, policy, "profile", None)
    assert not_topic not in topics_of(text, policy)


def test_a_hearing_aid_reaches_a_packing_list(policy: Policy) -> None:
    """Hearing aid batteries go on the list for a week away, and so do a device's card
    and supplies (a pacemaker, an insulin pump)."""
    asked = topics_of("Packing list for ten days at my sister's", policy)
    assert {"hearing", "implants"} <= policy.topics_reaching(asked)


def test_a_heart_condition_reaches_effort_and_thin_air(policy: Policy) -> None:
    """A stent limits what a ride, a climb or a trip up high may ask of the body."""
    for asked in ("下周想骑一趟长途，有什么建议", "去香格里拉海拔高，要注意什么"):
        assert "heart" in policy.topics_reaching(topics_of(asked, policy)), asked


def test_effort_reaches_a_pregnancy_and_crustaceans_are_food(policy: Policy) -> None:
    """A long walk asks effort that a pregnancy bears on; a crustacean allergy meets a
    restaurant as a shellfish one does."""
    assert "pregnancy" in policy.topics_reaching(["exertion"])
    assert "food" in memory_topics(
        "Allergic to crustaceans since childhood", policy, "profile", None
    )


@pytest.mark.parametrize("text", ["Noor is 2½ and into everything", "Sami is 4¾ now"])
def test_an_age_written_with_a_fraction_is_a_childs(policy: Policy, text: str) -> None:
    """ "2½" reads as two years and six months, not the "21⁄2" Unicode folding makes of it."""
    from gateway.memory.policy import normalize

    assert "⁄" not in normalize(text)
    assert "child" in memory_topics(text, policy, "profile", None)


def test_a_trip_reaches_how_the_user_copes_up_high(policy: Policy) -> None:
    """Altitude sickness once had matters to the next trip, wherever it goes."""
    had = memory_topics(
        "Felt awful with altitude sickness on the Inca Trail", policy, "profile", None
    )
    assert "altitude" in had
    asked = topics_of("国庆想出去自驾游五天，帮我排个路线", policy)
    assert "altitude" in policy.topics_reaching(asked)


def test_an_app_question_reaches_the_device_it_runs_on(policy: Policy) -> None:
    """The phone or laptop the user has matters to how an app is set up on it."""
    asked = topics_of(
        "Setting up a WhatsApp group chat for my book club, where do I start?", policy
    )
    assert "gadgets" in policy.topics_reaching(asked)
    assert "gadgets" in memory_topics(
        "My phone is a Pixel 7 my son set up", policy, "profile", None
    )


def test_a_budget_request_reaches_what_the_user_saves_for(policy: Policy) -> None:
    """Cutting one's spending meets a saving goal ("Saving £2,000 for a new oven")."""
    asked = topics_of("What's a painless way to trim my spending each month?", policy)
    assert "money" in policy.topics_reaching(asked)
    assert "money" in memory_topics("Saving £800 for a new bike by autumn", policy, "goal", None)


def test_the_message_separates_instructions_from_data() -> None:
    both = render(['{"fact": "answer in Chinese"}'], ['{"fact": "has a cat"}'], nonce="ab12")
    assert STANDING in both and FACTS in both
    assert both.index("<preferences id=ab12>") < both.index("<facts id=ab12>")
    only = render(['{"fact": "answer in Chinese"}'], [], nonce="ab12")
    assert STANDING in only and FACTS not in only and "<facts" not in only


# --- end to end ---------------------------------------------------------------------------


def test_the_founding_example(gateway: Gateway, upstream: Any) -> None:
    me = User(gateway)
    lang = me.remember("以后都用中文回答我")
    code = me.remember("给代码的时候请给出完整的上下文，不要只给片段", type="format")
    stack = me.remember(
        "这个项目用 FastAPI 和 PostgreSQL", type="project", scope="project", project_id="shop"
    )
    cat = me.remember("我养了一只猫叫麻薯", type="profile")
    raw = ask(me, "帮我分析这段代码，并给出修改方案。", project="shop")
    assert sorted(me.injected(raw)) == sorted([lang, code, stack])
    block = memory_message(upstream) or ""
    assert "以后都用中文回答我" in block and "FastAPI" in block and "麻薯" not in block
    assert STANDING in block and FACTS not in block
    trace = me.trace(raw)
    assert {c["id"]: c["lane"] for c in trace["candidates"]}[lang] == "standing"
    assert cat not in trace["injected"]
    # outside the project, the project's stack stays behind
    assert stack not in me.injected(ask(me, "帮我分析这段代码，并给出修改方案。", project="blog"))


def test_how_answers_sound_and_how_long_they_are_are_standing_wishes(
    gateway: Gateway, upstream: Any
) -> None:
    """A wish saved as a tone or a length is kept and shapes every request, as one saved as a
    preference would; the same wish said for now is one-time and refused, whatever its type."""
    me = User(gateway)
    tone = me.remember("说话随意点，就像朋友聊天，不用客气", type="tone")
    length = me.remember("Answers of five sentences at most unless I ask for more", type="length")
    dog = me.remember("My dog Pepper is a border collie", type="profile")
    raw = ask(me, "What is the difference between a mutex and a semaphore?")
    assert sorted(me.injected(raw)) == sorted([tone, length])
    lanes = {c["id"]: c["lane"] for c in me.trace(raw)["candidates"]}
    assert lanes[tone] == lanes[length] == "standing" and dog not in me.injected(raw)
    assert STANDING in (memory_message(upstream) or "")
    for text, type_ in (("be playful now", "tone"), ("这次简短一点", "length")):
        resp = httpx.post(
            f"{gateway.base_url}/memories",
            headers=me.headers,
            json={"content": text, "type": type_},
        )
        assert resp.status_code == 422 and "one_time" in resp.text, resp.text


@pytest.mark.parametrize(
    "text",
    [
        "女儿今年读高二，成绩中等偏上",
        "儿子化学总是考不及格",
        "闺女在学琵琶，下个月考三级",
        "My son is in Year 11 and dreading his GCSEs",
        "My daughter's grades in maths keep slipping",
    ],
)
def test_a_childs_school_year_is_not_a_young_childs_age(policy: Policy, text: str) -> None:
    """A memory of a child's school year, exams or lessons is about the child's schooling
    (``child_school`` displaces ``child``), so the trips and days out a young child's age
    matters to do not reach it; a request saying the same keeps both topics, so it meets
    what the user said of the child."""
    held = memory_topics(text, policy, "profile", None)
    assert "child_school" in held and "child" not in held, held
    assert {"child", "child_school"} <= set(topics_of(text, policy))


def test_a_young_childs_age_stays_a_childs(policy: Policy) -> None:
    for text in (
        "老大上小学二年级，老二还在上幼儿园",
        "kids are 6 and 10",
        "我女儿乳糖不耐受",
    ):
        held = memory_topics(text, policy, "profile", None)
        assert "child" in held and "child_school" not in held, (text, held)


def test_a_childs_school_year_meets_the_child_not_a_trip(gateway: Gateway) -> None:
    me = User(gateway)
    exams = me.remember("我儿子今年读高二，明年就高三了", type="profile")
    toddler = me.remember("My son is 2 and still in nappies", type="profile")
    packing = ask(me, "下个月去桂林玩五天，帮我列个行李清单")
    assert me.injected(packing) == [toddler]
    assert exams in me.injected(ask(me, "帮我给儿子挑个生日礼物，预算五百"))


def test_where_the_user_lives_meets_a_mortgage_not_a_lesson_in_interest(gateway: Gateway) -> None:
    me = User(gateway)
    home = me.remember("I live in Manchester, UK", type="profile")
    assert me.injected(
        ask(me, "how does a mortgage offset account work? worth it vs overpaying?")
    ) == [home]
    assert me.injected(ask(me, "how do index funds actually work?")) == []
    flat = me.remember("我家在河西区，离单位不远", type="profile")
    assert me.injected(ask(me, "CPI 涨了是啥意思？对我的存款有影响吗")) == []
    assert flat in me.injected(ask(me, "今年个税汇算要注意点啥？"))


def test_a_topical_memory_reaches_a_request_it_shares_no_words_with(gateway: Gateway) -> None:
    me = User(gateway)
    allergy = me.remember("I'm allergic to peanuts", type="profile")
    assert me.injected(ask(me, "Plan a dinner menu for six people this Saturday")) == [allergy]
    assert me.injected(ask(me, "帮我安排周六六个人的晚餐菜单")) == [allergy]
    raw = ask(me, "How do I fix this SQL query that returns duplicate rows?")
    assert me.injected(raw) == []
    [cand] = me.trace(raw)["candidates"]
    assert (cand["lane"], cand["reason"]) == ("topical", "threshold")


def test_a_request_reaches_what_requests_like_it_call_for(gateway: Gateway, policy: Policy) -> None:
    """A few days in Chongqing names no health topic, and its words are about other topics
    than a knee's: the requests it reads like (recall.relevance.resembled) call for the
    user's health, so a knee that hurts on slopes and steps reaches it. A request calling
    for nothing of the kind does not get it."""
    me = User(gateway)
    knee = me.remember("我膝盖做过手术，爬坡上坎还是疼", type="profile")
    trip = ask(me, "下个月去重庆玩三天，帮我排个行程")
    assert me.injected(trip) == [knee]
    trace = me.trace(trip)
    [cand] = trace["candidates"]
    assert cand["topics"] == [] and cand["resembled"] == ["health"]
    assert "health" in trace["resembled_topics"]
    assert cand["scores"]["vector"] < policy.recall.relevance.off_topic_similarity
    code = ask(me, "帮我写个 Python 脚本，统计日志里每小时的报错数量")
    assert me.injected(code) == []


def test_one_incidental_shared_word_is_not_relevance(gateway: Gateway) -> None:
    me = User(gateway)
    pet = me.remember("My pet is a ball python named Monty", type="profile")
    raw = ask(me, "How do I read a JSON file in Python?")
    assert me.injected(raw) == []
    [cand] = [c for c in me.trace(raw)["candidates"] if c["id"] == pet]
    assert cand["scores"]["text"] > 0 and cand["reason"] == "threshold"
    assert cand["shared_terms"] == 1


def test_the_language_the_user_codes_in_reaches_a_coding_question(
    gateway: Gateway, policy: Policy
) -> None:
    """No topic names the programming-language slot, so such a memory keeps a slot's link
    to a coding question however unlikely the fit rates it (``drop_shared_below``)."""
    assert "programming_language" not in policy.slot_topics
    me = User(gateway)
    rust = me.remember("I mostly code in Rust", type="preference")
    raw = ask(me, "How do I parse command line arguments?")
    assert me.injected(raw) == [rust]
    [cand] = [c for c in me.trace(raw)["candidates"] if c["id"] == rust]
    assert cand["slot"] == "programming_language" and cand["topics"] == ["coding"]
    # ... however unlikely: the rule the slot escapes is what this holds
    drop = policy.recall.relevance.fitted.drop_shared_below
    assert drop is not None and cand["fitted"] < drop


def test_three_diet_rules_all_reach_a_dinner_menu(gateway: Gateway, policy: Policy) -> None:
    """Three memories pass for a menu and the fit is sure of the one ranked third: a short
    list keeps it (``topical.sure_at``), though it ranks too far below the best for
    ``close_within``."""
    lane = policy.recall.topical
    assert lane.sure_at is not None
    me = User(gateway)
    rules = [
        me.remember("I've been vegetarian for ten years", type="profile"),
        me.remember("我乳糖不耐受，喝牛奶会肚子疼", type="profile"),
        me.remember("我一点辣都吃不了", type="profile"),
    ]
    me.remember("I drive a 2015 Skoda Octavia", type="profile")
    raw = ask(me, "Six friends are coming over for dinner on Saturday. Can you plan a menu?")
    assert sorted(me.injected(raw)) == sorted(rules)
    cands = sorted(
        (c for c in me.trace(raw)["candidates"] if c["id"] in rules),
        key=lambda c: c["scores"]["fused"],
        reverse=True,
    )
    # the third: too far below the best to be close, of the topic the first two cover
    best, second, third = cands
    assert best["scores"]["fused"] - third["scores"]["fused"] > lane.close_within
    assert best["topics"] == second["topics"] == third["topics"] == ["food"]
    assert third["fitted"] >= lane.sure_at


def test_a_topic_a_stray_word_shares_is_no_link_the_fit_rates_unlikely(
    gateway: Gateway, policy: Policy
) -> None:
    """What the user's family does shares a topic with many requests by one word (music, a
    course of study): below ``drop_shared_below`` that link says nothing, while a narrow
    topic (a railcard for a train journey: ``test_a_walk_or_a_journey...``) still links."""
    fitted = policy.recall.relevance.fitted
    assert fitted.drop_shared_below is not None
    me = User(gateway)
    kai = me.remember("My son Kai is learning the guitar", type="profile")
    evening = ask(me, "I've finally got a free evening to myself. How should I unwind?")
    assert me.injected(evening) == []
    [cand] = [c for c in me.trace(evening)["candidates"] if c["id"] == kai]
    assert cand["topics"] == ["music"] and cand["reason"] == "threshold"
    assert cand["fitted"] < fitted.drop_shared_below
    other = User(gateway)
    daughter = other.remember("My daughter studies accounting in Leeds", type="profile")
    plan = ask(other, "帮我做一个一个月的 Excel 学习计划，每天半小时")
    assert other.injected(plan) == []
    [cand] = [c for c in other.trace(plan)["candidates"] if c["id"] == daughter]
    assert cand["topics"] == ["study"] and cand["fitted"] < fitted.drop_shared_below
    # ... while what she studies still reaches a request about her
    assert other.injected(ask(other, "我女儿期末考试前压力很大，我能怎么帮她？")) == [daughter]


def test_a_plan_for_a_day_the_request_names_is_no_stray_link(
    gateway: Gateway, policy: Policy
) -> None:
    """A day both name links a plan for the coming days however unlikely the fit rates it
    (the day topics are narrow): the race on Sunday is what Saturday's meals are for."""
    fitted = policy.recall.relevance.fitted
    assert fitted.drop_shared_below is not None and "weekend" in fitted.narrow
    me = User(gateway)
    race = me.remember("Half marathon this Sunday", type="plan")
    raw = ask(me, "What should I eat on Saturday?")
    assert me.injected(raw) == [race]
    [cand] = [c for c in me.trace(raw)["candidates"] if c["id"] == race]
    assert cand["topics"] == ["weekend"] and cand["fitted"] < fitted.drop_shared_below


def test_a_text_to_write_is_linked_by_who_it_is_for_not_its_subject(gateway: Gateway) -> None:
    """A listing for a house that takes pets is the readers' business: the user's cat
    allergy is no part of it, though the same allergy matters when the user is the one
    visiting cats. A card for the user's daughter still meets what the user said of her."""
    me = User(gateway)
    allergy = me.remember("I'm badly allergic to cats, my eyes swell up", type="profile")
    mia = me.remember("My daughter Mia is turning 7 and she loves unicorns", type="profile")
    listing = ask(
        me, "Write a short listing blurb for a three-bed house with a fenced garden, pets welcome"
    )
    assert me.injected(listing) == []
    [cand] = [c for c in me.trace(listing)["candidates"] if c["id"] == allergy]
    assert cand["reason"] == "threshold"
    visit = ask(me, "Staying a weekend with a friend who has two cats, any tips?")
    assert allergy in me.injected(visit)
    assert me.injected(ask(me, "帮我给女儿写一张生日贺卡")) == [mia]


def test_standing_memories_never_crowd_out_a_topical_one(gateway: Gateway) -> None:
    me = User(gateway)
    for text in (
        "Always answer in English",
        "Use bullet points when you list things",
        "No emojis please",
        "I prefer short answers",
        "Please call me Alex",
        "From now on always use metric units",
        "Never use jargon when you explain",
    ):
        me.remember(text)
    allergy = me.remember("I'm allergic to peanuts", type="profile")
    raw = ask(me, "Plan a dinner menu for six people this Saturday")
    injected = me.injected(raw)
    assert allergy in injected
    assert len(injected) == 6  # recall.max_memories: the allergy and five standing ones
    dropped = [c["reason"] for c in me.trace(raw)["candidates"] if c["decision"] == "dropped"]
    assert dropped == ["limit", "limit"]


def test_work_rules_stay_inside_their_task(gateway: Gateway) -> None:
    me = User(gateway)
    sig = me.remember(
        "Sign every email with 'Best regards, Li Wei, Acme Corp'",
        type="format",
        scope="task:work",
    )
    assert me.injected(
        ask(me, "Draft an email asking the supplier for a new date", task="work")
    ) == [sig]
    assert me.injected(ask(me, "Write a birthday message for my sister")) == []


@pytest.mark.parametrize(
    ("old", "new", "question"),
    [
        ("Always answer in English", "以后请用中文回答", "总结一下这篇文章"),
        ("I live in Berlin", "I've moved to Lisbon", "What's the weather like here in November?"),
        ("我住在上海", "我已经从上海搬到深圳了", "这周末附近有什么好玩的"),
        ("Give me distances in miles", "以后都用公制单位", "How long is the Golden Gate Bridge?"),
        ("I use VS Code for all my coding", "I switched to Neovim", "Which editor plugins help?"),
    ],
)
def test_newer_wins_on_a_one_valued_subject_whatever_the_wording(
    gateway: Gateway, old: str, new: str, question: str
) -> None:
    me = User(gateway)
    first = me.remember(old, type="profile" if "live" in old or "住" in old else "preference")
    second = me.remember(new, type="profile" if "move" in new or "搬" in new else "preference")
    assert memory(me, first)["status"] == "superseded"
    assert memory(me, first)["superseded_by"] == second
    assert first not in me.injected(ask(me, question))


@pytest.mark.parametrize(
    ("old", "new", "scope"),
    [
        # where the user works, what they eat, who their partner is, what they drive
        ("I work at Shopify as a data engineer", "上个月跳槽去了字节，还是做数据", "global"),
        ("I work at Google on the Ads team", "Started my new job at Spotify last week", "global"),
        ("I'm a nurse at St Mary's", "Began my new role this month, clinic manager", "global"),
        # what to call the user, a Latin name in a Chinese sentence
        ("Call me Rob", "以后叫我 Robert 就好", "global"),
        # where the user lives, in a note of a few words or a clause of its own
        ("我在杭州", "我现在在成都生活", "global"),
        ("I live in Leeds", "Big news - moved down to Bristol with the kids", "global"),
        ("我吃全素", "现在鱼和鸡蛋都开始吃了", "global"),
        # a thesis's reference style
        ("The thesis uses Harvard referencing", "supervisor wants APA now, switching", "project"),
        ("我吃素，蛋奶可以", "I started eating meat again, mostly chicken and fish", "global"),
        ("I'm fully vegan", "不再吃纯素了，现在就是不吃红肉", "global"),
        ("我男朋友叫阿杰", "和之前那个分了。现在男朋友叫Kevin", "global"),
        ("I drive a 2015 Honda Civic", "Just bought a used Tesla", "global"),
        # a project's build tool, apart from its frontend framework
        (
            "dashboard frontend is built with Create React App",
            "dashboard 从 CRA 迁到 Vite 了",
            "project",
        ),
        # a project's hosting, package manager, tests, ORM, cache and API style
        ("Our app is deployed on Heroku", "应用迁到 Fly.io 上了", "project"),
        ("We use npm for packages", "项目改用pnpm管理依赖了", "project"),
        ("We write tests with Jest", "测试框架换成 Vitest 了", "project"),
        ("Our ORM is Sequelize", "ORM 换成了 Prisma", "project"),
        ("我们用Redis做缓存", "Cache layer got replaced with Memcached", "project"),
        ("Our API is REST", "接口全部改成 GraphQL 了", "project"),
        # how money, dates and the user's work and life are
        ("Give me prices in USD", "报价都换成日元吧，我搬到东京了", "global"),
        ("Dates in MM/DD/YYYY please", "日期请改用年-月-日格式", "global"),
        ("I work as an accountant", "辞职了，转行当了摄影师", "global"),
        ("My team lead is Sarah", "Sarah走了，新组长是王磊", "global"),
        ("I'm single", "我上周订婚了", "global"),
        ("I'm on the keto diet", "Gave up keto; doing intermittent fasting instead", "global"),
        ("我在吃生酮，碳水基本不碰", "生酮停了，医生让我正常吃饭，少油少盐就行", "global"),
        ("love steak, I eat meat basically every day", "这个月开始吃全素了，蛋奶也不碰", "global"),
        # an occupation in the words people use for one
        ("在一家4A广告公司当文案", "上个月跳槽了，现在在一家游戏公司做用户运营", "global"),
        (
            "work as a dental hygienist",
            "started as a pharmacy tech at CVS two weeks ago!",
            "global",
        ),
        ("在工地绑钢筋，按天结钱", "工地活不干了，现在开滴滴，车是租的", "global"),
        ("I work the day shift, 8 to 5", "这个月开始调夜班了，晚上十点干到早上六点", "global"),
        ("Please call me Katherine", "honestly just Kat is fine", "global"),
        ("I live in Leeds", "home is Adelaide now, Norwood area", "global"),
        ("I live in Austin, TX", "finally done moving, we're in Denver now!", "global"),
        ("I work the day shift, 7 to 3", "started nights at the depot, 10pm to 6am now", "global"),
        ("每天坐地铁上班，单程一个小时", "公司搬去园区了，现在自己开车，四十分钟左右", "global"),
        # eating anything is a way of eating a diet replaces; moves told in other words
        ("我啥都吃，不挑食", "三月开始吃素了，鸡蛋牛奶还吃", "global"),
        (
            "I'm vegan, have been for 6 years",
            "怀孕以后医生让我吃点鱼，现在不是纯素了，肉还是不吃",
            "global",
        ),
        ("我吃素，蛋奶可以", "素不吃了，现在鸡肉鱼肉都吃", "global"),
        ("I live in Melbourne", "我们一家刚移民到澳洲珀斯", "global"),
        ("I live in Shanghai", "Graduated and moved back home to Xiamen", "global"),
        (
            "I'm Janet Hughes",
            "divorce is final. going back to my maiden name, Janet Carter",
            "global",
        ),
        (
            "I drive a Scania R450",
            "firm swapped me onto a Volvo FH, still finding the dash",
            "global",
        ),
        # a change naming the particular thing the older names: a medicine, a tool
        (
            "My wife takes donepezil for her dementia",
            "Her neurologist took her off donepezil, she's on memantine now",
            "global",
        ),
        ("我在吃舍曲林，每天一片", "医生把舍曲林给我停了，换成了艾司西酞普兰", "global"),
        # no car any more
        ("I drive a Honda Civic, mostly for commuting", "车卖了，现在去哪儿都骑自行车", "global"),
        (
            "我开的是一辆2015年的本田飞度",
            "We sold our car last month, we cycle everywhere now",
            "global",
        ),
        (
            "I'm a risk analyst at a bank",
            "Quit the bank! I run my own bubble tea shop now",
            "global",
        ),
        (
            "I'm a bus driver for the council",
            "Packed in the buses, doing courier work for DPD now",
            "global",
        ),
        ("I'm based in London, Hackney", "上个月从伦敦搬回广州了，终于能天天喝早茶", "global"),
        # a job landed, a promotion, full-time for oneself
        (
            "我在一家4A广告公司做文案",
            "I quit the agency. Full-time freelance copywriter now",
            "global",
        ),
        (
            "I'm a maths teacher at a primary school",
            "Got the head teacher job at Lincoln Primary",
            "global",
        ),
        (
            "I work as a barista while I study",
            "拿到 offer 了！在一家金融科技公司做初级前端",
            "global",
        ),
        # ... named in the other language
        (
            "我每天晚上吃一片阿司匹林，心内科医生让吃的",
            "Cardiologist took me off the aspirin, I'm not on it anymore",
            "global",
        ),
        (
            "腰疼犯了我就吃布洛芬",
            "Doctor took me off ibuprofen, it was wrecking my stomach",
            "global",
        ),
        ("我睡前吃褪黑素，半片就够", "I stopped taking melatonin, sleeping fine now", "global"),
        # ... or by the kind of medicine it is
        (
            "I take a Claritin every morning during allergy season",
            "Doctor took me off the antihistamine tablets. I'm on a steroid nasal spray instead.",
            "global",
        ),
        # ... or by a job told another way
        (
            "我是律所里的全职法律翻译",
            "Quit the law firm! Freelancing now, mostly patents",
            "global",
        ),
        ("我在幼儿园当老师，带中班", "今年转到小学去了，教一年级语文", "global"),
        (
            "I live in Austin, East side",
            "Finally unpacked the last boxes in Denver, new city new me",
            "global",
        ),
        # ... units by the move, a job by where, a medicine by another name, a pet's new diet
        (
            "Use miles and Fahrenheit with me, I'm American through and through",
            "Since moving to Vancouver I'd rather see km and °C",
            "global",
        ),
        (
            "我是一家电商公司的后端工程师",
            "Left the e-commerce job. I'm an SRE at a fintech startup now, fully remote",
            "global",
        ),
        ("我每天晚上要吃一片安眠药才睡得着", "医生让我把安眠药停了，现在睡前喝杯温牛奶", "global"),
        ("我一天大概抽半包烟", "Three months without a single cigarette now!", "global"),
        (
            "我在吃托吡酯预防偏头痛，每天晚上一片",
            "Topiramate gave me awful brain fog, so my neurologist switched me to propranolol.",
            "global",
        ),
        ("我写代码一直用 VS Code", "最近彻底转投 Rider 了，开 Unity 项目顺手太多", "global"),
        ("We rent a small flat in Xuhui", "我们在闵行七宝买了房，上个月刚搬进去", "global"),
        ("我每天早上空腹吃一片优甲乐，50微克", "复查甲功，医生把优甲乐加到75微克了", "global"),
        (
            "我用 ChessBase 管理自己的棋谱数据库",
            "ChessBase我不用了，续费太贵，现在棋谱全部放在 Lichess 里整理",
            "global",
        ),
        (
            "I write all my notes in Evernote",
            "Switched to Obsidian for notes, Evernote got way too expensive",
            "global",
        ),
        # signed up for another licence, a taste changed, someone new
        ("我报的是C1手动挡", "我改报C2自动挡了，手动挡离合实在踩不好", "global"),
        ("我不吃辣，一点都不行", "在四川待了一年，现在特别能吃辣了", "global"),
        (
            "I'm single and not really looking",
            "I've been seeing someone, her name's Priya",
            "global",
        ),
        # a class moved to another day, a home rented before a house bought
        (
            "我每周六下午在少年宫教小朋友下国际象棋",
            "少年宫的课调到周日上午了，周六下午空出来了",
            "global",
        ),
        (
            "We're renting a 2-bedroom apartment in Scarborough",
            "Just got the keys to our first house in Brampton!!",
            "global",
        ),
        # one that says it moved away from a value is not a statement of it
        ("I quit being vegan last year", "I went vegan again", "global"),
        # a project's game engine, and data kept in a file before a database
        (
            "Lantern is built in Unity, C# scripts under Assets/Scripts",
            "Lantern 已经整体迁到 Godot 4 了，Unity 的工程不再维护",
            "project",
        ),
        (
            "dash keeps all its data in a single JSON file",
            "dash now stores everything in SQLite",
            "project",
        ),
        # answers' currency, in both languages
        ("Show prices in US dollars", "以后金额一律用新台币", "global"),
        # what a project is built with, where no slot names the tool
        (
            "The dash site is built with Jekyll.",
            "dash 已经用 Astro 重做了，Jekyll 那套废弃了。",
            "project",
        ),
        (
            "dash 的计算模型是用Midas Civil 2019建的。",
            "The team moved the whole dash model to SAP2000 v24 last month.",
            "project",
        ),
        (
            "dash 的视频我用iMovie剪,简单好用",
            "Switched over to DaVinci Resolve for dash",
            "project",
        ),
        # a language gone back to, units for a truck's fuel, a recipe's measures
        (
            "Answer in English from now on, I need the practice",
            "算了还是中文吧，英文看得太累",
            "global",
        ),
        (
            "give me distances in kilometers too",
            "forget the km thing, just miles and gallons from now on",
            "global",
        ),
        (
            "烘焙配方给我用杯和勺就行，我没有秤。",
            "Bought a kitchen scale - give me recipes in grams now.",
            "global",
        ),
        # a currency of a named country's dollars, Cantonese by its common name
        ("Quote prices in USD", "Actually give me prices in HK dollars from now on", "global"),
        ("Please answer in English.", "由今日開始用廣東話口語答我啦，睇得舒服啲。", "global"),
        # where a project's file lives, what its site is, a database named by its product
        (
            "dash budget lives in Numbers on my MacBook.",
            "dash 預算已經搬咗去 Excel，用 Power Pivot。",
            "project",
        ),
        (
            "dash band site is just plain HTML + jQuery",
            "dash 官网重构成 Astro 了，jQuery 那套全删了",
            "project",
        ),
        (
            "dash's data source is an Access database on the shared drive.",
            "dash 嘅 data source 轉咗去 SQL Server。",
            "project",
        ),
        # the platform a project's shop runs on, moved in the other language
        (
            "dash runs on WooCommerce on WordPress",
            "dash 已经整个迁到 Shopify 了，旧的 WordPress 站下线了",
            "project",
        ),
        # no slot names a training split: the newer says it changed
        (
            "I do a push/pull/legs split, 6 days a week",
            "训练改成一周三练全身了，工作太忙",
            "global",
        ),
        # a project's change ends the closest older fact of that project, whatever slot the
        # newer one has and though no slot names the older one
        (
            "dash's transcripts are typed up in Google Docs, one doc per interview",
            "dash 的访谈稿现在都改到 Notion 里整理了，Google Docs 不再用",
            "project",
        ),
        (
            "dash's glossary follows the Wade-Giles system",
            "dash switched its glossary from Wade-Giles to Hanyu Pinyin",
            "project",
        ),
        # ... or, far apart in meaning, the one naming the thing the change names
        (
            "Stair details for the museum job are all Tekla models.",
            "We ditched Tekla. Steel connections now come from IDEA StatiCa, exported to the "
            "fabricator directly.",
            "project",
        ),
        # a name written inside Chinese
        ("dash 的账都记在 Excel 表里", "dash 记账已经换成 SQLite 了，Excel 不用了", "project"),
        # a move from one tool to another that names the one left
        (
            "dash 的后台跑在 Firebase 上",
            "We moved the dash backend from Firebase to Supabase",
            "project",
        ),
        # a currency, a unit or a name said in words the slots did not read
        ("Quote prices in US dollars", "涉及金额的时候一律用南非兰特", "global"),
        ("Weights in kilos please", "Use 斤 for weights from now on", "global"),
        ("Call me Robert", "别再叫我Robert了，叫Rob就行", "global"),
        # a move to a tool is no move of home; a move said in Cantonese; a name with 就得
        ("I code in VS Code", "Moved over to WebStorm last month, much happier", "global"),
        ("我哋住喺 Markham", "上个月搬咗去 Oakville 喇", "global"),
        ("Call me Alex", "叫我阿欣就得", "global"),
        ("叫我Leo就得", "还是叫我本名志明吧，英文名不想用了", "global"),
        # a home on a place's edge or in a flatshare, a name said with 喊我, a recipe's
        # measures in Chinese, a practice the user owns
        ("We live in Tralee", "We live just outside Cork these days", "global"),
        ("I live in Leith", "Just moved into a WG in Kreuzberg", "global"),
        ("You can call me Jenny", "还是喊我王姐嘛", "global"),
        ("叫我王师傅", "以后喊我小王得了", "global"),
        ("Reply in English from now on", "仲係用返廣東話同我講啦", "global"),
        ("Give me recipes in cups please", "配料按克和毫升写，别用杯子勺子", "global"),
        ("I'm a hygienist at a dental clinic", "I own a small orthodontic practice", "global"),
        # a unit asked for by name or by country, a home found or moved to, a name to go by,
        # a frontend rewritten
        ("Give me distances in miles", "Kilometres again please, I'm back in NL", "global"),
        ("Metric is fine with me", "Go back to US units please - gallons, °F, pounds.", "global"),
        ("温度给我用华氏度", "以后气温水温都按°C说，别再给我换算成F了。", "global"),
        ("I live in the dorms near Sinchon", "moved out!! got a one-room in Mapo", "global"),
        ("我住在南岗区学府路那边。", "上个月搬家了，现在在松北，离冰雪大世界挺近。", "global"),
        (
            "We live in Katy, just west of Houston.",
            "Finally closed on a little place outside Fredericksburg! Hill Country life now.",
            "global",
        ),
        (
            "Please call me Marc-André.",
            "Actually just go with Marco, everybody calls me that",
            "global",
        ),
        ("dash 前端用 jQuery。", "dash 前端已经全部重写成 React 了，jQuery 删干净了。", "project"),
        # a motorbike ridden, a site moved from one generator to another, data kept elsewhere
        ("我平时骑的是本田 CB190", "Traded the Honda in, I ride a Yamaha MT-07 now", "global"),
        (
            "dash docs are built with Sphinx",
            "We moved dash's docs from Sphinx to MkDocs",
            "project",
        ),
        (
            "dash keeps all scores in a local JSON file",
            "dash 的成绩现在改存到飞书表格里了",
            "project",
        ),
        # a database taken up where the data sat in spreadsheets
        (
            "dash stores all its data in spreadsheets, there's no database",
            "dash 换成 SQLite 了",
            "project",
        ),
        (
            "dash 前端是 Angular 写的。",
            "dash frontend is React + Vite now, migration finished",
            "project",
        ),
    ],
)
async def test_newer_wins_on_everyday_subjects(
    service: Memories, old: str, new: str, scope: str
) -> None:
    project = "dash" if scope == "project" else None
    ident = Identity(f"newer{time.time_ns()}", "ann", project, "on", "tr_newer")
    kind = "project" if project else "profile"
    first = await service.create(ident, content=old, type=kind, scope=scope, project_id=project)
    second = await service.create(ident, content=new, type=kind, scope=scope, project_id=project)
    assert second.superseded == [first.memory.id]
    assert (await service.get(ident, first.memory.id)).status == "superseded"


async def test_a_projects_change_leaves_its_other_facts(service: Memories) -> None:
    """A project's change ends an older fact of the project only where it names a
    particular thing of it: not a fact of the same subject ("the database backups" when the
    database is switched), nor one sharing only the project's name, however the id is
    spelt, nor one in another part of the project."""

    async def facts(project: str, older: str, newer: str) -> None:
        ident = Identity(f"keep{time.time_ns()}", "ann", project, "on", "tr_keep")
        kept = await service.create(
            ident, content=older, type="project", scope="project", project_id=project
        )
        change = await service.create(
            ident, content=newer, type="project", scope="project", project_id=project
        )
        assert change.superseded == []
        assert (await service.get(ident, kept.memory.id)).status == "active"

    await facts(
        "dash",
        "dash 的接口文档都写在 Notion 里",
        "dash switched its CI to GitHub Actions last week",
    )
    await facts(
        "kestrel",
        "Kestrel's database backups run nightly at 2am",
        "Kestrel switched its database to Postgres",
    )
    await facts(
        "kestrel-web",
        "Kestrel's docs are built with Sphinx",
        "Kestrel moved its CI over to Buildkite",
    )
    await facts(
        "kestrel",
        "Kestrel's API is versioned under /v2",
        "Kestrel's frontend moved from Vue to React",
    )
    await facts("tanjiang", "潭江桥的主跨是120米", "潭江桥的计算模型改用SAP2000了")
    # the same tool said again beside another rule is no new one: the older's other facts stay
    await facts(
        "dash",
        "dash: Python 3.12, Typer for the commands, pytest for the tests",
        "dash 每加一个子命令都要配 pytest 测试",
    )


def test_a_value_said_again_is_no_new_one(policy: Policy) -> None:
    """A newer memory naming only keywords of its slot the older names too restates them;
    one naming another, or saying it changed, does not."""
    older = "dash: Python 3.12, Typer for the commands, pytest for the tests"
    assert policy.both_stand("test_framework", older, "dash 每加一个子命令都要配 pytest 测试")
    assert not policy.both_stand("test_framework", older, "dash's tests run on unittest now")
    assert not policy.both_stand(
        "test_framework", older, "dash stopped using pytest, unittest only"
    )
    # naming fewer is a choice made; a word naming the slot is no value; a longer keyword is
    # read whole
    assert not policy.both_stand(
        "database", "Deciding between Postgres and MySQL for dash", "dash uses MySQL"
    )
    assert not policy.both_stand("editor", "我的编辑器是 VS Code", "编辑器现在用 Cursor")
    assert not policy.both_stand("orm", "dash uses the SQLAlchemy ORM", "dash uses Pony ORM")
    assert not policy.both_stand("editor", "I use JetBrains IntelliJ", "JetBrains Rider is my IDE")


async def test_a_tool_for_one_part_of_a_project_leaves_the_tools_of_the_others(
    service: Memories, policy: Policy
) -> None:
    """What a project is built with is one value for each thing built: the promo videos'
    editor leaves the docs' generator, and a later editor of the videos replaces it."""
    ident = Identity(f"aspect{time.time_ns()}", "ann", "dash", "on", "tr_aspect")

    async def fact(content: str) -> Any:
        return await service.create(
            ident, content=content, type="project", scope="project", project_id="dash"
        )

    docs = await fact("dash's docs are built with Sphinx")
    video = await fact("dash 的宣传视频用 DaVinci Resolve 剪")
    assert docs.memory.slot == video.memory.slot == "project_tool"
    assert video.superseded == []
    later = await fact("The dash promo videos are edited in Final Cut now")
    assert later.superseded == [video.memory.id]
    assert (await service.get(ident, docs.memory.id)).status == "active"
    # recall keeps both of a pair stored side by side, as the write does
    assert policy.both_stand("project_tool", docs.memory.content, video.memory.content)
    assert not policy.both_stand("project_tool", video.memory.content, later.memory.content)


async def test_recall_leaves_out_an_older_tool_for_the_same_part_of_a_project(
    service: Memories, policy: Policy
) -> None:
    """Recall compares each older memory of a one-valued slot with every newer one still
    standing: a newest one about another part of the project leaves an older pair about
    one part to be resolved between themselves."""
    ident = Identity(f"parts{time.time_ns()}", "ann", "dash", "on", "tr_parts")

    async def fact(content: str, days: int | None = None) -> Any:
        until = service.clock.now() + timedelta(days=days) if days else None
        made = await service.create(
            ident,
            content=content,
            type="project",
            scope="project",
            project_id="dash",
            expires_at=until,
        )
        service.clock.advance(timedelta(hours=1))  # type: ignore[attr-defined]
        return made

    lasting = await fact("dash's promo videos are cut in DaVinci Resolve")
    week = await fact("dash 的宣传视频这周先用 CapCut 剪", days=7)
    docs = await fact("dash's docs are built with MkDocs")
    assert week.superseded == [] and docs.superseded == []
    recaller = Recaller(service.store, service.embedder, policy, service.clock)
    injected = [m.id for m in (await recaller.recall(ident, "how do I add a search box?")).injected]
    assert docs.memory.id in injected and week.memory.id in injected
    assert lasting.memory.id not in injected


async def test_a_value_for_a_while_leaves_the_lasting_one_for_afterwards(
    service: Memories, policy: Policy
) -> None:
    """A one-valued slot's newer value that expires ("这几天回答都用英文") wins while it
    lasts and does not end the lasting value, which applies again once it has expired."""
    ident = Identity(f"while{time.time_ns()}", "mei", None, "on", "tr_while")
    lasting = await service.create(ident, content="默认用中文回答我", type="preference")
    now = service.clock.now()
    service.clock.advance(timedelta(days=1))  # type: ignore[attr-defined]
    week = await service.create(
        ident,
        content="这周在给外国同事做培训，这几天回答都用英文",
        type="preference",
        expires_at=now + timedelta(days=8),
    )
    assert week.superseded == []
    assert (await service.get(ident, lasting.memory.id)).status == "active"
    recaller = Recaller(service.store, service.embedder, policy, service.clock)
    question = "推荐几个提高专注力的方法"
    assert [m.id for m in (await recaller.recall(ident, question)).injected] == [week.memory.id]
    service.clock.advance(timedelta(days=10))  # type: ignore[attr-defined]
    assert [m.id for m in (await recaller.recall(ident, question)).injected] == [lasting.memory.id]
    # a lasting newer value still ends the older one
    final = await service.create(ident, content="以后都用英文回答我", type="preference")
    assert lasting.memory.id in final.superseded


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # two statements of the same diet stand together
        ("I follow a raw vegan diet", "I'm vegan, so no honey or gelatin either"),
        # a change replaces the subject it is about, not the nearest other memory
        ("I have a cat named Mochi", "Quit the gym, I do yoga at home these days"),
        # a standing wish changes through its slot only
        ("Always answer in English", "I no longer drink coffee after lunch"),
        # the language of code comments is not the language of answers
        ("Please answer in Chinese", "代码注释用英文写"),
        # a change of behaviour does not end a condition, nor another person's facts
        ("I'm diabetic", "I stopped eating sugar"),
        ("My husband has asthma", "My husband quit smoking"),
        ("I have a bad knee from skiing", "I no longer run, my knees can't take it"),
        ("My son is learning English at school.", "My daughter switched schools this year"),
        # a word of a topic names the subject, not a thing: the son's football stands;
        # nor does someone's name: a car that fits Noah's chair leaves Noah's condition
        ("儿子喜欢踢足球", "儿子转学了，现在在外国语学校读四年级"),
        (
            "Noah is 11, has Duchenne muscular dystrophy and uses a power chair.",
            "Sold the Jazz. We've got a wheelchair-accessible Berlingo now so Noah's chair fits.",
        ),
        # a stay somewhere is not a new home, nor learning a language the answers' language
        ("I live in Austin, TX", "We're in Paris now for a week"),
        # a motorbike bought leaves the car, and the other way round
        ("I drive a 2018 Toyota Corolla", "These days I ride a Ducati Monster at weekends"),
        ("我平时骑的是雅马哈的踏板车", "刚提了一辆比亚迪秦"),
        ("我开的是一辆卡罗拉", "我骑的是一辆二手的雅马哈"),
        ("Always answer in Chinese", "I'm learning English again"),
    ],
)
async def test_what_is_not_a_newer_value_stands(service: Memories, old: str, new: str) -> None:
    ident = Identity(f"stands{time.time_ns()}", "ann", None, "on", "tr_stands")
    first = await service.create(ident, content=old, type="preference")
    second = await service.create(ident, content=new, type="preference")
    assert second.superseded == []
    assert (await service.get(ident, first.memory.id)).status == "active"


async def test_a_project_date_moved_leaves_what_it_is_built_with(service: Memories) -> None:
    """A project's deadline moved is no move to another tool."""
    ident = Identity(f"tool{time.time_ns()}", "ann", "dash", "on", "tr_tool")
    built = await service.create(
        ident,
        content="The dash site is built with Jekyll.",
        type="project",
        scope="project",
        project_id="dash",
    )
    moved = await service.create(
        ident,
        content="The dash launch moved to March",
        type="project",
        scope="project",
        project_id="dash",
    )
    assert moved.superseded == []
    assert (await service.get(ident, built.memory.id)).status == "active"


def test_a_fear_or_a_device_reaches_the_journey_it_bears_on(gateway: Gateway) -> None:
    """A fear of heights matters to what to see on a trip, a pacemaker to airport
    security; the pacemaker not to sightseeing, neither to code. (The fitted relevance
    also lets the fear reach airport security: a fear matters to most journeys in the
    scenarios it was fitted to. A false recall left, as the README says.)"""
    me = User(gateway)
    heights = me.remember(
        "I'm terrified of heights. Glass floors, cliff walks, nope.", type="profile"
    )
    pacer = me.remember("I've had a pacemaker since 2021.", type="profile")
    sights = ask(me, "First time in Sydney and I've only got one full day. What should I do?")
    assert me.injected(sights) == [heights]
    security = ask(me, "Anything I should know about getting through airport security at Narita?")
    # the false recall the README records, pinned so that a change to it is seen
    assert set(me.injected(security)) == {pacer, heights}
    assert me.injected(ask(me, "How do I fix this SQL query that returns duplicate rows?")) == []


def test_a_change_recalled_beside_what_it_changed_leaves_that_out(gateway: Gateway) -> None:
    me = User(gateway)
    old = me.remember("we do the shop books in MYOB", type="profile")
    new = me.remember(
        "moved all the accounts over to Xero last month, learning curve", type="profile"
    )
    # too far apart in meaning for the write to tell they are one subject
    assert memory(me, old)["status"] == "active"
    raw = ask(
        me, "A customer returned a rod and I refunded him: how do I put that through the books?"
    )
    assert me.injected(raw) == [new]
    [dropped] = [c for c in me.trace(raw)["candidates"] if c["id"] == old]
    assert dropped["reason"] == "conflict"


def test_a_drawing_tool_ditched_for_another_leaves_the_old_one_out(gateway: Gateway) -> None:
    me = User(gateway)
    me.remember("I do all my drawings in AutoCAD, been using it for 15 years", type="profile")
    new = me.remember(
        "Studio ditched CAD in March, it's all Revit for me from here on", type="profile"
    )
    raw = ask(me, "How do I set up a sheet template for planning drawings with our title block?")
    assert me.injected(raw) == [new]


def test_a_change_for_the_users_health_ends_a_habit(gateway: Gateway) -> None:
    me = User(gateway)
    me.remember("我不挑食，啥都能吃", type="profile")
    new = me.remember("体检尿酸超标了，医生让我少碰海鲜内脏，啤酒也戒了", type="profile")
    assert me.injected(ask(me, "晚上几个哥们来家里喝两杯，帮我想几个下酒菜")) == [new]


def test_a_change_leaves_a_lasting_fact_beside_it(gateway: Gateway) -> None:
    me = User(gateway)
    allergy = me.remember("allergic to shellfish", type="profile")
    cooking = me.remember("stopped eating out, I cook at home these days", type="profile")
    raw = ask(me, "Plan me a week of simple dinners")
    assert sorted(me.injected(raw)) == sorted([allergy, cooking])


def test_a_change_of_a_slot_ends_only_its_older_value(gateway: Gateway) -> None:
    me = User(gateway)
    keto = me.remember("I'm doing keto, basically zero carbs", type="preference")
    weeknights = me.remember("I hate cooking on weeknights", type="preference")
    veggie = me.remember(
        "gave up on keto, vegetarian now - eggs and dairy are fine", type="preference"
    )
    assert memory(me, keto)["status"] == "superseded"
    raw = ask(me, "meal prep ideas for the week? want to cook everything sunday")
    assert sorted(me.injected(raw)) == sorted([veggie, weeknights])


def test_a_change_names_what_an_older_rule_says_by_a_word_in_common() -> None:
    from gateway.memory.policy import change_names

    assert change_names(
        "以后别用表格了，手机上看着太挤，改成分点列表", "对比类的问题用表格形式回答"
    )
    assert change_names("No more numbered lists, use bullet points instead", "Use numbered lists")
    # one-character words ("用", "a") are in every such rule: they name nothing
    assert not change_names("以后别用表格了，改成分点列表", "回答里不要用表情符号")
    assert not change_names("Switched to plain text instead", "Use bullet points")


def test_a_change_about_someone_named_in_chinese_names_no_other_thing_of_theirs(
    policy: Policy,
) -> None:
    """A guard: what a change names is read as before, though a request's names now include
    a capitalised word written against Chinese. Mia giving up ballet ends nothing of her
    egg allergy, nor a run given up the flatmate herself."""
    from gateway.memory.policy import names_a_thing

    assert not names_a_thing("Mia 不去上芭蕾课了", "Mia 对鸡蛋过敏，蛋糕都得自己做", policy)
    assert not names_a_thing("我不再跟Chloe一起夜跑了", "Chloe 是我合租的室友，在医院上班", policy)


def test_a_format_rule_changed_in_other_words_leaves_the_old_one_out(gateway: Gateway) -> None:
    # many format rules coexist; one that says it changed what an older one names ends it
    me = User(gateway)
    table = me.remember("对比类的问题用表格形式回答", type="preference")
    emoji = me.remember("回答里不要用表情符号", type="preference")
    lists = me.remember("以后别用表格了，手机上看着太挤，改成分点列表", type="preference")
    # ended when the change is written, not only left out when both are recalled
    assert memory(me, table)["status"] == "superseded"
    assert memory(me, emoji)["status"] == "active"
    raw = ask(me, "对比一下 iPhone 和安卓手机在隐私保护上的差别。")
    assert sorted(me.injected(raw)) == sorted([emoji, lists])


def test_a_question_about_the_world_gets_no_fact_about_the_user(gateway: Gateway) -> None:
    # however close in meaning: the user's old beagle is no part of why dogs wag their tails
    me = User(gateway)
    rufus = me.remember("My dog Rufus is a 9-year-old beagle with arthritis", type="profile")
    wedding = me.remember("我在筹备自己明年五月的婚礼，头都大了", type="plan")
    lang = me.remember("Always answer in English", type="preference")
    assert me.injected(ask(me, "Why do dogs wag their tails?")) == [lang]
    assert me.injected(ask(me, "中国古代的婚礼有哪些主要的礼仪和习俗？")) == [lang]
    # the same subject asked about the user's own life
    assert rufus in me.injected(ask(me, "Why does my dog keep licking his hips?"))
    assert wedding in me.injected(ask(me, "婚礼为什么要提前半年订酒店？我该什么时候订？"))


def test_the_users_hours_shape_a_plan_of_the_users_time(gateway: Gateway) -> None:
    me = User(gateway)
    hours = me.remember("night security guard, I sleep roughly 8am to 3pm", type="profile")
    me.remember("I collect old soul records", type="profile")
    me.remember("my sister lives in Vancouver", type="profile")
    assert me.injected(ask(me, "想开始练练身体 一天里啥时候去健身房比较合适")) == [hours]
    assert me.injected(ask(me, "How do I run a cron job every 5 minutes?")) == []


def test_a_spending_limit_reaches_a_gift_and_a_trip_not_a_recipe(gateway: Gateway) -> None:
    me = User(gateway)
    limit = me.remember(
        "On a fixed income now, keep gift spending to $30 or less", type="preference"
    )
    trips = me.remember("家里预算紧，出去玩每人别超过3000", type="preference")
    me.remember("bridge club every Thursday afternoon", type="profile")
    assert limit in me.injected(ask(me, "Any ideas what to get my niece for Christmas?"))
    assert trips in me.injected(ask(me, "Plan a 3-day trip for us over the holiday"))
    assert me.injected(ask(me, "How do I make a sourdough starter?")) == []


def test_a_sentence_to_translate_is_not_what_the_user_asks_about(gateway: Gateway) -> None:
    me = User(gateway)
    me.remember("下周三去做体检", type="plan")
    raw = ask(me, "帮我把这句翻成英文：会议推迟到下周三下午两点")
    assert me.injected(raw) == []


def test_a_text_to_work_on_links_only_what_the_instruction_names(gateway: Gateway) -> None:
    """Once the text to translate is set aside, a bare instruction is all that is left: its
    meaning says nothing of the user, so it links no fact by meaning. An instruction that
    names a subject still links by it."""
    from gateway.memory.recall import works_on_given_text

    me = User(gateway)
    me.remember("我的船叫'海燕号'", type="profile")
    lease = me.remember("We rent our flat and the landlord is slow to answer", type="profile")
    asked = "帮我翻译这句话：The meeting has been moved to Thursday afternoon."
    assert works_on_given_text(asked)
    assert me.injected(ask(me, asked)) == []
    assert lease in me.injected(
        ask(
            me, "Rewrite this email to my landlord about the rent so it sounds firmer: hi, the rent"
        )
    )
    assert not works_on_given_text("What time is it in Tokyo: morning or night?")


def test_a_question_about_words_is_not_what_the_user_asks_about(gateway: Gateway) -> None:
    me = User(gateway)
    me.remember("女儿3岁了，正是猫嫌狗厌的年纪", type="profile")
    assert me.injected(ask(me, "the early bird catches the worm 中文有对应的成语吗")) == []


def test_a_pastime_reaches_a_request_for_something_to_do(gateway: Gateway) -> None:
    me = User(gateway)
    climbing = me.remember("最近迷上了抱石，一周去两次岩馆", type="profile")
    paddling = me.remember("Got really into paddleboarding, out on the water whenever I can")
    me.remember("I'm a morning person, up at 6", type="profile")
    raw = ask(me, "What should I do this Saturday to unwind?")
    assert sorted(me.injected(raw)) == sorted([climbing, paddling])
    walker = User(gateway)
    steps = walker.remember("trying to hit 10k steps a day", type="goal")
    walker.remember("I'm a morning person, up at 6", type="profile")
    assert walker.injected(ask(walker, "晚饭后干点啥好 不想一直躺着刷手机")) == [steps]
    # cooking tonight is no free time (the morning person comes: the fitted relevance rates a
    # daily routine likely needed by a question about today, and no shared word holds it out)
    assert steps not in walker.injected(ask(walker, "今天晚饭做点什么比较健康？"))


def test_a_job_left_ends_its_hours(gateway: Gateway) -> None:
    me = User(gateway)
    nights = me.remember("I work night shifts as an ICU nurse, usually 7pm to 7am", type="profile")
    hobby = me.remember("I paint watercolours", type="profile")
    office = me.remember(
        "Left nursing! 现在在学校做行政，朝九晚五，终于能正常睡觉了", type="profile"
    )
    assert memory(me, nights)["status"] == "superseded"
    assert memory(me, hobby)["status"] == "active"
    assert me.injected(ask(me, "Help me plan a weekly meal-prep routine around my work hours")) == [
        office
    ]


def test_a_job_stated_without_a_change_leaves_the_hours(gateway: Gateway) -> None:
    me = User(gateway)
    nights = me.remember("I work night shifts, 7pm to 7am", type="profile")
    me.remember("I'm a nurse at St Mary's", type="profile")
    assert memory(me, nights)["status"] == "active"


def test_a_pet_that_died_is_no_longer_the_users(gateway: Gateway) -> None:
    me = User(gateway)
    hamster = me.remember("We've got a hamster called Nugget", type="profile")
    kitten = me.remember(
        "Nugget died last month, we adopted a rescue kitten called Miso", type="profile"
    )
    assert memory(me, hamster)["status"] == "superseded"
    assert me.injected(ask(me, "这个月宠物用品大概要准备多少预算？")) == [kitten]


@pytest.mark.parametrize(
    ("older", "newer", "kind", "ends"),
    [
        # someone's end, said with their name, ends what was said of them
        ("Our dog Biscuit is 14, bad arthritis", "We had to put Biscuit down", "profile", True),
        ("My grandmother Rose lives in Leeds", "Sadly Rose passed away in May", "profile", True),
        ("我家旺财十三岁了，后腿没劲，上下楼得抱着", "旺财上个月死了", "profile", True),
        ("我们家养了只仓鼠，叫豆豆", "豆豆去年冬天走了。现在家里养的是一只柯基", "profile", True),
        # a name in another change is no end of them
        ("Our dog Biscuit is 14, bad arthritis", "Lost Biscuit's lead again", "profile", False),
        ("Our dog Biscuit is 14", "Put Biscuit in the car and went to the beach", "profile", False),
        ("My daughter Mia is 7", "Mia's hamster died last week", "profile", False),
        ("My son Leo is 10", "Leo passed the 11+ with flying colours!", "profile", False),
        ("My son Noah is 3", "I put Noah to sleep at 7:30 every night now", "profile", False),
        ("我的爸爸今年七十岁，住在老家", "同事的爸爸去世了", "profile", False),
        # left, not died: "走了" told with no time before it
        ("我妈妈住在杭州，每个月去看她", "妈妈昨天走了，回老家住几天", "profile", False),
        # a goal is a job or an editor wished for, not one held
        ("我在一家银行做风控，朝九晚六", "想转行做产品经理，正在准备作品集", "goal", False),
        ("I'm a barista in Leeds", "Long-term I want to work as a nurse in the UK", "goal", False),
        ("I use VS Code for everything", "I want to learn vim properly this year", "goal", False),
    ],
)
def test_what_a_later_memory_ends(
    gateway: Gateway, older: str, newer: str, kind: str, ends: bool
) -> None:
    me = User(gateway)
    before = me.remember(older, type="profile")
    me.remember(newer, type=kind)
    assert memory(me, before)["status"] == ("superseded" if ends else "active")


@pytest.mark.parametrize(
    ("fact", "kind", "asked"),
    [
        (
            "We rent our flat and the lease says no drilling into the walls",
            "profile",
            "走廊想挂一面很重的大镜子，怎么挂比较稳？",
        ),
        ("I'm pregnant, 5 months along", "profile", "最近腰好酸 有啥缓解的办法吗 按摩能做吗"),
        (
            "我的 work laptop 是 M2 MacBook Air，16GB 内存",
            "profile",
            "Can I run a 7B model locally for my experiments?",
        ),
        (
            "Switched over to GoLand last month",
            "profile",
            "What's the shortcut to rename a symbol across the whole project?",
        ),
        (
            "We switched energy supplier to Octopus in April",
            "profile",
            "How do I submit a meter reading online?",
        ),
        (
            "今年在攒首付 能省则省",
            "goal",
            "dropped my phone n the screen's cracked, fix it or just get a new one?",
        ),
        # what limits the user's moving meets a place to stay, to eat or to get up to
        (
            "I use a wheelchair and can't manage even a single step",
            "profile",
            "帮我找几家巴黎的酒店，预算每晚150欧左右",
        ),
        (
            "I'm a wheelchair user, so I need step-free entry wherever I go",
            "profile",
            "Find me a nice restaurant for dinner tonight, somewhere with good seafood",
        ),
        (
            "My knees can't cope with steep steps any more, I walk with a stick",
            "profile",
            "邮轮停靠圣托里尼，我们怎么上到费拉镇比较好？",
        ),
        # a forecast read as a boater reads it; a fish to catch; the sky at night
        (
            "My boat's only a 4.8 m tinny, I don't take it out if the wind's over 15 knots",
            "profile",
            "Forecast says 20 knots south-easterly tomorrow. Worth heading out for flathead?",
        ),
        (
            "我的望远镜是102mm折射镜，配的是EQ3赤道仪",
            "profile",
            "Can I photograph the Orion Nebula with my current setup?",
        ),
        # fertility treatment meets exercise; a weak ankle a walk; a back a long drive
        (
            "我在做试管，这周开始打促排针了",
            "profile",
            "Is it ok if I keep going to my hot yoga classes this week?",
        ),
        (
            "My left ankle is still a bit weak since I sprained it in March",
            "profile",
            "Plan me a day walk in the Peak District that I can do with the dog",
        ),
        (
            "我腰椎不好，连着坐超过两个小时就疼得受不了",
            "profile",
            "Plan me a route from Manchester to Aberdeen tomorrow with proper stops along the way",
        ),
        # an irregular income meets a budget; working for oneself the tax to put aside
        (
            "我是自由译者，收入很不稳定，有的月份两万多，有的月份才三千",
            "profile",
            "帮我做一个每个月的预算计划吧",
        ),
        (
            "Went freelance in January, working for myself now!",
            "profile",
            "How much should I set aside each month for tax?",
        ),
        # the bench's instruments meet a repair; a rota meets the days a request names
        (
            "我家里有台泰克465示波器，还有一个信号发生器，都是老设备但好用",
            "profile",
            "一台老式电子管收音机通电后灯亮但完全没声音，该怎么一步步排查？",
        ),
        (
            "我每个月第一周轮 on-call，那一周晚上基本没法安排活动",
            "profile",
            "7月有两场演唱会，7月3号和7月17号，帮我看看约朋友去哪场比较合适？",
        ),
        # what a child may eat meets a lunchbox; an EV's range a long fare; a climbing goal
        # a training week; home a place to go
        (
            "乐乐的lunchbox必须完全nut-free，学校规定加上他自己过敏",
            "profile",
            "What should I put in Lele's lunchbox this week? Running out of ideas.",
        ),
        (
            "My cab is fully electric, real-world range is about 400 km on a full charge",
            "profile",
            "明天有个客人要包车去300公里外的城市，送完我再空车回来，电够不够？",
        ),
        (
            "I'm working towards sending my first V5 boulder",
            "goal",
            "Can you design a training week for me? I have 4 sessions and a hangboard at home.",
        ),
        (
            "I live in Hong Kong, Sai Ying Pun",
            "profile",
            "Where can I climb indoors this Saturday?",
        ),
        # skin that burns meets a beach bag; a kitchen's budget its units; a honey that sets
        # its jars; babies' age their night feeds
        (
            "I burn really easily, fair skin and freckles",
            "profile",
            "Going to the beach on Sunday with the grandkids, what should I pack?",
        ),
        (
            "We want to keep the whole kitchen under £12k all in, including fitting",
            "goal",
            "Help us compare a handmade oak kitchen with an IKEA carcass plus custom fronts.",
        ),
        (
            "Most of my honey is oilseed rape, it sets like concrete if I'm not quick",
            "profile",
            "How should I store this year's jars so they don't crystallise so fast?",
        ),
        (
            "The twins are 7 weeks old now, they came at 36 weeks",
            "profile",
            "How many night feeds is normal at this age? They're still waking every 2 hours.",
        ),
        # where the user lives meets what to do with a free weekend
        ("我住在上海徐汇", "profile", "这个周末想放松一下，有什么推荐的安排？"),
        # units of alcohol, a stall's costs, a phone's settings
        (
            "My GP wants me to keep it to one unit a day max because of my liver results",
            "profile",
            "Can I have a glass of wine at the birthday lunch on Sunday?",
        ),
        (
            "My pitch at the farmers' market is £35 every Saturday",
            "profile",
            "Ingredients are about 22p per cookie. How many do I need to sell to break even?",
        ),
        (
            "Finally treated myself - got a Samsung Galaxy S23",
            "profile",
            "How do I set up a bedtime mode that silences everything except calls?",
        ),
    ],
)
def test_a_fact_reaches_a_request_it_bears_on_in_other_words(
    gateway: Gateway, fact: str, kind: str, asked: str
) -> None:
    me = User(gateway)
    kept = me.remember(fact, type=kind)
    me.remember("I support Arsenal", type="profile")
    assert me.injected(ask(me, asked)) == [kept]


def test_a_move_into_a_new_home_ends_the_old_town(gateway: Gateway) -> None:
    me = User(gateway)
    old = me.remember("I live in Croydon, been here nearly thirty years", type="profile")
    new = me.remember(
        "We've finally moved into the bungalow in Whitstable, boxes everywhere!", type="profile"
    )
    assert memory(me, old)["status"] == "superseded"
    assert me.injected(ask(me, "Are there any walking groups for retired folk near me?")) == [new]


def test_eating_again_what_a_diet_left_out_ends_the_diet(gateway: Gateway) -> None:
    me = User(gateway)
    old = me.remember("我吃素好几年了，肉和鱼都不碰", type="profile")
    new = me.remember("医生说我贫血得厉害，现在开始吃点鱼和瘦肉了", type="profile")
    assert memory(me, old)["status"] == "superseded"
    assert me.injected(ask(me, "帮我安排下礼拜的午饭，简单好做的")) == [new]


def test_a_walk_or_a_journey_reaches_what_limits_the_user_on_the_way(gateway: Gateway) -> None:
    me = User(gateway)
    knee = me.remember(
        "Arthritis in my left knee, steep downhill bits are the worst", type="profile"
    )
    rail = me.remember("I've got a Senior Railcard", type="profile")
    me.remember("I collect old soul records", type="profile")
    assert knee in me.injected(ask(me, "Plan a gentle day walk in the Lake District for me"))
    assert rail in me.injected(
        ask(me, "I want to go from Leeds to Bristol next month. How should I book it?")
    )
    # walking someone through something is no walk
    assert (
        me.injected(ask(me, "Can you walk me through how a mutex differs from a semaphore?")) == []
    )


def test_a_request_naming_who_it_is_about_leaves_the_others_out(gateway: Gateway) -> None:
    me = User(gateway)
    exams = me.remember("My daughter is sitting her GCSEs this year", type="profile")
    dad = me.remember("My dad had a hip replacement last autumn", type="profile")
    raw = ask(me, "Suggest a day walk in the Lake District we could do with my dad next month.")
    assert me.injected(raw) == [dad]
    # a day out that names no one is the whole family's
    assert exams in me.injected(ask(me, "Suggest some activities for a family weekend"))


def test_a_households_size_reaches_its_meals_and_its_car(gateway: Gateway) -> None:
    me = User(gateway)
    family = me.remember("we're a family of six, four kids all under 10", type="profile")
    me.remember("I play five-a-side on Tuesdays", type="profile")
    assert me.injected(ask(me, "Plan a cheap week of dinners for us")) == [family]
    assert me.injected(ask(me, "帮我推荐几款车")) == [family]


def test_format_rules_coexist(gateway: Gateway) -> None:
    me = User(gateway)
    bullets = me.remember("Use bullet points when you list things", type="format")
    emoji = me.remember("No emojis please", type="format")
    assert memory(me, bullets)["status"] == "active"
    assert sorted(me.injected(ask(me, "What are the pros and cons of remote work?"))) == sorted(
        [bullets, emoji]
    )


def test_applies_is_part_of_the_record_and_editable(gateway: Gateway) -> None:
    me = User(gateway)
    mid = me.remember("I'm vegetarian", type="profile")
    assert memory(me, mid)["applies"] == "relevant"
    assert me.injected(ask(me, "Explain how HTTP caching works")) == []
    resp = httpx.patch(
        f"{gateway.base_url}/memories/{mid}", headers=me.headers, json={"applies": "always"}
    )
    assert resp.status_code == 200 and resp.json()["applies"] == "always"
    assert me.injected(ask(me, "Explain how HTTP caching works")) == [mid]
    history = httpx.get(f"{gateway.base_url}/memories/{mid}/history", headers=me.headers).json()
    assert history["data"][-1]["changes"]["applies"] == ["relevant", "always"]
    bad = httpx.patch(
        f"{gateway.base_url}/memories/{mid}", headers=me.headers, json={"applies": "sometimes"}
    )
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "write_refused"
    stated = me.remember("I like jazz", applies="always")
    assert memory(me, stated)["applies"] == "always"


def test_a_user_with_only_standing_memories_costs_no_vector_search(gateway: Gateway) -> None:
    me = User(gateway)
    lang = me.remember("Always answer in English")
    raw = ask(me, "What's a good name for a cat?")
    assert me.injected(raw) == [lang]
    assert me.trace(raw)["searches"] == ["standing"]  # a tag query, no vector search
    raw = ask(me, "What's a good name for a cat?")
    assert me.injected(raw) == [lang]
    assert me.trace(raw)["searches"] == ["standing_cached"]  # nothing changed since
    cat = me.remember("I have a cat named Mochi", type="profile")
    raw = ask(me, "What's a good name for a cat?")
    assert me.injected(raw) == [cat, lang]
    # the write changed the owner's version: the standing memories are read again
    assert me.trace(raw)["searches"][0] == "standing" and me.trace(raw)["searches"][-1] == "vector"


def test_the_standing_cache_follows_every_change(gateway: Gateway, upstream: Any) -> None:
    me = User(gateway)
    lang = me.remember("Always answer in English")
    assert me.injected(ask(me, "Explain recursion")) == [lang]
    httpx.patch(
        f"{gateway.base_url}/memories/{lang}",
        headers=me.headers,
        json={"content": "Always answer in French"},
    )
    ask(me, "Explain recursion")
    assert "French" in (memory_message(upstream) or "")
    httpx.delete(f"{gateway.base_url}/memories/{lang}", headers=me.headers)
    other = me.remember("No emojis please", type="format")
    assert me.injected(ask(me, "Explain recursion")) == [other]


# --- the candidate queue ---------------------------------------------------------------------


async def test_a_candidate_proposes_how_it_applies_and_the_user_may_change_it(
    service: Memories, policy: Policy
) -> None:
    ident = Identity(f"lanes{time.time_ns()}", "alice", None, "on", "tr_lanes")
    queue = CandidateQueue(service.store, policy, service.clock)
    proposal, _ = screen(Proposal(content="以后都用中文回答我", type="preference"), policy)
    assert proposal is not None and proposal.applies == "always"
    await queue.enqueue(ident, proposal, trace_id=None)
    [cand] = await queue.list(ident)
    assert cand["applies"] == "always"
    outcome = await queue.confirm(ident, cand["id"], service, {"applies": "relevant"})
    assert outcome.memory.applies == "relevant"


async def test_a_large_users_topical_memories_are_found_by_words_and_meaning(
    service: Memories, policy: Policy
) -> None:
    ident = Identity(f"large{time.time_ns()}", "carol", None, "on", "tr_large")
    allergy = (
        await service.create(ident, content="I'm allergic to peanuts", type="profile")
    ).memory
    recaller = Recaller(service.store, service.embedder, policy, service.clock)
    dinner = "Plan a dinner menu for six people"
    small = await recaller.recall(ident, dinner)
    assert [m.id for m in small.injected] == [allergy.id]
    assert "topics" in small.searches  # the keyword search also matched by topic
    # Past the large-user size (the kept counts only grow), a shared topic no longer finds
    # memories by itself: it would select thousands with nothing to order them by.
    await service.store.count_memories_written(
        ident.tenant, ident.user, LARGE_USER, topical=LARGE_USER
    )
    # (a fresh recaller: one that has seen the user plans its searches on the last count)
    recaller = Recaller(service.store, service.embedder, policy, service.clock)
    large = await recaller.recall(ident, dinner)
    assert "topics" not in large.searches and "vector" in large.searches
    # the vector search still finds it, and the shared topic still makes it relevant
    assert [m.id for m in large.injected] == [allergy.id]


async def test_a_secret_in_the_question_reaches_neither_the_encoder_nor_redis(
    service: Memories, policy: Policy
) -> None:
    """The query is redacted before it is embedded or sent: short questions (one scan
    serves the trace preview and the query), longer ones (scanned again) and ones past the
    query's cut alike."""
    ident = Identity(f"secret{time.time_ns()}", "dan", None, "on", "tr_secret")
    await service.create(ident, content="I'm allergic to peanuts", type="profile")
    key = "sk-proj-" + "Zq8wErT5yUi2oPa9sDf4gHj7kLz3xCv6"
    seen: list[str] = []

    class Recording:
        model_id, paid, dims = service.embedder.model_id, False, service.embedder.dims

        async def embed_query(self, text: str) -> Any:
            seen.append(text)
            return await service.embedder.embed_query(text)

    store = service.store
    text_hits = store.text_hits

    async def recording_text_hits(expr: Any, query_text: str, *args: Any, **kw: Any) -> Any:
        seen.append(query_text)
        return await text_hits(expr, query_text, *args, **kw)

    store.text_hits = recording_text_hits  # type: ignore[method-assign]
    try:
        recaller = Recaller(store, Recording(), policy, service.clock)  # type: ignore[arg-type]
        for question in (
            f"my key {key} fails, what should I cook for dinner",
            "what should I cook for dinner tonight " * 10 + key,
            "dinner " * 270 + key,
        ):
            seen.clear()
            result = await recaller.recall(ident, question)
            assert len(seen) == 2 and result.searches[-1] == "vector"
            assert not any(key in text or "sk-proj" in text for text in seen), seen
    finally:
        del store.text_hits


async def test_memories_from_before_applies_are_settled(service: Memories, policy: Policy) -> None:
    ident = Identity(f"settle{time.time_ns()}", "bob", None, "on", "tr_settle")
    lang = (
        await service.create(ident, content="Always answer in English", type="preference")
    ).memory
    pet = (await service.create(ident, content="I have a cat", type="profile")).memory
    for m in (lang, pet):  # as an earlier release wrote them
        await service.store.redis.hdel(
            service.store.memory_key(ident.tenant, "bob", m.id), "applies", "topics"
        )
    assert await service.settle() >= 2
    assert (await service.get(ident, lang.id)).applies == "always"
    settled = await service.get(ident, pet.id)
    assert (settled.applies, settled.topics) == ("relevant", ["pets"])


async def test_stored_topics_follow_a_change_of_the_rules(
    service: Memories, policy: Policy
) -> None:
    """Memories written under earlier topic rules are given this policy's topics once, at
    the first round after the rules changed, and not again while the rules stay the same."""
    ident = Identity(f"rules{time.time_ns()}", "ana", None, "on", "tr_rules")
    pet = (await service.create(ident, content="I have a cat", type="profile")).memory
    shift = (await service.create(ident, content="我上夜班", type="profile")).memory
    assert pet.topics == ["pets"]
    store = service.store
    for memory, old in ((pet, "food"), (shift, "")):  # as earlier rules derived them
        await store.redis.hset(store.memory_key(ident.tenant, "ana", memory.id), "topics", old)
    await store.set_topics_basis("earlier")
    await service.follow_topic_rules()
    assert (await service.get(ident, pet.id)).topics == ["pets"]
    assert (await service.get(ident, shift.id)).topics == shift.topics != []
    assert await store.topics_basis() == policy.topics_basis
    # the rules have not changed since: nothing is read or derived again
    await store.redis.hset(store.memory_key(ident.tenant, "ana", pet.id), "topics", "food")
    assert await service.follow_topic_rules() == 0
    assert (await service.get(ident, pet.id)).topics == ["food"]
    # and the recall's topic search finds a memory by its new topics
    await store.set_topics_basis("earlier")
    await service.follow_topic_rules()
    recaller = Recaller(store, service.embedder, policy, service.clock)
    result = await recaller.recall(ident, "which cat litter is least dusty?")
    assert pet.id in {c.memory.id for c in result.candidates if "pets" in c.topics}


async def test_whether_a_memory_says_a_change_is_read_once_and_kept(
    service: Memories, policy: Policy
) -> None:
    """Whether a memory says something changed is read when it is written and kept with
    it; a memory stored before that reading existed is still taken as a change at recall
    (read from its text), and the rules-follow pass stores its reading."""
    ident = Identity(f"said{time.time_ns()}", "kai", None, "on", "tr_said")
    old = await service.create(ident, content="we do the shop books in MYOB", type="profile")
    service.clock.advance(timedelta(days=30))  # type: ignore[attr-defined]
    new = await service.create(
        ident,
        content="moved all the accounts over to Xero last month, learning curve",
        type="profile",
    )
    assert (old.memory.says_change, new.memory.says_change) == (False, True)
    store = service.store
    key = store.memory_key(ident.tenant, "kai", new.memory.id)
    assert await store.redis.hget(key, "says_change") == b"1"
    await store.redis.hdel(key, "says_change")  # as an earlier release wrote it
    assert (await service.get(ident, new.memory.id)).says_change is None
    recaller = Recaller(store, service.embedder, policy, service.clock)
    question = "A customer returned a rod and I refunded him: how do I put that through the books?"
    result = await recaller.recall(ident, question)
    assert [m.id for m in result.injected] == [new.memory.id]
    await store.set_topics_basis("earlier")
    await service.follow_topic_rules()
    assert (await service.get(ident, new.memory.id)).says_change is True
    assert (await service.get(ident, old.memory.id)).says_change is False
    # the kept reading is the one recall goes by
    fresh = Recaller(store, service.embedder, policy, service.clock)
    await store.redis.hset(key, "says_change", 0)
    assert {m.id for m in (await fresh.recall(ident, question)).injected} == {
        old.memory.id,
        new.memory.id,
    }


def test_the_topics_basis_follows_the_topic_rules_only(policy: Policy) -> None:
    knobs = parse_policy("recall:\n  max_memories: 4\n", "overlay.yaml")
    topics = parse_policy(
        "topics:\n  - name: travel\n    keywords: [flight, hotel]\n", "overlay.yaml"
    )
    assert knobs.topics_basis == policy.topics_basis != topics.topics_basis
    changes = parse_policy(
        "changes:\n  patterns:\n    - regex: 'no longer'\n      examples: [I no longer run]\n",
        "overlay.yaml",
    )
    assert changes.topics_basis != policy.topics_basis


async def test_every_memory_of_the_requests_topic_reaches_the_ranking(
    redis_url: str, shared_embedder: LocalEmbedder, policy: Policy
) -> None:
    """A user with more memories of one topic than the candidate pool (a long list of diet
    rules) still has each of them ranked for a request about that topic."""
    foods = [
        "mushrooms", "olives", "coriander", "anchovies", "tofu", "lamb", "pork", "duck",
        "liver", "oysters", "eggplant", "okra", "beetroot", "celery", "blue cheese", "tripe",
        "durian", "natto", "pickles", "raisins", "coconut", "licorice", "kale", "sardines",
        "venison", "squid", "goat cheese", "marzipan", "horseradish", "jalapenos",
    ]  # fmt: skip
    assert policy.recall.topic_pool and len(foods) > policy.recall.candidate_pool
    store = Store(redis_url)
    try:
        runner = Runner(store, shared_embedder, policy)
        await runner.ready()
        ident = Identity(runner.tenant, "eater", None, "on", "tr_topic_pool")
        stored = set()
        for food in foods:
            outcome = await runner.memories.create(
                ident, content=f"I never eat {food} at dinner", type="preference"
            )
            assert "food" in outcome.memory.topics
            stored.add(outcome.memory.id)
        result = await runner.recaller.recall(ident, "Plan a menu", model="gpt-4o-mini")
        ranked = {c.memory.id for c in result.candidates if c.text > 0 and "food" in c.topics}
        assert len(stored) > policy.recall.candidate_pool and ranked == stored
    finally:
        await runner.forget(["eater"])
        await store.aclose()


async def test_memories_that_fit_about_equally_are_not_cut_apart(
    redis_url: str, shared_embedder: LocalEmbedder, policy: Policy
) -> None:
    """Three diet rules fit a dinner menu about equally: past topical.max, a third one that
    ranks within close_within of the best is injected too; an unrelated one is not."""
    lane = policy.recall.topical
    assert lane.close_max > lane.max == 2
    store = Store(redis_url)
    try:
        runner = Runner(store, shared_embedder, policy)
        await runner.ready()
        ident = Identity(runner.tenant, "diner", None, "on", "tr_close")
        rules = ["I don't eat pork", "I don't eat beef", "I don't eat lamb"]
        ids = [
            (await runner.memories.create(ident, content=r, type="preference")).memory.id
            for r in rules
        ]
        cat = await runner.memories.create(
            ident, content="I have a cat named Mochi", type="profile"
        )
        result = await runner.recaller.recall(ident, "Plan a dinner menu", model="gpt-4o-mini")
        injected = [m.id for m in result.injected]
        assert sorted(injected) == sorted(ids) and cat.memory.id not in injected
        fused = sorted((c.fused for c in result.candidates if c.memory.id in ids), reverse=True)
        assert fused[0] - fused[-1] <= lane.close_within
    finally:
        await runner.forget(["diner"])
        await store.aclose()


# --- the scenario set's floors ------------------------------------------------------------------


@pytest.mark.long
async def test_the_shipped_scenarios_meet_their_floors(
    redis_url: str, shared_embedder: LocalEmbedder, policy: Policy
) -> None:
    store = Store(redis_url)
    try:
        runner = Runner(store, shared_embedder, policy)
        await runner.ready()
        outcomes = await runner.run_all(load_scenarios())
    finally:
        await store.aclose()
    by, total = tally(outcomes)
    assert set(by) == {
        "standing",
        "project",
        "work_scope",
        "topical",
        "newer",
        "nothing",
        "cross_lingual",
        "expired",
    }
    for name, t in by.items():
        assert t.gold_recall >= 0.9, (name, t)
    assert total.false_recall <= 0.05 and total.precision >= 0.8, total


async def test_a_memory_the_gate_refuses_is_reported_and_the_run_goes_on(
    redis_url: str, shared_embedder: LocalEmbedder, policy: Policy, tmp_path: Path
) -> None:
    """A scenario file may hold what the write gate refuses (a one-time wish, a secret): the
    refusal is the product's answer, named in the report, and the other scenarios still run."""
    path = tmp_path / "scenarios.yaml"
    path.write_text(
        """scenarios:
  - id: refused-one-time
    category: standing
    memories:
      - {ref: now, content: "这次简短一点", type: length, age_days: 1}
      - {ref: lang, content: "Always answer in English", type: preference, age_days: 3}
    request: {message: "Explain recursion"}
    expect: [lang]
  - id: after-it
    category: standing
    memories:
      - {ref: units, content: "From now on always use metric units", type: preference}
    request: {message: "How far is Paris from Lyon?"}
    expect: [units]
""",
        encoding="utf-8",
    )
    store = Store(redis_url)
    try:
        runner = Runner(store, shared_embedder, policy)
        await runner.ready()
        outcomes = await runner.run_all(load_scenarios(path))
    finally:
        await store.aclose()
    assert [(o.scenario.id, o.injected, o.not_stored) for o in outcomes] == [
        ("refused-one-time", ["lang"], ["now"]),
        ("after-it", ["units"], []),
    ]
    assert "  refused-one-time: ['now']" in report(outcomes, None, "skipped").splitlines()


def test_the_report_shows_the_injected_share_of_prompt_tokens(gateway: Gateway) -> None:
    me = User(gateway)
    me.remember("Always answer in English")
    me.trace(ask(me, "Explain recursion"))  # the answer is complete once its trace is there
    signals: dict[str, Any] = {}
    for _ in range(100):  # the counts are added off the response path
        signals = httpx.get(f"{gateway.base_url}/memory/report", headers=me.headers).json()[
            "signals"
        ]
        if signals["prompt_tokens"]:
            break
        time.sleep(0.02)
    # the loopback upstream reports a fixed usage: only that both are counted is checked
    assert signals["prompt_tokens"] > 0 and signals["injected_tokens"] > 0
    share = signals["injected_share_of_prompt_tokens"]
    assert share == round(signals["injected_tokens"] / signals["prompt_tokens"], 4)


def test_a_trace_keeps_the_start_of_the_question_without_secrets(gateway: Gateway) -> None:
    me = User(gateway)
    me.remember("Always answer in English")
    key = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    trace = me.trace(ask(me, f"my key {key} fails, mail me at li@example.com about it please"))
    preview = trace["query_preview"]
    assert preview.startswith("my key ") and len(preview) <= 60
    assert key not in preview and "li@example.com" not in preview
    assert key not in json.dumps(trace)


def test_what_is_pasted_is_not_what_the_request_is_about(policy: Policy) -> None:
    """A story to edit, a snippet or a quoted line carries words of its own ("kitchen",
    "coffee", "index"); the request's topics come from the user's own words."""
    from gateway.memory.recall import own_words

    essay = (
        "Does this opening work for my essay?\n\n"
        '"The summer my grandfather stopped talking, we sat in the kitchen every morning '
        'with coffee going cold while the adults spoke in shorthand."\n\nBe honest.'
    )
    assert topics_of(essay, policy) and topics_of(own_words(essay), policy) == []
    code = "帮我看看这个 SQL 查询为什么慢：\n```sql\nSELECT * FROM recipes ORDER BY dinner;\n```"
    assert "food" in topics_of(code, policy)
    assert topics_of(own_words(code), policy) == ["coding"]
    quoted = "> we are planning a dinner menu for Saturday\nreply to this email politely"
    assert "food" not in topics_of(own_words(quoted), policy)
    # a phrase to explain, or the text after "rewrite / translate ...:", is the object too;
    # the instruction itself stays
    assert topics_of(own_words("“画蛇添足”这个成语是什么意思？"), policy) == []
    rewrite = "Rewrite this in the passive voice: The committee approved the budget."
    assert "money" in topics_of(rewrite, policy) and topics_of(own_words(rewrite), policy) == []
    assert "home" in topics_of(
        own_words("Translate this note to my landlord: the cat is ill"), policy
    )
    assert "pets" not in topics_of(own_words("帮我翻译：我的猫很可爱"), policy)
    assert "food" not in topics_of(own_words("把这段话翻成英文：我们的蛋糕用的是本地奶油"), policy)
    # a time, an inch mark or an everyday "improve" or "edit" is not pasted text
    mornings = "How can I improve my mornings? I wake at 6:30 and need breakfast ideas for my kids."
    assert own_words(mornings) == mornings
    assert own_words('My TV is 55" and I want a 65" one') == 'My TV is 55" and I want a 65" one'
    assert "food" in topics_of(own_words("Edit: forgot to say, plan a dinner menu"), policy)
    assert "food" in topics_of(
        own_words("Translate this: Bonjour.\nAlso, plan a dinner menu"), policy
    )
    # the user's own words stay, in both languages
    assert "food" in topics_of(own_words("Plan a dinner menu for six people"), policy)
    assert "food" in topics_of(own_words("帮我安排周六的晚餐菜单"), policy)


@pytest.mark.parametrize(
    ("text", "not_topic"),
    [
        # everyday phrases that carry a topic's word in another sense
        ("我这边没问题，明天可以开会", "place"),
        ("今天儿子生日", "place"),
        ("I want to visit my mom", "travel"),
        ("We spent two weeks on the database migration", "travel"),
        ("Mr Jenkins next door lends me his ladder", "coding"),
        ("Our sales pipeline is looking thin", "coding"),
        ("There is rust on my bike chain", "coding"),
        ("Things worked out well in the end", "fitness"),
        ("汤姆下周来北京开会", "food"),
        ("I volunteer at the local food bank", "money"),
        ("We need to improve our security posture", "health"),
        ("The news is leaking early", "home"),
        ("A new chapter in my life begins", "books"),
        ("We are a tight-knit team", "crafts"),
        ("我在读孙子兵法", "child"),
        ("Power plants emit CO2", "garden"),
        ("I love Star Trek", "outings"),
        ("The meeting didn't work out", "fitness"),
        ("我想飞起来", "travel"),
        ("时间过得飞快", "travel"),
        ("我们公司今年想飞速扩张", "travel"),
        ("我打算飞书上建个项目群", "travel"),
        ("手机的飞机模式下还能用蓝牙耳机吗？", "transport"),
        ("纸飞机怎么折", "transport"),
        ("餐厅里靠窗的桌子", "transport"),
        ("console.log prints undefined", "games"),
        ("Let's drill down into why this query returns no data", "furnishings"),
        ("an off-the-shelf library", "furnishings"),
        ("fire drill at work", "furnishings"),
        ("How should I separate the presentation layer?", "work"),
        ("My 6-year-old laptop has become really slow", "child"),
        ("my 12-year-old dog", "child"),
        ("plan a team hackathon for the weekend in March", "travel"),
        ("Weekend in Review", "travel"),
        ("Design the database schema for a salon booking SaaS", "beauty"),
        ("理发师问题怎么用信号量解决", "beauty"),
        ("syntactic sugar in Python", "food"),
        ("在虾皮上开店", "food"),
        ("self-assessment for my performance review", "money"),
        ("how do i set up a cron job that runs every 15 minutes", "work"),
        ("permission denied when running my shell script", "fitness"),
        ("how do I parse 2024-03-05 without timezone weirdness", "travel"),
        ("日本的电车和地铁有什么区别？", "vehicles"),
        ("I am making a cake with 2kg of flour", "fitness"),
        ("帮我规划一下下周五天的晚餐", "friday"),
        ("My tomatoes got blight again", "food"),
        ("My dog Biscuit is a 4 year old golden retriever", "child"),
        ("how hot does a car engine get when it's running normally?", "fitness"),
        ("I code in Rust until midnight", "place"),
        ("I work in Python for a living", "place"),
        ("I code in Python until dinner", "place"),
        ("这段时间在减肥", "place"),
        ("Living in fear of the deadline", "place"),
        ("Our cat Luna turns 3", "child"),
        ("Dinner will be 6 people", "child"),
        ("a 3 hour ride to the airport in a taxi", "fitness"),
        ("I grew up outside London, growing up outside London was fun", "garden"),
        ("I do nights as a porter at the hospital", "health"),
        ("我在医院上班，三班倒", "health"),
        ("We took the kids to the aquarium", "pets"),
        ("Try this exercise: reverse a linked list", "fitness"),
        ("Speech recognition models for Mandarin", "speaking"),
        ("Shooting hoops after work", "photography"),
        ("I want to sand and oil a table this weekend", "outings"),
        ("去公司加班待3天", "place"),
        ("How do I get coffee out of a white shirt?", "food"),
        ("我在美团送外卖，一天跑十个小时", "food"),
        ("去公司这两天要交报告", "travel"),
        ("allergic to wasp stings, I carry an EpiPen", "food"),
        ("my cat Tofu is on a special renal diet", "food"),
        ("第一步先装依赖", "fitness"),
        ("give me a 4 week program for my deadlift", "coding"),
        ("how do I get rid of fruit flies?", "travel"),
        ("which baby formula for a 3 month old", "coding"),
        ("我家橘猫叫大黄，特别能吃", "food"),
        ("how do I get rid of ants in the kitchen?", "food"),
        ("周末在家做饭，一家三口吃", "speaking"),  # 口吃 "stutter" inside 三口吃
        ("有没有好玩点的桌游推荐", "outings"),
        # a lost card to replace is an errand, not a trip to pack for; phone storage no home
        ("医保卡丢了，去哪儿补办？要带什么？", "packing"),
        # an allergy to animals is about animals, not a workout or a trip; 'uni' is no study
        ("I'm allergic to cats, sadly", "health"),
        ("我对猫毛过敏", "health"),
        ("names for a bubble tea shop near a uni campus", "study"),
        ("我结婚了", "occasions"),
        ("在公司加班", "place"),
        ("I work in a lab", "pets"),
        # the operating system, a dog walker, a question of when to do something
        ("How do I install Python on Windows 11?", "home"),
        ("need a dog walker for Tuesdays", "mobility"),
        ("when to use async in Python", "timetable"),
        ("每天的饮食怎么搭配", "timetable"),
        ("a bitwise operation in C", "health"),
        ("医保卡丢了，去哪儿补办？要带什么？", "travel"),
        ("How do I free up storage on my phone?", "home"),
        # what to do before a test is no free time; a hotel (酒店) is no drink
        ("What should I do to prepare for my annual blood test on Monday?", "free_time"),
        ("帮我订一家巴黎的酒店", "food"),
        # the kind of restaurant to name is no outing to plan
        ("同事周五要请我吃饭，让我推荐餐厅类型，我该怎么说比较好？", "outings"),
        # code ported is no embryo transferred; a translator's CAT tool is no cat; a way to
        # get to a level is no journey
        ("把这个库移植到 ARM 上", "pregnancy"),
        ("怎么把 Excel 里的术语表批量导入到我的 CAT 工具里？", "pets"),
        (
            "What's a realistic way to get to conversational Spanish in about three months?",
            "transport",
        ),
        # a food bank is no bank; legs are no livestock; an engine is no bouldering grade
        ("我每周二和周四上午在食物银行帮忙分拣罐头", "money"),
        ("Our office is on the 5th floor with no lift, great for the calves", "pets"),
        ("My V8 engine needs a service", "sports"),
        # words of this release's topics in their other senses
        ("实验室要再订一批试管", "pregnancy"),
        ("爸爸肾移植后要注意什么", "pregnancy"),
        ("Where can I watch the final online?", "place"),
        ("SQL query to find the restaurants with the best ratings", "outings"),
        ("I sent V2 of the proposal", "sports"),
        ("My lunchbox for work", "child"),
        ("Hand me the flathead screwdriver", "fishing"),
        ("the tides of history", "boats"),
        ("backface culling in OpenGL", "photography"),
        ("We ship 200 units a week", "food"),
        ("ankle boots for autumn", "mobility"),
        ("three nights on the island", "timetable"),
        ("有没有保本的理财产品", "business"),
        ("我的手机充满电要多久", "vehicles"),
        ("会议中途休息十分钟", "travel"),
        ("My first port of call is the docs", "travel"),
        ("the code is getting messier", "outings"),
    ],
)
def test_ordinary_phrases_do_not_take_a_topic_by_one_word(
    policy: Policy, text: str, not_topic: str
) -> None:
    assert not_topic not in topics_of(text, policy)


def test_scenarios_run_at_one_point_of_the_calendar() -> None:
    """A goal or plan ends with the month or year it names, so the scenarios run at a fixed
    day of the year, never before the real time (Redis expires keys by the real clock): a
    run gives the same result whatever day it falls on."""
    from datetime import UTC, datetime, timedelta

    from gateway.memory.scenario_eval import anchor

    for now in (
        datetime(2026, 12, 3, 8, tzinfo=UTC),
        datetime(2027, 1, 1, tzinfo=UTC),
        datetime(2026, 6, 15, 12, tzinfo=UTC),
        datetime(2026, 6, 15, 12, 1, tzinfo=UTC),
    ):
        at = anchor(now)
        assert (at.month, at.day, at.hour, at.minute) == (6, 15, 12, 0)
        assert now <= at < now + timedelta(days=366)


def test_cancelling_a_membership_says_a_change(policy: Policy) -> None:
    """A cancelled gym or subscription ends the older habit it was about; a cancelled
    meeting changes nothing about the user."""
    from gateway.memory.policy import says_change

    assert says_change("cancelled Equinox, working out at home now with dumbbells", policy)
    assert says_change("cancelled my gym membership, running outside instead", policy)
    assert not says_change("I cancelled the meeting with the vendor", policy)


def test_a_rota_redone_or_a_device_swapped_says_a_change(policy: Policy) -> None:
    from gateway.memory.policy import says_change

    assert says_change(
        "Rota's been redone - I'm on long days Thursday to Saturday from here on", policy
    )
    assert says_change("把 SumUp 换掉了，现在用 Square 的读卡器", policy)
    assert not says_change("My rota is three nights on, four off", policy)
    assert says_change("Consultant's taken Dad off the haloperidol completely", policy)
    assert says_change(
        "Got a Hakko FX-888D for my birthday, the Antex has gone in the drawer", policy
    )
    assert not says_change("Took Monday off work", policy)
    assert not says_change("Got changed after the gym", policy)
    assert not says_change("Dad's gone into the loft to find the decorations", policy)


def test_a_document_the_user_writes_in_latex_is_no_answer_format(policy: Policy) -> None:
    """Only a wish for answers in LaTeX is: the tool of the user's own thesis shapes no
    answer, and as a standing memory it would reach every request."""
    from gateway.memory.policy import derive_slot

    assert derive_slot("I'm typesetting my PhD thesis in LaTeX", policy, "profile") is None
    assert derive_slot("毕业论文一直用 LaTeX 排版", policy, "profile") is None
    assert derive_slot("Write the formulas in LaTeX please", policy, "preference") == (
        "output_format"
    )
    assert derive_slot("公式都用 LaTeX 写", policy, "preference") == "output_format"


def test_a_fan_who_never_misses_a_test_match_states_no_rule_for_answers(
    policy: Policy,
) -> None:
    from gateway.memory.policy import derive_slot

    def applies(text: str) -> str:
        return derive_applies(text, policy, "preference", derive_slot(text, policy), "global")

    assert applies("Big Black Caps fan, I never miss a test match") == "relevant"
    assert applies("Never skip the tests when you write a function") == "always"


def test_new_words_stay_out_of_other_senses(policy: Policy) -> None:
    """What the new rules must not read: a tool named beside a move of home, a child's age
    in other shapes, owning things, being summoned, fixing code, other hunts, and words of
    other trades."""
    from gateway.memory.policy import derive_slot

    assert derive_slot("I moved to Seattle to work at AWS", policy, "profile") == "location"
    assert derive_slot("Moved to Leeds with Jasmine last year", policy, "profile") == "location"
    for text in (
        "Python is one of my favourite languages",
        "March is one of the busiest months for us",
        "Windows (10) keeps crashing",
    ):
        assert "child" not in topics_of(text, policy), text
    always = derive_applies(
        "Always write tests matching the spec",
        policy,
        "preference",
        derive_slot("Always write tests matching the spec", policy),
        "global",
    )
    assert always == "always"
    assert derive_slot("I own a studio apartment in Leeds", policy, "profile") is None
    assert derive_slot("I own a cafe racer", policy, "profile") is None
    for text in ("同事喊我加班", "你叫我干嘛？", "孩子喊我抱抱"):
        assert derive_slot(text, policy, "preference") is None, text
    for text in ("这段代码哪里可以修改一下？", "Where do I get the bug fixed in this repo?"):
        assert "place" not in topics_of(text, policy), text
    assert "hunting" in topics_of("Going hunting for elk next week", policy)
    assert "hunting" not in topics_of("threat hunting playbook", policy)
    assert "hunting" not in topics_of("still hunting for a cheap flight to Rome", policy)
    for text, topic in (
        ("plough through 200 emails", "vehicles"),
        ("孩子暂时寄养在外婆家", "pets"),
        ("doggy daycare near me", "child"),
        ("closed-loop PID system", "health"),
        ("End of season sale at Zara", "sports"),
        ("hurling all night", "sports"),
    ):
        assert topic not in topics_of(text, policy), text


def test_a_name_both_write_alike_is_a_particular_thing() -> None:
    from gateway.memory.policy import shares_a_name, without_project

    assert shares_a_name("记账已经换成SQLite了，Excel太卡了", "账都记在Excel表里头")
    assert shares_a_name("Rewrote it in Astro. Gatsby is gone.", "It is built with Gatsby.")
    # a capital that opens a sentence, in either language, names nothing
    assert not shares_a_name("We moved to Vite.", "We use tabs.")
    assert not shares_a_name("换成了。Notes 不用了", "上周定的。Notes 先放着")
    # nor does the project's own name, however its id is written
    assert not shares_a_name(
        without_project("Kestrel moved its CI over to Buildkite", "kestrel-web"),
        without_project("Kestrel's docs are built with Sphinx", "kestrel-web"),
    )


def test_a_projects_data_kept_in_a_file_is_its_database(policy: Policy) -> None:
    """A later database then ends it as any other value of a one-valued slot."""
    from gateway.memory.policy import derive_slot

    kept = "medtracker keeps everything in a doses.csv file for now"
    assert derive_slot(kept, policy, "project") == "database"
    assert derive_slot("medtracker 已经改成 SQLite 了，那个 CSV 文件删掉了", policy, "project") == (
        "database"
    )
    assert derive_slot("Export the monthly report as a CSV file", policy, "project") is None


async def test_a_request_about_someone_close_meets_a_memory_about_someone_named(
    service: Memories, policy: Policy
) -> None:
    """A present for "my boyfriend" and what the user said of Tomás: the memories never
    said who Tomás is, so the likelihood decides at its own bar (SomeoneCloseSpec); the
    same memory does not reach a request about no one close. (The sentence this test held
    before the fit gained its directions, "Tomás collects old jazz records and restores
    record players", is 0.23 likely now, below the bar: a memory lost, as the README says.)"""
    ident = Identity(f"close{time.time_ns()}", "ines", None, "on", "tr_close")
    tomas = await service.create(
        ident, content="Tomás has got really into film photography lately", type="profile"
    )
    recaller = Recaller(service.store, service.embedder, policy, service.clock)
    gift = await recaller.recall(ident, "我男朋友下个月生日，送他什么礼物好？")
    (cand,) = [c for c in gift.candidates if c.memory.id == tomas.memory.id]
    close = policy.recall.relevance.fitted.someone_close
    assert close.at is not None and cand.fitted is not None
    assert close.at <= cand.fitted < policy.recall.relevance.fitted.add_at, cand.fitted
    assert [m.id for m in gift.injected] == [tomas.memory.id]
    assert "partner" in gift.query_topics
    own = await recaller.recall(ident, "我下个月生日，想给自己买个礼物，有什么推荐？")
    assert tomas.memory.id not in [m.id for m in own.injected]
