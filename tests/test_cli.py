"""The ``memgate`` command as an operator meets it: help, version, settings, and failures that
read as one sentence, never a traceback."""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from gateway import __version__
from gateway.cli import build_parser, main, server_app, server_options
from gateway.config import Settings, describe, env_var_names
from gateway.memory.policy import Policy
from gateway.storage.redis_server import EmbeddedRedis, free_port
from tests.conftest import Upstream
from tests.upstream_stub import ServerThread

ROOT = Path(__file__).resolve().parent.parent


def _env(**extra: str) -> dict[str, str]:
    """The test's environment without any MEMGATE_* setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMGATE_")}
    env.update(extra)
    return env


def _memgate(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _one_clear_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


# --- help and version ----------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"memgate {__version__}"


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += _parsers(child)
    return found


def test_every_command_and_option_has_help_without_markup() -> None:
    parsers = _parsers(build_parser())
    assert {p.prog for p in parsers} >= {
        "memgate",
        "memgate serve",
        "memgate config",
        "memgate reembed",
        "memgate bench proxy",
        "memgate bench recall",
        "memgate bench locomo",
    }
    for parser in parsers:
        text = parser.format_help()
        assert "`" not in text, (parser.prog, text)
        assert parser.description, parser.prog
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    assert choice.help, (parser.prog, choice.dest)
            else:
                assert action.help and action.help.strip(), (parser.prog, action.dest)
    serve_help = next(p for p in parsers if p.prog == "memgate serve").format_help()
    for option in ("--host", "--port", "--workers"):
        assert option in serve_help


# --- settings ------------------------------------------------------------------------------


def test_unknown_setting_names_the_closest_valid_one() -> None:
    with pytest.raises(SystemExit) as exit_info:
        Settings.from_env({"MEMGATE_UPSTREAM_ULR": "http://127.0.0.1:9/v1"})
    assert "MEMGATE_UPSTREAM_ULR" in str(exit_info.value.code)
    assert "did you mean MEMGATE_UPSTREAM_URL?" in str(exit_info.value.code)
    with pytest.raises(SystemExit) as exit_info:
        Settings.from_env({"MEMGATE_NOTHING_LIKE_IT": "1"})
    assert "MEMGATE_NOTHING_LIKE_IT" in str(exit_info.value.code)
    # the real name is accepted
    assert Settings.from_env({"MEMGATE_UPSTREAM_URL": "http://h/v1"}).upstream_url == "http://h/v1"


def test_serve_with_a_misspelt_setting_does_not_start(tmp_path: Path) -> None:
    env = _env(MEMGATE_UPSTREAM_ULR="http://127.0.0.1:9/v1", MEMGATE_DATA_DIR=str(tmp_path))
    line = _one_clear_line(_memgate("serve", "--port", str(free_port()), env=env))
    assert "MEMGATE_UPSTREAM_URL" in line
    assert not (tmp_path / "redis").exists(), "it started the embedded Redis anyway"


def test_host_port_and_workers_come_from_the_environment() -> None:
    settings = Settings.from_env(
        {"MEMGATE_HOST": "0.0.0.0", "MEMGATE_PORT": "9001", "MEMGATE_WORKERS": "3"}
    )
    assert (settings.host, settings.port, settings.workers) == ("0.0.0.0", 9001, 3)
    for name, bad in (("MEMGATE_PORT", "70000"), ("MEMGATE_WORKERS", "0"), ("MEMGATE_PORT", "x")):
        with pytest.raises(SystemExit) as exit_info:
            Settings.from_env({name: bad})
        assert name in str(exit_info.value.code)


def test_config_prints_effective_settings_with_secrets_masked() -> None:
    env = _env(
        MEMGATE_UPSTREAM_API_KEY="sk-very-secret-upstream",
        MEMGATE_ADMIN_TOKEN="admin-secret-token",
        MEMGATE_REDIS_URL="redis://memgate:redis-password@10.0.0.5:6379/0",
        MEMGATE_UPSTREAM_URL="https://proxy-user:proxy-pass@llm.example/v1",
        MEMGATE_PORT="9001",
    )
    done = _memgate("config", env=env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for secret in ("sk-very-secret-upstream", "admin-secret-token", "redis-password", "proxy-pass"):
        assert secret not in out
    lines = dict(line.split("=", 1) for line in out.splitlines())
    assert set(lines) == set(env_var_names())
    assert lines["MEMGATE_UPSTREAM_API_KEY"] == "***  # environment"
    assert lines["MEMGATE_REDIS_URL"] == "redis://***@10.0.0.5:6379/0  # environment"
    assert lines["MEMGATE_UPSTREAM_URL"] == "https://***@llm.example/v1  # environment"
    assert lines["MEMGATE_PORT"] == "9001  # environment"
    assert lines["MEMGATE_HOST"] == "127.0.0.1  # default"
    assert lines["MEMGATE_POLICY"].endswith("default.yaml  # default")


def test_describe_shows_unset_secrets_as_empty() -> None:
    lines = describe(Settings(), env={})
    assert "MEMGATE_ADMIN_TOKEN=  # default" in lines


# --- failures are one sentence -------------------------------------------------------------


def test_reembed_while_the_gateway_holds_the_embedded_redis(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path / "redis"):  # what a running `memgate serve` holds
        line = _one_clear_line(_memgate("reembed", env=_env(MEMGATE_DATA_DIR=str(tmp_path))))
    assert line.startswith("memgate reembed: ")
    assert "stop it first" in line


def test_reembed_with_an_unreachable_redis(tmp_path: Path) -> None:
    url = f"redis://memgate:hunter2@127.0.0.1:{free_port()}/0"
    line = _one_clear_line(_memgate("reembed", env=_env(MEMGATE_REDIS_URL=url)))
    assert line.startswith("memgate reembed: ") and "Redis" in line
    assert "hunter2" not in line


def test_bad_policy_is_one_line(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text((ROOT / "policies" / "example.yaml").read_text() + "\nnot_a_key: true\n")
    for command in ("serve", "reembed"):
        line = _one_clear_line(_memgate(command, env=_env(MEMGATE_POLICY=str(policy))))
        assert line.startswith(f"memgate {command}: bad policy: ") and "policy.yaml" in line


def test_serve_on_a_port_in_use_is_one_line(tmp_path: Path, redis_url: str) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = _env(MEMGATE_REDIS_URL=redis_url, MEMGATE_DATA_DIR=str(tmp_path))
        done = _memgate("serve", "--port", str(port), env=env, timeout=120)
        # with no Redis URL, nothing is started either: the embedded Redis is not tried
        embedded = _memgate("serve", "--port", str(port), env=_env(MEMGATE_DATA_DIR=str(tmp_path)))
    for run in (done, embedded):
        assert run.returncode != 0
        assert "Traceback" not in run.stderr, run.stderr
        (line,) = run.stderr.strip().splitlines()
        assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in line
    assert not (tmp_path / "redis").exists()


# --- several workers -----------------------------------------------------------------------


def _metric_sum(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{name}\{{(.*)\}} (\S+)$", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            total += float(match.group(2))
    return total


@pytest.mark.long
def test_serve_with_several_workers_shares_one_embedded_redis_and_one_metrics_view(
    tmp_path: Path, upstream: Upstream
) -> None:
    """Two workers on MEMGATE_PORT: the embedded Redis is started once (by the parent), every
    request is answered, and any scrape of /metrics counts the requests of both workers."""
    port = free_port()
    env = _env(
        MEMGATE_DATA_DIR=str(tmp_path),
        MEMGATE_PORT=str(port),
        MEMGATE_UPSTREAM_URL=upstream.url,
        MEMGATE_LOG_LEVEL="warning",
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve", "--workers", "2"],
        env={**env, "MEMGATE_LOG_LEVEL": "info"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "memgate serve --workers 2 did not become ready"
            time.sleep(0.2)
        sent = 8
        headers = {"Authorization": "Bearer sk-workers", "X-Memory-Mode": "off"}
        body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
        for _ in range(sent):
            # a fresh connection each time, so the kernel may hand it to either worker
            with httpx.Client(headers=headers, timeout=30) as client:
                assert client.post(f"{base}/v1/chat/completions", json=body).status_code == 200
        for _ in range(6):
            with httpx.Client(timeout=30) as client:
                text = client.get(f"{base}/metrics").text
            assert _metric_sum(text, "memgate_requests_total", route="chat") == sent
            assert "memgate_build_info" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 0, out
    assert out.count('"embedded_redis_started"') == 1, out
    assert '"embedded_redis_stopped"' in out
    with EmbeddedRedis(tmp_path / "redis"):  # the lock is free again: Redis is gone
        pass


# --- ./scripts/serve -----------------------------------------------------------------------


def _fake_checkout(tmp_path: Path) -> Path:
    """scripts/serve and pyproject.toml beside a .venv whose python only records pip calls and
    whose memgate only says it started: what the script runs, without a package index."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "serve", root / "scripts" / "serve")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(
        '#!/bin/sh\necho "$@" >> "$(dirname "$0")/../pip-calls"\n'
        'if [ -n "$FAIL_INSTALL" ]; then exit 1; fi\n'
    )
    memgate = bin_dir / "memgate"
    memgate.write_text('#!/bin/sh\necho "memgate $*"\n')
    python.chmod(0o755)
    memgate.chmod(0o755)
    return root


