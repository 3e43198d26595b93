"""Storage: the only package that imports redis (memories, search, keys, the embedded Redis).

The Redis errors other layers catch are re-exported here, so that they need not import redis.
"""

from redis.exceptions import ConnectionError, RedisError, ResponseError

__all__ = ["ConnectionError", "RedisError", "ResponseError"]
