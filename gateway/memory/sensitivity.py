"""Sensitivity scanning: find secrets, identity numbers and contact details in text.

The detectors are declared in the policy (``sensitivity.patterns``); this module supplies the
built-in ones (adapted from detect-secrets so that upstream keeps their patterns current), the
validators that weed out look-alikes (checksums, stopwords), and the entropy fallback for
unknown key formats. It runs on every mined message, so everything expensive is prepared once
at import or on first use of a policy, and a scan never keeps or returns the matched text.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import cast

from detect_secrets.plugins import keyword as _ds_keyword
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HexHighEntropyString,
)
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from gateway.memory.policy import LEVELS, PatternSpec, Policy, level_at_least

__all__ = ["BUILTIN_DETECTORS", "VALIDATORS", "Finding", "Scan", "redact", "scan"]


@dataclass(frozen=True, slots=True)
class Finding:
    """Where something sensitive is; deliberately without the matched text."""

    kind: str
    level: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Scan:
    """The verdict on a text: its overall level and where each finding is."""

    level: str
    findings: tuple[Finding, ...]

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.kind for f in self.findings))


_LOW = Scan(level="low", findings=())

# --------------------------------------------------------------------------------------------
# Validators: a regex finds candidates, a validator rejects look-alikes.

_PRC_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_PRC_CHECK = "10X98765432"


def _digits(value: str) -> str:
    return "".join(str(int(c)) for c in value if c.isdecimal())


def _luhn(value: str, policy: Policy) -> bool:
    digits = _digits(value)
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _prc_id_checksum(value: str, policy: Policy) -> bool:
    """ISO 7064 MOD 11-2 as used by GB 11643, plus a birth date that exists."""
    if len(value) != 18:
        return False
    body = _digits(value[:17])
    if len(body) != 17:
        return False
    try:
        _dt.date(int(body[6:10]), int(body[10:12]), int(body[12:14]))
    except ValueError:
        return False
    check = _PRC_CHECK[sum(int(d) * w for d, w in zip(body, _PRC_WEIGHTS, strict=True)) % 11]
    last = value[17].upper()
    return (_digits(last) or last) == check


def _phone(value: str, policy: Policy) -> bool:
    return 7 <= len(_digits(value)) <= 15


_TRAILING = ".,;:!?)]}>\"'`。，；：！？）】」』”’"
_LEADING = "\"'`([{<“‘「『【"


def _clean(value: str) -> str:
    return value.strip().lstrip(_LEADING).rstrip(_TRAILING)


# References to a secret rather than the secret: ${DB_PASSWORD}, $TOKEN, %PASS%, <api-key>,
# {{ password }}, os.environ.get(...), and our own [REDACTED:password] (so that redacted text
# scans clean).
_PLACEHOLDER = re.compile(
    r"\$\{.*|\$[A-Z_][A-Z0-9_]*|%[A-Za-z_]+%|<[^<>]*>?|\{\{?[^{}]*\}?\}?"
    r"|[A-Za-z_][\w.]*[(\[].*|[A-Za-z_][\w.]*:[A-Za-z_]\w*|\[REDACTED:\w+\].*"
)


def _is_placeholder(value: str) -> bool:
    return _PLACEHOLDER.fullmatch(value.strip()) is not None


def _credential_value(value: str, policy: Policy) -> bool:
    """Reject talk *about* a password ("is wrong", "是多少") rather than a password."""
    if _is_placeholder(value):
        return False
    value = _clean(value)
    if len(value) < 2:
        return False
    folded = value.casefold()
    stop = policy.sensitivity.stopwords
    if folded in stop:
        return False
    if not value[0].isascii():
        return not any(not w.isascii() and folded.startswith(w) for w in stop)
    return len(value) >= 3


def _code_credential(value: str, policy: Policy) -> bool:
    """Machine-made values only: keeps "the secret is patience" out."""
    if _is_placeholder(value):
        return False
    value = _clean(value)
    if len(value) < 8 or not value.isascii() or value.casefold() in policy.sensitivity.stopwords:
        return False
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    mixed_case = any(c.islower() for c in value) and any(c.isupper() for c in value)
    return has_digit or has_symbol or mixed_case


def _jwt(value: str, policy: Policy) -> bool:
    return JwtTokenDetector.is_formally_valid(value)


Validator = Callable[[str, Policy], bool]

VALIDATORS: dict[str, Validator] = {
    "luhn": _luhn,
    "prc_id_checksum": _prc_id_checksum,
    "phone": _phone,
    "credential_value": _credential_value,
    "code_credential": _code_credential,
    "jwt": _jwt,
}

# --------------------------------------------------------------------------------------------
# Built-in detectors, adapted from detect-secrets. We use their compiled ``denylist`` regexes
# directly (finditer gives positions; analyze_line only gives values and consults global
# settings) and never construct plugins per call.

Span = tuple[int, int]
_Finder = Callable[[str], Iterator[Span]]


def _match_span(m: re.Match[str]) -> Span:
    # Upstream capture groups are sometimes the secret (aws, basic_auth) and sometimes just a
    # prefix (github's "ghp"): take the longest group only when it is long enough to be one.
    spans = [m.span(i) for i in range(1, m.re.groups + 1) if m.group(i)]
    best = max(spans, key=lambda span: span[1] - span[0], default=None)
    if best is not None and best[1] - best[0] >= 8:
        return best
    return m.span()


def _denylist_finder(detector: type[RegexBasedDetector]) -> _Finder:
    # ``denylist`` is a class attribute upstream (declared as an abstract property).
    patterns = tuple(cast("Iterable[re.Pattern[str]]", detector.denylist))

    def find(text: str) -> Iterator[Span]:
        for regex in patterns:
            for m in regex.finditer(text):
                yield _match_span(m)

    return find


_JWT_TAIL = re.compile(r"[A-Za-z0-9_\-+/=]*")


def _jwt_finder(text: str) -> Iterator[Span]:
    # detect-secrets' JWT regex stops lazily after the payload; extend over the signature so
    # that redaction removes the whole token.
    for regex in JwtTokenDetector.denylist:
        for m in regex.finditer(text):
            token = m.group().rstrip(".")
            if JwtTokenDetector.is_formally_valid(token):
                tail = _JWT_TAIL.match(text, m.end())
                yield m.start(), tail.end() if tail else m.end()


_KEYWORD_REGEXES: tuple[tuple[re.Pattern[str], int], ...] = tuple(
    dict.fromkeys(
        [
            *_ds_keyword.CONFIG_DENYLIST_REGEX_TO_GROUP.items(),
            *_ds_keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP.items(),
        ]
    )
)
# Every upstream keyword (api_key, passwd, secret, contraseña, ...) contains one of these;
# a substring test is far cheaper than the upstream alternation.
_KEYWORD_HINTS = ("key", "pass", "pwd", "secret", "contras")
assert all(any(hint in word for hint in _KEYWORD_HINTS) for word in _ds_keyword.DENYLIST), (
    "detect-secrets keyword list changed; update _KEYWORD_HINTS"
)
_VALUE_END = re.compile(r"[\s，。；、！？,;!?\"'`]")


_KEYWORD_ANCHORED = tuple(
    (regex, group)
    for regex, group in _KEYWORD_REGEXES
    if regex.pattern.startswith(_ds_keyword.DENYLIST_REGEX)
)
_KEYWORD_FREE = tuple(item for item in _KEYWORD_REGEXES if item not in _KEYWORD_ANCHORED)
_LONGEST_KEYWORD = 16  # "database_?pass" and friends: a match starts this close to a hint


def _keyword_finder(text: str) -> Iterator[Span]:
    # The upstream regexes are slow to *search* (a case-insensitive alternation tried at every
    # position), so anchored ones are only *matched* just before occurrences of a hint.
    lowered = text.lower()
    starts: set[int] = set()
    for hint in _KEYWORD_HINTS:
        i = lowered.find(hint)
        while i >= 0:
            starts.update(range(max(0, i - _LONGEST_KEYWORD), i + 1))
            i = lowered.find(hint, i + 1)
    if not starts:
        return
    spans: list[tuple[int, int]] = []
    for regex, group in _KEYWORD_ANCHORED:
        for pos in sorted(starts):
            m = regex.match(text, pos)
            if m is not None:
                spans.append(m.span(group))
    for regex, group in _KEYWORD_FREE:
        spans.extend(m.span(group) for m in regex.finditer(text))
    for start, end in dict.fromkeys(spans):
        if start < 0:
            continue
        # The upstream value runs to the end of the line; a secret is one token.
        stop = _VALUE_END.search(text, start, end)
        yield start, stop.start() if stop else end


BUILTIN_DETECTORS: dict[str, _Finder] = {
    "aws": _denylist_finder(AWSKeyDetector),
    "azure_storage": _denylist_finder(AzureStorageKeyDetector),
    "basic_auth": _denylist_finder(BasicAuthDetector),
    "discord": _denylist_finder(DiscordBotTokenDetector),
    "github": _denylist_finder(GitHubTokenDetector),
    "gitlab": _denylist_finder(GitLabTokenDetector),
    "jwt": _jwt_finder,
    "keyword": _keyword_finder,
    "mailchimp": _denylist_finder(MailchimpDetector),
    "npm": _denylist_finder(NpmDetector),
    "openai": _denylist_finder(OpenAIDetector),
    "private_key": _denylist_finder(PrivateKeyDetector),
    "pypi": _denylist_finder(PypiTokenDetector),
    "sendgrid": _denylist_finder(SendGridDetector),
    "slack": _denylist_finder(SlackDetector),
    "square_oauth": _denylist_finder(SquareOAuthDetector),
    "stripe": _denylist_finder(StripeDetector),
    "telegram": _denylist_finder(TelegramBotTokenDetector),
    "twilio": _denylist_finder(TwilioKeyDetector),
}

# --------------------------------------------------------------------------------------------
# Entropy fallback, using detect-secrets' entropy helpers (one instance each, reused).

_B64 = Base64HighEntropyString()
_HEX = HexHighEntropyString()
_TOKEN = re.compile(r"[A-Za-z0-9+/=_\-]+")
_HEX_TOKEN = re.compile(r"(?<![A-Za-z0-9])[0-9a-fA-F]+(?![A-Za-z0-9])")


# Word-like runs ("Password", "user"), whole numbers between separators ("-2024") and the
# separators themselves: what identifiers and version strings are made of.
_WORDLIKE = re.compile(r"[A-Z]?[a-z]{3,}|(?<![A-Za-z0-9])[0-9]+(?![A-Za-z0-9])|[+/=_\-]")


def _wordlike_fraction(token: str) -> float:
    """Share of the token that reads like an identifier; random keys score low."""
    return sum(m.end() - m.start() for m in _WORDLIKE.finditer(token)) / len(token)


_URL_PATH = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#]*([^\s?#]*)")


def _url_paths(text: str) -> list[Span]:
    if "://" not in text:
        return []
    return [m.span(1) for m in _URL_PATH.finditer(text) if m.end(1) > m.start(1)]


def _entropy_spans(text: str, policy: Policy) -> Iterator[Span]:
    spec = policy.sensitivity.entropy
    shortest = min(spec.min_length, spec.hex_min_length)
    paths = _url_paths(text) if spec.skip_url_paths else []
    for m in _TOKEN.finditer(text):
        token = m.group()
        if len(token) < shortest:
            continue
        if any(a <= m.start() and m.end() <= b for a, b in paths):
            continue
        if not any(c.isdigit() for c in token) or not any(c.isalpha() for c in token):
            continue
        if any(regex.fullmatch(token) for regex in spec.ignore_regexes):
            continue
        if (
            len(token) >= spec.hex_min_length
            and _HEX_TOKEN.fullmatch(token)
            and _HEX.calculate_shannon_entropy(token) >= spec.hex_threshold
        ):
            yield m.span()
        elif (
            len(token) >= spec.min_length
            and _B64.calculate_shannon_entropy(token) >= spec.threshold
            and _wordlike_fraction(token) <= spec.max_wordlike_fraction
        ):
            yield m.span()


# --------------------------------------------------------------------------------------------
# Scanning


def _pattern_spans(pat: PatternSpec, text: str) -> Iterator[Span]:
    if pat.detector is not None:
        yield from BUILTIN_DETECTORS[pat.detector](text)
        return
    regex = pat.compiled
    assert regex is not None  # the loader guarantees regex xor detector
    for m in regex.finditer(text):
        span = m.span(pat.group)
        if span[0] >= 0:
            yield span


_DIGIT_RUN = re.compile(r"\d+")


def _raw_findings(text: str, policy: Policy) -> list[Finding]:
    found: list[Finding] = []
    lowered = text.lower()
    longest_digits = max((m.end() - m.start() for m in _DIGIT_RUN.finditer(text)), default=0)
    for pat in policy.sensitivity.patterns:
        # Cheap pre-checks declared in the policy keep a scan fast on ordinary messages.
        if pat.hints and not any(h in lowered for h in pat.hints):
            continue
        if longest_digits < pat.requires_digits:
            continue
        validate = VALIDATORS[pat.validator] if pat.validator else None
        for start, end in _pattern_spans(pat, text):
            if end <= start:
                continue
            if validate is not None and not validate(text[start:end], policy):
                continue
            found.append(Finding(pat.name, pat.level, start, end))
    return found


def _covered(start: int, end: int, findings: Iterable[Finding]) -> bool:
    return any(f.start < end and start < f.end for f in findings)


def _resolve(found: list[Finding]) -> tuple[Finding, ...]:
    """Drop findings inside an earlier, at least as sensitive one; keep policy order for ties."""
    kept: list[Finding] = []
    order = {id(f): i for i, f in enumerate(found)}
    for f in sorted(found, key=lambda f: (-LEVELS.index(f.level), order[id(f)])):
        if any(
            k.start <= f.start and f.end <= k.end and level_at_least(k.level, f.level) for k in kept
        ):
            continue
        kept.append(f)
    return tuple(sorted(kept, key=lambda f: (f.start, f.end, f.kind)))


# Full-width letters and digits (ＡＢＣ１２３, typed with a Chinese IME in full-width mode) fold
# to ASCII one character for one, so positions in the folded text are positions in the original.
# Punctuation is left alone: the patterns already accept both widths where it matters.
_FOLD_WIDTH = {
    **{0xFF10 + i: 0x30 + i for i in range(10)},
    **{0xFF21 + i: 0x41 + i for i in range(26)},
    **{0xFF41 + i: 0x61 + i for i in range(26)},
}


def scan(text: str, policy: Policy) -> Scan:
    """Classify ``text`` as low, medium or high sensitivity and say where."""
    if not text:
        return _LOW
    text = text.translate(_FOLD_WIDTH)
    found = _raw_findings(text, policy)
    entropy = policy.sensitivity.entropy
    if entropy.enabled:
        for start, end in _entropy_spans(text, policy):
            if not _covered(start, end, found):
                found.append(Finding("high_entropy", entropy.level, start, end))
    if not found:
        return _LOW
    findings = _resolve(found)
    level = max((f.level for f in findings), key=LEVELS.index)
    return Scan(level=level, findings=findings)


def redact(
    text: str,
    policy: Policy,
    min_level: str = "high",
    replacement: str | None = None,
    *,
    scanned: Scan | None = None,
) -> str:
    """Replace everything at or above ``min_level`` with ``[REDACTED:<kind>]`` (or with
    ``replacement``: a search query wants the secret gone, not a word naming it).
    ``scanned``: ``scan(text, policy)``, when the caller already has it for this very text."""
    if min_level not in LEVELS:
        raise ValueError(f"unknown sensitivity level {min_level!r}")
    found = scan(text, policy) if scanned is None else scanned
    hits = [f for f in found.findings if level_at_least(f.level, min_level)]
    if not hits:
        return text
    # Merge overlapping spans; the most sensitive (then earliest) finding names the merge.
    merged: list[tuple[int, int, Finding]] = []
    for f in sorted(hits, key=lambda f: (f.start, -f.end)):
        if merged and f.start < merged[-1][1]:
            start, end, label = merged[-1]
            if LEVELS.index(f.level) > LEVELS.index(label.level):
                label = f
            merged[-1] = (start, max(end, f.end), label)
        else:
            merged.append((f.start, f.end, f))
    out: list[str] = []
    pos = 0
    for start, end, label in merged:
        out.append(text[pos:start])
        out.append(f"[REDACTED:{label.kind}]" if replacement is None else replacement)
        pos = end
    out.append(text[pos:])
    return "".join(out)
