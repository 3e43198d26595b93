"""Settings, read once from ``MEMGATE_*`` environment variables and passed in.

Tests build their own ``Settings`` instead of patching globals; every variable the gateway
reads is a field here, so the README table and the deploy files can be checked against it.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from platformdirs import user_data_dir

ENV_PREFIX = "MEMGATE_"

# Settings whose value must be one of a few words: a typo stops start-up instead of silently
# running with something else.
CHOICES: dict[str, tuple[str, ...]] = {"extractor": ("rules", "llm")}


def _default_data_dir() -> str:
    return user_data_dir("memgate", appauthor=False)


@dataclass(frozen=True)
class Settings:
    upstream_url: str = "https://api.openai.com/v1"
    """Base URL of the OpenAI-compatible upstream, including its ``/v1``."""
    upstream_api_key: str | None = None
    """When set, replaces the client's bearer key on the way upstream."""
    redis_url: str | None = None
    """External Redis 8 / Redis Stack 7.4+; unset starts the embedded Redis."""
    data_dir: str = field(default_factory=_default_data_dir)
    """Where the embedded Redis keeps its append-only file."""
    admin_token: str | None = None
    """Bearer token for the admin API and page; unset disables admin access."""
    allow_open_relay: bool = False
    """Serve on a non-loopback address with ``upstream_api_key`` set and no gateway keys:
    anyone who reaches the port spends that key. Off unless the operator says so."""
    trusted_proxies: str | None = None
    """Comma-separated addresses or networks of reverse proxies whose ``X-Forwarded-For``
    names the real peer (for the admin-token throttle); unset trusts no header."""
    log_level: str = "info"
    """debug, info, warning or error."""
    policy: str | None = None
    """Path to a policy overlay merged onto the shipped policy; unset uses the shipped one."""
    embeddings: str = "local"
    """``local`` (offline multilingual USE) or ``upstream`` (the upstream's /v1/embeddings)."""
    embeddings_model: str = "text-embedding-3-small"
    """Model name used when ``embeddings=upstream``."""
    connect_timeout: float = 10.0
    """Seconds to establish a connection to the upstream."""
    read_timeout: float = 600.0
    """Seconds to wait for a non-streamed upstream response (or its next bytes)."""
    stream_read_timeout: float = 600.0
    """Longest gap, in seconds, allowed between two chunks of a streamed response."""
    metrics_sample_seconds: float = 15.0
    """How often gauges sampled from Redis (memories by status, pending candidates) refresh."""
    extractor: str = "rules"
    """How mining finds candidates: ``rules`` (offline bilingual rules) or ``llm`` (the upstream
    answers a JSON-schema request; every candidate still passes the write gate)."""
    extractor_model: str = "gpt-4o-mini"
    """Model the LLM extractor asks when ``extractor=llm``."""
    max_body_bytes: int = 10_000_000
    """Largest chat completion or memory API request body; past it: 413."""
    passthrough_max_body_bytes: int = 536_870_912
    """Largest body streamed to the upstream on the other ``/v1`` routes (uploads); past it:
    413. ``0`` sets no limit."""
    upstream_keepalive_seconds: float = 4.0
    """How long an idle pooled upstream connection may be reused; keep it below the
    upstream's own keep-alive timeout (uvicorn closes idle connections after 5 s)."""
    client_keepalive_seconds: int = 75
    """How long ``memgate serve`` keeps an idle client connection open; keep it above the
    clients' own pool expiry (httpx and the openai SDK: 5 s), so that a client never sends a
    request on a connection the gateway is closing at that moment."""
    recall_concurrency: int = 32
    """Recalls that run at once per process; others wait their turn (within the policy's
    recall time budget) instead of all slowing each other past it. ``0``: no limit."""
    redis_max_connections: int = 256
    """Connections to Redis in the pool; a request that finds none free waits for one."""
    redis_pool_timeout: float = 5.0
    """Seconds a Redis call waits for a free pooled connection before failing."""
    redis_timeout: float = 5.0
    """Seconds to connect to Redis and to wait for one reply (a hung Redis fails the call;
    chat recall has its own, shorter budget in the policy)."""
    metrics_models: str | None = None
    """Comma-separated model names that get their own ``model`` label on token and upstream
    latency metrics; unset: the first 20 models the upstream answers with success."""
    host: str = "127.0.0.1"
    """Address ``memgate serve`` listens on (``--host`` overrides it)."""
    port: int = 8080
    """Port ``memgate serve`` listens on (``--port`` overrides it)."""
    workers: int = 1
    """Worker processes of ``memgate serve`` (``--workers`` overrides it)."""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> Settings:
        env = dict(os.environ if env is None else env)
        check_unknown(env)
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is None or raw == "":
                continue
            values[f.name] = _coerce(f.name, f.type, raw)
        values.update(overrides)
        return cls(**values)

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir).expanduser()

    @property
    def metrics_model_list(self) -> list[str] | None:
        if self.metrics_models is None:
            return None
        return [name.strip() for name in self.metrics_models.split(",") if name.strip()]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def open_relay_problem(settings: Settings, host: str, gateway_keys: int) -> str | None:
    """Why serving would spend the operator's upstream key for anyone who reaches the port
    (None when it would not, or when the operator opted in)."""
    if not settings.upstream_api_key or gateway_keys or settings.allow_open_relay:
        return None
    if is_loopback(host):
        return None
    return (
        f"memgate: refusing to serve on {host} with MEMGATE_UPSTREAM_API_KEY set and no "
        "gateway keys: anyone reaching the port would spend that key. Issue keys "
        "(memgate keys create --label <name>), bind to 127.0.0.1, or set "
        "MEMGATE_ALLOW_OPEN_RELAY=true to serve it anyway."
    )


