"""`POST /presentations/verify` and `POST /presentations` over HTTP: the presentation's proof with
challenge and domain, holder binding, every credential checked as the credential route does,
unsigned presentations, large ones through the worker, and the refusals."""

from __future__ import annotations

import copy

from tests.support.config import change_settings
from tests.support.credentials import wait_for_state
from tests.support.issuer import create_key, issue, unsigned
from tests.support.issuing import Issuer
from tests.support.oidc import make_tenant
from tests.support.presentations import (
    codes,
    present,
    sign_presentation,
    unsigned_presentation,
    verify_presentation,
)

CHALLENGE, DOMAIN = "5b5f2d3c-challenge", "verifier.example"
REVOCABLE = {"type": "BitstringStatusListEntry", "statusPurpose": "revocation"}


def _issued(client, tenant, **options) -> tuple[dict, str | None]:
    """A credential the tenant issues (and stores) for its user; its status entry's path when asked."""
    response = issue(client, tenant.headers, unsigned(tenant.did, degree="BSc"), userId=tenant.user_id, **options)
    entry = response.headers["Link"].split(">", 1)[0].removeprefix("<") if "Link" in response.headers else None
    return response.json["verifiableCredential"], entry


def test_a_presentation_tessera_signs_verifies_with_its_challenge_and_domain(app, client):
    holder = make_tenant(app, client, name="Holder wallet")
    create_key(client, holder.headers, "Ed25519")
    vc, _entry = _issued(client, holder)
    vp = present(client, holder.headers, unsigned_presentation([vc]), challenge=CHALLENGE, domain=DOMAIN).json[
        "verifiablePresentation"
    ]
    assert vp["holder"] == vc["issuer"]  # the client's did:web signs, as holder
    assert vp["proof"]["proofPurpose"] == "authentication"
    assert (vp["proof"]["challenge"], vp["proof"]["domain"]) == (CHALLENGE, DOMAIN)

    verifier = make_tenant(app, client, name="Verifier")
    answer = verify_presentation(client, verifier.headers, vp, {"challenge": CHALLENGE, "domain": DOMAIN})
    assert answer["verified"] is True, answer
    assert answer["checks"] == ["shape", "proof", "holder", "credentials"]
    assert answer["warnings"] == [] and answer["errors"] == []
    assert answer["presentationResult"] == {
        "verified": True,
        "checks": ["shape", "proof", "holder"],
        "warnings": [],
        "errors": [],
    }
    [result] = answer["credentialResults"]
    assert result["verified"] is True and result["credentialId"] == vc["id"]
    assert result["checks"] == ["shape", "proof", "validity_window"]

    wrong_challenge = verify_presentation(client, verifier.headers, vp, {"challenge": "another", "domain": DOMAIN})
    assert codes(wrong_challenge) == ["invalid_challenge"]
    assert wrong_challenge["credentialResults"][0]["verified"] is True
    wrong_domain = verify_presentation(client, verifier.headers, vp, {"challenge": CHALLENGE, "domain": "evil.example"})
    assert codes(wrong_domain) == ["invalid_domain"]


def test_holder_binding(app, client):
    verifier = make_tenant(app, client, name="Verifier")
    issuer, holder, stranger = Issuer(), Issuer(), Issuer()
    vc = issuer.sign(issuer.credential(holder.did, degree="BSc"))

    bound = sign_presentation(holder, unsigned_presentation([vc], holder.did), challenge=CHALLENGE)
    assert verify_presentation(client, verifier.headers, bound, {"challenge": CHALLENGE})["verified"] is True

    # Signed by someone else's key while naming the holder: the holder does not control that key.
    impostor = sign_presentation(stranger, unsigned_presentation([vc], holder.did), challenge=CHALLENGE)
    answer = verify_presentation(client, verifier.headers, impostor, {"challenge": CHALLENGE})
    assert codes(answer) == ["holder_mismatch"]
    assert holder.did in answer["errors"][0]["detail"]

    # No holder named: the proof shows a key, not who presents; verified, and said so.
    nameless = sign_presentation(holder, unsigned_presentation([vc]), challenge=CHALLENGE)
    answer = verify_presentation(client, verifier.headers, nameless, {"challenge": CHALLENGE})
    assert answer["verified"] is True
    assert [warning["code"] for warning in answer["warnings"]] == ["holder_not_named"]

    url_holder = sign_presentation(holder, unsigned_presentation([vc], "https://holder.example"), challenge=CHALLENGE)
    assert codes(verify_presentation(client, verifier.headers, url_holder, {"challenge": CHALLENGE})) == [
        "holder_mismatch"
    ]


