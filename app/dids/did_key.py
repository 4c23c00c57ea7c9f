"""did:key resolution (Ed25519, P-256, P-384, BLS12-381 G2), per the did:key method specification.

The DID document is generated from the key itself: one Multikey verification method whose
fragment is the method-specific identifier, referenced by every verification relationship except
keyAgreement.
"""

from __future__ import annotations

from app.dids.errors import DidResolutionFailed
from app.dids.verification_methods import decode_multibase_key

MULTIKEY_CONTEXTS = ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"]
_RELATIONSHIPS = ("authentication", "assertionMethod", "capabilityInvocation", "capabilityDelegation")


def resolve_did_key(did: str) -> dict:
    """The DID document of a did:key; raises `DidResolutionFailed("did_resolution_failed")`."""
    prefix = "did:key:"
    if not did.startswith(prefix):
        raise DidResolutionFailed("did_resolution_failed", f"{did[:100]!r} is not a did:key")
    identifier = did[len(prefix) :]
    if not identifier.startswith("z") or ":" in identifier:
        raise DidResolutionFailed("did_resolution_failed", "did:key identifier must be base58btc multibase")
    decode_multibase_key(identifier)
    method_id = f"{did}#{identifier}"
    document: dict = {
        "@context": MULTIKEY_CONTEXTS,
        "id": did,
        "verificationMethod": [
            {"id": method_id, "type": "Multikey", "controller": did, "publicKeyMultibase": identifier}
        ],
    }
    for relationship in _RELATIONSHIPS:
        document[relationship] = [method_id]
    return document
