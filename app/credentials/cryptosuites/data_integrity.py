"""Data Integrity building blocks shared by the suites: proof option checks, dates, proof values,
and `SignatureSuite`, the RDFC/JCS + Ed25519/ECDSA family (eddsa-rdfc-2022, ecdsa-rdfc-2019,
eddsa-jcs-2022, ecdsa-jcs-2019) which differs only in transformation, curve and hash.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext
from app.dids.verification_methods import VerificationKey
from app.multiformats import MultiformatError, base58btc_encode, multibase_decode

PROOF_TYPE = "DataIntegrityProof"
_DATE_TIME_STAMP = re.compile(
    r"^-?\d{4,}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?"
    r"(Z|[+-]((0\d|1[0-3]):[0-5]\d|14:00))$"
)
_DATE_TIME = re.compile(
    r"^-?\d{4,}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?"
    r"(Z|[+-]((0\d|1[0-3]):[0-5]\d|14:00))?$"
)
_CURVES: dict[str, tuple[ec.EllipticCurve, int, str]] = {
    "P-256": (ec.SECP256R1(), 32, "sha256"),
    "P-384": (ec.SECP384R1(), 48, "sha384"),
}


def parse_datetime(value: Any, *, require_offset: bool = True) -> datetime | None:
    """An aware datetime from an XML Schema dateTime(Stamp) string, or None when malformed.

    Without `require_offset`, a value lacking a time zone is read as UTC.
    """
    pattern = _DATE_TIME_STAMP if require_offset else _DATE_TIME
    if not isinstance(value, str) or not pattern.match(value):
        return None
    text = value.replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_datetime(moment: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SSZ` in UTC (seconds precision)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_proof_options(proof: Any, suite_name: str) -> None:
    """Check the proof's `type`, `cryptosuite`, purpose, method and dates; raise `ProofCheckFailed`."""
    if not isinstance(proof, dict):
        raise ProofCheckFailed("malformed_proof", "proof must be an object")
    if proof.get("type") != PROOF_TYPE:
        raise ProofCheckFailed("invalid_proof_configuration", f"proof type must be {PROOF_TYPE}")
    if proof.get("cryptosuite") != suite_name:
        raise ProofCheckFailed("invalid_proof_configuration", f"proof cryptosuite must be {suite_name}")
    for member in ("proofPurpose", "verificationMethod"):
        if not isinstance(proof.get(member), str) or not proof[member]:
            raise ProofCheckFailed("malformed_proof", f"proof {member} must be a non-empty string")
    for member in ("created", "expires"):
        if member in proof and parse_datetime(proof[member], require_offset=False) is None:
            raise ProofCheckFailed("invalid_proof_configuration", f"proof {member} is not an XML Schema dateTime")


def check_proof_context(document: dict, proof: dict) -> None:
    """The proof's `@context`, when present, must be a prefix of the document's `@context`."""
    if "@context" not in proof:
        return
    proof_context = proof["@context"]
    proof_context = proof_context if isinstance(proof_context, list) else [proof_context]
    document_context = document.get("@context")
    document_context = document_context if isinstance(document_context, list) else [document_context]
    if document_context[: len(proof_context)] != proof_context:
        raise ProofCheckFailed("invalid_proof_configuration", "proof @context does not match the document's @context")


def decode_proof_value(proof: dict, *, lengths: tuple[int, ...], prefixes: str = "z") -> bytes:
    """The bytes of a multibase `proofValue` of one of the given lengths; else `malformed_proof_value`."""
    value = proof.get("proofValue")
    if not isinstance(value, str):
        raise ProofCheckFailed("malformed_proof_value", "proofValue must be a string")
    try:
        decoded = multibase_decode(value, allowed=prefixes)
    except MultiformatError as error:
        raise ProofCheckFailed("malformed_proof_value", f"proofValue: {error}") from None
    if len(decoded) not in lengths:
        raise ProofCheckFailed(
            "malformed_proof_value",
            f"proofValue has {len(decoded)} bytes, expected {' or '.join(map(str, lengths))}",
        )
    return decoded


def jcs(value: Any) -> bytes:
    """RFC 8785 canonical JSON bytes; `malformed_document` when the value cannot be canonicalized."""
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as error:
        raise ProofCheckFailed("malformed_document", f"cannot canonicalize as JSON: {error}") from None