def test_the_holder_must_be_the_subject_when_the_verifier_asks(app, client):
    verifier = make_tenant(app, client, name="Verifier")
    issuer, holder, other = Issuer(), Issuer(), Issuer()
    own = issuer.sign(issuer.credential(holder.did, degree="BSc"))
    someone_elses = issuer.sign(issuer.credential(other.did, degree="PhD"))
    options = {"challenge": CHALLENGE, "holderMustBeSubject": True}

    vp = sign_presentation(holder, unsigned_presentation([own], holder.did), challenge=CHALLENGE)
    answer = verify_presentation(client, verifier.headers, vp, options)
    assert answer["verified"] is True and "holder_is_subject" in answer["checks"]

    vp = sign_presentation(holder, unsigned_presentation([own, someone_elses], holder.did), challenge=CHALLENGE)
    answer = verify_presentation(client, verifier.headers, vp, options)
    assert codes(answer) == ["holder_not_subject"]
    assert answer["errors"][0]["detail"].startswith("verifiableCredential 1: ")
    # Without the option the same presentation verifies: the subject is the verifier's business.
    assert verify_presentation(client, verifier.headers, vp, {"challenge": CHALLENGE})["verified"] is True
    # The check listed in options.checks is made all the same.
    listed = verify_presentation(
        client, verifier.headers, vp, {"challenge": CHALLENGE, "checks": ["holder_is_subject"]}
    )
    assert codes(listed) == ["holder_not_subject"]


def test_a_revoked_or_tampered_credential_fails_the_presentation(app, client):
    holder = make_tenant(app, client, name="Holder wallet")
    create_key(client, holder.headers, "Ed25519")
    vc, entry = _issued(client, holder, credentialStatus=REVOCABLE)
    verifier = make_tenant(app, client, name="Verifier")

    tampered = copy.deepcopy(vc)
    tampered["credentialSubject"]["degree"] = "PhD"
    vp = present(client, holder.headers, unsigned_presentation([vc, tampered]), challenge=CHALLENGE).json[
        "verifiablePresentation"
    ]
    answer = verify_presentation(client, verifier.headers, vp, {"challenge": CHALLENGE})
    assert answer["presentationResult"]["verified"] is True  # the holder signed what it sent
    assert [result["verified"] for result in answer["credentialResults"]] == [True, False]
    assert codes(answer) == ["invalid_signature"]
    assert answer["errors"][0]["detail"].startswith("verifiableCredential 1: ")

    vp = present(client, holder.headers, unsigned_presentation([vc]), challenge=CHALLENGE).json[
        "verifiablePresentation"
    ]
    assert verify_presentation(client, verifier.headers, vp, {"challenge": CHALLENGE})["verified"] is True
    assert client.patch(entry, json={"status": "revoked"}, headers=holder.headers).status_code == 200
    answer = verify_presentation(client, verifier.headers, vp, {"challenge": CHALLENGE})
    assert codes(answer) == ["revoked"]
    assert answer["credentialResults"][0]["errors"][0]["code"] == "revoked"


def test_a_presentation_without_a_proof_is_verified_for_its_credentials_and_says_so(app, client):
    verifier = make_tenant(app, client, name="Verifier")
    issuer = Issuer()
    vc = issuer.sign(issuer.credential("did:example:holder"))
    bare = unsigned_presentation([vc])
    for member in ("presentation", "verifiablePresentation"):
        answer = verify_presentation(client, verifier.headers, bare, member=member)
        assert answer["verified"] is True
        assert answer["checks"] == ["shape", "credentials"]
        assert [warning["code"] for warning in answer["warnings"]] == ["presentation_not_signed"]
    for options in ({"challenge": CHALLENGE}, {"domain": DOMAIN}, {"holderMustBeSubject": True}, {"checks": ["proof"]}):
        answer = verify_presentation(client, verifier.headers, bare, options, member="presentation")
        assert "presentation_not_signed" in codes(answer), options

    forged = copy.deepcopy(vc)
    forged["credentialSubject"]["firstName"] = "Eve"
    answer = verify_presentation(client, verifier.headers, unsigned_presentation([forged]), member="presentation")
    assert codes(answer) == ["invalid_signature"]


