"""`app.ops.rate_leases.RateLeases`: never more hits than the limit, one storage call per lease."""

from __future__ import annotations

from limits import parse
from limits.storage import MemoryStorage
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

from app.ops import rate_leases
from app.ops.rate_leases import RateLeases


class CountingStorage(MemoryStorage):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        self.calls += 1
        return super().incr(key, expiry, amount)


def allowed_hits(leases: list[RateLeases], strategy, limit, attempts: int) -> int:
    return sum(leases[index % len(leases)].hit(strategy, limit, "bucket") for index in range(attempts))


def test_small_limits_are_counted_hit_by_hit():
    storage = CountingStorage()
    strategy, limit = FixedWindowRateLimiter(storage), parse("100 per minute")
    assert allowed_hits([RateLeases()], strategy, limit, 150) == 100
    assert storage.calls == 150 and storage.get(limit.key_for("bucket")) == 150


def test_a_lease_takes_several_hits_in_one_call():
    storage = CountingStorage()
    strategy, limit = FixedWindowRateLimiter(storage), parse("1280 per minute")
    assert RateLeases.lease_size(limit) == 16
    leases = RateLeases()
    assert allowed_hits([leases], strategy, limit, 16) == 16
    assert storage.calls == 1 and storage.get(limit.key_for("bucket")) == 16
    assert leases.hit(strategy, limit, "bucket") and storage.calls == 2


def test_processes_together_never_exceed_the_limit():
    for text in ("128 per minute", "130 per minute", "1000 per minute", "1283 per minute"):
        storage = CountingStorage()
        strategy, limit = FixedWindowRateLimiter(storage), parse(text)
        processes = [RateLeases(), RateLeases(), RateLeases()]
        assert allowed_hits(processes, strategy, limit, limit.amount * 2) == limit.amount, text
        # the limiter's views, counting one by one in the same counter, are refused too
        assert not strategy.hit(limit, "bucket")


def test_a_lapsed_lease_is_not_spent(monkeypatch):
    storage = CountingStorage()
    strategy, limit = FixedWindowRateLimiter(storage), parse("1280 per minute")
    leases = RateLeases()
    clock = [1000.0]
    monkeypatch.setattr(rate_leases.time, "monotonic", lambda: clock[0])
    assert leases.hit(strategy, limit, "bucket") and storage.calls == 1
    clock[0] += 1.5  # past the lease (1 s for a one-minute window)
    assert leases.hit(strategy, limit, "bucket") and storage.calls == 2
    assert storage.get(limit.key_for("bucket")) == 32


def test_other_strategies_count_hit_by_hit():
    storage = CountingStorage()
    strategy, limit = MovingWindowRateLimiter(storage), parse("1280 per minute")
    assert allowed_hits([RateLeases()], strategy, limit, 20) == 20
    assert strategy.get_window_stats(limit, "bucket").remaining == 1260
