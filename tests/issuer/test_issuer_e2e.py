"""End to end over HTTP: a tenant issues a bbs-2023 credential, its user lists it, derives a
disclosure as holder, and a verifier verifies it; revoking it is seen by the verifier."""

from __future__ import annotations

from tests.support.credentials import access_token, listed_credentials, wait_for_state
from tests.support.issuer import create_key, unsigned
from tests.support.oidc import make_tenant


def test_issue_list_derive_verify_bbs_2023(app, client):
    tenant = make_tenant(app, client)
    key = create_key(client, tenant.headers, "Bls12381G2")

    credential = unsigned(degree="MSc", studentNumber="S-1234", gpa="3.9")
    issued = client.post(
        "/credentials/issue",
        json={
            "credential": credential,
            "options": {
                "cryptosuite": "bbs-2023",
                "mandatoryPointers": ["/issuer", "/validFrom"],
                "credentialStatus": {"type": "BitstringStatusListEntry", "statusPurpose": "revocation"},
                "userId": tenant.user_id,
            },
        },
        headers=tenant.headers,
    )
    assert issued.status_code == 201, issued.get_data(as_text=True)
    vc = issued.json["verifiableCredential"]
    assert vc["issuer"] == key["controller"] and vc["credentialSubject"]["id"] == tenant.did
    cid = issued.headers["Location"].rsplit("/", 1)[1]
    assert wait_for_state(client, tenant.headers, cid, "verified")["vc"] == vc

    token = access_token(client, tenant)
    listed = listed_credentials(client, token)
    assert listed == [vc]

    derived = client.post(
        "/credentials/derive",
        json={"verifiableCredential": listed[0], "options": {"selectivePointers": ["/credentialSubject/degree"]}},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert derived.status_code == 201, derived.get_data(as_text=True)
    shown = derived.json
    assert shown["credentialSubject"] == {"id": tenant.did, "degree": "MSc"}
    assert shown["credentialStatus"] == vc["credentialStatus"]  # always disclosed
    assert "gpa" not in str(shown) and "S-1234" not in str(shown)
    assert shown["proof"]["proofValue"] != vc["proof"]["proofValue"]

    verifier = make_tenant(app, client, name="Some employer")
    result = client.post("/credentials/verify", json={"verifiableCredential": shown}, headers=verifier.headers)
    assert result.status_code == 200, result.get_data(as_text=True)
    assert result.json["verified"] is True

    tampered = {**shown, "credentialSubject": {"id": tenant.did, "degree": "PhD"}}
    refused = client.post("/credentials/verify", json={"verifiableCredential": tampered}, headers=verifier.headers)
    assert refused.status_code == 400 and refused.json["errors"][0]["code"] == "invalid_signature"

    entry = issued.headers["Link"].split(">", 1)[0].removeprefix("<")
    assert issued.headers["Link"].endswith('; rel="status-entry"')
    revoked = client.patch(entry, json={"status": "revoked"}, headers=tenant.headers)
    assert revoked.status_code == 200, revoked.get_data(as_text=True)
    after = client.post("/credentials/verify", json={"verifiableCredential": shown}, headers=verifier.headers)
    assert after.status_code == 400 and after.json["verified"] is False
    wait_for_state(client, tenant.headers, cid, "failed")
    assert listed_credentials(client, token) == []


def test_derive_refuses_what_it_cannot_derive(app, client):
    tenant = make_tenant(app, client)
    create_key(client, tenant.headers, "Ed25519")
    create_key(client, tenant.headers, "Bls12381G2")
    plain = client.post(
        "/credentials/issue",
        json={"credential": unsigned(degree="BSc"), "options": {"cryptosuite": "eddsa-rdfc-2022"}},
        headers=tenant.headers,
    )
    base = client.post(
        "/credentials/issue",
        json={"credential": unsigned(degree="BSc"), "options": {"cryptosuite": "bbs-2023"}},
        headers=tenant.headers,
    ).json["verifiableCredential"]
    cases = [
        ({"verifiableCredential": plain.json["verifiableCredential"]}, 422, "credential_not_derivable"),
        ({"verifiableCredential": {**base, "proof": "x"}}, 422, "credential_not_derivable"),
        (
            {"verifiableCredential": base, "options": {"selectivePointers": ["/nothing/here"]}},
            422,
            "credential_not_derivable",
        ),
        ({"verifiableCredential": base, "options": {"selectivePointers": "x"}}, 422, "validation_failed"),
        ({"options": {}}, 422, "validation_failed"),
    ]
    for body, status, code in cases:
        response = client.post("/credentials/derive", json=body, headers=tenant.headers)
        assert response.status_code == status, (body, response.get_data(as_text=True))
        assert response.mimetype == "application/problem+json" and response.json["code"] == code
    assert client.post("/credentials/derive", json={"verifiableCredential": base}).status_code == 401
    bad_token = client.post(
        "/credentials/derive", json={"verifiableCredential": base}, headers={"Authorization": "Bearer nope"}
    )
    assert bad_token.status_code == 401