def test_presentations_tessera_signs_from_stored_credentials(app, client):
    holder = make_tenant(app, client, name="Holder wallet")
    key = create_key(client, holder.headers, "P-256")
    vc, _ = _issued(client, holder)
    response = issue(client, holder.headers, unsigned(holder.did, degree="MSc"), userId=holder.user_id)
    cid = response.headers["Location"].rsplit("/", 1)[1]
    wait_for_state(client, holder.headers, cid, "verified")

    for reference in ({"id": cid}, {"cid": cid}):
        vp = present(
            client,
            holder.headers,
            unsigned_presentation([reference, vc]),
            challenge=CHALLENGE,
            verificationMethod=key["didKeyVerificationMethod"],
            cryptosuite="ecdsa-jcs-2019",
        ).json["verifiablePresentation"]
        assert vp["verifiableCredential"][0] == response.json["verifiableCredential"]  # byte for byte as stored
        assert vp["holder"] == key["didKey"] and vp["proof"]["cryptosuite"] == "ecdsa-jcs-2019"
        answer = verify_presentation(client, holder.headers, vp, {"challenge": CHALLENGE})
        assert answer["verified"] is True, answer

    other = make_tenant(app, client, name="Another tenant")
    create_key(client, other.headers, "Ed25519")
    refused = present(client, other.headers, unsigned_presentation([{"id": cid}]), status=422)
    assert refused.json["code"] == "credential_not_presentable"
    assert "presentation.verifiableCredential.0.id" in refused.json["errors"]


def test_create_presentation_refusals(app, client):
    holder = make_tenant(app, client, name="Holder wallet")
    bls = create_key(client, holder.headers, "Bls12381G2")
    empty = unsigned_presentation([])
    no_key = present(client, holder.headers, empty, status=422)
    assert no_key.json["code"] == "issuer_key_missing"
    ed = create_key(client, holder.headers, "Ed25519")
    cases = [
        ({"presentation": {**empty, "proof": {}}}, "presentation_not_signable", "presentation.proof"),
        ({"presentation": {**empty, "@context": ["https://example.org"]}}, "presentation_not_signable", None),
        ({"presentation": {**empty, "type": ["VerifiableCredential"]}}, "presentation_not_signable", None),
        ({"presentation": {**empty, "holder": "did:example:someone"}}, "presentation_not_signable", None),
        ({"presentation": empty, "options": {"keyId": bls["id"]}}, "issuer_key_missing", None),
        ({"presentation": empty, "options": {"cryptosuite": "bbs-2023"}}, "validation_failed", None),
        ({"presentation": empty, "options": {"proofPurpose": "assertionMethod"}}, "validation_failed", None),
        ({"presentation": empty, "options": {"verificationMethod": "did:example:x#k"}}, "issuer_key_missing", None),
        ({"presentation": empty, "options": {"nonce": "x"}}, "validation_failed", "options.nonce"),
        ({"presentation": empty, "extra": 1}, "validation_failed", "extra"),
        ({"presentation": {**empty, "verifiableCredential": [{"id": "bnothing"}]}}, "credential_not_presentable", None),
    ]
    for body, code, member in cases:
        response = client.post("/presentations", json=body, headers=holder.headers)
        assert response.status_code == 422, (body, response.get_data(as_text=True))
        assert response.json["code"] == code, (body, response.json)
        if member is not None:
            assert member in response.json["errors"], response.json
    assert client.post("/presentations", json={"presentation": empty}).status_code == 401
    signed = present(client, holder.headers, empty, keyId=ed["id"]).json["verifiablePresentation"]
    assert signed["proof"]["cryptosuite"] == "eddsa-rdfc-2022" and "challenge" not in signed["proof"]


def test_verify_request_refusals(app, client):
    verifier = make_tenant(app, client, name="Verifier")
    issuer = Issuer()
    vp = unsigned_presentation([issuer.sign(issuer.credential("did:example:holder"))])
    cases = [
        ({"verifiablePresentation": vp, "verifiableCredential": {}}, ["verifiableCredential"]),
        ({"verifiablePresentation": vp, "presentation": vp}, ["verifiablePresentation", "presentation"]),
        ({"options": {}}, ["verifiablePresentation"]),
        ({"verifiablePresentation": vp, "options": {"holderMustBeSubject": "true"}}, ["options.holderMustBeSubject"]),
        ({"verifiablePresentation": vp, "options": {"issuerMustControlKeys": 0}}, ["options.issuerMustControlKeys"]),
        ({"verifiablePresentation": vp, "options": {"returnPresentation": "no"}}, ["options.returnPresentation"]),
        ({"verifiablePresentation": vp, "options": {"expectedProofPurpose": "x"}}, ["options.expectedProofPurpose"]),
    ]
    for body, members in cases:
        response = client.post("/presentations/verify", json=body, headers=verifier.headers)
        assert response.status_code == 422, (body, response.get_data(as_text=True))
        assert response.mimetype == "application/problem+json"
        assert set(members) <= set(response.json["errors"]), response.json
    assert client.post("/presentations/verify", json={"verifiablePresentation": vp}).status_code == 401

    malformed = [
        ({**vp, "type": ["VerifiableCredential"]}, "malformed_presentation"),
        ({**vp, "@context": "https://www.w3.org/ns/credentials/v2"}, "malformed_presentation"),
        ({**vp, "verifiableCredential": ["a string"]}, "malformed_presentation"),
        ({**vp, "holder": 7}, "malformed_presentation"),
        ("not an object", "malformed_presentation"),
    ]
    for document, code in malformed:
        answer = verify_presentation(client, verifier.headers, document)
        assert codes(answer) == [code], answer
    answer = verify_presentation(client, verifier.headers, vp, {"returnPresentation": True})
    assert answer["verifiablePresentation"] == vp


