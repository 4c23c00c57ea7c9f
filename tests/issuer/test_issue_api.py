"""POST /credentials/issue (W3C VC API): every suite, VC 1.1 and 2.0, status entries, storage for users."""

from __future__ import annotations

import pytest

from tests.support.credentials import wait_for_verification
from tests.support.issuer import SUITES, create_key, issue, unsigned, verify
from tests.support.issuing import create_user
from tests.support.oidc import path_of
from tests.support.problems import assert_problem


@pytest.mark.parametrize(("suite", "key_type"), SUITES)
def test_each_suite_issues_what_the_verifier_accepts(client, master, suite, key_type):
    key = create_key(client, master.headers, key_type)
    credential = unsigned("did:example:holder", degree="BSc")
    response = issue(client, master.headers, credential, cryptosuite=suite, keyId=key["id"])
    assert list(response.json) == ["verifiableCredential"]
    vc = response.json["verifiableCredential"]
    assert "Location" not in response.headers  # the subject is nobody's user here
    assert vc["issuer"] == key["controller"]
    assert {name: vc[name] for name in credential} == credential
    proof = vc["proof"]
    assert (proof["type"], proof["cryptosuite"], proof["proofPurpose"]) == (
        "DataIntegrityProof",
        suite,
        "assertionMethod",
    )
    assert proof["verificationMethod"] == key["verificationMethod"]
    result = verify(client, master.headers, vc)
    assert result["verified"] is True, result

    vc["credentialSubject"]["degree"] = "PhD"
    assert verify(client, master.headers, vc)["verified"] is False


def test_the_suite_picks_the_newest_active_key_of_its_type(client, master):
    create_key(client, master.headers, "Ed25519")
    p256 = create_key(client, master.headers, "P-256")
    newer = create_key(client, master.headers, "P-256")
    vc = issue(client, master.headers, unsigned(), cryptosuite="ecdsa-jcs-2019").json["verifiableCredential"]
    assert vc["proof"]["verificationMethod"] == newer["verificationMethod"] != p256["verificationMethod"]
    key_default = issue(client, master.headers, unsigned(), keyId=p256["id"]).json["verifiableCredential"]
    assert key_default["proof"]["cryptosuite"] == "ecdsa-rdfc-2019"
    default = issue(client, master.headers, unsigned()).json["verifiableCredential"]
    assert default["proof"]["cryptosuite"] == "ecdsa-rdfc-2019"
    assert default["proof"]["verificationMethod"] == newer["verificationMethod"]
    bbs = create_key(client, master.headers, "Bls12381G2")
    default = issue(client, master.headers, unsigned()).json["verifiableCredential"]
    assert (default["proof"]["cryptosuite"], default["proof"]["verificationMethod"]) == (
        "bbs-2023",
        bbs["verificationMethod"],
    )
    eddsa = issue(client, master.headers, unsigned(), cryptosuite="eddsa-jcs-2022").json["verifiableCredential"]
    assert eddsa["proof"]["cryptosuite"] == "eddsa-jcs-2022"


def test_a_did_key_issuer_signs_with_the_did_key_method(client, master):
    key = create_key(client, master.headers, "Bls12381G2")
    credential = {**unsigned("did:example:holder"), "issuer": {"id": key["didKey"], "name": "Example"}}
    vc = issue(client, master.headers, credential, cryptosuite="bbs-2023").json["verifiableCredential"]
    assert vc["issuer"] == {"id": key["didKey"], "name": "Example"}
    assert vc["proof"]["verificationMethod"] == key["didKeyVerificationMethod"]
    assert verify(client, master.headers, vc)["verified"] is True


