"""The bbs-2023 cryptosuite (W3C vc-di-bbs): base proofs as a holder verifies them, derived proofs.

Baseline proofs only: base header 0xd9 0x5d 0x02, derived header 0xd9 0x5d 0x03. The optional
features (anonymous holder binding, pseudonyms: headers 0x04 to 0x09) fail with
`unsupported_feature`. BBS itself is the `BBS_BLS12381G1_XMD:SHA-256_SSWU_RO_` ciphersuite of
`app.credentials.bbs`. Pure module (no Flask); failures raise `ProofCheckFailed`.
`create_base_proof` (issuer) and `derive_proof` (holder) make baseline proofs, for tests and demos.

`SuiteContext.options["bbs_presentation_header"]` (bytes), when set, is the presentation header a
verifier requires in a derived proof (e.g. its challenge); another one fails with
`presentation_header_mismatch`. A signature over more than `MAX_BBS_MESSAGES` statements fails
with `proof_too_large` before any curve work (each new message generator costs a hash to the curve).
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from app.credentials import bbs
from app.credentials.cryptosuites import sd_primitives as sd
from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext, register_suite
from app.credentials.cryptosuites.data_integrity import check_proof_options
from app.dids.verification_methods import VerificationKey

NAME = "bbs-2023"
BASE_PROOF_HEADER = b"\xd9\x5d\x02"
DERIVED_PROOF_HEADER = b"\xd9\x5d\x03"
_FEATURE_HEADERS = {
    b"\xd9\x5d\x04": "anonymous_holder_binding",
    b"\xd9\x5d\x05": "anonymous_holder_binding",
    b"\xd9\x5d\x06": "pseudonym",
    b"\xd9\x5d\x07": "pseudonym",
    b"\xd9\x5d\x08": "holder_binding_pseudonym",
    b"\xd9\x5d\x09": "holder_binding_pseudonym",
}
_HEADERS = {BASE_PROOF_HEADER: "base", DERIVED_PROOF_HEADER: "derived", **_FEATURE_HEADERS}
PUBLIC_KEY_LENGTH = 96
SIGNATURE_LENGTH = 80
PRESENTATION_HEADER_OPTION = "bbs_presentation_header"
MAX_BBS_MESSAGES = 2048
# A BBS proof is 3 G1 points, 4 scalars and one scalar per undisclosed message.
_PROOF_FIXED_LENGTH = 3 * 48 + 4 * 32
_SCALAR_LENGTH = 32


@dataclass(frozen=True)
class BaseProofValue:
    """The components of a baseline base proof value."""

    bbs_signature: bytes
    bbs_header: bytes
    public_key: bytes
    hmac_key: bytes
    mandatory_pointers: list[str]


@dataclass(frozen=True)
class DerivedProofValue:
    """The components of a baseline derived proof value; `label_map` is decompressed (`c14n<i>` -> `b<j>`)."""

    bbs_proof: bytes
    label_map: dict[str, str]
    mandatory_indexes: list[int]
    selective_indexes: list[int]
    presentation_header: bytes


@dataclass(frozen=True)
class DerivedVerifyData:
    """createVerifyData: what ProofVerify needs."""

    bbs_proof: bytes
    proof_hash: bytes
    mandatory_hash: bytes
    selective_indexes: list[int]
    presentation_header: bytes
    non_mandatory: list[str]

    @property
    def bbs_header(self) -> bytes:
        """The BBS header: proofHash followed by mandatoryHash."""
        return self.proof_hash + self.mandatory_hash


def parse_proof_value(proof_value: Any) -> BaseProofValue | DerivedProofValue:
    """parseBaseProofValue / parseDerivedProofValue for baseline proofs, chosen by the header.

    Raises `unsupported_feature` for the optional-feature headers, `malformed_proof_value` otherwise.
    """
    kind, payload = sd.split_proof_value(proof_value, _HEADERS)
    if kind not in ("base", "derived"):
        header = sd.decode_base64url_multibase(proof_value)[:3].hex()
        raise ProofCheckFailed(
            "unsupported_feature",
            f"{NAME} optional feature {kind!r} (proof header {header}) is not supported; baseline proofs only",
        )
    components = sd.decode_components(payload, 5)
    if kind == "base":
        return BaseProofValue(
            bbs_signature=sd.require_bytes(components[0], "bbsSignature", SIGNATURE_LENGTH),
            bbs_header=sd.require_bytes(components[1], "bbsHeader", 64),
            public_key=sd.require_bytes(components[2], "publicKey", PUBLIC_KEY_LENGTH),
            hmac_key=sd.require_bytes(components[3], "hmacKey", 32),
            mandatory_pointers=sd.require_pointer_list(components[4]),
        )
    return DerivedProofValue(
        bbs_proof=sd.require_bytes(components[0], "bbsProof"),
        label_map=sd.decompress_shuffled_label_map(components[1]),
        mandatory_indexes=sd.require_index_list(components[2], "mandatoryIndexes"),
        selective_indexes=sd.require_index_list(components[3], "selectiveIndexes"),
        presentation_header=sd.require_bytes(components[4], "presentationHeader"),
    )


def create_derived_verify_data(
    document: dict, proof: dict, parsed: DerivedProofValue, ctx: SuiteContext
) -> DerivedVerifyData:
    """createVerifyData: the revealed statements relabelled with the holder's label map and split."""
    proof_hash, mandatory_hash, non_mandatory = sd.derived_statements(
        document, proof, parsed.label_map, parsed.mandatory_indexes, ctx
    )
    return DerivedVerifyData(
        bbs_proof=parsed.bbs_proof,
        proof_hash=proof_hash,
        mandatory_hash=mandatory_hash,
        selective_indexes=parsed.selective_indexes,
        presentation_header=parsed.presentation_header,
        non_mandatory=non_mandatory,
    )