def _run_serve(root: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(root / "scripts" / "serve"), "--port", "9000"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def _pip_calls(root: Path) -> list[str]:
    calls = root / ".venv" / "pip-calls"
    return calls.read_text().splitlines() if calls.exists() else []


def test_scripts_serve_installs_only_when_pyproject_changes(tmp_path: Path) -> None:
    root = _fake_checkout(tmp_path)
    first = _run_serve(root)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "memgate serve --port 9000"
    assert len(_pip_calls(root)) == 1 and "install" in _pip_calls(root)[0]
    # started again: no install, so no package index is needed
    again = _run_serve(root)
    assert again.returncode == 0 and again.stdout.strip() == "memgate serve --port 9000"
    assert len(_pip_calls(root)) == 1
    # the dependencies changed: installed once more
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n# changed\n")
    assert _run_serve(root).returncode == 0
    assert len(_pip_calls(root)) == 2


def test_scripts_serve_retries_an_install_that_failed(tmp_path: Path) -> None:
    root = _fake_checkout(tmp_path)
    failed = _run_serve(root, FAIL_INSTALL="1")
    assert failed.returncode != 0 and "memgate serve" not in failed.stdout
    assert _run_serve(root).returncode == 0
    assert len(_pip_calls(root)) == 2


def test_serve_keeps_idle_client_connections_longer_than_clients_pool_them() -> None:
    # A server that closes an idle keep-alive connection while a client (whose pool keeps it
    # for 5 s: httpx's and the openai SDK's default) sends a request on it resets that
    # request. The gateway must leave ending idle connections to the client.
    from openai._constants import DEFAULT_CONNECTION_LIMITS

    clients = max(
        httpx.Limits().keepalive_expiry or 0, DEFAULT_CONNECTION_LIMITS.keepalive_expiry or 0
    )
    options = server_options(Settings.from_env({}), "127.0.0.1", 8080)
    assert options["timeout_keep_alive"] > clients
    tuned = Settings.from_env({"MEMGATE_CLIENT_KEEPALIVE_SECONDS": "120"})
    assert server_options(tuned, "127.0.0.1", 8080)["timeout_keep_alive"] == 120


def test_a_server_process_keeps_what_start_up_loaded_out_of_full_collections(
    tmp_path: Path, redis_url: str, upstream: Upstream, shipped_policy: Policy
) -> None:
    # A full collection walks every tracked object: the embedding model's tokenizer and the
    # policy would be walked again on each one, on the event loop every request waits on.
    settings = Settings(
        upstream_url=upstream.url, redis_url=redis_url, data_dir=str(tmp_path / "data")
    )
    before = gc.get_freeze_count()
    server = ServerThread(
        server_app(settings, redis_url=redis_url, policy=shipped_policy), free_port()
    ).start()
    try:
        assert httpx.get(f"{server.url}/readyz").status_code == 200
        assert gc.get_freeze_count() > before
    finally:
        server.stop()
        gc.unfreeze()  # this process runs other apps next


def test_a_host_name_is_checked_on_the_addresses_it_stands_for() -> None:
    import socket

    from gateway.cli import CommandError, _check_can_listen

    _check_can_listen("localhost", 0)  # a free port on a name that resolves here
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CommandError, match=re.escape(f"cannot listen on 127.0.0.1:{port}")):
            _check_can_listen("127.0.0.1", port)
    with pytest.raises(CommandError, match=re.escape("cannot listen on no-such-host.invalid:80")):
        _check_can_listen("no-such-host.invalid", 80)