def test_vc_1_1_credentials_are_issued(client, master):
    create_key(client, master.headers, "Ed25519")
    credential = {
        "@context": ["https://www.w3.org/2018/credentials/v1", "https://www.w3.org/ns/credentials/examples/v2"],
        "id": "urn:uuid:0b8c3f4e-7c51-4e1b-9d3c-6bdb4f1c1e11",
        "type": ["VerifiableCredential", "UniversityDegreeCredential"],
        "credentialSubject": {"id": "did:example:ebfeb1f712ebc6f1c276e12ec21", "degree": {"type": "BachelorDegree"}},
    }
    for suite in ("eddsa-rdfc-2022", "eddsa-jcs-2022"):
        vc = issue(client, master.headers, credential, cryptosuite=suite).json["verifiableCredential"]
        assert vc["@context"][-1] == "https://w3id.org/security/data-integrity/v2"
        assert "issuanceDate" in vc
        result = verify(client, master.headers, vc)
        assert result["verified"] is True, result


def test_mandatory_pointers_stay_disclosed_in_base_proofs(client, master):
    create_key(client, master.headers, "P-256")
    credential = unsigned("did:example:holder", degree="BSc")
    vc = issue(
        client, master.headers, credential, cryptosuite="ecdsa-sd-2023", mandatoryPointers=["/issuer", "/validFrom"]
    ).json["verifiableCredential"]
    derived = client.post(
        "/credentials/derive",
        json={"verifiableCredential": vc, "options": {"selectivePointers": ["/credentialSubject/degree"]}},
        headers=master.headers,
    )
    assert derived.status_code == 201, derived.get_data(as_text=True)
    shown = derived.json
    assert shown["issuer"] == vc["issuer"] and shown["validFrom"] == vc["validFrom"]
    assert shown["credentialSubject"] == {"id": "did:example:holder", "degree": "BSc"}  # ids always go along
    assert verify(client, master.headers, shown)["verified"] is True


def test_a_status_entry_is_assigned_and_revocation_is_seen(client, master):
    create_key(client, master.headers, "Ed25519")
    vc = issue(
        client,
        master.headers,
        unsigned("did:example:holder"),
        credentialStatus={"type": "BitstringStatusListEntry", "statusPurpose": "revocation"},
    ).json["verifiableCredential"]
    status = vc["credentialStatus"]
    assert status["type"] == "BitstringStatusListEntry" and status["statusPurpose"] == "revocation"
    assert verify(client, master.headers, vc)["verified"] is True
    entry_url = status["statusListCredential"]
    assert client.get(path_of(entry_url)).status_code == 200


def test_the_credential_is_stored_for_the_subject_user(client, master):
    create_key(client, master.headers, "Ed25519")
    user = create_user(client, master.headers)

    by_did = issue(client, master.headers, unsigned(user["did"]))
    location = by_did.headers["Location"]
    cid = location.rsplit("/", 1)[1]
    record = wait_for_verification(client, master.headers, cid)
    assert record["verification"]["state"] == "verified", record
    assert record["vc"] == by_did.json["verifiableCredential"]

    by_id = issue(client, master.headers, unsigned(), userId=user["user_id"]).json["verifiableCredential"]
    assert by_id["credentialSubject"]["id"] == user["did"]

    assert_problem(
        issue(client, master.headers, unsigned("did:example:someone-else"), 422, userId=user["user_id"]),
        422,
        "credential_not_issuable",
    )