def env_var_names() -> list[str]:
    return [ENV_PREFIX + f.name.upper() for f in fields(Settings)]


# Settings whose values never reach a terminal or a log line in full.
SECRETS = frozenset({"upstream_api_key", "admin_token"})
# Settings that are URLs: a password or user in them is masked, the rest is shown.
URLS = frozenset({"upstream_url", "redis_url"})


def check_unknown(env: dict[str, str]) -> None:
    """Stop start-up on a ``MEMGATE_*`` variable that is no setting: a misspelt name would
    otherwise be ignored silently and the gateway would run on the default it meant to change."""
    known = env_var_names()
    unknown = sorted(name for name in env if name.startswith(ENV_PREFIX) and name not in known)
    if not unknown:
        return
    name = unknown[0]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}?" if close else "see the README's configuration table."
    raise SystemExit(f"memgate: unknown setting {name}; {hint}")


def mask_url(url: str) -> str:
    """``url`` with any user and password in it replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, path = rest.partition("/")
    if "@" not in netloc:
        return url
    return f"{scheme}://***@{netloc.rsplit('@', 1)[1]}{slash}{path}"


def describe(settings: Settings, env: dict[str, str] | None = None) -> list[str]:
    """One ``NAME=value`` line per setting, secrets masked, each marked with where it came from
    (the environment or the built-in default)."""
    env = dict(os.environ if env is None else env)
    lines = []
    for f in fields(Settings):
        name = ENV_PREFIX + f.name.upper()
        value = getattr(settings, f.name)
        if value is None:
            shown = ""
        elif f.name in SECRETS:
            shown = "***"
        elif f.name in URLS:
            shown = mask_url(str(value))
        else:
            shown = str(value)
        origin = "environment" if env.get(name) else "default"
        lines.append(f"{name}={shown}  # {origin}")
    return lines


def check_choice(name: str, value: str) -> str:
    """``value`` when it is one of ``CHOICES[name]``, else a start-up error naming the variable."""
    allowed = CHOICES[name]
    if value not in allowed:
        raise SystemExit(
            f"memgate: bad value for {ENV_PREFIX}{name.upper()}: {value!r} "
            f"(use {' or '.join(repr(a) for a in allowed)})"
        )
    return value


def _coerce(name: str, type_name: Any, raw: str) -> Any:
    if name in CHOICES:
        return check_choice(name, raw.strip().lower())
    text = str(type_name)
    try:
        if text.startswith("float"):
            return float(raw)
        if text.startswith("int"):
            number = int(raw.replace("_", ""))
            if (
                number < 0
                or (name in ("port", "workers") and number < 1)
                or (name == "port" and number > 65535)
            ):
                raise ValueError(raw)
            return number
        if text.startswith("bool"):
            lowered = raw.strip().lower()
            if lowered in {"1", "true", "yes", "on"}:
                return True
            if lowered in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
    except ValueError:
        raise SystemExit(f"memgate: bad value for {ENV_PREFIX}{name.upper()}: {raw!r}") from None
    return raw
