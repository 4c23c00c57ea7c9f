"""`POST /v1/vc/verify` and `POST /credentials/verify`: W3C vectors, tampering and hostile input."""

from __future__ import annotations

import copy
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.config import change_settings
from tests.support.issuing import Issuer
from tests.support.vectors import EXPIRED_VECTORS, VECTORS, VERIFIED_VECTORS

UNBOUND = {"issuerMustControlKeys": False}


def _vector(name: str) -> dict:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


def _verify(client, headers, vc, options=None, path="/v1/vc/verify"):
    response = client.post(path, json={"verifiableCredential": vc, "options": options or {}}, headers=headers)
    assert response.status_code in (200, 400), response.get_data(as_text=True)
    body = response.json
    assert set(body) == {"verified", "checks", "warnings", "errors"}
    assert body["verified"] is (response.status_code == 200)
    return body


def _codes(body: dict) -> list[str]:
    return [error["code"] for error in body["errors"]]


@pytest.mark.parametrize("name", VERIFIED_VECTORS)
def test_w3c_vector_verifies(client, master, name):
    body = _verify(client, master.headers, _vector(name), UNBOUND)
    assert body["verified"], body["errors"]
    assert "proof" in body["checks"]
    expected = ["issuer_not_bound"]
    if name.startswith("bbs-2023/derived"):  # the spec's disclosure is bound to a header no one asked for
        expected.insert(0, "presentation_header_not_checked")
    assert [warning["code"] for warning in body["warnings"]] == expected


@pytest.mark.parametrize("name", EXPIRED_VECTORS)
def test_expired_vector_fails_only_on_its_validity_window(client, master, name):
    body = _verify(client, master.headers, _vector(name), UNBOUND)
    assert _codes(body) == ["expired"]


@pytest.mark.parametrize("name", VERIFIED_VECTORS)
def test_w3c_vector_with_a_changed_claim_fails(client, master, name):
    vc = _vector(name)
    subject = vc["credentialSubject"]
    subject = subject[0] if isinstance(subject, list) else subject
    claim = next(key for key in subject if key not in ("id", "type"))
    subject[claim] = "tampered" if subject[claim] != "tampered" else "changed"
    body = _verify(client, master.headers, vc, UNBOUND)
    assert not body["verified"]
    proofs = vc["proof"] if isinstance(vc["proof"], list) else [vc["proof"]]
    # Every proof of a set or chain signs the claims, so each one fails on its signature alone.
    assert _codes(body) == ["invalid_signature"] * len(proofs), body["errors"]


def test_issuer_must_control_the_key_by_default(client, master):
    vc = _vector("ecdsa/ecdsa-rdfc-2019-p256/employ/signedECDSAP256.json")
    body = _verify(client, master.headers, vc)
    assert _codes(body) == ["verification_method_not_authorized"]


def test_credential_signed_for_its_did_issuer_verifies_strictly(client, master):
    issuer = Issuer()
    for suite in ("eddsa-rdfc-2022", "eddsa-jcs-2022"):
        vc = issuer.sign(issuer.credential("did:example:holder"), suite)
        body = _verify(client, master.headers, vc)
        assert body["verified"], body["errors"]
        assert body["warnings"] == []


def test_verify_needs_an_api_token(client):
    response = client.post("/v1/vc/verify", json={"verifiableCredential": {}})
    assert response.status_code == 401
    assert response.headers["Content-Type"] == "application/problem+json"


def test_vc_api_alias_needs_a_token_unless_opened(app, client, master, monkeypatch):
    vc = _vector("eddsa/eddsa-rdfc-2022/signedDataInt.json")
    request = {"verifiableCredential": vc, "options": UNBOUND}
    assert client.post("/credentials/verify", json=request).status_code == 401
    assert client.post("/credentials/verify", json=request, headers=master.headers).status_code == 200
    change_settings(monkeypatch, app, VC_VERIFY_OPEN="1")
    response = client.post("/credentials/verify", json=request)
    assert response.status_code == 200
    assert response.json["verified"] is True


def test_verify_stores_nothing_and_reports_malformed_input(client, master):
    body = _verify(client, master.headers, "not a credential")
    assert _codes(body) == ["malformed_credential"]
    missing = client.post("/v1/vc/verify", json={"options": {}}, headers=master.headers)
    assert missing.status_code == 422
    assert "verifiableCredential" in missing.json["errors"]


# Hostile input: each is a clear failure reason and never a 5xx.


def test_context_not_on_the_allow_list(client, master):
    issuer = Issuer()
    vc = issuer.credential("did:example:holder")
    vc["@context"].append("https://evil.example/context.jsonld")
    vc["proof"] = issuer.sign(issuer.credential("did:example:holder"))["proof"]
    body = _verify(client, master.headers, vc)
    assert "context_not_allowed" in _codes(body)


