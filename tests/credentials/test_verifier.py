"""verify_credential end to end: every RDFC/JCS suite, proof sets and chains, key authorisation,
validity window, status, and hostile input that must fail with a reason, never an exception."""

from __future__ import annotations

import copy
import json
import socket
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.credentials.cryptosuites import require_suite
from app.credentials.cryptosuites.base import ProofCheckFailed, SuiteContext
from app.credentials.jsonld.loader import make_document_loader
from app.credentials.verifier import VerificationResult, verify_credential
from app.dids.resolver import DidResolver
from app.multiformats import base58btc_decode, decode_multikey_secret, multibase_encode
from tests.support.issuer import WHOLE_CREDENTIAL_SUITES
from tests.support.vectors import VECTORS

CONTEXTS = VECTORS / "contexts"
V2 = "https://www.w3.org/ns/credentials/v2"
EXAMPLES = "https://www.w3.org/ns/credentials/examples/v2"
NOW = datetime(2025, 6, 1, tzinfo=UTC)

KEY_FILES = {"Ed25519": "eddsa/keyPair.json", "P-256": "ecdsa/p256KeyPair.json", "P-384": "ecdsa/p384KeyPair.json"}
SUITE_KEYS = WHOLE_CREDENTIAL_SUITES


@pytest.fixture(scope="module")
def loader():
    return make_document_loader(CONTEXTS)


@pytest.fixture(scope="module")
def resolver() -> DidResolver:
    return DidResolver()


class Issuer:
    def __init__(self, key_type: str) -> None:
        pair = json.loads((VECTORS / KEY_FILES[key_type]).read_text())
        public = pair["publicKeyMultibase"]
        self.did = f"did:key:{public}"
        self.verification_method = f"{self.did}#{public}"
        self.private_key = decode_multikey_secret(pair.get("secretKeyMultibase") or pair["privateKeyMultibase"])[1]

    def credential(self, **changes) -> dict:
        credential = {
            "@context": [V2, EXAMPLES],
            "id": "urn:uuid:2f1c6a2e-5b1d-4c9e-9d57-0c1f6f0b8a11",
            "type": ["VerifiableCredential", "AlumniCredential"],
            "issuer": self.did,
            "validFrom": "2024-01-01T00:00:00Z",
            "credentialSubject": {"id": "did:example:holder", "alumniOf": "The School of Examples"},
        }
        credential.update(changes)
        return credential

    def sign(self, credential: dict, loader, suite: str = "eddsa-rdfc-2022", **options) -> dict:
        return require_suite(suite).sign(
            credential,
            private_key=self.private_key,
            verification_method=options.pop("verification_method", self.verification_method),
            ctx=SuiteContext(loader=loader),
            **options,
        )


@pytest.fixture(scope="module")
def ed25519() -> Issuer:
    return Issuer("Ed25519")


def _verify(vc, loader, resolver, **options) -> VerificationResult:
    options.setdefault("now", NOW)
    result = verify_credential(vc, resolver=resolver, loader=loader, **options)
    assert result.verified == (not result.errors)
    assert result.reason == (result.errors[0]["code"] if result.errors else None)
    return result


@pytest.mark.parametrize(("suite", "key_type"), SUITE_KEYS)
def test_signed_credential_verifies_and_tampering_fails(loader, resolver, suite: str, key_type: str) -> None:
    issuer = Issuer(key_type)
    signed = issuer.sign(issuer.credential(), loader, suite)
    result = _verify(signed, loader, resolver)
    assert result.verified, result.errors
    assert result.checks == ["shape", "proof", "validity_window"]
    assert result.as_dict() == {"verified": True, "checks": result.checks, "warnings": [], "errors": []}

    tampered = copy.deepcopy(signed)
    tampered["credentialSubject"]["alumniOf"] = "Another School"
    assert _verify(tampered, loader, resolver).reason == "invalid_signature"

    signature = bytearray(base58btc_decode(signed["proof"]["proofValue"][1:]))
    signature[7] ^= 0x80
    flipped = copy.deepcopy(signed)
    flipped["proof"]["proofValue"] = multibase_encode(bytes(signature), "z")
    assert _verify(flipped, loader, resolver).reason == "invalid_signature"


