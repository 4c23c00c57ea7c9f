"""Proof creation for every supported cryptosuite, and selective disclosure. Pure module (no Flask).

Keys are raw bytes: a 32-byte Ed25519 seed, a 32-byte P-256 or 48-byte P-384 scalar, a 32-byte
BBS (BLS12-381) secret key. `add_proof` signs an unsecured credential with the cryptosuites of
`app.credentials.cryptosuites` (base proofs for the selective-disclosure suites); `derive`
makes a holder's derived credential from a base proof. Failures raise `ProofCheckFailed`.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from app.credentials import bbs
from app.credentials.cryptosuites import bbs_2023, ecdsa_sd_2023, get_suite
from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext
from app.credentials.cryptosuites.data_integrity import PROOF_TYPE, format_datetime

KEY_TYPES = ("Ed25519", "P-256", "P-384", "Bls12381G2")
SUITE_KEY_TYPES: dict[str, tuple[str, ...]] = {
    "eddsa-rdfc-2022": ("Ed25519",),
    "eddsa-jcs-2022": ("Ed25519",),
    "ecdsa-rdfc-2019": ("P-256", "P-384"),
    "ecdsa-jcs-2019": ("P-256", "P-384"),
    "ecdsa-sd-2023": ("P-256",),
    "bbs-2023": ("Bls12381G2",),
}
DEFAULT_SUITE = {
    "Ed25519": "eddsa-rdfc-2022",
    "P-256": "ecdsa-rdfc-2019",
    "P-384": "ecdsa-rdfc-2019",
    "Bls12381G2": "bbs-2023",
}
SELECTIVE_DISCLOSURE_SUITES = frozenset({"bbs-2023", "ecdsa-sd-2023"})
# A presentation's proof is one signature of its holder: the suites that are not selective disclosure.
PRESENTATION_SUITES = tuple(sorted(name for name in SUITE_KEY_TYPES if name not in SELECTIVE_DISCLOSURE_SUITES))
PRESENTATION_KEY_TYPES = tuple(
    key_type for key_type in KEY_TYPES if any(key_type in SUITE_KEY_TYPES[name] for name in PRESENTATION_SUITES)
)
_EC_CURVES = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1()}


def generate_private_key(key_type: str) -> bytes:
    """A fresh private key of `key_type` as raw bytes."""
    if key_type == "Ed25519":
        return ed25519.Ed25519PrivateKey.generate().private_bytes_raw()
    if key_type in _EC_CURVES:
        scalar = ec.generate_private_key(_EC_CURVES[key_type]).private_numbers().private_value
        return scalar.to_bytes(32 if key_type == "P-256" else 48, "big")
    if key_type == "Bls12381G2":
        return bbs.keygen(secrets.token_bytes(32))
    raise ValueError(f"unknown key type {key_type!r}")


def _ec_private_key(key_type: str, private_key: bytes) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(int.from_bytes(private_key, "big"), _EC_CURVES[key_type])


def public_key_of(key_type: str, private_key: bytes) -> bytes:
    """The raw public key (compressed point for the curves) of a raw private key."""
    if key_type == "Ed25519":
        public = ed25519.Ed25519PrivateKey.from_private_bytes(private_key).public_key()
        return public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    if key_type in _EC_CURVES:
        public = _ec_private_key(key_type, private_key).public_key()
        return public.public_bytes(Encoding.X962, PublicFormat.CompressedPoint)
    if key_type == "Bls12381G2":
        return bbs.sk_to_pk(private_key)
    raise ValueError(f"unknown key type {key_type!r}")


def add_proof(
    credential: dict,
    *,
    cryptosuite: str,
    key_type: str,
    private_key: bytes,
    verification_method: str,
    ctx: SuiteContext,
    mandatory_pointers: Sequence[str] = (),
    created: datetime | None = None,
    proof_purpose: str = "assertionMethod",
) -> dict:
    """`credential` (without a proof) secured with one new `DataIntegrityProof` of `cryptosuite`.

    For bbs-2023 and ecdsa-sd-2023 the proof is a base proof for a holder, with
    `mandatory_pointers` always disclosed. `created` is the proof's creation time (default now),
    except for bbs-2023, whose proofs carry one only when `created` is given: every proof a holder
    derives repeats it, and a time to the second would link presentations that bbs-2023 keeps
    unlinkable. Raises `ValueError` for a key that does not fit the suite, `ProofCheckFailed` for a
    credential the suite cannot process.
    """
    if key_type not in SUITE_KEY_TYPES.get(cryptosuite, ()):
        raise ValueError(f"{cryptosuite} cannot sign with a {key_type} key")
    if cryptosuite not in SELECTIVE_DISCLOSURE_SUITES:
        suite = get_suite(cryptosuite)
        return suite.sign(
            credential,
            private_key=private_key,
            verification_method=verification_method,
            proof_purpose=proof_purpose,
            created=created,
            ctx=ctx,
        )
    options = {"type": PROOF_TYPE, "cryptosuite": cryptosuite}
    if created is not None or cryptosuite != "bbs-2023":
        options["created"] = format_datetime(created or _now())
    options["verificationMethod"] = verification_method
    options["proofPurpose"] = proof_purpose
    if cryptosuite == "bbs-2023":
        proof = bbs_2023.create_base_proof(credential, options, list(mandatory_pointers), private_key, ctx)
    else:
        proof = ecdsa_sd_2023.create_base_proof(
            credential, options, list(mandatory_pointers), _ec_private_key(key_type, private_key), ctx
        )
    return {**credential, "proof": proof}


def add_presentation_proof(
    presentation: dict,
    *,
    cryptosuite: str,
    key_type: str,
    private_key: bytes,
    verification_method: str,
    ctx: SuiteContext,
    challenge: str | None = None,
    domain: str | list[str] | None = None,
    created: datetime | None = None,
) -> dict:
    """`presentation` (without a proof) secured with one `authentication` proof of a signature suite
    (not a selective-disclosure one), carrying the verifier's `challenge` and `domain` when given.

    Raises `ValueError` for a key or suite that cannot sign it, `ProofCheckFailed` for a
    presentation the suite cannot process.
    """
    if cryptosuite not in PRESENTATION_SUITES or key_type not in SUITE_KEY_TYPES[cryptosuite]:
        raise ValueError(f"{cryptosuite} cannot sign a presentation with a {key_type} key")
    return get_suite(cryptosuite).sign(
        presentation,
        private_key=private_key,
        verification_method=verification_method,
        proof_purpose="authentication",
        created=created,
        ctx=ctx,
        challenge=challenge,
        domain=domain,
    )


def derive(
    credential: dict, selective_pointers: Sequence[str], ctx: SuiteContext, *, presentation_header: bytes = b""
) -> dict:
    """The holder's derived credential disclosing `selective_pointers` (and the mandatory ones).

    `credential` carries one bbs-2023 or ecdsa-sd-2023 base proof; `presentation_header` is
    bound into a bbs-2023 derived proof. Raises `ProofCheckFailed`.
    """
    proof = credential.get("proof")
    if isinstance(proof, list) and len(proof) == 1:
        proof = proof[0]
    if not isinstance(proof, dict):
        raise ProofCheckFailed("malformed_proof", "the credential must carry exactly one base proof")
    document = {name: value for name, value in credential.items() if name != "proof"}
    suite = proof.get("cryptosuite")
    if suite == "bbs-2023":
        return bbs_2023.derive_proof(
            document, proof, list(selective_pointers), ctx, presentation_header=presentation_header
        )
    if suite == "ecdsa-sd-2023":
        if presentation_header:
            raise ProofCheckFailed("unsupported_feature", "ecdsa-sd-2023 has no presentation header")
        return ecdsa_sd_2023.derive_proof(document, proof, list(selective_pointers), ctx)
    raise ProofCheckFailed("unknown_cryptosuite", f"cryptosuite {suite!r} has no derived proofs")


def _now() -> datetime:
    return datetime.now(UTC)
