"""The pure proof module `app.issuer.proofs`: keys, suites and their refusals."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext
from app.credentials.jsonld.loader import make_document_loader
from app.issuer import proofs
from app.multiformats import encode_multikey
from tests.support import independent as ind
from tests.support.issuer import unsigned
from tests.support.vectors import VECTORS

CTX = SuiteContext(loader=make_document_loader(VECTORS / "contexts"))


@pytest.mark.parametrize("key_type", proofs.KEY_TYPES)
def test_public_keys_match_independent_derivations(key_type):
    private = proofs.generate_private_key(key_type)
    public = proofs.public_key_of(key_type, private)
    if key_type == "Ed25519":
        expected = (
            ed25519.Ed25519PrivateKey.from_private_bytes(private)
            .public_key()
            .public_bytes(Encoding.Raw, PublicFormat.Raw)
        )
    elif key_type == "Bls12381G2":
        expected = ind.bbs_public_key(int.from_bytes(private, "big"))
    else:
        curve = ec.SECP256R1() if key_type == "P-256" else ec.SECP384R1()
        expected = (
            ec.derive_private_key(int.from_bytes(private, "big"), curve)
            .public_key()
            .public_bytes(Encoding.X962, PublicFormat.CompressedPoint)
        )
    assert public == expected
    assert encode_multikey(key_type, public) == ind.multikey(key_type, public)


def _sign(suite: str, key_type: str, **extra):
    private = proofs.generate_private_key(key_type)
    multikey = encode_multikey(key_type, proofs.public_key_of(key_type, private))
    credential = {**unsigned("did:example:holder"), "issuer": f"did:key:{multikey}"}
    return proofs.add_proof(
        credential,
        cryptosuite=suite,
        key_type=key_type,
        private_key=private,
        verification_method=f"did:key:{multikey}#{multikey}",
        ctx=CTX,
        **extra,
    )


@pytest.mark.parametrize(
    ("suite", "key_type"),
    [("bbs-2023", "Ed25519"), ("ecdsa-sd-2023", "P-384"), ("eddsa-jcs-2022", "P-256"), ("nope", "Ed25519")],
)
def test_a_key_the_suite_cannot_use_is_refused(suite, key_type):
    with pytest.raises(ValueError):
        _sign(suite, key_type)


@pytest.mark.parametrize("suite", ["bbs-2023", "ecdsa-sd-2023"])
def test_a_mandatory_pointer_to_nothing_is_refused(suite):
    key_type = "Bls12381G2" if suite == "bbs-2023" else "P-256"
    with pytest.raises(ProofCheckFailed):
        _sign(suite, key_type, mandatory_pointers=["/credentialSubject/nothing"])


def test_derive_needs_one_selective_disclosure_base_proof():
    signed = _sign("eddsa-jcs-2022", "Ed25519")
    with pytest.raises(ProofCheckFailed) as failure:
        proofs.derive(signed, ["/credentialSubject/firstName"], CTX)
    assert failure.value.code == "unknown_cryptosuite"
    base = _sign("ecdsa-sd-2023", "P-256")
    with pytest.raises(ProofCheckFailed):
        proofs.derive({**base, "proof": [base["proof"], base["proof"]]}, [], CTX)
    with pytest.raises(ProofCheckFailed) as failure:
        proofs.derive(base, [], CTX, presentation_header=b"x")
    assert failure.value.code == "unsupported_feature"
    derived = proofs.derive({**base, "proof": [base["proof"]]}, ["/issuer"], CTX)
    assert derived["issuer"] == base["issuer"] and "credentialSubject" not in derived
