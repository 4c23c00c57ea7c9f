"""DID documents this network builds for its own DIDs."""

from __future__ import annotations

DID_CORE_CONTEXT = "https://www.w3.org/ns/did/v1"


def user_document(did: str) -> dict:
    """The document of a user's DID: no verification methods (users sign in through the provider)."""
    return {"@context": [DID_CORE_CONTEXT], "id": did}
