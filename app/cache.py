"""The one cache of the application's processes: bounded, versioned or timed, measured.

    _DOCUMENTS = Cache("agent_did_documents", maxsize=10_000)
    document = _DOCUMENTS.get_or_build(did, version=document_version(did), build=lambda: build(did))

An entry is served while its `version` equals the one asked with (the builder's version function,
kept beside the builder, says what the value was built from: a change of any input is a new
version) and, for a cache or an entry with a `ttl`, until it is that many seconds old. The least recently used
entry goes first when the cache is full. Hits and misses are counted per cache in
`tessera_cache_requests_total{cache, result}`. Thread-safe; a value is built outside the lock (two
threads missing at once may both build; the last one is kept).

`peek` is the lookup of hot paths (an IRI expansion, a statement's compiled form), where a lookup
must cost about what a dict's does: no lock, no recency mark (entries only peeked at leave in the
order they came), and its hits and misses reach the counter in batches of `PEEK_BATCH`.

`functools.cache` stays right for pure functions of their arguments (statement builders); this
module is for values built from data that changes.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from prometheus_client import Counter

V = TypeVar("V")

CACHE_REQUESTS = Counter("tessera_cache_requests_total", "Cache lookups by cache and result", ["cache", "result"])
PEEK_BATCH = 256
_MISSING: Any = object()


class Cache(Generic[V]):
    """A bounded LRU map of values valid for a version and, with `ttl`, for `ttl` seconds."""

    def __init__(
        self, name: str, *, maxsize: int, ttl: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if maxsize <= 0:
            raise ValueError("a cache holds at least one entry")
        self.name = name
        self.maxsize = maxsize
        self.ttl = ttl
        self._clock = clock
        # key -> (version, expiry instant or None for never, value)
        self._entries: OrderedDict[Hashable, tuple[Hashable, float | None, V]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = CACHE_REQUESTS.labels(name, "hit")
        self._misses = CACHE_REQUESTS.labels(name, "miss")
        # next() of an itertools.count is atomic: peeks from several threads lose no count.
        self._peeked_hits = itertools.count(1)
        self._peeked_misses = itertools.count(1)

    def get(self, key: Hashable, version: Hashable = None) -> V | None:
        """The value of `key` built at `version` and not expired, else None (counted as a miss)."""
        value = self._lookup(key, version)
        return None if value is _MISSING else value

    def put(self, key: Hashable, value: V, version: Hashable = None, *, ttl: float | None = None) -> None:
        """Keep `value` for `key` at `version` (for `ttl` seconds when given, else the cache's),
        dropping the least recently used entry when full."""
        ttl = self.ttl if ttl is None else ttl
        expires_at = None if ttl is None else self._clock() + ttl
        with self._lock:
            self._entries[key] = (version, expires_at, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)

    def peek(self, key: Hashable, version: Hashable = None) -> V | None:
        """`get` for hot paths: without the lock or the recency mark, counted in batches."""
        entry = self._entries.get(key)
        if entry is not None and entry[0] == version and (entry[1] is None or self._clock() < entry[1]):
            if next(self._peeked_hits) % PEEK_BATCH == 0:
                self._hits.inc(PEEK_BATCH)
            return entry[2]
        if next(self._peeked_misses) % PEEK_BATCH == 0:
            self._misses.inc(PEEK_BATCH)
        return None

    def get_or_build(self, key: Hashable, build: Callable[[], V], version: Hashable = None) -> V:
        """The cached value of `key` at `version`, else `build()`, kept."""
        value = self._lookup(key, version)
        if value is _MISSING:
            value = build()
            self.put(key, value, version)
        return value

    def discard(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _lookup(self, key: Hashable, version: Hashable) -> Any:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == version and (entry[1] is None or self._clock() < entry[1]):
                self._entries.move_to_end(key)
                self._hits.inc()
                return entry[2]
        self._misses.inc()
        return _MISSING
