"""Verification methods of DID documents: find one, check it is authorised, read its public key.

Pure functions over DID document dicts; failures raise `DidResolutionFailed`.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from app.dids.errors import DidResolutionFailed
from app.multiformats import (
    MultiformatError,
    base58btc_decode,
    decode_multikey,
    multibase_decode,
)

KEY_TYPES = frozenset({"Ed25519", "P-256", "P-384", "Bls12381G2"})

VERIFICATION_RELATIONSHIPS = frozenset(
    {"assertionMethod", "authentication", "capabilityInvocation", "capabilityDelegation", "keyAgreement"}
)
_EC_CURVES = {"P-256": (ec.SECP256R1(), 32), "P-384": (ec.SECP384R1(), 48)}
_RAW_KEY_LENGTHS = {"Ed25519": 32, "Bls12381G2": 96}


@dataclass(frozen=True)
class VerificationKey:
    """A resolved public key: `key_type` is one of Ed25519, P-256, P-384, Bls12381G2.

    `public_key` is the raw encoding: 32 bytes for Ed25519, the SEC1 compressed point for
    P-256/P-384, the 96-byte compressed G2 point for BLS12-381.
    """

    id: str
    controller: str
    key_type: str
    public_key: bytes

    def __post_init__(self) -> None:
        if self.key_type not in KEY_TYPES:
            raise ValueError(f"unknown key type {self.key_type!r}")


def split_did_url(did_url: str) -> tuple[str, str | None]:
    """(DID, fragment or None) of a DID URL; raises `did_resolution_failed` when it is not one."""
    if not isinstance(did_url, str) or not did_url.startswith("did:") or len(did_url) > 4096:
        raise DidResolutionFailed("did_resolution_failed", f"{str(did_url)[:100]!r} is not a DID URL")
    did, _, fragment = did_url.partition("#")
    did = did.split("?", 1)[0].split("/", 1)[0]
    parts = did.split(":")
    if len(parts) < 3 or not parts[1] or not parts[2]:
        raise DidResolutionFailed("did_resolution_failed", f"{did_url[:100]!r} is not a DID URL")
    return did, fragment or None


def _absolute_id(value: Any, did: str) -> str | None:
    if not isinstance(value, str):
        return None
    return did + value if value.startswith("#") else value


def find_verification_method(document: dict, vm_url: str) -> dict | None:
    """The verification method object with id `vm_url` in a DID document (relative ids resolved)."""
    did = document.get("id")
    if not isinstance(did, str):
        return None
    candidates: list[Any] = []
    methods = document.get("verificationMethod", [])
    candidates.extend(methods if isinstance(methods, list) else [methods])
    for relationship in VERIFICATION_RELATIONSHIPS:
        entries = document.get(relationship, [])
        candidates.extend(entry for entry in (entries if isinstance(entries, list) else [entries]))
    for candidate in candidates:
        if isinstance(candidate, dict) and _absolute_id(candidate.get("id"), did) == vm_url:
            return candidate
    return None


def is_authorized(document: dict, vm_url: str, purpose: str) -> bool:
    """True when `vm_url` is listed (by reference or embedded) under the `purpose` relationship."""
    did = document.get("id")
    entries = document.get(purpose, [])
    if not isinstance(did, str) or purpose not in VERIFICATION_RELATIONSHIPS:
        return False
    for entry in entries if isinstance(entries, list) else [entries]:
        entry_id = entry.get("id") if isinstance(entry, dict) else entry
        if _absolute_id(entry_id, did) == vm_url:
            return True
    return False


def key_from_verification_method(method: dict, vm_url: str) -> VerificationKey:
    """The public key of a verification method (Multikey, JsonWebKey(2020), legacy key types)."""
    controller = method.get("controller")
    if not isinstance(controller, str):
        raise DidResolutionFailed("did_resolution_failed", "verification method has no controller")
    key_type, public_key = _read_public_key(method)
    return VerificationKey(id=vm_url, controller=controller, key_type=key_type, public_key=public_key)


def _read_public_key(method: dict) -> tuple[str, bytes]:
    method_type = method.get("type")
    try:
        if "publicKeyMultibase" in method:
            if method_type in ("Ed25519VerificationKey2018",):
                raise DidResolutionFailed("did_resolution_failed", "Ed25519VerificationKey2018 uses publicKeyBase58")
            key_type, public_key = decode_multikey(method["publicKeyMultibase"])
        elif "publicKeyJwk" in method:
            key_type, public_key = _read_jwk(method["publicKeyJwk"])
        elif "publicKeyBase58" in method and method_type in ("Ed25519VerificationKey2018", "Bls12381G2Key2020"):
            key_type = "Ed25519" if method_type == "Ed25519VerificationKey2018" else "Bls12381G2"
            public_key = base58btc_decode(method["publicKeyBase58"])
        else:
            raise DidResolutionFailed("did_resolution_failed", f"unsupported verification method type {method_type!r}")
    except (MultiformatError, TypeError) as error:
        raise DidResolutionFailed("did_resolution_failed", f"unreadable public key: {error}") from None
    check_public_key(key_type, public_key)
    return key_type, public_key


def check_public_key(key_type: str, public_key: bytes) -> None:
    """Raise `did_resolution_failed` unless `public_key` is a well-formed key of `key_type`."""
    if key_type in _EC_CURVES:
        curve, _ = _EC_CURVES[key_type]
        try:
            ec.EllipticCurvePublicKey.from_encoded_point(curve, public_key)
        except ValueError:
            raise DidResolutionFailed("did_resolution_failed", f"invalid {key_type} public key") from None
        if len(public_key) != 1 + _EC_CURVES[key_type][1]:
            raise DidResolutionFailed("did_resolution_failed", f"{key_type} key must be a compressed point")
    elif len(public_key) != _RAW_KEY_LENGTHS.get(key_type, -1):
        raise DidResolutionFailed("did_resolution_failed", f"{key_type} public key has {len(public_key)} bytes")


def _b64url(value: Any) -> bytes:
    if not isinstance(value, str):
        raise MultiformatError("JWK member must be a string")
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError) as error:
        raise MultiformatError(f"invalid base64url: {error}") from None


def _read_jwk(jwk: Any) -> tuple[str, bytes]:
    if not isinstance(jwk, dict):
        raise MultiformatError("publicKeyJwk must be an object")
    if "d" in jwk:
        raise DidResolutionFailed("did_resolution_failed", "publicKeyJwk must not contain private key material")
    kty, crv = jwk.get("kty"), jwk.get("crv")
    if kty == "OKP" and crv == "Ed25519":
        return "Ed25519", _b64url(jwk.get("x"))
    if kty == "EC" and crv in _EC_CURVES:
        size = _EC_CURVES[crv][1]
        x, y = _b64url(jwk.get("x")), _b64url(jwk.get("y"))
        if len(x) != size or len(y) != size:
            raise MultiformatError(f"{crv} JWK coordinates must be {size} bytes")
        return crv, bytes([2 + (y[-1] & 1)]) + x
    if kty in ("EC", "OKP") and crv in ("BLS12381G2", "Bls12381G2") and "y" not in jwk:
        return "Bls12381G2", _b64url(jwk.get("x"))
    raise DidResolutionFailed("did_resolution_failed", f"unsupported JWK kty={kty!r} crv={crv!r}")


def decode_multibase_key(text: str) -> tuple[str, bytes]:
    """(key type, raw key) of a multibase multicodec public key; raises `did_resolution_failed`."""
    try:
        multibase_decode(text, allowed="z")
        key_type, public_key = decode_multikey(text)
    except MultiformatError as error:
        raise DidResolutionFailed("did_resolution_failed", f"invalid multikey: {error}") from None
    check_public_key(key_type, public_key)
    return key_type, public_key
