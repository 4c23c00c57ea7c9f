"""The holder's side of the VC API: `POST /credentials/derive` answers the derived credential itself and
takes a stored credential by its id; selective-disclosure credentials keep the issuer and the validity
dates disclosed unless the issuer names the pointers."""

from __future__ import annotations

import pytest

from tests.support.credentials import access_token, wait_for_state
from tests.support.issuer import create_key, issue, unsigned, verify
from tests.support.oidc import make_tenant

SD_KEYS = [("bbs-2023", "Bls12381G2"), ("ecdsa-sd-2023", "P-256")]
V1 = "https://www.w3.org/2018/credentials/v1"


def _derive(client, headers: dict, credential: dict, pointers: list[str], status: int = 201):
    body = {"verifiableCredential": credential, "options": {"selectivePointers": pointers}}
    response = client.post("/credentials/derive", json=body, headers=headers)
    assert response.status_code == status, response.get_data(as_text=True)
    return response


@pytest.mark.parametrize(("suite", "key_type"), SD_KEYS)
def test_by_default_a_disclosure_keeps_the_issuer_and_the_validity_dates(client, master, suite, key_type):
    create_key(client, master.headers, key_type)
    credential = {**unsigned("did:example:holder", degree="BSc", gpa="3.9"), "validUntil": "2099-01-01T00:00:00Z"}
    vc = issue(client, master.headers, credential, cryptosuite=suite).json["verifiableCredential"]
    shown = _derive(client, master.headers, vc, ["/credentialSubject/degree"]).json
    assert "verifiableCredential" not in shown  # the credential itself, as the VC API answers
    assert (shown["issuer"], shown["validFrom"], shown["validUntil"]) == (
        vc["issuer"],
        vc["validFrom"],
        vc["validUntil"],
    )
    assert "gpa" not in shown["credentialSubject"]
    assert verify(client, master.headers, shown)["verified"] is True

    # Pointers the issuer names are its choice: without /issuer no verifier takes the disclosure.
    bare = issue(client, master.headers, credential, cryptosuite=suite, mandatoryPointers=[]).json[
        "verifiableCredential"
    ]
    shown = _derive(client, master.headers, bare, ["/credentialSubject/degree"]).json
    assert "issuer" not in shown
    assert verify(client, master.headers, shown)["errors"][0]["code"] == "malformed_credential"


def test_a_vc_1_1_disclosure_keeps_its_issuance_date(client, master):
    create_key(client, master.headers, "Bls12381G2")
    credential = {
        "@context": [V1],
        "type": ["VerifiableCredential"],
        "credentialSubject": {"id": "did:example:alice"},
        "issuanceDate": "2024-01-01T00:00:00Z",
    }
    vc = issue(client, master.headers, credential, cryptosuite="bbs-2023").json["verifiableCredential"]
    shown = _derive(client, master.headers, vc, ["/credentialSubject"]).json
    assert shown["issuanceDate"] == "2024-01-01T00:00:00Z" and shown["issuer"] == vc["issuer"]
    result = verify(client, master.headers, shown)
    assert result["verified"] is True, result


def test_derive_takes_a_stored_credential_by_its_id(app, client):
    tenant = make_tenant(app, client, name="Issuer and holder's wallet")
    create_key(client, tenant.headers, "Bls12381G2")
    issued = issue(client, tenant.headers, unsigned(tenant.did, degree="BSc", gpa="3.9"), userId=tenant.user_id)
    cid = issued.headers["Location"].rsplit("/", 1)[1]
    wait_for_state(client, tenant.headers, cid, "verified")
    token = access_token(client, tenant)
    bearer = {"Authorization": f"Bearer {token}"}

    for headers in (bearer, tenant.headers):
        for reference in ({"id": cid}, {"cid": cid}):
            shown = _derive(client, headers, reference, ["/credentialSubject/degree"]).json
            assert shown["credentialSubject"] == {"id": tenant.did, "degree": "BSc"}
            assert verify(client, tenant.headers, shown)["verified"] is True

    other = make_tenant(app, client, name="Another tenant")
    other_bearer = {"Authorization": f"Bearer {access_token(client, other)}"}
    for headers in (other.headers, other_bearer):
        refused = _derive(client, headers, {"id": cid}, [], status=422)
        assert refused.json["code"] == "credential_not_presentable"
        assert list(refused.json["errors"]) == ["verifiableCredential.id"]
    refused = _derive(client, tenant.headers, {"id": "not a cid"}, [], status=422)
    assert refused.json["code"] == "credential_not_presentable"

    # A user's stored credentials are read through the consent gate, as the credential list is.
    response = client.put(
        f"/v1/sub_client/{tenant.client_id}", json={"reads_credentials": False}, headers=tenant.headers
    )
    assert response.status_code == 200, response.get_data(as_text=True)
    refused = _derive(client, bearer, {"id": cid}, [], status=403)
    assert refused.json["code"] == "insufficient_scope"
    # A credential sent in full reads nothing stored: the same token derives it.
    assert _derive(client, bearer, issued.json["verifiableCredential"], ["/credentialSubject/degree"]).json
