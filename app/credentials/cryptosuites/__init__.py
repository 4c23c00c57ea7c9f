"""Registry of Data Integrity cryptosuites: `get_suite(name)` finds a suite by its cryptosuite name.

Every module in this package is imported on the first lookup; suite modules register themselves
with `register_suite` at import time.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading

from app.credentials.cryptosuites.base import (
    Cryptosuite,
    ProofCheckFailed,
    lookup_registered,
    register_suite,
    registered_names,
)

__all__ = ["Cryptosuite", "ProofCheckFailed", "get_suite", "register_suite", "require_suite", "suite_names"]

_NOT_SUITES = frozenset({"base"})
_load_lock = threading.Lock()
_loaded = False


def _load_suite_modules() -> None:
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if _loaded:
            return
        for module in pkgutil.iter_modules(__path__):
            if module.name not in _NOT_SUITES and not module.name.startswith("_"):
                importlib.import_module(f"{__name__}.{module.name}")
        _loaded = True


def get_suite(name: str) -> Cryptosuite | None:
    """The suite registered under `name`, or None."""
    _load_suite_modules()
    return lookup_registered(name)


def require_suite(name: str) -> Cryptosuite:
    """The suite registered under `name`; raises `ProofCheckFailed("unknown_cryptosuite")`."""
    suite = get_suite(name) if isinstance(name, str) else None
    if suite is None:
        raise ProofCheckFailed("unknown_cryptosuite", f"cryptosuite {name!r} is not supported")
    return suite


def suite_names() -> list[str]:
    """Names of every available suite."""
    _load_suite_modules()
    return registered_names()