@pytest.mark.parametrize(
    "path",
    [
        "eddsa/eddsa-rdfc-2022/signedDataInt.json",
        "eddsa/eddsa-rdfc-2022/employ/signedDataInt.json",
        "eddsa/eddsa-jcs-2022/signedJCS.json",
        "ecdsa/ecdsa-rdfc-2019-p256/signedECDSAP256.json",
        "ecdsa/ecdsa-rdfc-2019-p256/employ/signedECDSAP256.json",
        "ecdsa/ecdsa-rdfc-2019-p384/signedECDSAP384.json",
        "ecdsa/ecdsa-rdfc-2019-p384/employ/signedECDSAP384.json",
        "ecdsa/ecdsa-jcs-2019-p256/signedJCSECDSAP256.json",
        "ecdsa/ecdsa-jcs-2019-p384/signedJCSECDSAP384.json",
        "eddsa/proof-set-chain/signedProofSet1.json",
        "eddsa/proof-set-chain/signedProofSet2.json",
        "eddsa/proof-set-chain/signedProofChain1.json",
        "eddsa/proof-set-chain/signedProofChain2.json",
    ],
)
def test_official_vectors_verify_end_to_end(loader, resolver, path: str) -> None:
    vc = json.loads((VECTORS / path).read_text())
    result = _verify(vc, loader, resolver, issuer_must_control_keys=False)
    assert result.verified, result.errors
    # Their issuer is an https URL, so it cannot have authorised the did:key that signed them.
    assert _verify(vc, loader, resolver).reason == "verification_method_not_authorized"
    tampered = copy.deepcopy(vc)
    tampered["validFrom"] = "2023-01-02T00:00:00Z"
    assert _verify(tampered, loader, resolver, issuer_must_control_keys=False).reason == "invalid_signature"


def test_one_bad_proof_in_a_set_fails_the_credential(loader, resolver) -> None:
    vc = json.loads((VECTORS / "eddsa/proof-set-chain/signedProofSet2.json").read_text())
    vc["proof"][1]["created"] = "2023-02-24T23:36:39Z"
    result = _verify(vc, loader, resolver, issuer_must_control_keys=False)
    assert [error["code"] for error in result.errors] == ["invalid_signature"]
    assert result.errors[0]["detail"].startswith("proof 1:")


def test_chain_with_a_missing_previous_proof_fails(loader, resolver) -> None:
    vc = json.loads((VECTORS / "eddsa/proof-set-chain/signedProofChain2.json").read_text())
    vc["proof"] = [proof for proof in vc["proof"] if proof.get("id") != "urn:uuid:d94f792a-c546-4d06-b38a-da070ab56c23"]
    result = _verify(vc, loader, resolver, issuer_must_control_keys=False)
    assert result.reason == "previous_proof_missing"


def test_key_of_another_did_is_not_authorised(loader, resolver, ed25519: Issuer) -> None:
    other = Issuer("P-256")
    vc = ed25519.sign(ed25519.credential(issuer=other.did), loader)
    assert _verify(vc, loader, resolver).reason == "verification_method_not_authorized"


def test_wrong_proof_purpose_fails(loader, resolver, ed25519: Issuer) -> None:
    vc = ed25519.sign(ed25519.credential(), loader, proof_purpose="authentication")
    assert _verify(vc, loader, resolver).reason == "invalid_proof_purpose"
    assert _verify(vc, loader, resolver, proof_purpose="authentication").verified


def test_unknown_cryptosuite_and_proof_type(loader, resolver, ed25519: Issuer) -> None:
    vc = ed25519.sign(ed25519.credential(), loader)
    unknown = copy.deepcopy(vc)
    unknown["proof"]["cryptosuite"] = "rot13-2024"
    result = _verify(unknown, loader, resolver)
    assert result.reason == "unknown_cryptosuite" and "rot13-2024" in result.errors[0]["detail"]
    missing = copy.deepcopy(vc)
    del missing["proof"]["cryptosuite"]
    assert _verify(missing, loader, resolver).reason == "unknown_cryptosuite"
    legacy = copy.deepcopy(vc)
    legacy["proof"]["type"] = "Ed25519Signature2020"
    assert _verify(legacy, loader, resolver).reason == "unsupported_proof_type"


@pytest.mark.parametrize(
    ("proof_value", "code"),
    [
        ("z" + "1" * 20, "malformed_proof_value"),
        ("u" + "A" * 86, "malformed_proof_value"),
        ("zIl0O", "malformed_proof_value"),
        ("", "malformed_proof_value"),
        (None, "malformed_proof_value"),
    ],
)
def test_malformed_proof_values_fail(loader, resolver, ed25519: Issuer, proof_value, code: str) -> None:
    vc = ed25519.sign(ed25519.credential(), loader)
    vc["proof"]["proofValue"] = proof_value
    assert _verify(vc, loader, resolver).reason == code


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"validFrom": "2030-01-01T00:00:00Z"}, "not_yet_valid"),
        ({"validUntil": "2025-01-01T00:00:00Z"}, "expired"),
        ({"validFrom": "yesterday"}, "malformed_credential"),
        ({"validUntil": "2025-13-01T00:00:00Z"}, "malformed_credential"),
    ],
)
def test_validity_window(loader, resolver, ed25519: Issuer, changes: dict, code: str) -> None:
    vc = ed25519.sign(ed25519.credential(**changes), loader)
    result = _verify(vc, loader, resolver)
    assert [error["code"] for error in result.errors] == [code]


