"""The memgate command line: run the gateway, show its settings, manage its keys, re-embed
memories, measure it."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from gateway import __version__
from gateway.config import Settings, describe, mask_url, open_relay_problem

if TYPE_CHECKING:
    from litestar import Litestar

    from gateway.memory.policy import Policy
    from gateway.storage.redis_server import EmbeddedRedis

# The app each worker process builds when ``memgate serve --workers N`` runs several of them.
WORKER_APP = "gateway.cli:worker_app"


_CREDENTIALS = re.compile(r"://[^/@\s]+@")


class CommandError(Exception):
    """A command failed in a way its one-line message fully explains."""


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _load_policy(settings: Settings) -> Any:
    from gateway.memory.policy import PolicyError, load_policy

    try:
        return load_policy(settings.policy)
    except PolicyError as exc:
        raise CommandError(f"bad policy: {exc}") from None


def server_app(
    settings: Settings, *, redis_url: str, policy: Policy, embedded: EmbeddedRedis | None = None
) -> Litestar:
    """The gateway as a server process runs it (one app for the process's whole life, so
    what its start-up loads is kept out of the collector's full passes)."""
    from gateway.app import create_app

    return create_app(
        settings, redis_url=redis_url, policy=policy, embedded=embedded, freeze_heap=True
    )


def worker_app() -> Litestar:
    """The app of one worker process; the parent already resolved the Redis URL (an embedded
    Redis is started once, by the parent) and put it in the environment."""
    from gateway.observability.logs import configure_logging

    settings = Settings.from_env()
    configure_logging(settings.log_level)
    assert settings.redis_url, "the parent process sets MEMGATE_REDIS_URL for its workers"
    return server_app(settings, redis_url=settings.redis_url, policy=_load_policy(settings))


def server_options(settings: Settings, host: str, port: int) -> dict[str, Any]:
    """uvicorn's options for ``memgate serve``."""
    return {
        "host": host,
        "port": port,
        "log_level": "warning",
        "log_config": None,  # uvicorn's loggers go through memgate's (see logs.py)
        "access_log": False,
        # The peer is the socket's address; X-Forwarded-For counts only from
        # MEMGATE_TRUSTED_PROXIES, which the gateway checks itself.
        "proxy_headers": False,
        "lifespan": "on",
        "loop": "uvloop",
        "http": "httptools",
        # Longer than clients keep idle pooled connections: the client, never the gateway,
        # ends an idle connection, so no request is sent on one the gateway is closing.
        "timeout_keep_alive": settings.client_keepalive_seconds,
    }


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gateway.memory.tokens import prepare_cache
    from gateway.observability.logs import configure_logging
    from gateway.observability.metrics import MULTIPROC_ENV
    from gateway.storage.redis_server import EmbeddedRedis, EmbeddedRedisError

    settings = Settings.from_env()
    host = args.host or settings.host
    port = args.port or settings.port
    workers = args.workers or settings.workers
    configure_logging(settings.log_level)
    log = structlog.get_logger("memgate")
    policy = _load_policy(settings)
    _check_can_listen(host, port)
    embedded: EmbeddedRedis | None = None
    metrics_dir: str | None = None
    redis_url = settings.redis_url
    if not redis_url:
        embedded = EmbeddedRedis(settings.data_path / "redis")
        try:
            redis_url = embedded.start()
        except EmbeddedRedisError as exc:
            raise CommandError(str(exc)) from None
        log.info("embedded_redis_started", port=embedded.port, data_dir=str(embedded.data_dir))
    try:
        problem = open_relay_problem(settings, host, _count_keys(redis_url))
    except BaseException:
        if embedded is not None:
            embedded.stop()
        raise
    if problem:
        print(problem, file=sys.stderr)
        if embedded is not None:
            embedded.stop()
        return 2
    # Docker and Kubernetes stop with SIGTERM: turn it into a normal exit so the embedded
    # Redis below is stopped cleanly (uvicorn re-raises the signal after its own shutdown).
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    server_args = server_options(settings, host, port)
    try:
        log.info(
            "serving",
            host=host,
            port=port,
            workers=workers,
            upstream=mask_url(settings.upstream_url),
        )
        if workers == 1:
            uvicorn.run(
                server_app(settings, redis_url=redis_url, policy=policy, embedded=embedded),
                **server_args,
            )
        else:
            # Workers are fresh processes that read their settings from the environment:
            # they share this process's Redis and a metrics folder (prometheus-client's
            # multi-process mode: a scrape adds up every worker's series, whichever worker
            # answers it), and find the tokenizer files already in place.
            prepare_cache(settings.data_path / "tiktoken")
            metrics_dir = tempfile.mkdtemp(prefix="memgate-metrics-")
            os.environ[MULTIPROC_ENV] = metrics_dir
            os.environ["MEMGATE_REDIS_URL"] = redis_url
            uvicorn.run(WORKER_APP, factory=True, workers=workers, **server_args)
    finally:
        if embedded is not None:
            embedded.stop()
            log.info("embedded_redis_stopped")
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0


def _check_can_listen(host: str, port: int) -> None:
    """Refuse at once an address the server could not listen on (a port in use, an address
    not on this machine), before the embedded Redis, the model and the app are started for
    nothing. Each address the host stands for is bound as uvicorn binds it, then released
    for uvicorn to take; a host name is refused only when none of its addresses can be
    bound (uvicorn reports any other failure itself)."""
    import ipaddress
    import socket

    targets: list[tuple[socket.AddressFamily, tuple[Any, ...]]]
    try:
        ipaddress.ip_address(host)
        targets = [(socket.AF_INET6 if ":" in host else socket.AF_INET, (host, port))]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except (OSError, UnicodeError) as exc:
            raise CommandError(f"cannot listen on {host}:{port}: {exc}") from None
        targets = [(info[0], tuple(info[4][:2])) for info in infos]
    reasons: list[str] = []
    for family, address in targets:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(address)
            return
        except (OSError, OverflowError) as exc:
            reasons.append(exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc))
    raise CommandError(f"cannot listen on {host}:{port}: {reasons[0]}")


