"""A real Prometheus scrapes a running memgate; every dashboard and alert query must work.

Starts the ``prometheus`` binary (Debian: ``apt-get install prometheus``; it must be on PATH,
the test fails without it) with a temporary config that scrapes the test gateway five times a second
and loads ``deploy/alerts.yml``. Sends traffic through memgate (plain, streamed, memory mode on,
off and dry-run, a passthrough call and one upstream error), waits until a scrape has seen it,
then evaluates every PromQL expression of ``grafana/dashboards/*.json`` and ``deploy/alerts.yml``
through ``/api/v1/query``: each must parse and return a non-empty result.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gateway.storage.redis_server import EmbeddedRedis, free_port
from tests.conftest import Gateway, GatewayFactory
from tests.test_deploy_files import DASHBOARDS, DEPLOY, alert_rules, load_dashboard

SCRAPE_INTERVAL = "200ms"
# What Grafana's global variables stand for when a query is sent to Prometheus by hand.
BUILTIN_VARIABLES = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__interval_ms": "15000",
    "__range": "5m",
    "__range_s": "300",
}
COMPARISONS = ("==", "!=", ">=", "<=", ">", "<")


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} is not on PATH: install Prometheus (Debian: apt-get install prometheus)",
            pytrace=False,
        )
    return path


# --- PromQL helpers ------------------------------------------------------------------------


def substitute_variables(expr: str, templating: list[dict[str, Any]]) -> str:
    """Replace Grafana variables: built-ins by fixed values, dashboard variables by their
    "All" value (``allValue``) or else their first option."""
    values = dict(BUILTIN_VARIABLES)
    for var in templating:
        if var.get("includeAll") and var.get("allValue"):
            values[var["name"]] = var["allValue"]
        elif var.get("query"):
            values[var["name"]] = str(var["query"]).split(",")[0].strip()
    # longest names first so $__range_s is not eaten by $__range
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    assert "$" not in expr, f"unresolved variable in {expr!r}"
    return expr


def split_comparison(expr: str) -> tuple[str, str, str] | None:
    """(left, operator, right) for the last comparison at nesting depth 0, else None.

    Strings and everything inside (), {} and [] are skipped, so label matchers such as
    ``code!="200"`` or ``route=~"a|b"`` are never taken for a comparison.
    """
    depth = 0
    quote: str | None = None
    found: tuple[int, str] | None = None
    i = 0
    while i < len(expr):
        ch = expr[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'`":
            quote = ch
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif depth == 0:
            for op in COMPARISONS:
                if expr.startswith(op, i):
                    found = (i, op)
                    i += len(op) - 1
                    break
        i += 1
    if found is None:
        return None
    at, op = found
    return expr[:at].strip(), op, expr[at + len(op) :].strip()


@pytest.mark.unit
def test_split_comparison() -> None:
    assert split_comparison('up{job="memgate"} == 0') == ('up{job="memgate"}', "==", "0")
    assert split_comparison('sum(rate(x{code!="200", r=~"a|b"}[5m])) / sum(y) > 0.05') == (
        'sum(rate(x{code!="200", r=~"a|b"}[5m])) / sum(y)',
        ">",
        "0.05",
    )
    assert split_comparison("max(delta(g[1h])) >= 50") == ("max(delta(g[1h]))", ">=", "50")
    assert split_comparison('histogram_quantile(0.99, sum by (le) (rate(h{a="<"}[5m])))') is None
    assert split_comparison("rate(x[5m])") is None


@pytest.mark.unit
def test_substitute_variables() -> None:
    route = {"name": "route", "includeAll": True, "allValue": ".*", "query": "chat,admin"}
    mode = {"name": "mode", "query": "on,off"}
    assert (
        substitute_variables(
            'rate(x{route=~"$route", m="${mode}"}[$__rate_interval]) + y[$__range]', [route, mode]
        )
        == 'rate(x{route=~".*", m="on"}[1m]) + y[5m]'
    )


# --- a running Prometheus ------------------------------------------------------------------


@dataclass
class Prometheus:
    url: str
    client: httpx.Client
    log: Path

    def api(self, path: str, **params: Any) -> dict[str, Any]:
        url = f"{self.url}/api/v1/{path}"
        if path == "query":  # POST: long expressions, no URL length limit
            resp = self.client.post(url, data=params)
        else:
            resp = self.client.get(url, params=params)
        try:
            body = resp.json()
        except ValueError:
            raise AssertionError(f"{path}: HTTP {resp.status_code} {resp.text[:300]}") from None
        return body

    def query(self, expr: str) -> dict[str, Any]:
        return self.api("query", query=expr)

    def vector(self, expr: str) -> list[dict[str, Any]]:
        body = self.query(expr)
        assert body["status"] == "success", (expr, body)
        return body["data"]["result"]

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def _write_config(path: Path, target: str, job: str = "memgate") -> None:
    config = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "rule_files": [str((DEPLOY / "alerts.yml").resolve())],
        "scrape_configs": [
            {
                "job_name": job,
                "scrape_interval": SCRAPE_INTERVAL,
                "scrape_timeout": SCRAPE_INTERVAL,
                "metrics_path": "/metrics",
                "static_configs": [{"targets": [target]}],
            }
        ],
    }
    path.write_text(yaml.safe_dump(config))


def _start_prometheus(
    folder: Path, target: str, job: str
) -> tuple[subprocess.Popen[bytes], Prometheus]:
    binary = _binary("prometheus")
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "prometheus.yml"
    _write_config(config, target, job)
    port = free_port()
    log = folder / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    client = httpx.Client(timeout=10.0)
    return proc, Prometheus(url=f"http://127.0.0.1:{port}", client=client, log=log)


def _wait_ready(proc: subprocess.Popen[bytes], server: Prometheus) -> None:
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            pytest.fail(f"prometheus exited with {proc.returncode}:\n{server.logs()}")
        try:
            if server.client.get(f"{server.url}/-/ready").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"prometheus not ready after 30s:\n{server.logs()}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes], server: Prometheus) -> None:
    server.client.close()
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@dataclass
class Scraped:
    """A Prometheus of one test and the loopback socket its gateway is to listen on."""

    prometheus: Prometheus
    sock: socket.socket


# Each test's Prometheus and the job name it scrapes its gateway under.
JOBS = {
    "queries": "memgate",
    "refusals": "memgate",
    "went-away": "kubernetes-pods",  # as with Kubernetes annotation discovery
    "signals": "memgate",
}


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Scraped]]:
    """One Prometheus per test (a test reads absolute values and alert conditions, which
    another test's gateway would change), all started at once, each scraping a port held
    for the gateway its test starts there: bound, so no other process takes it, and not
    listening, so that until then the target is simply down. Prometheus hands its scrapers
    their first targets only at its discovery's update interval (about five seconds, not a
    flag), so started together the tests wait for that once, not once each."""
    started: dict[str, tuple[subprocess.Popen[bytes], Scraped]] = {}
    try:
        for name, job in JOBS.items():
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            target = f"127.0.0.1:{sock.getsockname()[1]}"
            try:
                proc, server = _start_prometheus(tmp_path_factory.mktemp(name), target, job)
            except BaseException:
                sock.close()
                raise
            started[name] = (proc, Scraped(server, sock))
        for proc, each in started.values():
            _wait_ready(proc, each.prometheus)
        yield {name: each for name, (_, each) in started.items()}
    finally:
        for proc, each in started.values():
            _stop(proc, each.prometheus)
            each.sock.close()


# --- traffic -------------------------------------------------------------------------------


def _send_traffic(gateway: Gateway) -> int:
    """Plain, streamed, each memory mode, a passthrough call, one upstream error, one bad
    request.

    Returns how many requests memgate should have counted.
    """
    headers = {"Authorization": "Bearer sk-test-prometheus", "X-Memory-User": "metrics-user"}
    messages = [{"role": "user", "content": "What is my favourite colour?"}]
    url = f"{gateway.base_url}/chat/completions"
    sent = 0
    with httpx.Client(timeout=30.0, headers=headers) as client:
        for mode in ("on", "off", "dry-run"):
            resp = client.post(
                url,
                json={"model": "gpt-test", "messages": messages},
                headers={"X-Memory-Mode": mode},
            )
            assert resp.status_code == 200, resp.text
            sent += 1
        for mode in ("on", "off"):
            body = {
                "model": "gpt-test",
                "messages": messages,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            with client.stream("POST", url, json=body, headers={"X-Memory-Mode": mode}) as resp:
                assert resp.status_code == 200
                text = "".join(resp.iter_text())
            assert "[DONE]" in text
            sent += 1
        resp = client.get(f"{gateway.base_url}/models")
        assert resp.status_code == 200, resp.text
        sent += 1
        resp = client.post(url, json={"model": "error-500", "messages": messages})
        assert resp.status_code == 500, resp.text
        sent += 1
        resp = client.post(url, content=b"{not json", headers={"content-type": "application/json"})
        assert resp.status_code == 400, resp.text
        sent += 1
    return sent


def _wait_for(what: str, check: Any, prometheus: Prometheus, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\nprometheus log:\n{prometheus.logs()}")
        time.sleep(0.2)


def _scraped_gateway(
    make_gateway: GatewayFactory, scraped: Scraped, **overrides: Any
) -> tuple[Gateway, Prometheus]:
    """The test's gateway on the socket held for it, once its Prometheus has scraped it."""
    prometheus = scraped.prometheus
    gateway = make_gateway(sock=scraped.sock, **overrides)
    _wait_for(
        "the first scrape of memgate",
        lambda: bool(prometheus.vector("memgate_build_info")),
        prometheus,
    )
    return gateway, prometheus


