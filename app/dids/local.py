"""Documents of the DIDs this service answers for itself, without a network round trip.

The features that own such DIDs register their lookups at `create_app` (`register_local_dids`), so
DID resolution (the credentials verifier) asks them without importing those features.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flask import Flask, current_app

DocumentLookup = Callable[[str], "dict | None"]
_EXTENSION = "local_dids"


@dataclass(frozen=True)
class LocalDids:
    """`network(did)`: an active `did:<method>:` DID's document (agents, users), else None;
    `web(did)`: a did:web this service hosts (issuer keys), else None."""

    network: DocumentLookup
    web: DocumentLookup


def register_local_dids(app: Flask, local: LocalDids) -> None:
    app.extensions[_EXTENSION] = local


def local_documents(did_method: str) -> DocumentLookup:
    """The lookup of our own DID documents for DIDs of method `did_method` and our did:web.

    Runs inside an application context (the registered lookups read the database).
    """
    prefix = f"did:{did_method}:"

    def lookup(did: str) -> dict | None:
        local: LocalDids = current_app.extensions[_EXTENSION]
        if did.startswith("did:web:"):
            return local.web(did)
        if not did.startswith(prefix):
            return None
        return local.network(did)

    return lookup