def test_empty_valid_until_means_no_end(loader, resolver, ed25519: Issuer) -> None:
    credential = ed25519.credential()
    credential["validUntil"] = ""
    vc = require_suite("eddsa-jcs-2022").sign(
        credential, private_key=ed25519.private_key, verification_method=ed25519.verification_method
    )
    assert _verify(vc, loader, resolver, now=datetime(2100, 1, 1, tzinfo=UTC)).verified


def test_expired_proof_fails(loader, resolver, ed25519: Issuer) -> None:
    vc = ed25519.sign(ed25519.credential(), loader)
    vc["proof"]["expires"] = "2025-01-01T00:00:00Z"
    assert _verify(vc, loader, resolver).reason == "proof_expired"


def _with_status(issuer: Issuer, loader) -> dict:
    status = {
        "id": "https://status.example/lists/1#42",
        "type": "BitstringStatusListEntry",
        "statusPurpose": "revocation",
        "statusListIndex": "42",
        "statusListCredential": "https://status.example/lists/1",
    }
    return issuer.sign(issuer.credential(credentialStatus=status), loader)


@pytest.mark.parametrize("status", ["revoked", "suspended"])
def test_status_problems_are_reported(loader, resolver, ed25519: Issuer, status: str) -> None:
    vc = _with_status(ed25519, loader)
    seen: list[dict] = []

    def checker(credential: dict) -> str | None:
        seen.append(credential)
        return status

    result = _verify(vc, loader, resolver, status_checker=checker)
    assert result.reason == status and "status" in result.checks and seen == [vc]


def test_status_checker_outcomes(loader, resolver, ed25519: Issuer) -> None:
    vc = _with_status(ed25519, loader)
    assert _verify(vc, loader, resolver, status_checker=lambda _: None).checks[-1] == "status"
    unchecked = _verify(vc, loader, resolver)
    assert unchecked.verified and [warning["code"] for warning in unchecked.warnings] == ["status_not_checked"]

    def unavailable(_: dict) -> str | None:
        raise ProofCheckFailed("status_list_unavailable", "list could not be fetched")

    def broken(_: dict) -> str | None:
        raise RuntimeError("bug")

    assert _verify(vc, loader, resolver, status_checker=unavailable).reason == "status_list_unavailable"
    assert _verify(vc, loader, resolver, status_checker=broken).reason == "status_check_failed"
    assert _verify(vc, loader, resolver, status_checker=lambda _: "paused").reason == "status_check_failed"


def test_status_is_not_checked_for_a_forged_credential(loader, resolver, ed25519: Issuer) -> None:
    vc = _with_status(ed25519, loader)
    vc["credentialSubject"]["alumniOf"] = "Forged"

    def checker(_: dict) -> str | None:
        raise AssertionError("status must not be fetched for a credential that failed its proof")

    assert _verify(vc, loader, resolver, status_checker=checker).reason == "invalid_signature"


@pytest.mark.parametrize(
    "vc",
    [
        None,
        "a string",
        ["VerifiableCredential"],
        {},
        {"@context": V2, "type": ["VerifiableCredential"]},
        {"@context": [EXAMPLES, V2], "type": ["VerifiableCredential"]},
        {
            "@context": [V2],
            "type": ["Credential"],
            "issuer": "did:example:1",
            "credentialSubject": {"a": 1},
            "proof": {},
        },
        {"@context": [V2], "type": "VerifiableCredential", "issuer": 5, "credentialSubject": {"a": 1}, "proof": {}},
        {"@context": [V2], "type": "VerifiableCredential", "issuer": "did:example:1", "proof": {}},
        {"@context": [V2], "type": "VerifiableCredential", "issuer": "did:example:1", "credentialSubject": {"a": 1}},
        {
            "@context": [V2],
            "type": "VerifiableCredential",
            "issuer": "did:example:1",
            "credentialSubject": {"a": 1},
            "proof": [],
        },
        {
            "@context": [V2],
            "type": "VerifiableCredential",
            "issuer": {"name": "x"},
            "credentialSubject": {"a": 1},
            "proof": {},
        },
        {"@context": [V2], "type": "VerifiableCredential", "credentialSubject": {"a": {1, 2}}, "proof": {}},
    ],
)
def test_malformed_credentials_are_reported(loader, resolver, vc) -> None:
    result = _verify(vc, loader, resolver)
    assert result.reason == "malformed_credential" and result.checks == []


