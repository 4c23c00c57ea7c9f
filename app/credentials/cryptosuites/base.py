"""Interfaces shared by every Data Integrity cryptosuite: context, registry (and the failure type).

Pure module (no Flask). A suite module defines an object satisfying `Cryptosuite` and calls
`register_suite(...)` at import time; `app.credentials.cryptosuites.get_suite(name)` finds it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from app.credentials.failures import ProofCheckFailed as ProofCheckFailed
from app.credentials.jsonld.canon import (
    CanonicalizationLimits,
    CanonicalResult,
    canonicalize,
    canonicalize_nquads,
    canonicalize_with_labels,
    expand,
    to_nquads,
)
from app.credentials.jsonld.loader import DocumentLoader
from app.dids.verification_methods import VerificationKey


@dataclass(frozen=True)
class SuiteContext:
    """What a suite needs besides the document and the key: JSON-LD processing bound to a loader.

    `canonicalize` and friends apply the limits (time, size, safe mode) and raise
    `ProofCheckFailed` (`context_not_allowed`, `undefined_term`, `canonicalization_limit`, ...).
    `options` carries suite-specific extras (e.g. a BBS presentation header policy).
    """

    loader: DocumentLoader
    limits: CanonicalizationLimits = field(default_factory=CanonicalizationLimits)
    options: Mapping[str, Any] = field(default_factory=dict)

    def canonicalize(self, document: dict, *, hash_name: str = "sha256") -> str:
        """RDFC-1.0 canonical N-Quads of a JSON-LD document (one string, each quad ending in newline)."""
        return canonicalize(document, self.loader, hash_name=hash_name, limits=self.limits)

    def canonicalize_with_labels(self, document: dict, *, hash_name: str = "sha256") -> CanonicalResult:
        """Canonical quads plus the map from the document's blank-node ids to canonical labels."""
        return canonicalize_with_labels(document, self.loader, hash_name=hash_name, limits=self.limits)

    def to_nquads(self, document: dict) -> list[str]:
        """The document's quads in N-Quads form (not canonicalized; blank nodes `_:b0`, ...)."""
        return to_nquads(document, self.loader, limits=self.limits)

    def canonicalize_nquads(self, nquads: list[str] | str, *, hash_name: str = "sha256") -> CanonicalResult:
        """Canonicalize already serialized N-Quads (used by the selective-disclosure suites)."""
        return canonicalize_nquads(nquads, hash_name=hash_name, limits=self.limits)

    def expand(self, document: dict) -> list:
        """The JSON-LD expansion of a document, in safe mode and under the limits."""
        return expand(document, self.loader, limits=self.limits)


@runtime_checkable
class Cryptosuite(Protocol):
    """A Data Integrity cryptosuite verifier, identified by its `cryptosuite` name."""

    name: str

    def verify_proof(self, document_without_proof: dict, proof: dict, key: VerificationKey, ctx: SuiteContext) -> None:
        """Return if the proof is valid for the document and key, else raise `ProofCheckFailed`."""


_registry: dict[str, Cryptosuite] = {}
_registry_lock = threading.Lock()


def register_suite(suite: Cryptosuite) -> Cryptosuite:
    """Make `suite` findable by `get_suite(suite.name)`; registering a name twice replaces it."""
    with _registry_lock:
        _registry[suite.name] = suite
    return suite


def lookup_registered(name: str) -> Cryptosuite | None:
    """The suite registered under `name` so far, without importing suite modules."""
    return _registry.get(name)


def registered_names() -> list[str]:
    """Names of the suites registered so far."""
    return sorted(_registry)
