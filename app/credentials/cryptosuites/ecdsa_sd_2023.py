"""The ecdsa-sd-2023 cryptosuite (W3C vc-di-ecdsa section 3.4): base and derived proofs, P-256.

A base proof (header 0xd9 0x5d 0x00) is what an issuer hands to a holder; it is verified here as
the holder would: the HMAC key it carries relabels the canonical statements, the mandatory
pointers split them, and the base signature plus one proof-scoped signature per non-mandatory
statement are checked. A derived proof (header 0xd9 0x5d 0x01) is what a verifier receives.
`create_base_proof` (issuer) and `derive_proof` (holder) make both kinds, for tests and demos.
Pure module (no Flask); failures raise `ProofCheckFailed`.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from app.credentials.cryptosuites import sd_primitives as sd
from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext, register_suite
from app.credentials.cryptosuites.data_integrity import check_proof_options
from app.dids.verification_methods import VerificationKey
from app.multiformats import multibase_decode

NAME = "ecdsa-sd-2023"
BASE_PROOF_HEADER = b"\xd9\x5d\x00"
DERIVED_PROOF_HEADER = b"\xd9\x5d\x01"
_HEADERS = {BASE_PROOF_HEADER: "base", DERIVED_PROOF_HEADER: "derived"}
P256_MULTIKEY_PREFIX = b"\x80\x24"
_SIGNATURE_LENGTH = 64
_ECDSA_SHA256 = ec.ECDSA(hashes.SHA256())


@dataclass(frozen=True)
class BaseProofValue:
    """The five components of a base proof value."""

    base_signature: bytes
    public_key: bytes
    hmac_key: bytes
    signatures: list[bytes]
    mandatory_pointers: list[str]


@dataclass(frozen=True)
class DerivedProofValue:
    """The five components of a derived proof value; `label_map` is decompressed (`c14n<i>` -> `u...`)."""

    base_signature: bytes
    public_key: bytes
    signatures: list[bytes]
    label_map: dict[str, str]
    mandatory_indexes: list[int]


@dataclass(frozen=True)
class VerifyData:
    """What the signature checks need: the statements, hashes and signatures to match them."""

    base_signature: bytes
    proof_hash: bytes
    public_key: bytes
    signatures: list[bytes]
    non_mandatory: list[str]
    mandatory_hash: bytes


def _signature_list(value: Any) -> list[bytes]:
    if not isinstance(value, list):
        raise sd.malformed("signatures must be an array of byte strings")
    return [sd.require_bytes(item, "each signature", _SIGNATURE_LENGTH) for item in value]


def _proof_scoped_key(value: Any) -> bytes:
    key = sd.require_bytes(value, "publicKey", len(P256_MULTIKEY_PREFIX) + 33)
    if not key.startswith(P256_MULTIKEY_PREFIX):
        raise sd.malformed("publicKey must be a P-256 Multikey (0x8024 prefix)")
    return key


def parse_proof_value(proof_value: Any) -> BaseProofValue | DerivedProofValue:
    """parseBaseProofValue / parseDerivedProofValue, chosen by the header; `malformed_proof_value`."""
    kind, payload = sd.split_proof_value(proof_value, _HEADERS)
    components = sd.decode_components(payload, 5)
    if kind == "base":
        return BaseProofValue(
            base_signature=sd.require_bytes(components[0], "baseSignature", _SIGNATURE_LENGTH),
            public_key=_proof_scoped_key(components[1]),
            hmac_key=sd.require_bytes(components[2], "hmacKey", 32),
            signatures=_signature_list(components[3]),
            mandatory_pointers=sd.require_pointer_list(components[4]),
        )
    return DerivedProofValue(
        base_signature=sd.require_bytes(components[0], "baseSignature", _SIGNATURE_LENGTH),
        public_key=_proof_scoped_key(components[1]),
        signatures=_signature_list(components[2]),
        label_map=sd.decompress_hmac_label_map(components[3]),
        mandatory_indexes=sd.require_index_list(components[4], "mandatoryIndexes"),
    )


def create_derived_verify_data(document: dict, proof: dict, parsed: DerivedProofValue, ctx: SuiteContext) -> VerifyData:
    """createVerifyData: the revealed statements relabelled with the holder's label map."""
    proof_hash, mandatory_hash, non_mandatory = sd.derived_statements(
        document, proof, parsed.label_map, parsed.mandatory_indexes, ctx
    )
    return VerifyData(
        base_signature=parsed.base_signature,
        proof_hash=proof_hash,
        public_key=parsed.public_key,
        signatures=parsed.signatures,
        non_mandatory=non_mandatory,
        mandatory_hash=mandatory_hash,
    )


def create_base_verify_data(document: dict, proof: dict, parsed: BaseProofValue, ctx: SuiteContext) -> VerifyData:
    """The holder's view of a base proof: the issuer's transformation redone with its HMAC key."""
    groups = sd.mandatory_group(document, sd.hmac_id_label_map_factory(parsed.hmac_key), parsed.mandatory_pointers, ctx)
    return VerifyData(
        base_signature=parsed.base_signature,
        proof_hash=sd.proof_hash(proof, document, ctx),
        public_key=parsed.public_key,
        signatures=parsed.signatures,
        non_mandatory=list(groups.non_matching.values()),
        mandatory_hash=sd.hash_nquads(groups.matching.values()),
    )


def _p256_public_key(encoded: bytes, what: str, failure_code: str) -> ec.EllipticCurvePublicKey:
    try:
        return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), encoded)
    except ValueError:
        raise ProofCheckFailed(failure_code, f"{what} is not a valid P-256 point") from None


