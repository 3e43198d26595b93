"""Sensitivity scanning: bilingual secrets are caught, ordinary text is left alone."""

from __future__ import annotations

import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.memory.policy import Policy, load_policy
from gateway.memory.sensitivity import Finding, Scan, redact, scan
from tests.secret_corpus import BENIGN, CONTACTS, NEAR_MISSES, SECRET_VALUES, SECRETS

pytestmark = pytest.mark.unit  # no Redis, servers or browsers

POLICY = load_policy()


@pytest.fixture(scope="module")
def policy() -> Policy:
    return POLICY


# --- the corpus -----------------------------------------------------------------------------


@pytest.mark.parametrize("text", SECRETS)
def test_secrets_are_high(policy: Policy, text: str) -> None:
    result = scan(text, policy)
    assert result.level == "high", result


@pytest.mark.parametrize(("text", "secret"), SECRET_VALUES)
def test_redaction_removes_the_secret(policy: Policy, text: str, secret: str) -> None:
    redacted = redact(text, policy)
    assert secret not in redacted
    assert "[REDACTED:" in redacted
    # Whatever is left scans clean: nothing half-redacted remains.
    assert scan(redacted, policy).level != "high", redacted


@pytest.mark.parametrize("text", CONTACTS)
def test_contact_details_are_medium(policy: Policy, text: str) -> None:
    assert scan(text, policy).level == "medium"
    assert redact(text, policy) == text  # default redaction only removes high
    assert scan(redact(text, policy, min_level="medium"), policy).level == "low"


@pytest.mark.parametrize("text", BENIGN)
def test_ordinary_text_is_low(policy: Policy, text: str) -> None:
    result = scan(text, policy)
    assert result == Scan(level="low", findings=()), [
        (f, text[f.start : f.end]) for f in result.findings
    ]
    assert redact(text, policy, min_level="low") == text


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_checksums_reject_look_alikes(policy: Policy, text: str) -> None:
    assert scan(text, policy).level == "low"


# --- specific behaviour -------------------------------------------------------------------------


def test_findings_locate_but_do_not_carry_the_secret(policy: Policy) -> None:
    text, secret = SECRET_VALUES[0]
    result = scan(text, policy)
    assert [text[f.start : f.end] for f in result.findings] == [secret]
    start = text.index(secret)
    assert result.findings == (Finding("openai_key", "high", start, start + len(secret)),)
    assert secret not in repr(result)


def test_kinds_name_what_was_found(policy: Policy) -> None:
    text = "我的手机号是13812345678，密码是abc12345，邮箱 li@example.com"
    result = scan(text, policy)
    assert result.level == "high"
    assert result.kinds == ("phone", "password", "email")
    assert (
        redact(text, policy)
        == "我的手机号是13812345678，密码是[REDACTED:password]，邮箱 li@example.com"
    )
    assert redact(text, policy, min_level="medium") == (
        "我的手机号是[REDACTED:phone]，密码是[REDACTED:password]，邮箱 [REDACTED:email]"
    )


def test_private_key_block_is_removed_entirely(policy: Policy) -> None:
    text, key = next((t, s) for t, s in SECRET_VALUES if "PRIVATE" in s)
    redacted = redact(text, policy)
    assert redacted == "Here is my deploy key:\n[REDACTED:private_key]\nthanks"
    assert key.splitlines()[1] not in redacted


def test_truncated_private_key_is_removed_to_the_end(policy: Policy) -> None:
    text = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oJhoq8gl"
    assert redact(text, policy) == "[REDACTED:private_key]"


def test_overlapping_findings_merge_into_one_redaction(policy: Policy) -> None:
    text = "postgres://admin:s3cr3tP4ss@db.example.com/app"
    # The password (high) and the "e-mail" s3cr3tP4ss@db.example.com (medium) overlap.
    assert redact(text, policy) == "postgres://admin:[REDACTED:url_credentials]@db.example.com/app"
    assert redact(text, policy, min_level="medium") == (
        "postgres://admin:[REDACTED:url_credentials]/app"
    )


def test_redact_rejects_unknown_levels(policy: Policy) -> None:
    with pytest.raises(ValueError):
        redact("hello", policy, min_level="secret")


def test_empty_text(policy: Policy) -> None:
    assert scan("", policy) == Scan(level="low", findings=())
    assert redact("", policy) == ""


def test_talk_about_passwords_is_not_a_password(policy: Policy) -> None:
    for text in (
        "the password is incorrect",
        "my password is in 1Password",
        "密码是什么？",
        "密码是多少",
        "密码为空",
        "password: ${DB_PASSWORD}",
        "password = os.environ['DB_PASSWORD']",
    ):
        assert scan(text, policy).level == "low", text


def test_full_width_digits_in_an_id_are_still_an_id(policy: Policy) -> None:
    text = "身份证号：１１０１０５１９９００３０７１２３９"
    assert scan(text, policy).kinds == ("prc_id",)