def test_a_presentation_over_the_budget_is_refused_before_any_work(app, client, monkeypatch):
    verifier = make_tenant(app, client, name="Verifier")
    issuer = Issuer()
    vc = issuer.sign(issuer.credential("did:example:holder"))
    change_settings(monkeypatch, app, VP_MAX_CREDENTIALS=2)
    response = client.post(
        "/presentations/verify",
        json={"verifiablePresentation": unsigned_presentation([vc, vc, vc])},
        headers=verifier.headers,
    )
    assert response.status_code == 422 and response.json["code"] == "too_many_credentials"
    change_settings(monkeypatch, app, VP_MAX_CREDENTIALS=32, VC_MAX_PROOFS=1)
    doubly = {**vc, "proof": [vc["proof"], vc["proof"]]}
    response = client.post(
        "/presentations/verify",
        json={"verifiablePresentation": unsigned_presentation([doubly])},
        headers=verifier.headers,
    )
    assert response.status_code == 422 and response.json["code"] == "too_many_proofs"
    assert "verifiablePresentation.verifiableCredential.0.proof" in response.json["errors"]


def test_a_large_presentation_is_verified_by_a_job(app, client, monkeypatch, wait_for_job):
    verifier = make_tenant(app, client, name="Verifier")
    issuer, holder = Issuer(), Issuer()
    credentials = [issuer.sign(issuer.credential(holder.did, n=str(n))) for n in range(3)]
    vp = sign_presentation(holder, unsigned_presentation(credentials, holder.did), challenge=CHALLENGE)
    change_settings(monkeypatch, app, VP_INLINE_MAX_PROOFS=3)
    response = client.post(
        "/presentations/verify",
        json={"verifiablePresentation": vp, "options": {"challenge": CHALLENGE}},
        headers=verifier.headers,
    )
    assert response.status_code == 202, response.get_data(as_text=True)
    job = response.json["data"]
    assert job["kind"] == "credentials.verify_presentation"
    assert response.headers["Location"].endswith(f"/v1/jobs/{job['id']}")
    wait_for_job(job["id"])
    done = client.get(response.headers["Location"], headers=verifier.headers).json["data"]
    assert done["state"] == "succeeded"
    assert done["result"]["verified"] is True, done
    assert len(done["result"]["credentialResults"]) == 3

    response = client.post(
        "/presentations/verify",
        json={"verifiablePresentation": vp, "options": {"challenge": "another"}},
        headers=verifier.headers,
    )
    wait_for_job(response.json["data"]["id"])
    done = client.get(response.headers["Location"], headers=verifier.headers).json["data"]
    assert done["result"]["verified"] is False and codes(done["result"]) == ["invalid_challenge"]

    other = make_tenant(app, client, name="Another tenant")
    assert client.get(response.headers["Location"], headers=other.headers).status_code == 404

    # Text no database keeps cannot wait in a job, on either database.
    unstorable = sign_presentation(holder, unsigned_presentation(credentials, holder.did), challenge="a\u0000b")
    response = client.post(
        "/presentations/verify", json={"verifiablePresentation": unstorable}, headers=verifier.headers
    )
    assert response.status_code == 422 and "verifiablePresentation.proof.challenge" in response.json["errors"]

    change_settings(monkeypatch, app, VC_VERIFY_OPEN=True)
    anonymous = client.post("/presentations/verify", json={"verifiablePresentation": vp})
    assert anonymous.status_code == 413 and anonymous.json["code"] == "presentation_too_large"
