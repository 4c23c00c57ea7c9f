"""Short-lived "only one of us" claims, shared through Redis (or this process without Redis).

While Redis is unreachable the claims fall back to this process: the database stays the judge of
what is written (callers compare-and-set), so a claim only saves duplicate work and must never
fail a request.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

log = logging.getLogger(__name__)


class ShortClaims:
    """`claim(key, ttl)` is True for exactly one caller until the claim expires or is released."""

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        key_prefix: str = "tessera:social:claim",
        socket_timeout: float = 1.0,
    ) -> None:
        self._redis = (
            redis.Redis.from_url(redis_url, socket_connect_timeout=socket_timeout, socket_timeout=socket_timeout)
            if redis_url
            else None
        )
        self._key_prefix = key_prefix
        self._lock = threading.Lock()
        self._held: dict[str, float] = {}

    def claim(self, key: str, ttl: float) -> bool:
        """Take the claim on `key` for `ttl` seconds; False when someone else holds it."""
        if self._redis is not None:
            try:
                return bool(self._redis.set(f"{self._key_prefix}:{key}", "1", nx=True, px=int(ttl * 1000)))
            except redis.RedisError as exc:
                log.warning("redis unreachable, claim %s held in this process: %s", key, exc.__class__.__name__)
        with self._lock:
            now = time.monotonic()
            if self._held.get(key, 0.0) > now:
                return False
            self._held[key] = now + ttl
            return True

    def release(self, key: str) -> None:
        """Give the claim back early (after the work it guarded is durable)."""
        if self._redis is not None:
            try:
                self._redis.delete(f"{self._key_prefix}:{key}")
            except redis.RedisError as exc:  # the claim expires on its own
                log.warning("redis unreachable, claim %s left to expire: %s", key, exc.__class__.__name__)
        with self._lock:
            self._held.pop(key, None)
