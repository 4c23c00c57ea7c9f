"""`app.cache.Cache`: bounded (least recently used first out), versioned, timed, measured."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from app.cache import PEEK_BATCH, Cache


def _count(name: str, result: str) -> float:
    return REGISTRY.get_sample_value("tessera_cache_requests_total", {"cache": name, "result": result}) or 0.0


def test_the_least_recently_used_entry_goes_first():
    cache: Cache[int] = Cache("test_bounds", maxsize=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3)
    assert len(cache) == 2
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3


def test_an_entry_serves_its_own_version_only():
    cache: Cache[str] = Cache("test_versions", maxsize=8)
    built: list[str] = []

    def build(text: str):
        return lambda: built.append(text) or text

    assert cache.get_or_build("doc", build("v1"), version=("row", 1)) == "v1"
    assert cache.get_or_build("doc", build("again"), version=("row", 1)) == "v1"
    assert cache.get_or_build("doc", build("v2"), version=("row", 2)) == "v2"
    assert built == ["v1", "v2"]
    assert cache.get("doc", version=("row", 1)) is None


def test_entries_expire_after_their_ttl():
    now = [100.0]
    cache: Cache[str] = Cache("test_ttl", maxsize=8, ttl=10, clock=lambda: now[0])
    cache.put("default", "x")
    cache.put("short", "y", ttl=1)
    now[0] = 101.5
    assert cache.get("default") == "x" and cache.get("short") is None
    now[0] = 110.0
    assert cache.get("default") is None


def test_hits_and_misses_are_counted_per_cache():
    cache: Cache[int] = Cache("test_metrics", maxsize=4)
    hits, misses = _count("test_metrics", "hit"), _count("test_metrics", "miss")
    cache.get("absent")
    cache.put("present", 1)
    cache.get("present")
    cache.get("present", version="other")
    assert _count("test_metrics", "hit") == hits + 1
    assert _count("test_metrics", "miss") == misses + 2


def test_a_peek_serves_like_get_but_marks_nothing_used():
    now = [0.0]
    cache: Cache[int] = Cache("test_peek", maxsize=2, clock=lambda: now[0])
    cache.put("a", 1, version=1)
    cache.put("b", 2, ttl=5)
    assert cache.peek("a", version=1) == 1 and cache.peek("a") is None and cache.peek("absent") is None
    now[0] = 5.0
    assert cache.peek("b") is None  # expired
    cache.put("c", 3)
    assert cache.get("a", version=1) is None, "peeking left 'a' the least recently used"


def test_peeks_are_counted_in_batches():
    cache: Cache[int] = Cache("test_peek_metrics", maxsize=4)
    cache.put("present", 1)
    hits, misses = _count("test_peek_metrics", "hit"), _count("test_peek_metrics", "miss")
    for _ in range(PEEK_BATCH - 1):
        cache.peek("present")
        cache.peek("absent")
    assert (_count("test_peek_metrics", "hit"), _count("test_peek_metrics", "miss")) == (hits, misses)
    cache.peek("present")
    cache.peek("absent")
    assert _count("test_peek_metrics", "hit") == hits + PEEK_BATCH
    assert _count("test_peek_metrics", "miss") == misses + PEEK_BATCH


def test_a_cache_holds_something():
    with pytest.raises(ValueError):
        Cache("test_empty", maxsize=0)