# --- the test ------------------------------------------------------------------------------


def test_promtool_accepts_the_deploy_config_and_rules() -> None:
    promtool = _binary("promtool")
    for args in (["check", "rules", "alerts.yml"], ["check", "config", "prometheus.yml"]):
        result = subprocess.run(
            [promtool, *args], cwd=DEPLOY, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_and_alert_queries_against_real_prometheus(
    make_gateway: GatewayFactory, scraped: dict[str, Scraped]
) -> None:
    gateway, prometheus = _scraped_gateway(make_gateway, scraped["queries"])
    # memgate is scraped and healthy before any traffic
    _wait_for(
        "the first scrape of memgate",
        lambda: [s["value"][1] for s in prometheus.vector('up{job="memgate"}')] == ["1"],
        prometheus,
    )
    sent = _send_traffic(gateway)

    # memgate counted the traffic, and Prometheus holds at least two samples taken after it of
    # every request series (rate() needs two)
    def scraped() -> bool:
        total = prometheus.vector("sum(memgate_requests_total)")
        if not total or float(total[0]["value"][1]) != sent:
            return False
        fresh = prometheus.vector(
            f"min(count_over_time((memgate_requests_total > 0)[1m:{SCRAPE_INTERVAL}]))"
        )
        return bool(fresh) and float(fresh[0]["value"][1]) >= 2

    _wait_for(f"{sent} requests in memgate_requests_total", scraped, prometheus)

    failures: list[str] = []

    # An empty result is asked again until one deadline for all checks: a scrape that
    # times out on a loaded machine marks every series stale until the next one succeeds.
    deadline = time.monotonic() + 15

    def check(where: str, expr: str, *, need_data: bool = True) -> None:
        while True:
            body = prometheus.query(expr)
            if body.get("status") != "success":
                failures.append(f"{where}: does not evaluate: {body.get('error')}\n    {expr}")
                return
            if not need_data or body["data"]["result"]:
                return
            if time.monotonic() > deadline:
                failures.append(f"{where}: empty result\n    {expr}")
                return
            time.sleep(0.2)

    # every dashboard query
    count = 0
    for path in DASHBOARDS:
        board = load_dashboard(path)
        templating = board.get("templating", {}).get("list", [])
        for panel in board["panels"]:
            for target in panel["targets"]:
                expr = substitute_variables(target["expr"], templating)
                check(f"{path.name} / {panel['title']} / {target['refId']}", expr)
                count += 1
    assert count >= 30, count

    # every alert rule: the whole expression parses; its left-hand side (or what absent()
    # looks for) has data
    rules = alert_rules()
    for rule in rules:
        where = f"alerts.yml / {rule['alert']}"
        expr = rule["expr"]
        check(where, expr, need_data=False)
        if expr.startswith("absent(") and expr.endswith(")"):
            check(where + " (what it looks for)", expr[len("absent(") : -1])
            continue
        split = split_comparison(expr)
        check(where + " (left-hand side)", split[0] if split else expr)

    assert not failures, "\n".join(failures)

    # Prometheus loaded and evaluated every rule without error
    def evaluated() -> bool:
        groups = prometheus.api("rules", type="alert")["data"]["groups"]
        loaded = [r for g in groups for r in g["rules"]]
        return len(loaded) == len(rules) and all(
            r["health"] == "ok" and r.get("lastEvaluation", "").startswith("2") for r in loaded
        )

    _wait_for("the alert rules to be evaluated", evaluated, prometheus)

    # and the one upstream error among a handful of requests is enough to raise (pending)
    # the upstream error rate alert
    def alerting() -> bool:
        alerts = prometheus.api("alerts")["data"]["alerts"]
        return any(a["labels"]["alertname"] == "MemgateUpstreamErrorRateHigh" for a in alerts)

    _wait_for("MemgateUpstreamErrorRateHigh to be pending", alerting, prometheus)
    rules_json = json.dumps(prometheus.api("rules")["data"])
    assert '"health": "err"' not in rules_json


def _alert_expr(name: str) -> str:
    return next(rule["expr"] for rule in alert_rules() if rule["alert"] == name)


def _fires(prometheus: Prometheus, name: str) -> bool:
    """The alert's condition holds now (its expression returns a series)."""
    return bool(prometheus.vector(_alert_expr(name)))


def test_client_4xx_is_not_an_upstream_failure(
    make_gateway: GatewayFactory, scraped: dict[str, Scraped]
) -> None:
    """Only refusals (a client's rate limit, a bad body): the client-error alert's condition
    holds and the upstream-failure alerts' do not."""
    gateway, prometheus = _scraped_gateway(make_gateway, scraped["refusals"])
    headers = {"Authorization": "Bearer sk-test-prometheus-4xx"}
    url = f"{gateway.base_url}/chat/completions"
    messages = [{"role": "user", "content": "hi"}]

    def requests_scraped(count: int) -> bool:
        total = prometheus.vector("sum(memgate_requests_total)")
        return bool(total) and float(total[0]["value"][1]) == count

    with httpx.Client(timeout=30.0, headers=headers) as client:
        # the first refusal creates the series (rate() needs it to exist before it grows)
        resp = client.post(url, json={"model": "error-429", "messages": messages})
        assert resp.status_code == 429
        _wait_for("the first refusal scraped", lambda: requests_scraped(1), prometheus)
        for _ in range(3):
            resp = client.post(url, json={"model": "error-429", "messages": messages})
            assert resp.status_code == 429
        resp = client.post(url, content=b"{", headers={"content-type": "application/json"})
        assert resp.status_code == 400
    _wait_for("every refusal scraped", lambda: requests_scraped(5), prometheus)
    _wait_for(
        "MemgateClientErrorRateHigh's condition",
        lambda: _fires(prometheus, "MemgateClientErrorRateHigh"),
        prometheus,
    )
    (upstream_4xx,) = prometheus.vector('sum(memgate_upstream_errors_total{kind="http_4xx"})')
    assert upstream_4xx["value"][1] == "4"
    assert not _fires(prometheus, "MemgateUpstreamErrorRateHigh")
    assert not _fires(prometheus, "MemgateUpstreamErrorRateCritical")


def test_a_target_that_went_away_is_caught(
    make_gateway: GatewayFactory, scraped: dict[str, Scraped]
) -> None:
    """The scrape job is not called "memgate" (as with Kubernetes annotation discovery): when
    the gateway stops, MemgateDown's and MemgateAbsent's conditions hold."""
    gateway, prometheus = _scraped_gateway(make_gateway, scraped["went-away"])
    assert not _fires(prometheus, "MemgateDown")
    assert not _fires(prometheus, "MemgateAbsent")
    assert gateway.server is not None
    gateway.server.stop()
    _wait_for("MemgateDown's condition", lambda: _fires(prometheus, "MemgateDown"), prometheus)
    _wait_for("MemgateAbsent's condition", lambda: _fires(prometheus, "MemgateAbsent"), prometheus)
    (down,) = prometheus.vector(_alert_expr("MemgateDown"))
    assert down["metric"]["job"] == "kubernetes-pods"


def _metric_sum(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith((name + "{", name + " "))
    )


@pytest.fixture
def own_redis_url(tmp_path: Path) -> Iterator[str]:
    """A Redis of the test's own: the never-injected share counts every tenant's memories,
    and the session's Redis holds whatever earlier tests saved."""
    server = EmbeddedRedis(tmp_path / "own-redis")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def test_live_memory_signals_against_real_prometheus(
    own_redis_url: str, make_gateway: GatewayFactory, scraped: dict[str, Scraped]
) -> None:
    """The dashboard's live quality signals hold the figures memgate's own counters give, and
    the memory report shows the same for one user."""
    # The request's model is counted as "other", a series that exists (at zero) from the start,
    # so rate() sees the whole increase of both token counters.
    gateway, prometheus = _scraped_gateway(
        make_gateway,
        scraped["signals"],
        redis_url=own_redis_url,
        metrics_sample_seconds=0.2,
        metrics_models="some-other-model",
    )
    admin = {
        "Authorization": "Bearer test-admin-token",
        "X-Memory-Tenant": "signals-tenant",
        "X-Memory-User": "signals-user",
    }
    board = load_dashboard(DASHBOARDS[[p.name for p in DASHBOARDS].index("memgate-memory.json")])
    panel = next(p for p in board["panels"] if p["title"].startswith("Memory quality signals"))
    exprs = {
        t["refId"]: substitute_variables(t["expr"], board["templating"]["list"])
        for t in panel["targets"]
    }
    long_ago = "2020-01-01T00:00:00Z"
    with httpx.Client(base_url=gateway.url, timeout=30.0, headers=admin) as client:
        for content, kind in (
            ("Always answer in English", "preference"),
            ("I have a cat named Mochi", "profile"),
        ):
            resp = client.post(
                "/v1/memories",
                json={"content": content, "type": kind},
                headers={"X-Memory-Eval-Time": long_ago},
            )
            assert resp.status_code == 201, resp.text
        chat = {
            "model": "gpt-test",
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
        }
        resp = client.post("/v1/chat/completions", json=chat)
        assert resp.status_code == 200, resp.text
        assert resp.headers["x-memory-injected"]
        after = client.get("/metrics").text

    # the share of memories never injected, by age: one of the two memories, both older
    # than 7 days and than 30
    def shares() -> dict[str, str]:
        return {s["metric"]["after_days"]: s["value"][1] for s in prometheus.vector(exprs["B"])}

    _wait_for("the never-injected share", lambda: shares() == {"7": "0.5", "30": "0.5"}, prometheus)

    # injected tokens as a share of prompt tokens: as memgate's own counters say
    want = _metric_sum(after, "memgate_injected_tokens_total") / _metric_sum(
        after, "memgate_prompt_tokens_total"
    )
    assert want > 0

    def token_share() -> float | None:
        found = prometheus.vector(exprs["D"])
        value = float(found[0]["value"][1]) if found else math.nan
        return None if math.isnan(value) else value

    _wait_for("the injected-token share", lambda: token_share() is not None, prometheus)
    assert token_share() == pytest.approx(want, rel=1e-6)
    # the other two evaluate to a series (their values need corrections and conflicts
    # over time; the per-user report below checks them)
    for ref in ("A", "C"):
        _wait_for(f"signal {ref}", lambda r=ref: bool(prometheus.vector(exprs[r])), prometheus)

    with httpx.Client(base_url=gateway.url, timeout=30.0, headers=admin) as client:
        signals = client.get("/v1/memory/report").json()["signals"]
    assert signals["injections"] == 1
    assert signals["never_injected_after_days"]["7"] == {
        "memories": 2,
        "never_injected": 1,
        "share": 0.5,
    }
    assert signals["corrections_per_1000_injected"] == 0.0
    assert signals["recent_requests"] == 1
    assert signals["conflicts_per_request"] == 0.0
