"""The per-platform call budget: in memory and shared through a real Redis server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from app.social.budget import CallBudget, Rate


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_memory_budget_grants_up_to_the_limit_then_says_how_long_to_wait() -> None:
    clock = FakeClock()
    budget = CallBudget({"platform_c": [Rate(3, 10)]}, clock=clock)
    assert [budget.acquire("platform_c") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert budget.acquire("platform_c") == pytest.approx(10.0)
    clock.now += 4
    assert budget.acquire("platform_c") == pytest.approx(6.0)
    clock.now += 6
    assert budget.acquire("platform_c") == 0.0


def test_window_slides_rather_than_resets() -> None:
    clock = FakeClock()
    budget = CallBudget({"platform_a": [Rate(2, 10)]}, clock=clock)
    budget.acquire("platform_a")
    clock.now += 9
    budget.acquire("platform_a")
    clock.now += 2  # the first call left the window, the second has not
    assert budget.acquire("platform_a") == 0.0
    assert budget.acquire("platform_a") == pytest.approx(8.0)  # until the call at +9 leaves


def test_every_rate_of_a_platform_must_allow_the_call() -> None:
    clock = FakeClock()
    budget = CallBudget({"platform_a": [Rate(5, 1), Rate(6, 100)]}, clock=clock)
    for _ in range(5):
        assert budget.acquire("platform_a") == 0.0
    assert budget.acquire("platform_a") == pytest.approx(1.0)
    clock.now += 1
    assert budget.acquire("platform_a") == 0.0
    assert budget.acquire("platform_a") == pytest.approx(99.0)


def test_refused_calls_take_nothing_and_cost_counts() -> None:
    clock = FakeClock()
    budget = CallBudget({"platform_b": [Rate(4, 10)]}, clock=clock)
    assert budget.acquire("platform_b", cost=3) == 0.0
    assert budget.acquire("platform_b", cost=2) > 0
    assert budget.acquire("platform_b", cost=1) == 0.0
    with pytest.raises(ValueError):
        budget.acquire("platform_b", cost=5)


def test_unconfigured_platform_is_unlimited() -> None:
    budget = CallBudget({})
    assert all(budget.acquire("platform_b") == 0.0 for _ in range(1000))


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """`REDIS_URL` when the run has one, else a private redis-server on a free loopback port."""
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    binary = shutil.which("redis-server")
    assert binary, "the Redis budget tests need REDIS_URL or a redis-server binary"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)


def redis_budget(url: str, prefix: str, rates: list[Rate]) -> CallBudget:
    return CallBudget({"platform_c": rates}, redis_url=url, key_prefix=prefix)


def test_redis_budget_is_shared_between_instances(redis_url: str) -> None:
    prefix = f"test:{uuid.uuid4().hex}"
    first = redis_budget(redis_url, prefix, [Rate(3, 30)])
    second = redis_budget(redis_url, prefix, [Rate(3, 30)])
    assert [first.acquire("platform_c"), second.acquire("platform_c"), first.acquire("platform_c")] == [0, 0, 0]
    wait = second.acquire("platform_c")
    assert 29 < wait <= 30
    second.reset("platform_c")
    assert first.acquire("platform_c") == 0.0


def test_redis_budget_under_concurrency_grants_exactly_the_limit(redis_url: str) -> None:
    prefix = f"test:{uuid.uuid4().hex}"
    budgets = [redis_budget(redis_url, prefix, [Rate(10, 60), Rate(1000, 3600)]) for _ in range(4)]
    granted: list[float] = []
    lock = threading.Lock()

    def worker(budget: CallBudget) -> None:
        for _ in range(10):
            wait = budget.acquire("platform_c")
            with lock:
                granted.append(wait)

    threads = [threading.Thread(target=worker, args=(budget,)) for budget in budgets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(1 for wait in granted if wait == 0) == 10
    assert all(0 < wait <= 60 for wait in granted if wait)


def test_redis_window_expires(redis_url: str) -> None:
    budget = redis_budget(redis_url, f"test:{uuid.uuid4().hex}", [Rate(1, 0.3)])
    assert budget.acquire("platform_c") == 0.0
    assert 0 < budget.acquire("platform_c") <= 0.3
    time.sleep(0.35)
    assert budget.acquire("platform_c") == 0.0


def test_budget_setting_is_parsed() -> None:
    from app.social.settings import DEFAULT_BUDGETS, parse_budgets

    assert parse_budgets("platform_a=100000/86400, 10/1; platform_c=800/60") == {
        "platform_a": [Rate(100000, 86400.0), Rate(10, 1.0)],
        "platform_c": [Rate(800, 60.0)],
    }
    assert set(parse_budgets(DEFAULT_BUDGETS)) == {"platform_a", "platform_b", "platform_c"}
    assert parse_budgets("") == {}
