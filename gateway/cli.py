"""The ``memgate`` command: ``serve`` runs the gateway, ``keys`` manages its API keys,
``bench`` measures it."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

import structlog

from .config import Settings, open_relay_problem


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .app import create_app
    from .logs import configure_logging
    from .policy import PolicyError, load_policy
    from .redis_server import EmbeddedRedis, EmbeddedRedisError

    settings = Settings.from_env()
    configure_logging(settings.log_level)
    log = structlog.get_logger("memgate")
    try:
        policy = load_policy(settings.policy)
    except (PolicyError, OSError) as exc:
        print(f"memgate: bad policy: {exc}", file=sys.stderr)
        return 2
    embedded: EmbeddedRedis | None = None
    redis_url = settings.redis_url
    if not redis_url:
        embedded = EmbeddedRedis(settings.data_path / "redis")
        try:
            redis_url = embedded.start()
        except EmbeddedRedisError as exc:
            print(f"memgate: {exc}", file=sys.stderr)
            return 1
        log.info("embedded_redis_started", port=embedded.port, data_dir=str(embedded.data_dir))
    try:
        problem = open_relay_problem(settings, args.host, _count_keys(redis_url))
    except Exception:
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
    try:
        app = create_app(settings, redis_url=redis_url, policy=policy, embedded=embedded)
        log.info("serving", host=args.host, port=args.port, upstream=settings.upstream_url)
        uvicorn.run(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            log_config=None,  # uvicorn's loggers go through memgate's (see logs.py)
            access_log=False,
            # The peer is the socket's address; X-Forwarded-For counts only from
            # MEMGATE_TRUSTED_PROXIES, which the gateway checks itself.
            proxy_headers=False,
            lifespan="on",
            loop="uvloop",
            http="httptools",
        )
    finally:
        if embedded is not None:
            embedded.stop()
            log.info("embedded_redis_stopped")
    return 0


def _count_keys(redis_url: str) -> int:
    import asyncio

    from .store import Store

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

    from .clock import SystemClock
    from .errors import MemgateError
    from .identity import TENANT_HASH_CHARS
    from .keys import Keyring
    from .redis_server import EmbeddedRedis
    from .store import Store

    if args.action == "legacy-tenant":
        key = sys.stdin.readline().strip()
        if not key:
            print("memgate: give the old client key on standard input", file=sys.stderr)
            return 2
        print(hashlib.sha256(key.encode()).hexdigest()[:TENANT_HASH_CHARS])
        return 0
    settings = Settings.from_env()
    embedded = None
    redis_url = settings.redis_url
    if not redis_url:
        embedded = EmbeddedRedis(settings.data_path / "redis")
        redis_url = embedded.start()

    async def run() -> int:
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

    try:
        return asyncio.run(run())
    finally:
        if embedded is not None:
            embedded.stop()


def _reembed(args: argparse.Namespace) -> int:
    import asyncio

    from .clock import SystemClock
    from .embed import make_embedder
    from .memories import Memories
    from .policy import load_policy
    from .redis_server import EmbeddedRedis
    from .reembed import reembed
    from .store import Store

    settings = Settings.from_env()
    embedded = None
    redis_url = settings.redis_url
    if not redis_url:
        embedded = EmbeddedRedis(settings.data_path / "redis")
        redis_url = embedded.start()

    async def run() -> int:
        store = Store(redis_url)
        try:
            memories = Memories(
                store, make_embedder(settings), load_policy(settings.policy), SystemClock()
            )
            return await reembed(memories)
        finally:
            await store.aclose()

    try:
        moved = asyncio.run(run())
    finally:
        if embedded is not None:
            embedded.stop()
    print(f"re-embedded {moved} memories with {settings.embeddings}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from .bench import run_proxy_bench

    return run_proxy_bench(
        rounds=args.rounds, warmup=args.warmup, concurrency=args.concurrency, seconds=args.seconds
    )


def _bench_soak(args: argparse.Namespace) -> int:
    from .bench_soak import run_soak

    return run_soak(seconds=args.seconds, concurrency=args.concurrency, users=args.users)


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
    from .bench_recall import run_recall_bench

    return run_recall_bench(
        sizes=args.sizes,
        queries=args.queries,
        users_total=args.users_total,
        embed_limit=args.embed_limit,
        warmup=args.warmup,
    )


def _bench_locomo(args: argparse.Namespace) -> int:
    from .bench_recall import run_locomo_bench

    return run_locomo_bench(
        data=args.data,
        k=args.k,
        pool=args.pool,
        prefeval=args.prefeval,
        no_prefeval=args.no_prefeval,
    )


def _bench_scenarios(args: argparse.Namespace) -> int:
    from .scenario_eval import run_scenario_bench

    return run_scenario_bench(
        scenarios=args.scenarios,
        prefeval=args.prefeval,
        no_prefeval=args.no_prefeval,
        json_out=args.json,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memgate", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gateway")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.set_defaults(func=_serve)
    keys = sub.add_parser("keys", help="issue, list, rotate and revoke gateway keys")
    actions = keys.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="issue a key (its secret is printed once)")
    create.add_argument("--label", required=True)
    create.add_argument(
        "--tenant", help="an existing tenant id to map the key to (default: a new tenant)"
    )
    create.add_argument(
        "--upstream-key-stdin",
        action="store_true",
        help="read the upstream key this key's requests are sent with from standard input",
    )
    actions.add_parser("list", help="keys without their secrets")
    for name, what in (("rotate", "a new secret, same tenant"), ("revoke", "revoke a key")):
        one = actions.add_parser(name, help=what)
        one.add_argument("id")
    actions.add_parser(
        "legacy-tenant",
        help="print the tenant id memgate derived from a client key (read from standard input)",
    )
    keys.set_defaults(func=_keys)
    re_embed = sub.add_parser(
        "reembed", help="re-embed memories stored under another embedding model"
    )
    re_embed.set_defaults(func=_reembed)
    bench = sub.add_parser("bench", help="benchmarks that print figures")
    targets = bench.add_subparsers(
        dest="target", required=True, metavar="{proxy,recall,locomo,scenarios,soak}"
    )
    proxy = targets.add_parser("proxy", help="latency memgate adds to a loopback upstream")
    proxy.add_argument("--rounds", type=int, default=300)
    proxy.add_argument("--warmup", type=int, default=20)
    proxy.add_argument("--concurrency", type=int, default=32)
    proxy.add_argument("--seconds", type=float, default=3.0)
    proxy.set_defaults(func=_bench)
    recall = targets.add_parser("recall", help="recall latency at growing numbers of memories")
    recall.add_argument(
        "--sizes",
        type=_sizes,
        default=[1_000, 10_000, 100_000],
        help="memories of one user, comma-separated (default 1000,10000,100000)",
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
    locomo = targets.add_parser("locomo", help="evidence recall@k on LoCoMo (and PrefEval)")
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
        help="gold recall, false recall and precision per category on recall scenarios, "
        "and PrefEval through the product path",
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
    soak = targets.add_parser("soak", help="bounded loopback soak with memory on")
    soak.add_argument("--seconds", type=float, default=600.0)
    soak.add_argument("--concurrency", type=int, default=200)
    soak.add_argument("--users", type=int, default=50, help="users with a memory each")
    soak.set_defaults(func=_bench_soak)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