def _check_message_count(count: int) -> None:
    if count > MAX_BBS_MESSAGES:
        raise ProofCheckFailed(
            "proof_too_large", f"the BBS signature covers {count} statements; at most {MAX_BBS_MESSAGES} are accepted"
        )


@lru_cache(maxsize=256)
def _public_key_problem(backend: Any, public_key: bytes) -> str | None:
    """Why `public_key` is not a usable BLS12-381 G2 key, or None (cached: keys repeat)."""
    if len(public_key) != PUBLIC_KEY_LENGTH:
        return f"a BLS12-381 G2 public key has {PUBLIC_KEY_LENGTH} bytes, not {len(public_key)}"
    try:
        point = backend.g2_from_bytes(public_key)
    except bbs.BbsInputError as error:
        return str(error)
    return "the public key is the identity point" if backend.g2_is_identity(point) else None


class Bbs2023:
    """Verifier of bbs-2023 baseline proofs; `backend` picks the curve backend of `app.credentials.bbs`."""

    name = NAME

    def __init__(self, backend: Any = None) -> None:
        self.backend = backend

    def presentation_header(self, proof: dict) -> bytes | None:
        """The presentation header of a derived proof (empty when it has none); None for a base proof
        or a proof value that cannot be read (`verify_proof` reports that)."""
        try:
            parsed = parse_proof_value(proof.get("proofValue"))
        except ProofCheckFailed:
            return None
        return parsed.presentation_header if isinstance(parsed, DerivedProofValue) else None

    def verify_proof(self, document_without_proof: dict, proof: dict, key: VerificationKey, ctx: SuiteContext) -> None:
        """Return when the proof verifies with `key` (BLS12-381 G2), else raise `ProofCheckFailed`."""
        sd.check_proof_and_key(document_without_proof, proof, key, NAME, "Bls12381G2", "BLS12-381 G2")
        problem = _public_key_problem(self.backend or bbs.get_backend(), bytes(key.public_key))
        if problem is not None:
            raise ProofCheckFailed("invalid_public_key", f"verification method key: {problem}")
        parsed = parse_proof_value(proof.get("proofValue"))
        if isinstance(parsed, BaseProofValue):
            self.verify_base_proof(document_without_proof, proof, parsed, key, ctx)
        else:
            self.verify_derived_proof(document_without_proof, proof, parsed, key, ctx)

    def verify_base_proof(
        self,
        document: dict,
        proof: dict,
        parsed: BaseProofValue,
        key: VerificationKey,
        ctx: SuiteContext,
    ) -> None:
        """Check a base proof as its holder does: recompute the header and statements, then Verify.

        The issuer's transformation is redone with the HMAC key from the proof; the signature
        must verify over (proofHash || mandatoryHash, every non-mandatory statement).
        """
        if parsed.public_key != key.public_key:
            raise ProofCheckFailed("invalid_signature", "the base proof names another issuer key")
        groups = sd.mandatory_group(
            document, sd.shuffled_id_label_map_factory(parsed.hmac_key), parsed.mandatory_pointers, ctx
        )
        _check_message_count(len(groups.non_matching))
        header = sd.proof_hash(proof, document, ctx) + sd.hash_nquads(groups.matching.values())
        if header != parsed.bbs_header:
            raise ProofCheckFailed(
                "invalid_signature", "the proof's BBS header does not match the document and proof options"
            )
        messages = [quad.encode("utf-8") for quad in groups.non_matching.values()]
        try:
            valid = bbs.verify(key.public_key, parsed.bbs_signature, header, messages, backend=self.backend)
        except bbs.BbsInputError as error:
            raise sd.malformed(f"BBS signature rejected: {error}") from None
        if not valid:
            raise ProofCheckFailed("invalid_signature", "the BBS signature does not verify")

    def verify_derived_proof(
        self,
        document: dict,
        proof: dict,
        parsed: DerivedProofValue,
        key: VerificationKey,
        ctx: SuiteContext,
    ) -> None:
        """Verify a derived proof: ProofVerify over the revealed non-mandatory statements."""
        expected_header = ctx.options.get(PRESENTATION_HEADER_OPTION)
        if expected_header is not None and bytes(expected_header) != parsed.presentation_header:
            raise ProofCheckFailed(
                "presentation_header_mismatch", "the derived proof was made for another presentation header"
            )
        undisclosed = max(0, len(parsed.bbs_proof) - _PROOF_FIXED_LENGTH) // _SCALAR_LENGTH
        _check_message_count(undisclosed + len(parsed.selective_indexes))
        data = create_derived_verify_data(document, proof, parsed, ctx)
        if len(data.selective_indexes) != len(data.non_mandatory):
            raise ProofCheckFailed(
                "invalid_signature",
                f"{len(data.non_mandatory)} non-mandatory statements for "
                f"{len(data.selective_indexes)} disclosed indexes",
            )
        try:
            valid = bbs.proof_verify(
                key.public_key,
                data.bbs_proof,
                data.bbs_header,
                data.presentation_header,
                [quad.encode("utf-8") for quad in data.non_mandatory],
                data.selective_indexes,
                backend=self.backend,
            )
        except bbs.BbsInputError as error:
            raise sd.malformed(f"BBS proof rejected: {error}") from None
        if not valid:
            raise ProofCheckFailed("invalid_signature", "the BBS proof does not verify")