def _count_keys(redis_url: str) -> int:
    import asyncio

    from gateway.storage.store import Store

    async def run() -> int:
        store = Store(redis_url)
        try:
            return len(await store.gateway_keys())
        finally:
            await store.aclose()

    return asyncio.run(run())


def _keys(args: argparse.Namespace) -> int:
    """Gateway keys from the command line; with the embedded Redis, run it while the gateway
    is stopped (or use the admin API, ``/v1/memory/keys``, while it runs)."""
    import asyncio
    import hashlib
    import json

    from gateway.clock import SystemClock
    from gateway.errors import MemgateError
    from gateway.memory.identity import TENANT_HASH_CHARS
    from gateway.storage.keys import Keyring
    from gateway.storage.store import Store

    if args.action == "legacy-tenant":
        key = sys.stdin.readline().strip()
        if not key:
            print("memgate: give the old client key on standard input", file=sys.stderr)
            return 2
        print(hashlib.sha256(key.encode()).hexdigest()[:TENANT_HASH_CHARS])
        return 0
    settings = Settings.from_env()

    async def run(redis_url: str) -> int:
        store = Store(redis_url)
        keyring = Keyring(store, SystemClock())
        try:
            if args.action == "create":
                upstream = sys.stdin.readline().strip() if args.upstream_key_stdin else None
                key, secret = await keyring.create(
                    args.label, tenant=args.tenant, upstream_key=upstream or None
                )
                print(json.dumps({**key.to_api(), "key": secret}, ensure_ascii=False))
            elif args.action == "list":
                for key in await keyring.list():
                    print(json.dumps(key.to_api(), ensure_ascii=False))
            elif args.action == "rotate":
                key, secret = await keyring.rotate(args.id)
                print(json.dumps({**key.to_api(), "key": secret}, ensure_ascii=False))
            else:
                key = await keyring.revoke(args.id)
                print(json.dumps({**key.to_api(), "revoked": True}, ensure_ascii=False))
            return 0
        except MemgateError as exc:
            print(f"memgate: {exc.message}", file=sys.stderr)
            return 1
        finally:
            await store.aclose()

    with _redis_for_command(settings, "stop it first.") as redis_url:
        return asyncio.run(run(redis_url))