def test_proof_that_is_not_an_object(loader, resolver, ed25519: Issuer) -> None:
    vc = ed25519.sign(ed25519.credential(), loader)
    vc["proof"] = ["not a proof"]
    assert _verify(vc, loader, resolver).reason == "malformed_proof"


def test_context_not_on_the_allow_list(loader, resolver, ed25519: Issuer, tmp_path: Path) -> None:
    extra_url = "https://contexts.example/unlisted/v1"
    context_file = tmp_path / "unlisted.jsonld"
    context_file.write_text(json.dumps({"@context": {"nickname": "https://contexts.example/vocab#nickname"}}))
    wide = make_document_loader(CONTEXTS, extra={extra_url: context_file})
    credential = ed25519.credential()
    credential["@context"] = [V2, EXAMPLES, extra_url]
    credential["credentialSubject"]["nickname"] = "x"
    vc = ed25519.sign(credential, wide)
    assert _verify(vc, wide, resolver).verified
    result = _verify(vc, loader, resolver)
    assert result.reason == "context_not_allowed" and extra_url in result.errors[0]["detail"]


def test_undefined_term_fails_even_with_a_valid_signature(loader, resolver, ed25519: Issuer) -> None:
    credential = ed25519.credential()
    credential["@context"] = [V2]
    credential["credentialSubject"]["undefinedClaim"] = "silently dropped elsewhere"
    vc = require_suite("eddsa-jcs-2022").sign(
        credential, private_key=ed25519.private_key, verification_method=ed25519.verification_method
    )
    assert _verify(vc, loader, resolver).verified  # JCS does not interpret JSON-LD
    with pytest.raises(ProofCheckFailed) as failure:
        ed25519.sign(credential, loader)
    assert failure.value.code == "undefined_term"
    forged = ed25519.sign(ed25519.credential(), loader)
    forged["@context"] = [V2]
    forged["credentialSubject"] = {"id": "did:example:holder", "undefinedClaim": "x"}
    assert _verify(forged, loader, resolver).reason == "undefined_term"


def test_json_ld_bomb_is_a_limit_failure(loader, resolver, ed25519: Issuer) -> None:
    vc = ed25519.sign(ed25519.credential(), loader)
    terms = {f"t{index}": f"https://ex.org/t{index}" for index in range(4000)}
    vc["@context"] = [V2, EXAMPLES, {"nest": {"@id": "https://ex.org/nest", "@context": terms}}]
    inner = vc["credentialSubject"]
    for _ in range(25):
        inner["nest"] = {"t1": "v"}
        inner = inner["nest"]
    assert _verify(vc, loader, resolver).reason == "canonicalization_limit"


def test_deeply_nested_credential_is_a_limit_failure(loader, resolver, ed25519: Issuer) -> None:
    vc = ed25519.sign(ed25519.credential(), loader)
    inner = vc["credentialSubject"]
    for _ in range(10_000):
        inner["alumniOf"] = {}
        inner = inner["alumniOf"]
    assert _verify(vc, loader, resolver).reason == "canonicalization_limit"


def test_did_web_issuer_on_loopback_is_refused_without_a_connection(loader, resolver) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.05)
    port = listener.getsockname()[1]
    connections: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connections.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        did = f"did:web:127.0.0.1%3A{port}"
        issuer = Issuer("Ed25519")
        vc = issuer.sign(issuer.credential(issuer=did), loader, verification_method=f"{did}#key-1")
        result = _verify(vc, loader, resolver)
        assert result.reason == "did_resolution_failed" and "127.0.0.1" in result.errors[0]["detail"]
        stop.wait(0.2)
        assert connections == []
    finally:
        stop.set()
        thread.join()
        listener.close()


def test_a_failing_resolver_never_reads_as_verified(loader, ed25519: Issuer, caplog) -> None:
    class BrokenResolver:
        def resolve_verification_method(self, vm_url: str, purpose: str, *, controller=None):
            raise RuntimeError("resolver bug")

    vc = ed25519.sign(ed25519.credential(), loader)
    result = _verify(vc, loader, BrokenResolver())
    assert result.reason == "verification_error"
    assert result.errors[0]["detail"] == "the check failed with an unexpected error (logged)"
    assert "resolver bug" in caplog.text  # the exception's text is the log's, never the answer's
