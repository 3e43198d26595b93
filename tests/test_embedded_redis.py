"""The embedded Redis: Query Engine loaded, persistence across restarts, clean start and stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import redis

from gateway.storage.redis_server import EmbeddedRedis, EmbeddedRedisError, free_port


def test_query_engine_and_persistence_across_restart(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path) as server:
        client = redis.Redis.from_url(server.url)
        modules = {m[b"name"] for m in client.module_list()}
        assert {b"search", b"ReJSON"} <= modules
        client.execute_command(
            "FT.CREATE", "idx", "ON", "HASH", "PREFIX", "1", "doc:", "SCHEMA", "t", "TEXT"
        )
        client.hset("doc:1", mapping={"t": "remember me"})
        client.close()
    # A new server on the same data dir (and another port) finds the data and the index.
    with EmbeddedRedis(tmp_path) as again:
        client = redis.Redis.from_url(again.url)
        assert client.hget("doc:1", "t") == b"remember me"
        assert client.ft("idx").search("remember").total == 1
        client.close()
    assert (tmp_path / "appendonlydir").is_dir()


def test_second_server_on_same_data_dir_is_refused(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path), pytest.raises(EmbeddedRedisError, match="already using"):
        EmbeddedRedis(tmp_path).start()


@pytest.mark.long
def test_memgate_serve_runs_on_embedded_defaults(tmp_path: Path) -> None:
    """`memgate serve` with no MEMGATE_REDIS_URL starts its own Redis and stops it on exit."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMGATE_")}
    env["MEMGATE_DATA_DIR"] = str(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "memgate serve did not become ready"
            time.sleep(0.2)
        assert (tmp_path / "redis" / "appendonlydir").is_dir()
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 0, out
    assert '"embedded_redis_started"' in out and '"embedded_redis_stopped"' in out
    # The Redis child is gone: its lock on the data dir is free again.
    with EmbeddedRedis(tmp_path / "redis"):
        pass


@pytest.mark.unit
def test_free_ports_come_from_below_the_ephemeral_range() -> None:
    """A port of the kernel's ephemeral range can go to any outgoing connection between the
    check and a server's bind; ports below it are only handed to whoever binds them."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except OSError:
        pytest.skip("no ephemeral port range to read here")
    if low <= 2048:
        pytest.skip("the ephemeral range starts too low to leave ports below it")
    ports = [free_port() for _ in range(20)]
    assert all(1024 <= p < low for p in ports), ports
    assert len(set(ports)) > 1  # picked at random, not the same port for every caller
    for port in ports[:3]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