def _config(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from gateway.memory.policy import default_policy_path

    settings = Settings.from_env()
    if settings.policy is None:
        settings = replace(settings, policy=str(default_policy_path()))
    print("\n".join(describe(settings)))
    return 0


def _reembed(args: argparse.Namespace) -> int:
    import asyncio

    from gateway.clock import SystemClock
    from gateway.memory.embed import make_embedder
    from gateway.memory.memories import Memories
    from gateway.memory.reembed import reembed
    from gateway.storage.store import Store
    from gateway.upstream import Upstream

    settings = Settings.from_env()
    policy = _load_policy(settings)

    async def run(redis_url: str) -> int:
        store, upstream = Store(redis_url), Upstream(settings)
        try:
            await store.check_query_engine()
            memories = Memories(store, make_embedder(settings, upstream), policy, SystemClock())
            return await reembed(memories)
        finally:
            await upstream.aclose()
            await store.aclose()

    held = (
        "stop it first (the gateway itself moves memories of an earlier local model while it runs)."
    )
    with _redis_for_command(settings, held) as redis_url:
        moved = asyncio.run(run(redis_url))
    print(f"re-embedded {moved} memories with {settings.embeddings}")
    return 0


def _drop_previous_indexes(args: argparse.Namespace) -> int:
    import asyncio

    from gateway.storage.store import Store

    settings = Settings.from_env()

    async def run(redis_url: str) -> list[str]:
        store = Store(redis_url)
        try:
            await store.check_query_engine()
            return await store.drop_previous_memory_indexes()
        finally:
            await store.aclose()

    with _redis_for_command(settings, "it drops the previous indexes there itself.") as url:
        dropped = asyncio.run(run(url))
    for name in dropped:
        print(f"dropped {name} (its memories stay)")
    if not dropped:
        print("no previous memory index to drop")
    return 0


@contextlib.contextmanager
def _redis_for_command(settings: Settings, held: str) -> Iterator[str]:
    """The configured Redis, or the embedded one started for this command and stopped after
    it; ``held`` tells the operator what to do when a running gateway holds it."""
    from gateway.storage.redis_server import EmbeddedRedis, EmbeddedRedisError

    if settings.redis_url:
        yield settings.redis_url
        return
    embedded = EmbeddedRedis(settings.data_path / "redis")
    try:
        url = embedded.start()
    except EmbeddedRedisError as exc:
        if "already using" in str(exc):
            raise CommandError(
                f"a running memgate holds the embedded Redis in {embedded.data_dir}; {held}"
            ) from None
        raise CommandError(str(exc)) from None
    try:
        yield url
    finally:
        embedded.stop()


def _benchmarks() -> None:
    """Make the repository's ``benchmarks`` package importable, here and in the processes a
    benchmark starts; the benchmarks are not part of the installed package."""
    import importlib.util

    checkout = Path(__file__).resolve().parent.parent
    if not (checkout / "benchmarks" / "__init__.py").is_file():
        if importlib.util.find_spec("benchmarks") is None:
            raise CommandError(
                "the benchmarks need a repository checkout (they are not installed with "
                "the package): run them from a clone with `pip install -e .`"
            )
        return
    root = str(checkout)
    if root not in sys.path:
        sys.path.insert(0, root)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, *paths]))


def _bench(args: argparse.Namespace) -> int:
    _benchmarks()
    from benchmarks.bench import run_proxy_bench

    return run_proxy_bench(
        rounds=args.rounds,
        warmup=args.warmup,
        concurrency=args.concurrency,
        seconds=args.seconds,
        workers=args.workers,
    )


def _bench_soak(args: argparse.Namespace) -> int:
    _benchmarks()
    from benchmarks.bench_soak import run_soak

    return run_soak(seconds=args.seconds, concurrency=args.concurrency, users=args.users)


def _bench_scenarios(args: argparse.Namespace) -> int:
    from gateway.memory.scenario_eval import run_scenario_bench

    return run_scenario_bench(
        scenarios=args.scenarios,
        prefeval=args.prefeval,
        no_prefeval=args.no_prefeval,
        json_out=args.json,
    )


def _fit_relevance(args: argparse.Namespace) -> int:
    from gateway.memory.scenario_eval import run_fit

    return run_fit(scenarios=args.scenarios, out=args.out)


