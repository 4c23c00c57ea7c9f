"""Registry of Data Integrity cryptosuites: `get_suite(name)` finds a suite by its cryptosuite name.

Every module in this package is imported on the first lookup; suite modules register themselves
with `register_suite` at import time. A module that fails to import is logged and listed by
`suite_import_errors()`; its suites are then unknown (`unknown_cryptosuite`), the others still work.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import threading

from app.credentials.cryptosuites.base import (
    Cryptosuite,
    ProofCheckFailed,
    lookup_registered,
    register_suite,
    registered_names,
)

__all__ = [
    "Cryptosuite",
    "ProofCheckFailed",
    "get_suite",
    "register_suite",
    "require_suite",
    "suite_import_errors",
    "suite_names",
]

_NOT_SUITES = frozenset({"base"})
_load_lock = threading.Lock()
_loaded = False
_import_errors: dict[str, str] = {}
logger = logging.getLogger(__name__)


def _load_suite_modules() -> None:
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if _loaded:
            return
        for module in pkgutil.iter_modules(__path__):
            if module.name in _NOT_SUITES or module.name.startswith("_"):
                continue
            try:
                importlib.import_module(f"{__name__}.{module.name}")
            except Exception as error:  # one broken suite must not take the others down with it
                _import_errors[module.name] = f"{type(error).__name__}: {error}"
                logger.exception("cryptosuite module %s failed to import", module.name)
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


def suite_import_errors() -> dict[str, str]:
    """Modules of this package that failed to import, with the error (empty when all is well)."""
    _load_suite_modules()
    return dict(_import_errors)
