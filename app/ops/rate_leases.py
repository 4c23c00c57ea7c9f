"""A rate limit's hits counted a few at a time: the hot path's limit without a round trip per request.

A process takes a *lease* of several hits of a fixed window from the shared counter at once (one
INCRBY of the lease's size) and spends them itself; the limiter's views count in the same counter
one by one. Never more hits are allowed in a window than the limit (a lease that crosses it keeps
only the hits below it), with one bounded exception: hits a lease took in one window and spends in
the first `lease_seconds` of the next are not counted there, at most `size - 1` per process and
bucket. Hits leased and left unspent when a lease lapses are lost the other way (refused, never
allowed). Limits under `_EXACT_BELOW` hits per window are counted one by one, exactly as before.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from limits import RateLimitItem
from limits.strategies import FixedWindowRateLimiter, RateLimiter

_EXACT_BELOW = 128  # limits smaller than this are counted hit by hit
_MAX_LEASE = 16
_MAX_BUCKETS = 4096  # leases kept per process before lapsed ones are dropped


@dataclass(slots=True)
class _Lease:
    remaining: int
    lapses_at: float


class RateLeases:
    """Leases of one process, per bucket (the limit's storage key)."""

    def __init__(self) -> None:
        self._leases: dict[str, _Lease] = {}
        self._lock = threading.Lock()

    @staticmethod
    def lease_size(limit: RateLimitItem) -> int:
        """Hits taken at once: one below `_EXACT_BELOW`, else up to 1/64 of the window's hits."""
        return 1 if limit.amount < _EXACT_BELOW else min(_MAX_LEASE, limit.amount // 64)

    def hit(self, strategy: RateLimiter, limit: RateLimitItem, *identifiers: str) -> bool:
        """Count one hit; False when the limit is reached. Storage errors propagate."""
        size = self.lease_size(limit)
        if size == 1 or not isinstance(strategy, FixedWindowRateLimiter):
            return strategy.hit(limit, *identifiers)
        key = limit.key_for(*identifiers)
        now = time.monotonic()
        with self._lock:
            lease = self._leases.get(key)
            if lease is not None and lease.remaining > 0 and now < lease.lapses_at:
                lease.remaining -= 1
                return True
        count = strategy.storage.incr(key, limit.get_expiry(), amount=size)
        granted = size - max(0, count - limit.amount)
        if granted <= 0:
            return False
        lease_seconds = min(1.0, limit.get_expiry() / 60)
        with self._lock:
            if len(self._leases) >= _MAX_BUCKETS:
                self._leases = {name: kept for name, kept in self._leases.items() if kept.lapses_at > now}
            # Spend one now; a lease still held by another thread of this process is replaced (its rest is lost).
            self._leases[key] = _Lease(remaining=granted - 1, lapses_at=now + lease_seconds)
        return True