def test_jsonld_bomb_hits_the_canonicalisation_limit(client, master):
    issuer = Issuer()
    vc = issuer.sign(issuer.credential("did:example:holder"))
    node: dict = {"leaf": "x"}
    for _ in range(200):
        node = {"nested": node}
    vc["credentialSubject"]["bomb"] = node
    body = _verify(client, master.headers, vc)
    assert _codes(body) == ["canonicalization_limit"]


def test_wide_jsonld_bomb_hits_the_canonicalisation_limit(client, master):
    issuer = Issuer()
    vc = issuer.sign(issuer.credential("did:example:holder"))
    vc["credentialSubject"]["items"] = [{"n": [{"m": index} for index in range(30)]} for _ in range(1000)]
    body = _verify(client, master.headers, vc)
    assert _codes(body) == ["canonicalization_limit"]


@pytest.mark.parametrize(
    "proof_value",
    ["z3FXQjecWufY46", "zz-not-base58-0OIl", "u" + "A" * 86, "", "Z" + "1" * 80],
)
def test_proof_value_of_the_wrong_length_or_encoding(client, master, proof_value):
    issuer = Issuer()
    vc = issuer.sign(issuer.credential("did:example:holder"))
    vc["proof"]["proofValue"] = proof_value
    body = _verify(client, master.headers, vc)
    assert _codes(body) == ["malformed_proof_value"]


def test_unknown_cryptosuite(client, master):
    issuer = Issuer()
    vc = issuer.sign(issuer.credential("did:example:holder"))
    vc["proof"]["cryptosuite"] = "rot13-2024"
    body = _verify(client, master.headers, vc)
    assert _codes(body) == ["unknown_cryptosuite"]


class _Recorder(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *_args) -> None:
        return


def test_did_web_pointing_at_loopback_is_refused_without_a_request(client, master):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    _Recorder.hits = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        did = f"did:web:127.0.0.1%3A{port}"
        issuer = Issuer()
        vc = issuer.credential("did:example:holder")
        vc["issuer"] = did
        vc = issuer.sign(vc)
        vc["proof"]["verificationMethod"] = f"{did}#key-1"
        body = _verify(client, master.headers, vc)
        assert _codes(body) == ["did_resolution_failed"]
        assert "non-public" in body["errors"][0]["detail"] or "not a domain" in body["errors"][0]["detail"]
        assert _Recorder.hits == []
    finally:
        server.shutdown()


def test_did_web_host_resolving_to_loopback_is_refused(client, master):
    issuer = Issuer()
    vc = issuer.credential("did:example:holder")
    vc["issuer"] = "did:web:localhost"
    vc = issuer.sign(vc)
    vc["proof"]["verificationMethod"] = "did:web:localhost#key-1"
    body = _verify(client, master.headers, vc)
    assert _codes(body) == ["did_resolution_failed"]
    assert "non-public address" in body["errors"][0]["detail"]
    assert socket.gethostbyname("localhost").startswith("127.")


def test_tampered_signature_byte(client, master):
    issuer = Issuer()
    vc = issuer.sign(issuer.credential("did:example:holder"))
    from app.multiformats import base58btc_decode, base58btc_encode

    raw = bytearray(base58btc_decode(vc["proof"]["proofValue"][1:]))
    raw[5] ^= 0x01
    vc["proof"]["proofValue"] = "z" + base58btc_encode(bytes(raw))
    body = _verify(client, master.headers, copy.deepcopy(vc))
    assert _codes(body) == ["invalid_signature"]


def test_other_key_than_the_issuers(client, master):
    issuer, impostor = Issuer(), Issuer()
    vc = impostor.sign(issuer.credential("did:example:holder"))
    body = _verify(client, master.headers, vc)
    assert _codes(body) == ["verification_method_not_authorized"]


# Standards: proof options of the selective-disclosure suites, proof chains, issuer binding.

SD_VECTORS = [
    "ecdsa/ecdsa-sd-2023/employ/addSignedSDBase.json",
    "ecdsa/ecdsa-sd-2023/employ/derivedRevealDocument.json",
    "bbs-2023/addSignedSDBase.json",
    "bbs-2023/derivedRevealDocument.json",
]


@pytest.mark.parametrize("name", SD_VECTORS)
@pytest.mark.parametrize("created", ["2023-08-15 23:36:38Z", "yesterday", "2023-02-30T00:00:00Z", 20230815])
def test_selective_disclosure_proof_with_a_created_that_is_no_datetime_is_refused(client, master, name, created):
    vc = _vector(name)
    vc["proof"]["created"] = created
    body = _verify(client, master.headers, vc, UNBOUND)
    assert _codes(body) == ["invalid_proof_configuration"], body["errors"]
    assert "created" in body["errors"][0]["detail"]


