"""Offline, allow-listed JSON-LD document loader for pyld: contexts come from local files only.

The standard contexts ship in the package (`contexts/`, listed in `contexts/manifest.json` as
URL → file and SHA-256, checked when they are loaded); an operator's directory adds to them.

A loader never touches the network. Each document is parsed once and kept; processed contexts
are cached per loader (not in pyld's process-wide cache, which would let one loader's contexts
leak into another's allow-list).
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from app.cache import Cache
from app.credentials.failures import ProofCheckFailed

T = TypeVar("T")

URLMAP_FILE = "urlmap.json"
BUILTIN_CONTEXTS_DIR = Path(__file__).resolve().parent / "contexts"
MANIFEST_FILE = "manifest.json"
_PROCESSED_CONTEXT_CACHE_SIZE = 512
_IRI_MEMO_CONTEXTS = 64  # a verification expands against a handful of contexts
# A verification expands about a hundred IRIs. Each entry keeps its processed context alive (so its
# id is not reused): this bounds how many contexts the expansions can hold, as the size above
# bounds those of the processed contexts.
_EXPANDED_IRIS = 1024


class ContextNotAllowed(ProofCheckFailed):
    """A JSON-LD document referenced a context URL that is not on the allow-list."""

    code = "context_not_allowed"

    def __init__(self, url: str) -> None:
        self.url = url
        super().__init__(detail=f"context {url!r} is not on the allow-list")


def _thread_cache(name: str, size: int = _PROCESSED_CONTEXT_CACHE_SIZE) -> Cache:
    return Cache(f"jsonld_{name}", maxsize=size)


class PyldContextCache:
    """The cache pyld's `ContextResolver` is given (it calls `get` and assigns items), kept in a `Cache`."""

    def __init__(self, cache: Cache[dict]) -> None:
        self._cache = cache

    def get(self, key: str, default: Any = None) -> Any:
        value = self._cache.get(key)
        return default if value is None else value

    def __setitem__(self, key: str, value: dict) -> None:
        self._cache.put(key, value)


class DocumentLoader:
    """A pyld `documentLoader(url, options)` serving allow-listed documents from memory.

    Use `make_document_loader` to build one from a directory. `urls` lists what is allowed.
    `resolved_contexts` is the cache pyld's ContextResolver keeps for this loader, and
    `processed_contexts`, `iri_contexts` and `expanded_iris` the canonicalizer's caches of
    processed contexts, of those IRIs are expanded against, and of the expansions (see
    `canon._GuardedProcessor`). None needs a version: the loader's documents never change, and a
    processed context is never mutated. The canonicalizer looks its caches up with `Cache.peek`
    (they lie on its hot path), so they forget entries in the order they came.

    The caches are not safe to share (processed contexts are matched by identity), so each thread
    has its own: threads never wait for one another, and a small verification is not held up by a
    large one running in another thread of the process.
    """

    def __init__(self, documents: dict[str, Any]) -> None:
        self._documents = documents
        self._local = threading.local()

    @property
    def resolved_contexts(self) -> PyldContextCache:
        """This thread's cache of resolved contexts (pyld's ContextResolver)."""
        return self._thread_local("resolved_contexts", lambda: PyldContextCache(_thread_cache("resolved_contexts")))

    @property
    def processed_contexts(self) -> Cache[tuple]:
        """This thread's processed contexts, by active context and local context."""
        return self._thread_local("processed_contexts", lambda: _thread_cache("processed_contexts"))

    @property
    def iri_contexts(self) -> Cache[dict]:
        """This thread's processed contexts whose IRI expansions are kept, by identity."""
        return self._thread_local("iri_contexts", lambda: _thread_cache("iri_contexts", _IRI_MEMO_CONTEXTS))

    @property
    def expanded_iris(self) -> Cache[tuple]:
        """This thread's IRI expansions, by processed context (identity), value, base and vocab."""
        return self._thread_local("expanded_iris", lambda: _thread_cache("expanded_iris", _EXPANDED_IRIS))

    def _thread_local(self, name: str, build: Callable[[], T]) -> T:
        value = getattr(self._local, name, None)
        if value is None:
            value = build()
            setattr(self._local, name, value)
        return value

    @property
    def urls(self) -> frozenset[str]:
        """The allow-listed URLs."""
        return frozenset(self._documents)

    def get_document(self, url: str) -> Any:
        """A deep copy of the parsed document at `url`; raises `ContextNotAllowed`."""
        try:
            return copy.deepcopy(self._documents[url])
        except (KeyError, TypeError):
            raise ContextNotAllowed(str(url)) from None

    def __call__(self, url: str, options: dict | None = None) -> dict[str, Any]:
        try:
            document = self._documents[url]
        except (KeyError, TypeError):
            raise ContextNotAllowed(str(url)) from None
        # "static" lets pyld keep the resolved (and processed) context in this loader's cache, so
        # a context is loaded and processed once per loader rather than once per document.
        return {
            "contextUrl": None,
            "documentUrl": url,
            "document": copy.deepcopy(document),
            "contentType": "application/ld+json",
            "tag": "static",
        }


def read_contexts_dir(contexts_dir: Path) -> dict[str, Path]:
    """The URL → file map of a contexts directory, read from its `urlmap.json`.

    Raises `FileNotFoundError` when the directory has no `urlmap.json`, `ValueError` when it is
    not a JSON object of URL → relative file name.
    """
    contexts_dir = Path(contexts_dir)
    mapping = json.loads((contexts_dir / URLMAP_FILE).read_text(encoding="utf-8"))
    if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
        raise ValueError(f"{contexts_dir / URLMAP_FILE} must map URLs to file names")
    return {str(url): contexts_dir / name for url, name in mapping.items()}


class ContextIntegrityError(RuntimeError):
    """A built-in context file does not match the SHA-256 its manifest pins (a damaged install)."""


def builtin_contexts() -> dict[str, Any]:
    """The parsed standard contexts shipped in the package, URL → document.

    Each file is checked against the SHA-256 in `contexts/manifest.json`; raises
    `ContextIntegrityError` on a mismatch.
    """
    manifest = json.loads((BUILTIN_CONTEXTS_DIR / MANIFEST_FILE).read_text(encoding="utf-8"))
    documents: dict[str, Any] = {}
    for url, entry in manifest.items():
        data = (BUILTIN_CONTEXTS_DIR / entry["file"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise ContextIntegrityError(f"built-in context {entry['file']} for {url} does not match its SHA-256")
        documents[url] = json.loads(data)
    return documents


def make_document_loader(
    contexts_dir: Path | None,
    *,
    extra: dict[str, Path | dict] | None = None,
    builtin: bool = False,
) -> DocumentLoader:
    """Build an offline loader for the contexts in `contexts_dir` (plus `extra` URL → file).

    Files are read and parsed now, once. Any other URL raises `ContextNotAllowed`.
    `extra` may also map a URL directly to an already parsed document (a dict).
    With `builtin`, the package's standard contexts are allowed too; for a URL both define,
    the built-in (pinned) document wins.
    """
    files: dict[str, Any] = {}
    if contexts_dir is not None:
        files.update(read_contexts_dir(Path(contexts_dir)))
    if extra:
        files.update(extra)
    if builtin:
        files.update(builtin_contexts())
    documents: dict[str, Any] = {}
    for url, source in files.items():
        if isinstance(source, dict):
            documents[url] = copy.deepcopy(source)
        else:
            documents[url] = json.loads(Path(source).read_text(encoding="utf-8"))
    return DocumentLoader(documents)