def _eval(args: argparse.Namespace) -> int:
    from gateway.memory.eval import run_eval

    return run_eval(
        scenarios=args.scenarios,
        arms=args.arms,
        gateway=args.gateway,
        upstream=args.upstream,
        json_out=args.json,
        chart=args.chart,
        model=args.model,
    )


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of numbers: {text!r}"
        ) from None
    if not sizes:
        raise argparse.ArgumentTypeError("give at least one size")
    return sizes


def _bench_recall(args: argparse.Namespace) -> int:
    _benchmarks()
    from benchmarks.bench_recall import run_recall_bench

    return run_recall_bench(
        sizes=args.sizes,
        queries=args.queries,
        users_total=args.users_total,
        embed_limit=args.embed_limit,
        warmup=args.warmup,
    )


def _bench_locomo(args: argparse.Namespace) -> int:
    _benchmarks()
    from benchmarks.bench_recall import run_locomo_bench

    return run_locomo_bench(
        data=args.data,
        k=args.k,
        pool=args.pool,
        prefeval=args.prefeval,
        no_prefeval=args.no_prefeval,
    )


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a default only where there is one to show (not for flags and unset options)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False):
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memgate",
        description="memgate: an OpenAI-compatible proxy that gives chat apps careful "
        "long-term memory. Settings come from MEMGATE_* environment variables "
        "(see 'memgate config').",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"memgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser(
        "serve",
        help="run the gateway",
        description="Run the gateway. Without MEMGATE_REDIS_URL it starts its own Redis "
        "(once, whatever the number of workers) and stops it on exit.",
        formatter_class=_HelpFormatter,
    )
    serve.add_argument(
        "--host", default=None, help="address to listen on (default: MEMGATE_HOST, 127.0.0.1)"
    )
    serve.add_argument(
        "--port", type=_port, default=None, help="port to listen on (default: MEMGATE_PORT, 8080)"
    )
    serve.add_argument(
        "--workers",
        type=_positive,
        default=None,
        metavar="N",
        help="worker processes sharing the port, e.g. one per core (default: MEMGATE_WORKERS, 1)",
    )
    serve.set_defaults(func=_serve)
    config = sub.add_parser(
        "config",
        help="print the effective settings, secrets masked",
        description="Print every setting as NAME=value, with keys, tokens and URL passwords "
        "masked, and whether it came from the environment or is the default.",
        formatter_class=_HelpFormatter,
    )
    config.set_defaults(func=_config)
    keys = sub.add_parser(
        "keys",
        help="issue, list, rotate and revoke gateway keys",
        description="Gateway keys: memgate's own API keys, each mapped to a tenant. With the "
        "embedded Redis, run this while the gateway is stopped (or use /v1/memory/keys).",
        formatter_class=_HelpFormatter,
    )
    actions = keys.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, what: str) -> argparse.ArgumentParser:
        return actions.add_parser(
            name,
            help=what,
            description=what[0].upper() + what[1:] + ".",
            formatter_class=_HelpFormatter,
        )

    create = action("create", "issue a key (its secret is printed once)")
    create.add_argument("--label", required=True, help="a name for the key's owner")
    create.add_argument(
        "--tenant", help="an existing tenant id to map the key to (default: a new tenant)"
    )
    create.add_argument(
        "--upstream-key-stdin",
        action="store_true",
        help="read the upstream key this key's requests are sent with from standard input",
    )
    action("list", "list the keys, without their secrets")
    for name, what in (
        ("rotate", "give a key a new secret, same tenant"),
        ("revoke", "revoke a key"),
    ):
        action(name, what).add_argument("id", help="the key's id")
    action(
        "legacy-tenant",
        "print the tenant id memgate derived from a client key (read from standard input)",
    )
    keys.set_defaults(func=_keys)
    re_embed = sub.add_parser(
        "reembed",
        help="re-embed memories stored under another embedding model",
        description="Move memories stored under another embedding model into the current "
        "model's index (same ids, fields and expiry). With the embedded Redis, stop the "
        "gateway first.",
        formatter_class=_HelpFormatter,
    )
    re_embed.set_defaults(func=_reembed)
    drop_previous = sub.add_parser(
        "drop-previous-indexes",
        help="drop memory indexes an upgrade replaced (the memories stay)",
        description="Drop the memory indexes of an earlier release's schema that this "
        "release's indexes replace, keeping every memory. Run it once no replica of the "
        "previous release runs; the gateway does it itself with the embedded Redis.",
        formatter_class=_HelpFormatter,
    )
    drop_previous.set_defaults(func=_drop_previous_indexes)
    bench = sub.add_parser(
        "bench",
        help="benchmarks that print figures",
        description="Benchmarks that print figures; nothing is asserted.",
        formatter_class=_HelpFormatter,
    )
    targets = bench.add_subparsers(
        dest="target", required=True, metavar="{proxy,recall,locomo,scenarios,soak}"
    )
    proxy = targets.add_parser(
        "proxy",
        help="latency memgate adds to a loopback upstream",
        description="Send the same requests directly to a loopback upstream and through "
        "memgate, and print the latency memgate adds and its requests per second.",
        formatter_class=_HelpFormatter,
    )
    proxy.add_argument("--rounds", type=int, default=300, help="timed sequential requests")
    proxy.add_argument("--warmup", type=int, default=20, help="untimed requests per target")
    proxy.add_argument(
        "--concurrency", type=int, default=32, help="requests in flight in the concurrent run"
    )
    proxy.add_argument(
        "--seconds", type=float, default=3.0, help="length of the concurrent run per target"
    )
    proxy.add_argument(
        "--workers",
        type=_positive,
        default=1,
        metavar="N",
        help="worker processes of the gateway under test",
    )
    proxy.set_defaults(func=_bench)
    recall = targets.add_parser(
        "recall",
        help="recall latency at growing numbers of memories",
        description="Fill an embedded Redis with generated memories and time recall by stage.",
        formatter_class=_HelpFormatter,
    )
    recall.add_argument(
        "--sizes",
        type=_sizes,
        default=[1_000, 10_000, 100_000],
        help="memories of one user, comma-separated",
    )
    recall.add_argument("--queries", type=int, default=200, help="timed recalls per size")
    recall.add_argument("--warmup", type=int, default=20, help="untimed recalls per size")
    recall.add_argument(
        "--users-total",
        type=int,
        default=0,
        help="then fill the index with other users up to this many memories "
        "(e.g. 1000000; heavy, off by default)",
    )
    recall.add_argument(
        "--embed-limit",
        type=int,
        default=20_000,
        help="distinct sentences embedded; beyond, vectors are reused with noise",
    )
    recall.set_defaults(func=_bench_recall)
    locomo = targets.add_parser(
        "locomo",
        help="evidence recall@k on LoCoMo (and PrefEval)",
        description="Rank LoCoMo's and PrefEval's candidates with several fusions and run "
        "the recaller end to end (the data sets are not shipped).",
        formatter_class=_HelpFormatter,
    )
    locomo.add_argument(
        "--data",
        help="path to locomo10.json (default: "
        "../shared/eval-data/locomo/locomo10.json from the repo root)",
    )
    locomo.add_argument("--k", type=int, default=5, help="report recall@k and recall@2k")
    locomo.add_argument(
        "--pool", type=int, default=100, help="candidates fetched from each of KNN and BM25"
    )
    locomo.add_argument(
        "--prefeval",
        help="PrefEval explicit_preference folder (default: next to the LoCoMo folder)",
    )
    locomo.add_argument("--no-prefeval", action="store_true", help="skip the PrefEval slice")
    locomo.set_defaults(func=_bench_locomo)
    scen = targets.add_parser(
        "scenarios",
        help="recall quality on scenarios, and PrefEval through the product path",
        description="Gold recall, false recall and precision per category on recall "
        "scenarios (the shipped bilingual set by default), and PrefEval's explicit "
        "preferences through the write path and recall.",
        formatter_class=_HelpFormatter,
    )
    scen.add_argument("--scenarios", help="scenario file (default: the shipped bilingual set)")
    scen.add_argument(
        "--prefeval",
        help="PrefEval explicit_preference folder (default: ../shared/eval-data/prefeval/"
        "explicit_preference from the repo root, when present)",
    )
    scen.add_argument("--no-prefeval", action="store_true", help="skip PrefEval")
    scen.add_argument("--json", help="also write the figures to this JSON file")
    scen.set_defaults(func=_bench_scenarios)
    soak = targets.add_parser(
        "soak",
        help="bounded loopback soak with memory on",
        description="Many concurrent streams with memory on against a loopback upstream "
        "that closes idle connections; prints errors, answers missing their memories, "
        "mining jobs lost, added latency and resident memory.",
        formatter_class=_HelpFormatter,
    )
    soak.add_argument("--seconds", type=float, default=600.0, help="length of the soak")
    soak.add_argument("--concurrency", type=int, default=200, help="streams in flight")
    soak.add_argument("--users", type=int, default=50, help="users with a memory each")
    soak.set_defaults(func=_bench_soak)
    fit_cmd = sub.add_parser(
        "fit",
        help="fit recall to scenarios",
        description="Fit parts of recall to written scenarios.",
        formatter_class=_HelpFormatter,
    )
    fit_targets = fit_cmd.add_subparsers(dest="target", required=True, metavar="TARGET")
    fitted = fit_targets.add_parser(
        "relevance",
        help="the fitted relevance (recall.relevance.fitted) from scenario files",
        description="Runs the scenarios through the write path and recall, and fits how "
        "likely a request needs a topical memory to the memories each scenario expects or "
        "forbids (weights a dimension of the local embedder's vectors). Writes a policy layer "
        "(the shipped one is gateway/policies/fitted.yaml).",
        formatter_class=_HelpFormatter,
    )
    fitted.add_argument("scenarios", nargs="+", help="scenario files")
    fitted.add_argument("--out", required=True, help="the policy layer to write")
    fitted.set_defaults(func=_fit_relevance)
    ev = sub.add_parser(
        "eval",
        help="does memory help, and what does wrong memory cost (A/B over scenarios)",
        description="Runs eval scenarios in three arms (off: X-Memory-Mode off; memory: the "
        "memories as stored; wrong: plus seeded wrong memories) and prints per arm hit "
        "precision, false-recall rate, conflict rate, corrections and their cost, repeated "
        "questions avoided, answer checks passed, memories never used, tokens and latency "
        "added. Without --gateway it starts a throwaway gateway (embedded Redis in a "
        "temporary directory) and, without --upstream, a loopback upstream that returns the "
        "scenarios' recorded answers.",
        formatter_class=_HelpFormatter,
    )
    ev.add_argument("--scenarios", help="eval scenario file (default: the shipped bilingual pack)")
    ev.add_argument("--arms", default="off,memory,wrong", help="arms to run, comma-separated")
    ev.add_argument(
        "--gateway",
        help="an already running memgate (its admin token in MEMGATE_ADMIN_TOKEN); eval uses "
        "a throwaway tenant there and deletes its memories afterwards",
    )
    ev.add_argument(
        "--upstream",
        help="OpenAI-compatible upstream for the throwaway gateway, including /v1 (its key in "
        "MEMGATE_UPSTREAM_API_KEY); default: recorded answers from a loopback stub",
    )
    ev.add_argument("--model", default="gpt-4o-mini", help="model named in each request")
    ev.add_argument("--json", help="write the metrics, one object per arm, to this file")
    ev.add_argument("--chart", help="write a PNG chart (benefit next to error cost per arm)")
    ev.set_defaults(func=_eval)
    return parser


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"not a whole number of at least 1: {text!r}")
    return number


def _port(text: str) -> int:
    number = _positive(text)
    if number > 65535:
        raise argparse.ArgumentTypeError(f"not a port number (1-65535): {text!r}")
    return number


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = " ".join(filter(None, ["memgate", args.command, getattr(args, "target", None)]))
    try:
        return int(args.func(args))
    except CommandError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # One sentence, never a traceback: a traceback can carry settings (URLs with
        # passwords) and tells an operator less than the cause does.
        print(f"{command}: {_explain(exc)}", file=sys.stderr)
        return 1


def _explain(exc: Exception) -> str:
    from gateway.storage import ConnectionError as RedisConnectionError
    from gateway.storage import RedisError

    if isinstance(exc, RedisConnectionError):
        return "cannot reach Redis (check MEMGATE_REDIS_URL and that the server is up)."
    if isinstance(exc, RedisError):
        return f"Redis refused the work ({type(exc).__name__}); check MEMGATE_REDIS_URL."
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror}{where}."
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"failed with {type(exc).__name__}: {_CREDENTIALS.sub('://***@', first)}"


if __name__ == "__main__":
    raise SystemExit(main())
