"""Per-platform call budgets shared by every worker process through Redis.

A budget is a list of `Rate(calls, per_seconds)` per platform; a call is allowed only when it keeps
every rate's sliding window at or under its limit (a sliding log, so no burst at window edges can
exceed what the platform enforces). `acquire` never sleeps: it answers 0 (go) or the seconds until
the call would be allowed, so a task can re-schedule itself instead of waiting. Without a Redis URL
the budget lives in process memory, which is only right for a single worker process; while Redis is
unreachable each process falls back to its own in-memory budget rather than failing the call.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import redis

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rate:
    """At most `calls` calls in any window of `per_seconds` seconds."""

    calls: int
    per_seconds: float


# KEYS: one sorted set per rate. ARGV: cost, member prefix, then (limit, window_ms) per rate.
# Members are "<prefix>:<i>" scored by the Redis clock in ms, so every process shares one clock.
_ACQUIRE_SCRIPT = """
local cost = tonumber(ARGV[1])
local prefix = ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wait = 0
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[1 + 2 * i])
  local window = tonumber(ARGV[2 + 2 * i])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local used = redis.call('ZCARD', key)
  if used + cost > limit then
    local over = used + cost - limit
    local oldest = redis.call('ZRANGE', key, over - 1, over - 1, 'WITHSCORES')
    local until_free = tonumber(oldest[2]) + window - now
    if until_free > wait then wait = until_free end
  end
end
if wait > 0 then return wait end
for i, key in ipairs(KEYS) do
  local window = tonumber(ARGV[2 + 2 * i])
  for n = 1, cost do
    redis.call('ZADD', key, now, prefix .. ':' .. n)
  end
  redis.call('PEXPIRE', key, window)
end
return 0
"""


class CallBudget:
    """Shared call budget per platform; platforms without configured rates are unlimited."""

    def __init__(
        self,
        rates: Mapping[str, Sequence[Rate]],
        *,
        redis_url: str | None = None,
        key_prefix: str = "tessera:social:budget",
        clock: Callable[[], float] = time.monotonic,
        socket_timeout: float = 1.0,
    ) -> None:
        self._rates = {platform: tuple(platform_rates) for platform, platform_rates in rates.items()}
        self._key_prefix = key_prefix
        self._redis = (
            redis.Redis.from_url(redis_url, socket_connect_timeout=socket_timeout, socket_timeout=socket_timeout)
            if redis_url
            else None
        )
        self._script = self._redis.register_script(_ACQUIRE_SCRIPT) if self._redis is not None else None
        self._clock = clock
        self._lock = threading.Lock()
        self._logs: dict[tuple[str, int], deque[float]] = {}

    def acquire(self, platform: str, cost: int = 1) -> float:
        """Take `cost` calls of `platform`'s budget: 0.0 when granted, else seconds to wait (nothing taken).

        Raises `ValueError` when `cost` exceeds a rate's whole limit (it could never be granted).
        """
        rates = self._rates.get(platform)
        if not rates:
            return 0.0
        if any(cost > rate.calls for rate in rates):
            raise ValueError(f"cost {cost} exceeds the {platform} budget")
        if self._script is not None:
            try:
                return self._acquire_redis(platform, rates, cost)
            except redis.RedisError as exc:
                log.warning("redis unreachable, %s budget kept in this process: %s", platform, exc.__class__.__name__)
        return self._acquire_memory(platform, rates, cost)

    def _acquire_redis(self, platform: str, rates: tuple[Rate, ...], cost: int) -> float:
        keys = [f"{self._key_prefix}:{platform}:{index}" for index in range(len(rates))]
        args: list[str | int] = [cost, uuid.uuid4().hex]
        for rate in rates:
            args.extend([rate.calls, int(rate.per_seconds * 1000)])
        wait_ms = int(self._script(keys=keys, args=args))
        return wait_ms / 1000.0 if wait_ms > 0 else 0.0

    def _acquire_memory(self, platform: str, rates: tuple[Rate, ...], cost: int) -> float:
        with self._lock:
            now = self._clock()
            wait = 0.0
            logs = []
            for index, rate in enumerate(rates):
                log = self._logs.setdefault((platform, index), deque())
                while log and log[0] <= now - rate.per_seconds:
                    log.popleft()
                over = len(log) + cost - rate.calls
                if over > 0:
                    wait = max(wait, log[over - 1] + rate.per_seconds - now)
                logs.append(log)
            if wait > 0:
                return wait
            for log in logs:
                log.extend([now] * cost)
            return 0.0

    def reset(self, platform: str) -> None:
        """Forget every call recorded for `platform` (operators and tests)."""
        if self._redis is not None:
            rates = self._rates.get(platform, ())
            keys = [f"{self._key_prefix}:{platform}:{index}" for index in range(len(rates))]
            if keys:
                self._redis.delete(*keys)
        with self._lock:
            for key in [key for key in self._logs if key[0] == platform]:
                del self._logs[key]