@dataclass(frozen=True)
class SignatureSuite:
    """One RDFC/JCS signature suite: `transformation` is "rdfc" or "jcs", `algorithm` "Ed25519"/"ECDSA".

    With ECDSA, P-256 hashes with SHA-256 and P-384 with SHA-384 (for RDFC also inside RDFC-1.0).
    """

    name: str
    transformation: str
    algorithm: str

    @property
    def key_types(self) -> tuple[str, ...]:
        """Key types this suite verifies with."""
        return ("Ed25519",) if self.algorithm == "Ed25519" else ("P-256", "P-384")

    def verify_proof(self, document_without_proof: dict, proof: dict, key: VerificationKey, ctx: SuiteContext) -> None:
        """Verify `proof` over the document; raises `ProofCheckFailed`."""
        check_proof_options(proof, self.name)
        if key.key_type not in self.key_types:
            raise ProofCheckFailed("unsupported_key_type", f"{self.name} cannot use a {key.key_type} key")
        signature = decode_proof_value(proof, lengths=(self._signature_length(key.key_type),))
        if not isinstance(document_without_proof, dict):
            raise ProofCheckFailed("malformed_document", "document must be an object")
        check_proof_context(document_without_proof, proof)
        options = {name: value for name, value in proof.items() if name != "proofValue"}
        document = copy.copy(document_without_proof)
        if "@context" in options:
            document["@context"] = options["@context"]
        data = self.hash_data(document, options, key.key_type, ctx)
        if not self._signature_valid(key, signature, data):
            raise ProofCheckFailed("invalid_signature", f"{self.name} signature does not verify")

    def sign(
        self,
        document: dict,
        *,
        private_key: bytes | ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey,
        verification_method: str,
        proof_purpose: str = "assertionMethod",
        created: datetime | str | None = None,
        ctx: SuiteContext | None = None,
        proof_id: str | None = None,
        challenge: str | None = None,
        domain: str | list[str] | None = None,
    ) -> dict:
        """A copy of `document` with a new proof added (appended to an existing proof set).

        `private_key`: a raw Ed25519 seed (32 bytes), a raw ECDSA scalar (32 bytes P-256, 48
        bytes P-384) or a `cryptography` private key. `ctx` is required for RDFC suites.
        `challenge` and `domain` go into the proof (a presentation's, for a verifier).
        """
        signer, key_type = self._signing_key(private_key)
        unsecured = {name: value for name, value in document.items() if name != "proof"}
        options: dict[str, Any] = {"type": PROOF_TYPE, "cryptosuite": self.name}
        if proof_id is not None:
            options["id"] = proof_id
        options["created"] = created if isinstance(created, str) else format_datetime(created or _now())
        options["verificationMethod"] = verification_method
        options["proofPurpose"] = proof_purpose
        if challenge is not None:
            options["challenge"] = challenge
        if domain is not None:
            options["domain"] = domain
        if "@context" in unsecured:
            options["@context"] = unsecured["@context"]
        data = self.hash_data(unsecured, options, key_type, ctx)
        if isinstance(signer, ed25519.Ed25519PrivateKey):
            signature = signer.sign(data)
        else:
            curve_size = _CURVES[key_type][1]
            digest = hashes.SHA256() if key_type == "P-256" else hashes.SHA384()
            r, s = decode_dss_signature(signer.sign(data, ec.ECDSA(digest)))
            signature = r.to_bytes(curve_size, "big") + s.to_bytes(curve_size, "big")
        # The JCS suites' Create Proof keeps the document's @context in the proof; RDFC's does not.
        proof = {name: value for name, value in options.items() if name != "@context" or self.transformation == "jcs"}
        proof["proofValue"] = "z" + base58btc_encode(signature)
        signed = copy.deepcopy(document)
        existing = signed.get("proof")
        if existing is None:
            signed["proof"] = proof
        else:
            signed["proof"] = [*(existing if isinstance(existing, list) else [existing]), proof]
        return signed

    def hash_data(self, document: dict, proof_options: dict, key_type: str, ctx: SuiteContext | None) -> bytes:
        """proofConfig hash ‖ transformed document hash, the bytes that are signed."""
        hash_name = "sha384" if key_type == "P-384" else "sha256"
        config = {name: value for name, value in proof_options.items() if name != "proofValue"}
        if "@context" in document:
            config["@context"] = document["@context"]
        elif self.transformation == "rdfc":
            raise ProofCheckFailed("malformed_document", "an RDFC-secured document needs an @context")
        if self.transformation == "rdfc":
            if ctx is None:
                raise ValueError("RDFC suites need a SuiteContext")
            canonical_config = ctx.canonicalize(config, hash_name=hash_name).encode("utf-8")
            canonical_document = ctx.canonicalize(document, hash_name=hash_name).encode("utf-8")
        else:
            canonical_config = jcs(config)
            canonical_document = jcs(document)
        return hashlib.new(hash_name, canonical_config).digest() + hashlib.new(hash_name, canonical_document).digest()

    def _signature_length(self, key_type: str) -> int:
        return 64 if key_type in ("Ed25519", "P-256") else 96

    def _signature_valid(self, key: VerificationKey, signature: bytes, data: bytes) -> bool:
        try:
            if key.key_type == "Ed25519":
                ed25519.Ed25519PublicKey.from_public_bytes(key.public_key).verify(signature, data)
                return True
            curve, size, _ = _CURVES[key.key_type]
            public_key = ec.EllipticCurvePublicKey.from_encoded_point(curve, key.public_key)
            r = int.from_bytes(signature[:size], "big")
            s = int.from_bytes(signature[size:], "big")
            digest = hashes.SHA256() if key.key_type == "P-256" else hashes.SHA384()
            public_key.verify(encode_dss_signature(r, s), data, ec.ECDSA(digest))
            return True
        except InvalidSignature:
            return False
        except ValueError as error:
            raise ProofCheckFailed("invalid_public_key", f"{key.key_type} public key: {error}") from None

    def _signing_key(
        self, private_key: bytes | ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey
    ) -> tuple[ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey, str]:
        if self.algorithm == "Ed25519":
            if isinstance(private_key, ed25519.Ed25519PrivateKey):
                return private_key, "Ed25519"
            if isinstance(private_key, bytes) and len(private_key) == 32:
                return ed25519.Ed25519PrivateKey.from_private_bytes(private_key), "Ed25519"
            raise ValueError(f"{self.name} needs an Ed25519 private key (32-byte seed)")
        if isinstance(private_key, ec.EllipticCurvePrivateKey):
            for key_type, (curve, _, _) in _CURVES.items():
                if private_key.curve.name == curve.name:
                    return private_key, key_type
            raise ValueError(f"{self.name} needs a P-256 or P-384 key")
        if isinstance(private_key, bytes):
            for key_type, (curve, size, _) in _CURVES.items():
                if len(private_key) == size:
                    return ec.derive_private_key(int.from_bytes(private_key, "big"), curve), key_type
        raise ValueError(f"{self.name} needs a P-256 (32-byte) or P-384 (48-byte) private key")


def _now() -> datetime:
    return datetime.now(UTC)
