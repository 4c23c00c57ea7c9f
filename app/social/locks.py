"""Short-lived "only one of us" claims, shared through Redis (or this process without Redis)."""

from __future__ import annotations

import threading
import time

import redis


class ShortClaims:
    """`claim(key, ttl)` is True for exactly one caller until the claim expires or is released."""

    def __init__(self, redis_url: str | None = None, *, key_prefix: str = "tessera:social:claim") -> None:
        self._redis = redis.Redis.from_url(redis_url) if redis_url else None
        self._key_prefix = key_prefix
        self._lock = threading.Lock()
        self._held: dict[str, float] = {}

    def claim(self, key: str, ttl: float) -> bool:
        """Take the claim on `key` for `ttl` seconds; False when someone else holds it."""
        if self._redis is not None:
            return bool(self._redis.set(f"{self._key_prefix}:{key}", "1", nx=True, px=int(ttl * 1000)))
        with self._lock:
            now = time.monotonic()
            if self._held.get(key, 0.0) > now:
                return False
            self._held[key] = now + ttl
            return True

    def release(self, key: str) -> None:
        """Give the claim back early (after the work it guarded is durable)."""
        if self._redis is not None:
            self._redis.delete(f"{self._key_prefix}:{key}")
            return
        with self._lock:
            self._held.pop(key, None)
