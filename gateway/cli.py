"""The ``memgate`` command: ``serve`` runs the gateway, ``bench`` measures it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import structlog

from .config import Settings


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
        app = create_app(settings, redis_url=redis_url, policy=policy)
        log.info("serving", host=args.host, port=args.port, upstream=settings.upstream_url)
        uvicorn.run(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            access_log=False,
            lifespan="on",
        )
    finally:
        if embedded is not None:
            embedded.stop()
            log.info("embedded_redis_stopped")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from .bench import run_proxy_bench

    return run_proxy_bench(
        rounds=args.rounds, warmup=args.warmup, concurrency=args.concurrency, seconds=args.seconds
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memgate", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gateway")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.set_defaults(func=_serve)
    bench = sub.add_parser("bench", help="benchmarks that print figures")
    bench.add_argument("target", choices=["proxy"])
    bench.add_argument("--rounds", type=int, default=300)
    bench.add_argument("--warmup", type=int, default=20)
    bench.add_argument("--concurrency", type=int, default=32)
    bench.add_argument("--seconds", type=float, default=3.0)
    bench.set_defaults(func=_bench)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
