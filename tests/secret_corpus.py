"""A bilingual corpus of sensitive and ordinary texts, shared by unit and integration tests.

SECRETS must scan as ``high``, CONTACTS as ``medium`` and BENIGN as ``low``: misses and false
positives both count. Everything is fake. Provider-shaped keys are assembled at import time
from pieces (and pseudo-random bodies) so that this file itself does not trip secret
scanners or push protection; identity and card numbers are fake but checksum-valid.
"""

from __future__ import annotations

import base64
import json
import random

__all__ = ["BENIGN", "CONTACTS", "NEAR_MISSES", "SECRETS", "SECRET_VALUES"]

_rng = random.Random(20240517)
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _body(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _b64url(obj: dict[str, object]) -> str:
    raw = json.dumps(obj, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


_UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

OPENAI_LEGACY = "sk-" + _body(20) + "T3Blbk" + "FJ" + _body(20)
OPENAI_PROJECT = "sk-" + "proj-" + _body(40, _ALNUM + "-_") + "T3Blbk" + "FJ" + _body(40)
OPENAI_COMPATIBLE = "sk-" + _body(32, "0123456789abcdef")
ANTHROPIC = "sk-" + "ant-api03-" + _body(93, _ALNUM + "-_") + "AA"
AWS_KEY_ID = "AK" + "IA" + _body(16, _UPPER_DIGITS)
AWS_SECRET = _body(40, _ALNUM + "/+")
GITHUB_CLASSIC = "gh" + "p_" + _body(36)
GITHUB_FINE = "github" + "_pat_" + _body(22) + "_" + _body(59)
SLACK = "xo" + "xb-" + "1234567890" + "-" + "9876543210123" + "-" + _body(24).lower()
STRIPE = "sk" + "_live_" + _body(24)
GOOGLE = "AI" + "za" + _body(35, _ALNUM + "-_")
HUGGINGFACE = "hf" + "_" + _body(34)
ALIBABA = "LT" + "AI" + _body(20)
TENCENT = "AK" + "ID" + _body(32)
BEARER = _body(48, _ALNUM + "._-")
JWT = (
    _b64url({"alg": "HS256", "typ": "JWT"})
    + "."
    + _b64url({"sub": "1234567890", "name": "Li Lei", "iat": 1716000000})
    + "."
    + _body(43, _ALNUM + "-_")
)
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE"
    + " KEY-----\n"
    + "\n".join(_body(64, _ALNUM + "+/") for _ in range(4))
    + "\n-----END RSA PRIVATE"
    + " KEY-----"
)
OPENSSH_KEY = (
    "-----BEGIN OPENSSH PRIVATE"
    + " KEY-----\n"
    + _body(70, _ALNUM + "+/")
    + "\n-----END OPENSSH PRIVATE"
    + " KEY-----"
)
UNKNOWN_TOKEN = _body(40)
DB_PASSWORD = "s3cr3t" + "P4ss"

# Fake identity documents with valid checksums.
PRC_ID = "110105199003071239"
PRC_ID_X = "11010519491231002X"
PRC_ID_2 = "440304199302287890"
CARD_VISA = "4111 1111 1111 1111"
CARD_UNIONPAY = "6222021234567890128"
CARD_UNIONPAY_16 = "6217 0000 1234 5670"
CARD_AMEX = "378282246310005"
CARD_MASTERCARD = "5289-3300-0012-3457"

# (text, secret value): the value must disappear when the text is redacted.
SECRET_VALUES: list[tuple[str, str]] = [
    # English
    (f"Here is my OpenAI key {OPENAI_LEGACY}, please keep it.", OPENAI_LEGACY),
    (f"export OPENAI_API_KEY={OPENAI_PROJECT}", OPENAI_PROJECT),
    (f"the DeepSeek key is {OPENAI_COMPATIBLE}", OPENAI_COMPATIBLE),
    (f"my anthropic key is {ANTHROPIC}", ANTHROPIC),
    (f"AWS access key id {AWS_KEY_ID}", AWS_KEY_ID),
    (f'aws_secret_access_key = "{AWS_SECRET}"', AWS_SECRET),
    (f"use this GitHub token {GITHUB_CLASSIC} for CI", GITHUB_CLASSIC),
    (f"fine-grained token: {GITHUB_FINE}", GITHUB_FINE),
    (f"slack bot token {SLACK}", SLACK),
    (f"Stripe: {STRIPE}", STRIPE),
    (f"maps key {GOOGLE}", GOOGLE),
    (f"HF token {HUGGINGFACE}", HUGGINGFACE),
    (f"Authorization: Bearer {BEARER}", BEARER),
    (f"the session JWT is {JWT}", JWT),
    (f"Here is my deploy key:\n{PRIVATE_KEY}\nthanks", PRIVATE_KEY),
    (f"the key for our internal service is {UNKNOWN_TOKEN}", UNKNOWN_TOKEN),
    ("password: hunter2", "hunter2"),
    ("my password is Tr0ub4dor&3", "Tr0ub4dor&3"),
    ("The wifi password is sunflower88", "sunflower88"),
    (f"postgres://admin:{DB_PASSWORD}@db.example.com:5432/app", DB_PASSWORD),
    ("pin code is 4821", "4821"),
    (f"My ID number is {PRC_ID}", PRC_ID),
    (f"card: {CARD_VISA}, exp 12/29", CARD_VISA),
    (f"Amex {CARD_AMEX}", CARD_AMEX),
    ("passport number: E12345678", "E12345678"),
    ("My SSN is 078-05-1120", "078-05-1120"),
    # Chinese
    ("我的密码是abc12345", "abc12345"),
    ("密码：Passw0rd!", "Passw0rd!"),
    ("wifi密码是 sunflower88，别告诉别人", "sunflower88"),
    ("密码改成了Qwer1234", "Qwer1234"),
    ("支付宝口令是芝麻开门", "芝麻开门"),
    ("登录口令：hello123", "hello123"),
    (f"我的身份证号是{PRC_ID_2}", PRC_ID_2),
    (f"身份证：{PRC_ID_X}", PRC_ID_X),
    (f"银行卡号 {CARD_UNIONPAY}", CARD_UNIONPAY),
    (f"工资卡是{CARD_UNIONPAY_16}", CARD_UNIONPAY_16),
    (f"信用卡 {CARD_MASTERCARD}", CARD_MASTERCARD),
    ("我的护照号码是EA1234567", "EA1234567"),
    (f"这是我的API密钥：{OPENAI_PROJECT}", OPENAI_PROJECT),
    (f"阿里云 AccessKey ID 是 {ALIBABA}", ALIBABA),
    (f"腾讯云的 SecretId：{TENCENT}", TENCENT),
    ("令牌：a8F3kLm9Qz2Xw7Rt", "a8F3kLm9Qz2Xw7Rt"),
    (f"我的 token 是 {JWT}", JWT),
    (f"服务器私钥如下：\n{OPENSSH_KEY}", OPENSSH_KEY),
    (f"这是内部服务的密钥 {UNKNOWN_TOKEN} 记一下", UNKNOWN_TOKEN),
]
SECRETS: list[str] = [text for text, _ in SECRET_VALUES]

CONTACTS: list[str] = [
    "我的手机号是13812345678",
    "手机：+86 139 1234 5678",
    "call me at +1 415 555 2671",
    "reach me at (415) 555-2671",
    "office phone 010-62345678",
    "my email is li.lei@example.com",
    "邮箱：zhangsan@example.cn，有事发邮件",
]

BENIGN: list[str] = [
    # English
    "I prefer concise answers with code examples.",
    "This project uses FastAPI and PostgreSQL 16.",
    "Use snake_case_names for Python functions and CamelCase for classes.",
    "I use OAuth2PasswordBearer with tokenUrl='token' in FastAPI.",
    "Call get_user_by_id_and_email_address_v2 from utils.",
    "The meeting is at 10:30 on 2024-05-17, room 1203.",
    "Our revenue grew 12.5% to 3,450,000 USD in Q3 2023.",
    "Order #20240517123456 shipped yesterday.",
    "Please reset my password, I forgot it.",
    "The password must be at least 12 characters.",
    "The password is wrong, what should I do?",
    "Password: at least 12 characters and one digit.",
    "My password manager is 1Password.",
    "What is the secret to good sourdough?",
    "The secret: practice every day.",
    "My token expired yesterday.",
    "The API key is stored in the environment variable OPENAI_API_KEY.",
    "Use the token bucket algorithm for rate limiting.",
    "Set max_tokens=4096 and temperature=0.7 in the config.",
    "Run pip install -r requirements.txt and then pytest -q.",
    "git checkout -b feature/add-user-auth-2024",
    "The model gpt-4o-mini-2024-07-18 is cheaper than claude-3-5-sonnet-20241022.",
    "Qwen2.5-72B-Instruct-GPTQ-Int4 runs on two GPUs.",
    "Try Qwen2-VL-7B-Instruct-AWQ or DeepSeek-R1-Distill-Qwen-32B next.",
    "Install the win_amd64-cp311-cp311 wheel, not iPhone15ProMax256GB stuff.",
    "Python 3.11.7, numpy 2.4.6 and redis 8.1.0 are pinned.",
    "Docs are at https://docs.litestar.dev/2/usage/routing/overview.html",
    "Redis listens on localhost:6379 and the API on port 8000.",
    "I run 5 km every morning at 6:30 and weigh 72 kg.",
    "ISBN 978-7-111-54742-6 is the Chinese edition.",
    "The invoice number is INV-2024-000123.",
    "Meeting ID: 845 2931 0072",
    "I scored 98 on the exam and 1450 on the SAT.",
    "Tokyo is UTC+9; I am on PST.",
    "HTTP2ConnectionPoolManager99 is a made-up class name.",
    "The /api/v1/users/12345/orders/67890/items endpoint is slow.",
    "Let's pretend the budget is 1,000,000 yuan.",
    "1+1=2 and 2*3=6",
    "api_key = os.environ.get('OPENAI_API_KEY')",
    "password: ${DB_PASSWORD}",
    "token = <your-token-here>",
    "secrets = SecretsCollection()",
    "request id 123e4567-e89b-12d3-a456-426614174000 failed",
    "Rename ModelForSequenceClassification2 to SomeVeryLongClassName2Factory.",
    "Build for x86_64-linux-gnu-gcc-12 on Ubuntu 22.04.",
    # Chinese
    "我喜欢简洁的回答，最好带代码示例。",
    "项目用 FastAPI 和 PostgreSQL，部署在 Kubernetes 上。",
    "我的密码忘记了，怎么重置？",
    "密码是多少位比较安全？",
    "密码是对的，但登录不上。",
    "请问密码学和信息安全有什么区别？",
    "口令红包怎么玩？",
    "令牌桶算法用来限流。",
    "会议定在2024年5月17日上午10点，在3号会议室。",
    "我今年28岁，在杭州做后端开发。",
    "这个函数叫 get_user_by_id，返回用户对象。",
    "订单号 20240517123456 已发货",
    "我跑步 5 公里用了 28 分钟。",
    "这个问题的答案是42。",
    "我用的是 iPhone 15，系统 iOS 17.4。",
    "身份证丢了怎么补办？",
    "学号 2019211345，工号 10086。",
    "请把 snake_case_names 改成 camelCase。",
    "护照过期了需要续签吗？",
    "手机号换了，之前的不用了。",
    "回答用英文，这次简短一点。",
    "今年的预算是 120 万元，增长 15%。",
]

# Shaped like sensitive numbers but failing their checksum: must not be flagged as such.
NEAR_MISSES: list[str] = [
    "编号 110105199003071238",  # PRC ID shape, wrong check digit
    "number 110105199013071239",  # month 13
    "card 4111 1111 1111 1112",  # Luhn fails
    "账号 6222021234567890127",  # Luhn fails
    "reference 1234567890123456",  # not a card prefix
]
