"""Presentations with Digital Bazaar's libraries as the reference (tests/credentials/vc_node): a holder
there derives and presents what Tessera issued, and Tessera verifies it over HTTP; presentations and
bbs-2023 disclosures Tessera makes verify there."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest

from tests.support.issuer import create_key, issue, unsigned
from tests.support.oidc import Tenant, make_tenant
from tests.support.presentations import DigitalBazaar, codes, present, unsigned_presentation, verify_presentation

CHALLENGE, DOMAIN = "d436f0c8-fbd9-4e48-bbb2-55fc5d0920a8", "verifier.example"
REVOCABLE = {"type": "BitstringStatusListEntry", "statusPurpose": "revocation"}
# The suites that sign a presentation, each with the key types Tessera verifies them with.
SIGNING = [
    ("eddsa-rdfc-2022", "Ed25519"),
    ("ecdsa-rdfc-2019", "P-256"),
    ("ecdsa-rdfc-2019", "P-384"),
    ("eddsa-jcs-2022", "Ed25519"),
    ("ecdsa-jcs-2019", "P-256"),
    ("ecdsa-jcs-2019", "P-384"),
]


@pytest.fixture(scope="module")
def digital_bazaar() -> DigitalBazaar:
    return DigitalBazaar()


@dataclass
class Wallet:
    """A holder's keys made by Digital Bazaar's libraries, and what Tessera issued to the first one:
    an eddsa-rdfc-2022 credential, and ecdsa-sd-2023 and bbs-2023 disclosures derived there (the bbs
    one bound to the verifier's challenge)."""

    issuer: Tenant
    keys: dict[str, dict]
    credentials: list[dict]

    @property
    def did(self) -> str:
        return self.keys["Ed25519"]["controller"]


@pytest.fixture(scope="module")
def wallet(app, real_worker, digital_bazaar) -> Wallet:
    http = app.test_client()
    issuer = make_tenant(app, http, name="Example University")
    for key_type in ("Ed25519", "P-256", "Bls12381G2"):
        create_key(http, issuer.headers, key_type)
    keys = {key["type"]: key for key in digital_bazaar.run("keys", {"types": ["Ed25519", "P-256", "P-384"]})}
    holder = keys["Ed25519"]["controller"]

    def issued(suite: str) -> dict:
        credential = unsigned(holder, degree="BSc", gpa="3.9")
        return issue(http, issuer.headers, credential, cryptosuite=suite).json["verifiableCredential"]

    pointers = ["/credentialSubject/degree"]
    sd = digital_bazaar.run("derive", {"credential": issued("ecdsa-sd-2023"), "selectivePointers": pointers})
    bbs = digital_bazaar.run(
        "derive", {"credential": issued("bbs-2023"), "selectivePointers": pointers, "presentationHeader": CHALLENGE}
    )
    assert "gpa" not in sd["credentialSubject"] and "gpa" not in bbs["credentialSubject"]
    return Wallet(issuer, keys, [issued("eddsa-rdfc-2022"), sd, bbs])


@pytest.mark.parametrize(("suite", "key_type"), SIGNING, ids=[f"{suite}-{key}" for suite, key in SIGNING])
def test_a_presentation_digital_bazaar_signs_verifies_at_tessera(app, client, digital_bazaar, wallet, suite, key_type):
    verifier = make_tenant(app, client, name="Verifier")
    key = wallet.keys[key_type]
    request = {"key": key, "cryptosuite": suite, "challenge": CHALLENGE, "domain": DOMAIN}
    vp = digital_bazaar.run("present", {**request, "credentials": wallet.credentials})
    options = {"challenge": CHALLENGE, "domain": DOMAIN}

    answer = verify_presentation(client, verifier.headers, vp, options)
    assert answer["verified"] is True, answer
    assert answer["warnings"] == []  # the bbs disclosure's header is the challenge: checked
    assert [result["verified"] for result in answer["credentialResults"]] == [True, True, True]
    if key_type == "Ed25519":  # the holder is the credentials' subject
        assert verify_presentation(client, verifier.headers, vp, {**options, "holderMustBeSubject": True})["verified"]

    assert "invalid_challenge" in codes(
        verify_presentation(client, verifier.headers, vp, {**options, "challenge": "x"})
    )
    assert codes(verify_presentation(client, verifier.headers, vp, {**options, "domain": "evil.example"})) == [
        "invalid_domain"
    ]

    # Signed with the holder's key while naming someone else as the holder.
    stranger = wallet.keys["P-256" if key_type == "Ed25519" else "Ed25519"]["controller"]
    impostor = digital_bazaar.run("present", {**request, "credentials": wallet.credentials, "holder": stranger})
    assert codes(verify_presentation(client, verifier.headers, impostor, options)) == ["holder_mismatch"]

    # A credential changed before the holder signed: the presentation's proof holds, the credential's does not.
    tampered = copy.deepcopy(wallet.credentials)
    tampered[0]["credentialSubject"]["degree"] = "PhD"
    answer = verify_presentation(
        client, verifier.headers, digital_bazaar.run("present", {**request, "credentials": tampered}), options
    )
    assert answer["presentationResult"]["verified"] is True
    assert codes(answer) == ["invalid_signature"]
    assert answer["errors"][0]["detail"].startswith("verifiableCredential 0: ")


def test_a_revoked_credential_in_a_digital_bazaar_presentation_fails(app, client, digital_bazaar, wallet):
    response = issue(client, wallet.issuer.headers, unsigned(wallet.did, degree="BSc"), credentialStatus=REVOCABLE)
    entry = response.headers["Link"].split(">", 1)[0].removeprefix("<")
    request = {"key": wallet.keys["Ed25519"], "cryptosuite": "eddsa-rdfc-2022", "challenge": CHALLENGE}
    vp = digital_bazaar.run("present", {**request, "credentials": [response.json["verifiableCredential"]]})
    verifier = make_tenant(app, client, name="Verifier")
    assert verify_presentation(client, verifier.headers, vp, {"challenge": CHALLENGE})["verified"] is True
    assert client.patch(entry, json={"status": "revoked"}, headers=wallet.issuer.headers).status_code == 200
    assert codes(verify_presentation(client, verifier.headers, vp, {"challenge": CHALLENGE})) == ["revoked"]


@pytest.mark.parametrize(("suite", "key_type"), SIGNING, ids=[f"{suite}-{key}" for suite, key in SIGNING])
def test_a_presentation_tessera_signs_verifies_with_digital_bazaar(app, client, digital_bazaar, suite, key_type):
    holder = make_tenant(app, client, name="Holder wallet")
    key = create_key(client, holder.headers, key_type)
    credential = {**unsigned(key["didKey"], degree="BSc"), "issuer": key["didKey"]}
    vc = issue(client, holder.headers, credential, keyId=key["id"]).json["verifiableCredential"]
    vp = present(
        client,
        holder.headers,
        unsigned_presentation([vc]),
        challenge=CHALLENGE,
        domain=DOMAIN,
        cryptosuite=suite,
        verificationMethod=key["didKeyVerificationMethod"],
    ).json["verifiablePresentation"]
    check = {"presentation": vp, "challenge": CHALLENGE, "domain": DOMAIN, "holder": key["didKey"]}
    result = digital_bazaar.run("verify-presentation", check)
    assert result == {"verified": True, "errors": []}
    assert digital_bazaar.run("verify-presentation", {**check, "challenge": "another"})["verified"] is False


def test_a_presentation_tessera_signs_with_its_did_web_verifies_with_digital_bazaar(app, client, digital_bazaar):
    holder = make_tenant(app, client, name="Holder wallet")
    key = create_key(client, holder.headers, "Ed25519")
    vc = issue(client, holder.headers, unsigned("did:example:alice", degree="BSc")).json["verifiableCredential"]
    vp = present(client, holder.headers, unsigned_presentation([vc]), challenge=CHALLENGE).json[
        "verifiablePresentation"
    ]
    assert vp["holder"] == key["controller"] == vc["issuer"]
    client_id = key["controller"].rsplit(":", 1)[1]
    digital_bazaar.documents = {key["controller"]: client.get(f"/clients/{client_id}/did.json").json}
    check = {"presentation": vp, "challenge": CHALLENGE, "holder": key["controller"]}
    try:
        assert digital_bazaar.run("verify-presentation", check) == {"verified": True, "errors": []}
        assert digital_bazaar.run("verify-presentation", {**check, "challenge": "another"})["verified"] is False
    finally:
        digital_bazaar.documents = {}


def test_bbs_presentation_headers_both_ways(app, client, digital_bazaar):
    issuer = make_tenant(app, client, name="Example University")
    key = create_key(client, issuer.headers, "Bls12381G2")
    credential = {**unsigned("did:example:alice", degree="BSc", gpa="3.9"), "issuer": key["didKey"]}
    vc = issue(client, issuer.headers, credential, keyId=key["id"]).json["verifiableCredential"]
    pointers = ["/credentialSubject/degree"]

    # Tessera's disclosure, bound to a header, verified by Digital Bazaar's verifier expecting one.
    body = {"verifiableCredential": vc, "options": {"selectivePointers": pointers, "presentationHeader": "h-1"}}
    ours = client.post("/credentials/derive", json=body, headers=issuer.headers)
    assert ours.status_code == 201, ours.get_data(as_text=True)
    check = {"credential": ours.json}
    assert digital_bazaar.run("verify-credential", {**check, "expectedPresentationHeader": "h-1"})["verified"] is True
    assert digital_bazaar.run("verify-credential", {**check, "expectedPresentationHeader": "h-2"})["verified"] is False

    # Digital Bazaar's disclosure, bound to a header, verified by Tessera.
    theirs = digital_bazaar.run(
        "derive", {"credential": vc, "selectivePointers": pointers, "presentationHeader": "h-1"}
    )
    verifier = make_tenant(app, client, name="Verifier")

    def verify(options: dict) -> dict:
        response = client.post(
            "/credentials/verify", json={"verifiableCredential": theirs, "options": options}, headers=verifier.headers
        )
        assert response.status_code in (200, 400), response.get_data(as_text=True)
        return response.json

    bound = verify({"presentationHeader": "h-1"})
    assert bound["verified"] is True and bound["warnings"] == [], bound
    assert codes(verify({"presentationHeader": "h-2"})) == ["presentation_header_mismatch"]
    unchecked = verify({})
    assert unchecked["verified"] is True
    assert [warning["code"] for warning in unchecked["warnings"]] == ["presentation_header_not_checked"]