def create_base_proof(
    document: dict,
    proof_options: dict,
    mandatory_pointers: Sequence[str],
    secret_key: bytes,
    ctx: SuiteContext,
    *,
    hmac_key: bytes | None = None,
    backend: Any = None,
) -> dict:
    """Create Base Proof (issuer, baseline): `proof_options` plus a base `proofValue` for a holder.

    `secret_key` is the 32-byte BBS secret key of the verification method; the HMAC key is
    random unless given. Raises `ProofCheckFailed`, or `BbsInputError` for a bad secret key.
    """
    proof = copy.deepcopy(proof_options)
    check_proof_options(proof, NAME)
    hmac_key = hmac_key if hmac_key is not None else secrets.token_bytes(32)
    groups = sd.mandatory_group(document, sd.shuffled_id_label_map_factory(hmac_key), list(mandatory_pointers), ctx)
    _check_message_count(len(groups.non_matching))
    header = sd.proof_hash(proof, document, ctx) + sd.hash_nquads(groups.matching.values())
    public_key = bbs.sk_to_pk(secret_key, backend=backend)
    messages = [quad.encode("utf-8") for quad in groups.non_matching.values()]
    signature = bbs.sign(secret_key, public_key, header, messages, backend=backend)
    proof["proofValue"] = sd.encode_proof_value(
        BASE_PROOF_HEADER, [signature, header, public_key, hmac_key, list(mandatory_pointers)]
    )
    return proof


def derive_proof(
    document: dict,
    proof: dict,
    selective_pointers: Sequence[str],
    ctx: SuiteContext,
    *,
    presentation_header: bytes = b"",
    rng: Any = None,
    backend: Any = None,
) -> dict:
    """Add Derived Proof (holder, baseline): the reveal document with a derived proof.

    `document` is the credential without its proof, `proof` its base proof; `rng` replaces the
    BBS random scalars (tests only). Raises `ProofCheckFailed`.
    """
    parsed = parse_proof_value(proof.get("proofValue"))
    if not isinstance(parsed, BaseProofValue):
        raise sd.malformed("a derived proof can only be made from a base proof")
    disclosure = sd.create_disclosure(
        document, sd.shuffled_id_label_map_factory(parsed.hmac_key), parsed.mandatory_pointers, selective_pointers, ctx
    )
    messages = [quad.encode("utf-8") for quad in disclosure.non_mandatory]
    try:
        bbs_proof = bbs.proof_gen(
            parsed.public_key,
            parsed.bbs_signature,
            parsed.bbs_header,
            presentation_header,
            messages,
            disclosure.selective_indexes,
            rng=rng,
            backend=backend,
        )
    except bbs.BbsInputError as error:
        raise sd.malformed(f"BBS proof generation rejected the base proof: {error}") from None
    derived = {**proof}
    derived["proofValue"] = sd.encode_proof_value(
        DERIVED_PROOF_HEADER,
        [
            bbs_proof,
            sd.compress_label_map(disclosure.label_map, lambda label: int(label.removeprefix("b"))),
            disclosure.mandatory_indexes,
            disclosure.selective_indexes,
            presentation_header,
        ],
    )
    return {**disclosure.reveal_document, "proof": derived}


SUITE = register_suite(Bbs2023())