# --- properties -----------------------------------------------------------------------------

_PRC_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def _prc_check(body: str) -> str:
    return "10X98765432"[sum(int(d) * w for d, w in zip(body, _PRC_WEIGHTS, strict=True)) % 11]


prc_bodies = st.builds(
    lambda region, date, seq: f"{region}{date:%Y%m%d}{seq:03d}",
    st.integers(min_value=110000, max_value=659999),
    st.dates(min_value=date(1900, 1, 1), max_value=date(2099, 12, 31)),
    st.integers(min_value=0, max_value=999),
)


@settings(max_examples=150)
@given(body=prc_bodies, wrong=st.integers(min_value=1, max_value=10))
def test_prc_ids_are_found_iff_the_checksum_holds(body: str, wrong: int) -> None:
    good = body + _prc_check(body)
    assert "prc_id" in scan(f"身份证号 {good}", POLICY).kinds
    assert "prc_id" in scan(f"my ID is {good}.", POLICY).kinds
    digits = "10X98765432"
    bad = body + digits[(digits.index(_prc_check(body)) + wrong) % 11]
    assert "prc_id" not in scan(f"编号 {bad}", POLICY).kinds


def _luhn_complete(prefix: str) -> str:
    for d in "0123456789":
        total = 0
        for i, ch in enumerate(reversed(prefix + d)):
            n = int(ch) * (2 if i % 2 else 1)
            total += n - 9 if n > 9 else n
        if total % 10 == 0:
            return prefix + d
    raise AssertionError


@settings(max_examples=150)
@given(
    start=st.sampled_from(["4", "51", "55", "62", "37", "35"]),
    rest=st.text("0123456789", min_size=12, max_size=14),
    sep=st.sampled_from(["", " ", "-"]),
)
def test_card_numbers_are_found_iff_luhn_holds(start: str, rest: str, sep: str) -> None:
    number = _luhn_complete(start + rest)
    if len(set(number)) == 1:
        return
    grouped = sep.join(number[i : i + 4] for i in range(0, len(number), 4))
    assert "bank_card" in scan(f"卡号 {grouped}", POLICY).kinds
    broken = number[:-1] + str((int(number[-1]) + 1) % 10)
    assert "bank_card" not in scan(f"card {broken}", POLICY).kinds


@settings(max_examples=100)
@given(prefix=st.text(max_size=40), suffix=st.text(max_size=40))
def test_a_secret_is_caught_and_removed_whatever_surrounds_it(prefix: str, suffix: str) -> None:
    for text, secret in SECRET_VALUES[:3]:
        wrapped = f"{prefix} {text} {suffix}"
        assert scan(wrapped, POLICY).level == "high"
        assert secret not in redact(wrapped, POLICY)


@settings(max_examples=200)
@given(text=st.text(max_size=300))
def test_scan_is_total_and_consistent(text: str) -> None:
    result = scan(text, POLICY)
    levels = {"low": 0, "medium": 1, "high": 2}
    assert levels[result.level] == max((levels[f.level] for f in result.findings), default=0)
    for f in result.findings:
        assert 0 <= f.start < f.end <= len(text)
    assert redact(redact(text, POLICY), POLICY) == redact(text, POLICY)


# --- pathological input ----------------------------------------------------------------------

PATHOLOGICAL = (
    "a" * 20_000,
    "1" * 20_000,
    "1 " * 10_000,
    "password: " * 2_000,
    "密码是" * 5_000,
    "sk-" + "a-" * 10_000,
    "eyJ" + "a." * 10_000,
    "+1 " * 7_000,
    "x@" * 10_000,
)


def test_pathological_inputs_finish() -> None:
    """Guards against catastrophic regex backtracking without timing anything: a scan that
    backtracks catastrophically on these inputs does not finish, so they are scanned in a
    child process under a deadline far beyond any normal run (a regex match holds the
    interpreter, so only a process can be given up on). Scanning speed is for benchmarks."""
    code = (
        "from gateway.memory.policy import load_policy\n"
        "from gateway.memory.sensitivity import scan\n"
        "from tests.test_sensitivity import PATHOLOGICAL\n"
        "policy = load_policy()\n"
        "print(','.join(scan(text, policy).level for text in PATHOLOGICAL))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    levels = done.stdout.strip().split(",")
    assert len(levels) == len(PATHOLOGICAL) and set(levels) <= {"low", "medium", "high"}


def test_a_typical_message_is_left_alone(policy: Policy) -> None:
    text = (
        "这周我在做计费服务，项目用 FastAPI 和 PostgreSQL 16，部署在 Kubernetes 上。"
        "I'd like short code examples, and please remember I deploy on Fridays at 5pm."
    )
    assert scan(text, policy).level == "low"
