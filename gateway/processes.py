"""Child processes of the commands that start servers (``memgate eval``, the benchmarks):
spawned in their own session, stopped in order, and never outliving their parent."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

__all__ = ["BenchError", "_Server", "http_body"]

_START_TIMEOUT = 60.0


async def http_body(scope: dict[str, Any], receive: Any, send: Any) -> bytes | None:
    """For a raw ASGI test upstream: answers the lifespan protocol, and for an HTTP request
    returns its whole body (None for anything else, which the caller ignores)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return None
    if scope["type"] != "http":
        return None
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body


class BenchError(RuntimeError):
    """A target failed to start, or failed requests during warm-up."""


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM if the bench dies without cleaning up."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class _Server:
    name: str
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    @classmethod
    def spawn(
        cls, name: str, port: int, args: list[str], env: dict[str, str], workdir: Path
    ) -> _Server:
        log_path = workdir / f"{name}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                args,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Own session: Ctrl-C reaches only the bench, which then stops children in order.
                start_new_session=True,
                preexec_fn=_die_with_parent if os.name == "posix" else None,
            )
        return cls(name, f"http://127.0.0.1:{port}", proc, log_path)

    def wait_ready(self, path: str, expect: int, timeout: float = _START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                if self.proc.poll() is not None:
                    raise BenchError(
                        f"{self.name} exited at start (code {self.proc.returncode}):\n"
                        + self.log_tail()
                    )
                with contextlib.suppress(httpx.TransportError):
                    if client.get(self.url + path).status_code == expect:
                        return
                if time.monotonic() > deadline:
                    raise BenchError(
                        f"{self.name} not ready after {timeout:.0f} s:\n{self.log_tail()}"
                    )
                time.sleep(0.05)

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            text = self.log_path.read_text(errors="replace").strip().splitlines()
            return "\n".join("    " + line for line in text[-lines:]) or "    (no output)"
        return "    (no log)"

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc.poll() is None:
            # SIGINT, as Ctrl-C would: uvicorn shuts down, then re-raises it as
            # KeyboardInterrupt, so `memgate serve` still runs its `finally` and stops its
            # embedded Redis (after SIGTERM uvicorn re-raises a default-action SIGTERM: no cleanup).
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