def _ecdsa_valid(public_key: ec.EllipticCurvePublicKey, signature: bytes, data: bytes) -> bool:
    r = int.from_bytes(signature[:32], "big")
    s = int.from_bytes(signature[32:], "big")
    try:
        public_key.verify(encode_dss_signature(r, s), data, _ECDSA_SHA256)
    except InvalidSignature:
        return False
    return True


def verify_signatures(data: VerifyData, issuer_key: ec.EllipticCurvePublicKey) -> None:
    """Check the base signature (issuer key) and every statement signature (proof-scoped key).

    Raises `invalid_signature` when a signature fails or their count differs from the statements.
    """
    if len(data.signatures) != len(data.non_mandatory):
        raise ProofCheckFailed(
            "invalid_signature",
            f"{len(data.signatures)} signatures for {len(data.non_mandatory)} non-mandatory statements",
        )
    if not _ecdsa_valid(issuer_key, data.base_signature, data.proof_hash + data.public_key + data.mandatory_hash):
        raise ProofCheckFailed("invalid_signature", "the base signature does not verify")
    scoped_key = _p256_public_key(data.public_key[len(P256_MULTIKEY_PREFIX) :], "publicKey", "malformed_proof_value")
    for index, (signature, statement) in enumerate(zip(data.signatures, data.non_mandatory, strict=True)):
        if not _ecdsa_valid(scoped_key, signature, statement.encode("utf-8")):
            raise ProofCheckFailed(
                "invalid_signature", f"the signature of non-mandatory statement {index} does not verify"
            )


class EcdsaSd2023:
    """Verifier of ecdsa-sd-2023 base proofs (as a holder checks them) and derived proofs."""

    name = NAME

    def verify_proof(self, document_without_proof: dict, proof: dict, key: VerificationKey, ctx: SuiteContext) -> None:
        """Return when the proof verifies with `key` (P-256), else raise `ProofCheckFailed`."""
        sd.check_proof_and_key(document_without_proof, proof, key, NAME, "P-256", "P-256")
        issuer_key = _p256_public_key(key.public_key, "the verification method key", "invalid_public_key")
        parsed = parse_proof_value(proof.get("proofValue"))
        if isinstance(parsed, BaseProofValue):
            data = create_base_verify_data(document_without_proof, proof, parsed, ctx)
        else:
            data = create_derived_verify_data(document_without_proof, proof, parsed, ctx)
        verify_signatures(data, issuer_key)


def _sign_raw(private_key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    r, s = decode_dss_signature(private_key.sign(data, _ECDSA_SHA256))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def create_base_proof(
    document: dict,
    proof_options: dict,
    mandatory_pointers: Sequence[str],
    issuer_key: ec.EllipticCurvePrivateKey,
    ctx: SuiteContext,
    *,
    hmac_key: bytes | None = None,
) -> dict:
    """Create Base Proof (issuer): `proof_options` plus a base `proofValue` for a holder.

    `proof_options` must name the type, cryptosuite, verification method and purpose; the HMAC
    key is random unless given. Raises `ProofCheckFailed` for documents that cannot be processed.
    """
    if not isinstance(issuer_key.curve, ec.SECP256R1):
        raise ProofCheckFailed("unsupported_key_type", f"{NAME} signs with P-256 keys")
    proof = copy.deepcopy(proof_options)
    check_proof_options(proof, NAME)
    hmac_key = hmac_key if hmac_key is not None else secrets.token_bytes(32)
    groups = sd.mandatory_group(document, sd.hmac_id_label_map_factory(hmac_key), list(mandatory_pointers), ctx)
    proof_hash = sd.proof_hash(proof, document, ctx)
    scoped_key = ec.generate_private_key(ec.SECP256R1())
    public_key = P256_MULTIKEY_PREFIX + scoped_key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint
    )
    signatures = [_sign_raw(scoped_key, quad.encode("utf-8")) for quad in groups.non_matching.values()]
    base_signature = _sign_raw(issuer_key, proof_hash + public_key + sd.hash_nquads(groups.matching.values()))
    proof["proofValue"] = sd.encode_proof_value(
        BASE_PROOF_HEADER, [base_signature, public_key, hmac_key, signatures, list(mandatory_pointers)]
    )
    return proof


def derive_proof(document: dict, proof: dict, selective_pointers: Sequence[str], ctx: SuiteContext) -> dict:
    """Add Derived Proof (holder): the reveal document with a derived proof for a verifier.

    `document` is the credential without its proof, `proof` its base proof. Raises
    `ProofCheckFailed` (`malformed_proof_value` for a proof that is not a base proof).
    """
    parsed = parse_proof_value(proof.get("proofValue"))
    if not isinstance(parsed, BaseProofValue):
        raise sd.malformed("a derived proof can only be made from a base proof")
    disclosure = sd.create_disclosure(
        document, sd.hmac_id_label_map_factory(parsed.hmac_key), parsed.mandatory_pointers, selective_pointers, ctx
    )
    selective = disclosure.groups["selective"].matching
    non_mandatory_indexes = list(disclosure.groups["mandatory"].non_matching)
    if len(non_mandatory_indexes) != len(parsed.signatures):
        raise ProofCheckFailed("invalid_signature", "the base proof does not match the document's statements")
    filtered = [parsed.signatures[i] for i, index in enumerate(non_mandatory_indexes) if index in selective]
    derived = {**proof}
    derived["proofValue"] = sd.encode_proof_value(
        DERIVED_PROOF_HEADER,
        [
            parsed.base_signature,
            parsed.public_key,
            filtered,
            sd.compress_label_map(disclosure.label_map, lambda label: multibase_decode(label, allowed="u")),
            disclosure.mandatory_indexes,
        ],
    )
    return {**disclosure.reveal_document, "proof": derived}


SUITE = register_suite(EcdsaSd2023())
