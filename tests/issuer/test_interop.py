"""Cross-checks with independent implementations (tests/support/independent.py): credentials Tessera
issues verify there, and credentials signed there verify (and derive) with Tessera, over HTTP."""

from __future__ import annotations

import json
import secrets

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tests.support import independent as ind
from tests.support.issuer import create_key, issue, unsigned, verify
from tests.support.vectors import VECTORS

IETF = VECTORS / "bbs-ietf" / "bls12-381-sha-256"


def _derive(client, headers, vc: dict, pointers: list[str]) -> dict:
    response = client.post(
        "/credentials/derive",
        json={"verifiableCredential": vc, "options": {"selectivePointers": pointers}},
        headers=headers,
    )
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.json


@pytest.mark.parametrize("case", ["signature001.json", "signature004.json"])
def test_the_independent_bbs_matches_the_ietf_fixtures(case):
    fixture = json.loads((IETF / "signature" / case).read_text())
    public_key = bytes.fromhex(fixture["signerKeyPair"]["publicKey"])
    messages = [bytes.fromhex(message) for message in fixture["messages"]]
    header = bytes.fromhex(fixture["header"])
    signature = bytes.fromhex(fixture["signature"])
    assert ind.bbs_public_key(int(fixture["signerKeyPair"]["secretKey"], 16)) == public_key
    assert ind.bbs_verify(public_key, signature, header, messages) is fixture["result"]["valid"]
    if fixture["result"]["valid"]:
        assert ind.bbs_sign(int(fixture["signerKeyPair"]["secretKey"], 16), public_key, header, messages) == signature


@pytest.mark.parametrize(
    ("suite", "key_type"),
    [
        ("eddsa-rdfc-2022", "Ed25519"),
        ("eddsa-jcs-2022", "Ed25519"),
        ("ecdsa-rdfc-2019", "P-256"),
        ("ecdsa-jcs-2019", "P-256"),
        ("ecdsa-jcs-2019", "P-384"),
    ],
)
def test_tessera_signatures_verify_independently(client, master, suite, key_type):
    key = create_key(client, master.headers, key_type)
    vc = issue(client, master.headers, unsigned("did:example:holder", degree="BSc"), cryptosuite=suite).json[
        "verifiableCredential"
    ]
    found_type, public_key = ind.public_key_from_multikey(key["publicKeyMultibase"])
    assert found_type == key_type
    assert ind.verify_signature_suite(vc, key_type, public_key) is True
    vc["credentialSubject"]["degree"] = "PhD"
    assert ind.verify_signature_suite(vc, key_type, public_key) is False


@pytest.mark.parametrize(
    ("suite", "key_type"),
    [
        ("eddsa-rdfc-2022", "Ed25519"),
        ("eddsa-jcs-2022", "Ed25519"),
        ("ecdsa-rdfc-2019", "P-256"),
        ("ecdsa-jcs-2019", "P-256"),
        ("ecdsa-jcs-2019", "P-384"),
    ],
)
def test_independent_signatures_verify_with_tessera(client, master, suite, key_type):
    if key_type == "Ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
        public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    else:
        private = ec.generate_private_key(ec.SECP256R1() if key_type == "P-256" else ec.SECP384R1())
        public = private.public_key().public_bytes(Encoding.X962, PublicFormat.CompressedPoint)
    multikey = ind.multikey(key_type, public)
    credential = {**unsigned("did:example:holder", degree="BSc"), "issuer": f"did:key:{multikey}"}
    vc = ind.sign_signature_suite(credential, suite, private, f"did:key:{multikey}#{multikey}")
    assert verify(client, master.headers, vc)["verified"] is True
    vc["credentialSubject"]["degree"] = "PhD"
    assert verify(client, master.headers, vc)["verified"] is False


def test_tessera_bbs_base_proofs_verify_with_arkworks(client, master):
    key = create_key(client, master.headers, "Bls12381G2")
    credential = unsigned("did:example:holder", degree="BSc")
    # The independent check covers base proofs without mandatory pointers: none are named, none by default.
    vc = issue(client, master.headers, credential, cryptosuite="bbs-2023", mandatoryPointers=[]).json[
        "verifiableCredential"
    ]
    _, public_key = ind.public_key_from_multikey(key["publicKeyMultibase"])
    assert ind.verify_bbs_base(vc, public_key) is True
    vc["credentialSubject"]["degree"] = "PhD"
    assert ind.verify_bbs_base(vc, public_key) is False


def test_arkworks_bbs_base_proofs_verify_and_derive_with_tessera(client, master):
    secret = secrets.randbelow(ind.R - 1) + 1
    multikey = ind.multikey("Bls12381G2", ind.bbs_public_key(secret))
    credential = {**unsigned("did:example:holder", degree="BSc", gpa="3.9"), "issuer": f"did:key:{multikey}"}
    vc = ind.bbs_base_proof(credential, secret, f"did:key:{multikey}#{multikey}")
    assert verify(client, master.headers, vc)["verified"] is True

    shown = _derive(client, master.headers, vc, ["/issuer", "/credentialSubject/degree"])  # nothing is mandatory
    assert shown["credentialSubject"] == {"id": "did:example:holder", "degree": "BSc"}
    result = verify(client, master.headers, shown)
    assert result["verified"] is True, result

    vc["credentialSubject"]["gpa"] = "4.0"
    assert verify(client, master.headers, vc)["verified"] is False


def test_tessera_ecdsa_sd_derived_proofs_verify_independently(client, master):
    key = create_key(client, master.headers, "P-256")
    vc = issue(
        client,
        master.headers,
        unsigned("did:example:holder", degree="BSc", gpa="3.9"),
        cryptosuite="ecdsa-sd-2023",
        mandatoryPointers=["/issuer", "/validFrom"],
    ).json["verifiableCredential"]
    shown = _derive(client, master.headers, vc, ["/credentialSubject/degree"])
    _, public_key = ind.public_key_from_multikey(key["publicKeyMultibase"])
    assert ind.verify_ecdsa_sd_derived(shown, public_key) is True
    shown["validFrom"] = "2025-01-01T00:00:00Z"
    assert ind.verify_ecdsa_sd_derived(shown, public_key) is False


def test_independent_ecdsa_sd_base_proofs_verify_and_derive_with_tessera(client, master):
    private = ec.generate_private_key(ec.SECP256R1())
    public = private.public_key().public_bytes(Encoding.X962, PublicFormat.CompressedPoint)
    multikey = ind.multikey("P-256", public)
    credential = {**unsigned("did:example:holder", degree="BSc", gpa="3.9"), "issuer": f"did:key:{multikey}"}
    vc = ind.ecdsa_sd_base_proof(credential, private, f"did:key:{multikey}#{multikey}")
    assert verify(client, master.headers, vc)["verified"] is True
    shown = _derive(client, master.headers, vc, ["/issuer", "/credentialSubject/gpa"])
    assert verify(client, master.headers, shown)["verified"] is True
    assert ind.verify_ecdsa_sd_derived(shown, public) is True