def test_another_tenants_user_is_not_a_target(app, client, master):
    from tests.support.tenancy import make_master

    other = make_master(app, name="Other organisation")
    create_key(client, other.headers, "Ed25519")
    user = create_user(client, master.headers)
    response = issue(client, other.headers, unsigned(user["did"]))
    assert "Location" not in response.headers
    answer = issue(client, other.headers, unsigned(), 422, userId=user["user_id"])
    assert_problem(answer, 422, "credential_not_issuable")


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"options": {}}, 422, "validation_failed"),
        ({"credential": [], "options": {}}, 422, "validation_failed"),
        ({"credential": {"type": ["VerifiableCredential"]}}, 422, "credential_not_issuable"),
        ({"credential": "UNSIGNED", "options": {"cryptosuite": "nope"}}, 422, "validation_failed"),
        ({"credential": "UNSIGNED", "options": {"unknownOption": 1}}, 422, "validation_failed"),
        ({"credential": "UNSIGNED", "options": {"mandatoryPointers": ["credentialSubject"]}}, 422, "validation_failed"),
        ({"credential": "UNSIGNED", "options": {"mandatoryPointers": ["/issuer"]}}, 422, "credential_not_issuable"),
        ({"credential": "UNSIGNED", "options": {"keyId": "nope"}}, 422, "issuer_key_missing"),
        ({"credential": "UNSIGNED", "options": {"cryptosuite": "bbs-2023"}}, 422, "issuer_key_missing"),
        ({"credential": "UNSIGNED", "options": {"userId": "7"}}, 422, "validation_failed"),
        ({"credential": "UNSIGNED", "options": {"credentialStatus": {"statusPurpose": "x"}}}, 422, "validation_failed"),
        ({"credential": "SIGNED"}, 422, "credential_not_issuable"),
        ({"credential": "OTHER_ISSUER"}, 422, "credential_not_issuable"),
        ({"credential": "UNKNOWN_CONTEXT"}, 422, "credential_not_issuable"),
    ],
)
def test_bad_issue_requests_are_problems(client, master, body, status, code):
    create_key(client, master.headers, "Ed25519")
    credential = unsigned("did:example:holder")
    replacements = {
        "UNSIGNED": credential,
        "SIGNED": {**credential, "proof": {"type": "DataIntegrityProof"}},
        "OTHER_ISSUER": {**credential, "issuer": "did:example:issuer"},
        "UNKNOWN_CONTEXT": {**credential, "@context": [*credential["@context"], "https://example.com/unknown/v1"]},
    }
    if isinstance(body.get("credential"), str):
        body = {**body, "credential": replacements[body["credential"]]}
    response = client.post("/credentials/issue", json=body, headers=master.headers)
    assert_problem(response, status, code)


def test_issue_needs_a_token_and_json(client, master):
    assert client.post("/credentials/issue", json={"credential": unsigned()}).status_code == 401
    response = client.post("/credentials/issue", data="{", content_type="application/json", headers=master.headers)
    assert response.status_code == 400 and response.mimetype == "application/problem+json"


def test_a_repeated_idempotency_key_replays_the_issued_credential(client, master):
    create_key(client, master.headers, "Ed25519")
    body = {"credential": unsigned("did:example:holder"), "options": {}}
    headers = {**master.headers, "Idempotency-Key": "issue-once"}
    first = client.post("/credentials/issue", json=body, headers=headers)
    again = client.post("/credentials/issue", json=body, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.get_data() == first.get_data()


def test_bbs_base_and_derived_proofs_carry_no_creation_time(client, master):
    create_key(client, master.headers, "Bls12381G2")
    credential = unsigned("did:example:holder", degree="BSc")
    vc = issue(client, master.headers, credential, cryptosuite="bbs-2023", mandatoryPointers=["/issuer"]).json[
        "verifiableCredential"
    ]
    assert "created" not in vc["proof"]  # repeated in every derived proof, it would link them
    presentations = []
    for _ in range(2):
        derived = client.post(
            "/credentials/derive",
            json={"verifiableCredential": vc, "options": {"selectivePointers": ["/credentialSubject/degree"]}},
            headers=master.headers,
        )
        assert derived.status_code == 201, derived.get_data(as_text=True)
        presentations.append(derived.json)
    for shown in presentations:
        assert "created" not in shown["proof"]
        result = verify(client, master.headers, shown)
        assert result["verified"] is True, result
    assert presentations[0]["proof"]["proofValue"] != presentations[1]["proof"]["proofValue"]
    ecdsa_sd = create_key(client, master.headers, "P-256")
    other = issue(client, master.headers, credential, cryptosuite="ecdsa-sd-2023", keyId=ecdsa_sd["id"])
    assert "created" in other.json["verifiableCredential"]["proof"]  # only bbs-2023 promises unlinkability
