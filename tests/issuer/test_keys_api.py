"""Issuer keys per client: create, list, rotate, retire; the did:web document; tenant isolation."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from app.multiformats import decode_multikey
from tests.support.issuer import create_key, issue, unsigned, verify
from tests.support.problems import assert_problem
from tests.support.tenancy import make_master

KEY_TYPES = ["Ed25519", "P-256", "P-384", "Bls12381G2"]


@pytest.mark.parametrize("key_type", KEY_TYPES)
def test_a_new_key_is_published_in_the_clients_did_web_document(app, client, master, key_type):
    key = create_key(client, master.headers, key_type)
    assert key["type"] == key_type and key["state"] == "active"
    assert decode_multikey(key["publicKeyMultibase"])[0] == key_type
    authority = urlsplit(app.config["BASE_URL"]).netloc.replace(":", "%3A")
    assert key["controller"] == f"did:web:{authority}:clients:{master.client_id}"
    assert key["verificationMethod"] == f"{key['controller']}#key-{key['id']}"
    assert key["didKey"] == f"did:key:{key['publicKeyMultibase']}"
    assert "private" not in str(key).lower()

    response = client.get(f"/clients/{master.client_id}/did.json")
    assert response.status_code == 200
    document = response.json
    assert document["id"] == key["controller"]
    assert document["verificationMethod"] == [
        {
            "id": key["verificationMethod"],
            "type": "Multikey",
            "controller": key["controller"],
            "publicKeyMultibase": key["publicKeyMultibase"],
        }
    ]
    assert document["assertionMethod"] == [key["verificationMethod"]]


def test_private_keys_are_stored_encrypted(app, client, master):
    from app.extensions import db
    from app.issuer.models import ClientIssuerKey

    key = create_key(client, master.headers, "Ed25519")
    with app.app_context():
        row = db.session.get(ClientIssuerKey, key["id"])
        assert row.private_key_encrypted.startswith("v1.")
        db.session.rollback()


def test_list_rotate_and_retire(client, master):
    first = create_key(client, master.headers, "Ed25519")
    bbs = create_key(client, master.headers, "Bls12381G2")

    rotated = client.post(f"/v1/issuer/keys/{first['id']}/rotate", headers=master.headers)
    assert rotated.status_code == 201, rotated.get_data(as_text=True)
    second = rotated.json["data"]
    assert second["type"] == "Ed25519" and second["state"] == "active" and second["id"] != first["id"]
    assert rotated.headers["Location"].endswith(f"/v1/issuer/keys/{second['id']}")
    old = client.get(f"/v1/issuer/keys/{first['id']}", headers=master.headers).json["data"]
    assert (old["state"], old["replacedBy"]) == ("retired", second["id"])

    rotated = client.post(f"/v1/issuer/keys/{first['id']}/rotate", headers=master.headers)
    assert_problem(rotated, 409, "issuer_key_retired")

    retired = client.post(f"/v1/issuer/keys/{bbs['id']}/retire", headers=master.headers)
    assert retired.status_code == 200 and retired.json["data"]["state"] == "retired"
    again = client.post(f"/v1/issuer/keys/{bbs['id']}/retire", headers=master.headers)
    assert again.status_code == 200 and again.json["data"]["state"] == "retired"

    listed = client.get("/v1/issuer/keys", headers=master.headers).json["data"]
    assert [key["id"] for key in listed] == [second["id"], bbs["id"], first["id"]]
    document = client.get(f"/clients/{master.client_id}/did.json").json
    assert len(document["verificationMethod"]) == 3  # retired keys stay published


def test_a_retired_key_no_longer_signs_but_what_it_signed_still_verifies(client, master):
    key = create_key(client, master.headers, "Ed25519")
    signed = issue(client, master.headers, unsigned("did:example:holder")).json["verifiableCredential"]
    assert signed["proof"]["verificationMethod"] == key["verificationMethod"]
    client.post(f"/v1/issuer/keys/{key['id']}/retire", headers=master.headers)

    assert_problem(issue(client, master.headers, unsigned("did:example:holder"), 422), 422, "issuer_key_missing")
    assert_problem(
        issue(client, master.headers, unsigned("did:example:holder"), 422, keyId=key["id"]), 422, "issuer_key_missing"
    )
    assert verify(client, master.headers, signed)["verified"] is True


def test_keys_of_another_tenant_are_404s(app, client, master):
    other = make_master(app, name="Other organisation")
    key = create_key(client, master.headers, "P-256")
    for method, path in [
        ("get", f"/v1/issuer/keys/{key['id']}"),
        ("post", f"/v1/issuer/keys/{key['id']}/rotate"),
        ("post", f"/v1/issuer/keys/{key['id']}/retire"),
    ]:
        assert_problem(getattr(client, method)(path, headers=other.headers), 404, "issuer_key_not_found")
    assert client.get("/v1/issuer/keys", headers=other.headers).json["data"] == []
    assert_problem(
        issue(client, other.headers, unsigned("did:example:x"), 422, keyId=key["id"], cryptosuite="ecdsa-rdfc-2019"),
        422,
        "issuer_key_missing",
    )
    assert client.get(f"/v1/issuer/keys/{key['id']}", headers=master.headers).json["data"]["state"] == "active"


def test_sub_client_keys_belong_to_the_acting_node(client, master):
    created = client.post("/v1/sub_client", json={"name": "Faculty"}, headers=master.headers)
    assert created.status_code == 201, created.get_data(as_text=True)
    sub_id = created.json["data"]["client_id"]
    acting = {**master.headers, "x-api-subclient-id": str(sub_id)}
    key = create_key(client, acting, "Ed25519")
    assert key["controller"].endswith(f":clients:{sub_id}")
    assert client.get("/v1/issuer/keys", headers=master.headers).json["data"] == []
    assert_problem(client.get(f"/v1/issuer/keys/{key['id']}", headers=master.headers), 404)
    assert client.get(f"/clients/{sub_id}/did.json").json["verificationMethod"][0]["id"] == key["verificationMethod"]


def test_bad_key_requests_are_problems(client, master):
    rsa = client.post("/v1/issuer/keys", json={"type": "RSA"}, headers=master.headers)
    assert_problem(rsa, 422, "validation_failed")
    assert_problem(client.post("/v1/issuer/keys", json={}, headers=master.headers), 422)
    assert_problem(client.post("/v1/issuer/keys", json={"type": "Ed25519"}), 401)
    assert_problem(client.get("/v1/issuer/keys/not-a-key", headers=master.headers), 404)
    assert_problem(client.get("/v1/issuer/keys/%00", headers=master.headers), 404)
    assert_problem(client.get("/clients/999999999/did.json"), 404, "did_not_found")
    assert_problem(client.get("/clients/abc/did.json"), 422)


def test_a_client_without_keys_has_an_empty_document(client, master):
    document = client.get(f"/clients/{master.client_id}/did.json").json
    assert document["verificationMethod"] == [] and document["assertionMethod"] == []


def test_a_disabled_clients_did_is_gone_and_its_credentials_no_longer_verify(app, client, master):
    from app.db import transaction
    from app.tenancy import service

    create_key(client, master.headers, "Ed25519")
    signed = issue(client, master.headers, unsigned("did:example:holder")).json["verifiableCredential"]
    verifier = make_master(app, name="Verifier")
    assert verify(client, verifier.headers, signed)["verified"] is True
    with app.app_context(), transaction():
        service.disable_client(master.client_id)
    assert_problem(client.get(f"/clients/{master.client_id}/did.json"), 404, "did_not_found")
    result = verify(client, verifier.headers, signed)
    assert result["verified"] is False and result["errors"][0]["code"] == "did_resolution_failed"
