"""What a verify request and a credential must be, exactly: JSON booleans in options, no unknown
members, VC 1.1's `issuanceDate`, a presentation sent to the credential route."""

from __future__ import annotations

import pytest

from tests.support.issuing import Issuer
from tests.support.presentations import unsigned_presentation

VERIFY_PATHS = ["/v1/vc/verify", "/credentials/verify"]
V1_CONTEXT = ["https://www.w3.org/2018/credentials/v1", "https://w3id.org/security/data-integrity/v2"]


def _post(client, path: str, headers: dict, body: dict):
    return client.post(path, json=body, headers=headers)


@pytest.mark.parametrize("path", VERIFY_PATHS)
@pytest.mark.parametrize("value", ["no", "false", "true", 0, 1, None, []])
def test_boolean_options_are_json_booleans(client, master, path, value):
    issuer = Issuer()
    vc = issuer.sign(issuer.credential("did:example:holder"))
    body = {"verifiableCredential": vc, "options": {"issuerMustControlKeys": value}}
    response = _post(client, path, master.headers, body)
    assert response.status_code == 422, response.get_data(as_text=True)
    assert response.json["code"] == "validation_failed"
    assert "options.issuerMustControlKeys" in response.json["errors"]
    for boolean in (True, False):
        body["options"]["issuerMustControlKeys"] = boolean
        assert _post(client, path, master.headers, body).status_code == 200


@pytest.mark.parametrize("path", VERIFY_PATHS)
def test_unknown_members_of_a_verify_request_are_refused_by_name(client, master, path):
    issuer = Issuer()
    vc = issuer.sign(issuer.credential("did:example:holder"))
    body = {"verifiableCredential": vc, "verifiablePresentation": unsigned_presentation([vc]), "returnAll": True}
    response = _post(client, path, master.headers, body)
    assert response.status_code == 422, response.get_data(as_text=True)
    assert {"verifiablePresentation", "returnAll"} <= set(response.json["errors"])
    assert _post(client, path, master.headers, {"verifiableCredential": vc}).status_code == 200


@pytest.mark.parametrize("path", VERIFY_PATHS)
def test_a_presentation_sent_to_the_credential_route_is_pointed_to_its_own(client, master, path):
    issuer = Issuer()
    vp = unsigned_presentation([issuer.sign(issuer.credential("did:example:holder"))])
    response = _post(client, path, master.headers, {"verifiableCredential": vp})
    assert response.status_code == 400
    [error] = response.json["errors"]
    assert error["code"] == "malformed_credential" and "POST /presentations/verify" in error["detail"]


def test_a_vc_1_1_credential_needs_its_issuance_date(client, master):
    issuer = Issuer()
    credential = {
        "@context": list(V1_CONTEXT),
        "type": ["VerifiableCredential"],
        "issuer": issuer.did,
        "credentialSubject": {"id": "did:example:alice"},
    }
    undated = issuer.sign(credential)
    response = _post(client, "/credentials/verify", master.headers, {"verifiableCredential": undated})
    assert response.status_code == 400
    assert response.json["errors"] == [
        {"code": "malformed_credential", "detail": '"issuanceDate" property is required (VC Data Model 1.1)'}
    ]
    dated = issuer.sign({**credential, "issuanceDate": "2024-01-01T00:00:00Z"})
    response = _post(client, "/credentials/verify", master.headers, {"verifiableCredential": dated})
    assert response.status_code == 200, response.get_data(as_text=True)
