"""The one module that queries Redis. Every other module asks the store; none holds a client."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aredis
from redis.exceptions import RedisError, ResponseError


class QueryEngineMissing(RuntimeError):
    pass


class Store:
    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.redis: aredis.Redis = aredis.Redis.from_url(
            redis_url, decode_responses=False, health_check_interval=30
        )

    async def check_query_engine(self) -> None:
        """Fail fast at start-up when the Redis lacks the Query Engine (RediSearch)."""
        await self.redis.ping()
        try:
            await self.redis.execute_command("FT._LIST")
        except ResponseError as exc:
            raise QueryEngineMissing(
                f"The Redis at {_redact(self.redis_url)} has no Query Engine ({exc}). "
                "Use Redis 8 or Redis Stack 7.4+, or leave MEMGATE_REDIS_URL unset "
                "for the embedded one."
            ) from None

    async def readiness(self) -> dict[str, Any]:
        try:
            await self.redis.ping()
            indexes = await self.redis.execute_command("FT._LIST")
        except RedisError as exc:
            return {"redis": False, "error": type(exc).__name__}
        return {"redis": True, "indexes": len(indexes)}

    async def aclose(self) -> None:
        await self.redis.aclose()


def _redact(url: str) -> str:
    """Never print a password that sits in a Redis URL."""
    if "@" in url:
        scheme, _, rest = url.partition("://")
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url
