"""Resolution of this network's DIDs (``did:<method>:<40 hex>``), as the DID Resolution spec shapes it.

The features that hold such DIDs (agents, users) register a finder each at `create_app`
(`register_did_finders`); resolution asks them in order without importing them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app

from app.db import isoformat, utcnow
from app.dids.method import did_method, is_network_did

DID_RESOLUTION_CONTEXT = "https://w3id.org/did-resolution/v1"
_DID_SYNTAX = re.compile(r"^did:[a-z0-9]+:[A-Za-z0-9._:%-]+$")
_EXTENSION = "network_did_finders"


@dataclass(frozen=True)
class NetworkDid:
    """What a feature knows of one of its DIDs: the document and its ``didDocumentMetadata``."""

    document: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    deactivated: bool = False


DidFinder = Callable[[str], NetworkDid | None]


@dataclass(frozen=True)
class Resolution:
    """The outcome of resolving a DID: HTTP status and the DID resolution result."""

    status: int
    result: dict[str, Any]

    @property
    def document(self) -> dict[str, Any] | None:
        return self.result.get("didDocument")


def document_finder(lookup: Callable[[str], dict | None]) -> DidFinder:
    """A finder for DIDs that have a document and no metadata (users' DIDs)."""

    def find(did: str) -> NetworkDid | None:
        document = lookup(did)
        return None if document is None else NetworkDid(document)

    return find


def register_did_finders(app: Flask, finders: Sequence[DidFinder]) -> None:
    app.extensions[_EXTENSION] = tuple(finders)


def _error(status: int, error: str, title: str, detail: str) -> Resolution:
    return Resolution(
        status,
        {
            "@context": DID_RESOLUTION_CONTEXT,
            "didDocument": None,
            "didResolutionMetadata": {
                "error": {"type": f"https://www.w3.org/ns/did#{error}", "title": title, "detail": detail}
            },
            "didDocumentMetadata": {},
        },
    )


def resolve_did(did: str) -> Resolution:
    """Resolve a DID of this network: 200, 400 INVALID_DID, 404 NOT_FOUND or 410 deactivated."""
    if not _DID_SYNTAX.match(did) or not is_network_did(did):
        return _error(400, "INVALID_DID", "Invalid DID", f"Not a DID of this network (did:{did_method()}:<40 hex>).")
    for find in current_app.extensions[_EXTENSION]:
        found = find(did)
        if found is not None:
            return Resolution(
                410 if found.deactivated else 200,
                {
                    "@context": DID_RESOLUTION_CONTEXT,
                    "didDocument": found.document,
                    "didResolutionMetadata": {"contentType": "application/did+json", "retrieved": isoformat(utcnow())},
                    "didDocumentMetadata": found.metadata,
                },
            )
    return _error(404, "NOT_FOUND", "DID not found", f"{did} is unknown.")


def resolve_network_did(did: str) -> dict[str, Any] | None:
    """The DID document of an active DID of this network (agents and users), or None.

    For the credentials verifier and other features: deactivated, unknown and malformed DIDs
    all give None.
    """
    resolution = resolve_did(did)
    return resolution.document if resolution.status == 200 else None