@pytest.mark.parametrize("name", SD_VECTORS)
def test_selective_disclosure_proof_with_another_context_than_the_document_is_refused(client, master, name):
    vc = _vector(name)
    vc["proof"]["@context"] = ["https://www.w3.org/ns/credentials/examples/v2"]
    body = _verify(client, master.headers, vc, UNBOUND)
    assert _codes(body) == ["invalid_proof_configuration"], body["errors"]


def _chain_proof(signer: Issuer, vc: dict, previous_id: str, proof_id: str) -> dict:
    """`vc` with a proof by `signer` added that chains to the proof `previous_id` (eddsa-rdfc-2022)."""
    from app.credentials.cryptosuites import get_suite
    from app.multiformats import base58btc_encode
    from tests.support.vectors import suite_context

    suite = get_suite("eddsa-rdfc-2022")
    proofs = vc["proof"] if isinstance(vc["proof"], list) else [vc["proof"]]
    previous = [proof for proof in proofs if proof.get("id") == previous_id]
    document = {name: value for name, value in vc.items() if name != "proof"}
    document["proof"] = previous
    options = {
        "type": "DataIntegrityProof",
        "cryptosuite": suite.name,
        "id": proof_id,
        "created": "2024-02-01T00:00:00Z",
        "verificationMethod": signer.verification_method,
        "proofPurpose": "assertionMethod",
        "previousProof": previous_id,
    }
    data = suite.hash_data(document, options, "Ed25519", suite_context())
    chained = copy.deepcopy(vc)
    chained["proof"] = [*proofs, {**options, "proofValue": "z" + base58btc_encode(signer.private_key.sign(data))}]
    return chained


def _signed_with_id(issuer: Issuer, vc: dict, proof_id: str) -> dict:
    from app.credentials.cryptosuites import get_suite
    from tests.support.vectors import suite_context

    return get_suite("eddsa-rdfc-2022").sign(
        vc,
        private_key=issuer.private_key,
        verification_method=issuer.verification_method,
        ctx=suite_context(),
        proof_id=proof_id,
    )


def test_proof_chain_with_a_second_signer_binds_through_the_issuers_proof(client, master):
    issuer, notary = Issuer(), Issuer()
    vc = _signed_with_id(issuer, issuer.credential("did:example:holder"), "urn:uuid:issuer-proof")
    chained = _chain_proof(notary, vc, "urn:uuid:issuer-proof", "urn:uuid:notary-proof")
    body = _verify(client, master.headers, chained)
    assert body["verified"], body["errors"]
    assert body["warnings"] == []


def test_proof_chain_without_a_proof_by_the_issuer_is_not_bound(client, master):
    issuer, notary, other = Issuer(), Issuer(), Issuer()
    vc = _signed_with_id(other, issuer.credential("did:example:holder"), "urn:uuid:other-proof")
    chained = _chain_proof(notary, vc, "urn:uuid:other-proof", "urn:uuid:notary-proof")
    body = _verify(client, master.headers, chained)
    assert _codes(body) == ["verification_method_not_authorized"]
    assert issuer.did in body["errors"][0]["detail"]


def test_a_second_signers_bad_proof_still_fails_the_chain(client, master):
    issuer, notary = Issuer(), Issuer()
    vc = _signed_with_id(issuer, issuer.credential("did:example:holder"), "urn:uuid:issuer-proof")
    chained = _chain_proof(notary, vc, "urn:uuid:issuer-proof", "urn:uuid:notary-proof")
    chained["proof"][1]["created"] = "2024-03-01T00:00:00Z"
    body = _verify(client, master.headers, chained)
    assert _codes(body) == ["invalid_signature"]


def test_https_issuer_with_a_did_key_signer_needs_the_explicit_option(client, master):
    signer = Issuer()
    vc = signer.credential("did:example:holder")
    vc["issuer"] = "https://issuer.example/"
    vc = signer.sign(vc)
    body = _verify(client, master.headers, vc)
    assert _codes(body) == ["verification_method_not_authorized"]
    assert "not a DID" in body["errors"][0]["detail"]

    waived = _verify(client, master.headers, vc, UNBOUND)
    assert waived["verified"], waived["errors"]
    assert [warning["code"] for warning in waived["warnings"]] == ["issuer_not_bound"]
    detail = waived["warnings"][0]["detail"]
    assert "issuerMustControlKeys" in detail and "not a DID" not in detail


@pytest.mark.parametrize("host", ["localhost", "no-such-host.invalid"])
def test_did_web_errors_never_reveal_internal_addresses(app, client, master, host):
    issuer = Issuer()
    did = f"did:web:{host}"
    vc = issuer.credential("did:example:holder")
    vc["issuer"] = did
    vc = issuer.sign(vc)
    vc["proof"]["verificationMethod"] = f"{did}#key-1"
    body = _verify(client, master.headers, vc)
    assert _codes(body) == ["did_resolution_failed"]
    # An internal host and an unknown one answer alike, without any resolved address or OS error.
    assert body["errors"][0]["detail"] == f"did:web host {host} is unknown or has a non-public address; refused"
