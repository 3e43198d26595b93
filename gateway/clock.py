"""The one source of time: the gateway reads "now" only from the clock it is given.

Evaluation replays scenarios with simulated time, so nothing else calls ``datetime.now()``.
"""

from __future__ import annotations

import threading
import time
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Current time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, for measuring durations."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.perf_counter()


class ManualClock:
    """A clock that moves only when told to (tests and simulated-time evaluation)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        return time.perf_counter()

    def advance(self, delta: timedelta) -> None:
        with self._lock:
            self._now += delta

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = when


# The simulated "now" of one request (``memgate eval``), set only for a request whose caller
# holds the admin token (``access.authorize``); every other request sees its clock's time.
_EVAL_NOW: ContextVar[datetime | None] = ContextVar("memgate_eval_now", default=None)


class EvalAwareClock:
    """The gateway's clock: ``base``'s time, or the simulated time set for the current
    request (a context variable, so it reaches that request's background writes and nothing
    else)."""

    def __init__(self, base: Clock) -> None:
        self.base = base

    def now(self) -> datetime:
        simulated = _EVAL_NOW.get()
        return simulated if simulated is not None else self.base.now()

    def monotonic(self) -> float:
        return self.base.monotonic()


def set_eval_now(when: datetime) -> None:
    """Simulated time for the rest of the current request (its context)."""
    _EVAL_NOW.set(when.astimezone(UTC))


def to_iso(when: datetime | None) -> str | None:
    if when is None:
        return None
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def from_iso(text: str) -> datetime:
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)
