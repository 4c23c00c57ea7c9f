"""`POST /v1/vc/issuer/store` and `GET /v1/vc/issuer/credentials/{cid}` through HTTP."""

from __future__ import annotations

import json

import pytest
import rfc8785

from app.multiformats import cid_for
from tests.support.credentials import wait_for_verification
from tests.support.issuing import Issuer, create_user
from tests.support.tenancy import make_master


def _store(client, headers, vc_text: str, **extra_headers):
    body = '{"vc": ' + vc_text + "}"
    return client.post(
        "/v1/vc/issuer/store", data=body, content_type="application/json", headers={**headers, **extra_headers}
    )


@pytest.fixture
def user(client, master):
    return create_user(client, master.headers)


@pytest.fixture
def issuer():
    return Issuer()


def test_store_answers_the_vc_byte_for_byte_and_the_cid(client, master, user, issuer):
    vc = issuer.sign(issuer.credential(user["did"], score=1.50, note="caf\u00e9 \u2603"))
    # Unusual but valid JSON: key order, spacing, escapes and number forms must survive untouched.
    vc_text = json.dumps(vc, indent=3, ensure_ascii=True).replace('"score": 1.5', '"score": 1.50')
    assert '"score": 1.50' in vc_text and "\\u00e9" in vc_text
    response = _store(client, master.headers, vc_text)
    assert response.status_code == 201, response.get_data(as_text=True)
    expected_cid = cid_for(rfc8785.dumps(vc))
    text = response.get_data(as_text=True)
    assert text == '{"data":{"cid":"' + expected_cid + '","vc":' + vc_text + "}}"
    assert response.headers["Location"].endswith(f"/v1/vc/issuer/credentials/{expected_cid}")
    assert expected_cid.startswith("b")

    record = client.get(f"/v1/vc/issuer/credentials/{expected_cid}", headers=master.headers)
    assert record.status_code == 200
    assert ',"vc":' + vc_text + "," in record.get_data(as_text=True)
    assert record.json["data"]["verification"]["state"] in ("pending", "verified")


def test_storing_the_same_vc_again_returns_the_same_record(client, master, user, issuer):
    vc = issuer.sign(issuer.credential(user["did"]))
    first = _store(client, master.headers, json.dumps(vc))
    second = _store(client, master.headers, json.dumps(vc, indent=2))
    assert first.status_code == 201
    assert second.status_code == 200
    assert second.json["data"]["cid"] == first.json["data"]["cid"]
    # The record keeps the first text it was stored with.
    assert second.get_data(as_text=True) == first.get_data(as_text=True)


def test_idempotency_key_replays_the_first_answer(client, master, user, issuer):
    vc_text = json.dumps(issuer.sign(issuer.credential(user["did"])))
    first = _store(client, master.headers, vc_text, **{"Idempotency-Key": "store-1"})
    replay = _store(client, master.headers, vc_text, **{"Idempotency-Key": "store-1"})
    assert first.status_code == replay.status_code == 201
    assert replay.headers.get("Idempotent-Replayed") == "true"
    assert replay.get_data() == first.get_data()
    other = issuer.sign(issuer.credential(user["did"]))
    reused = _store(client, master.headers, json.dumps(other), **{"Idempotency-Key": "store-1"})
    assert reused.status_code == 422


def test_a_signed_credential_is_verified_by_the_job(client, master, user, issuer):
    response = _store(client, master.headers, json.dumps(issuer.sign(issuer.credential(user["did"]))))
    record = wait_for_verification(client, master.headers, response.json["data"]["cid"])
    assert record["verification"]["state"] == "verified"
    assert record["verification"]["reason"] is None
    assert record["verification"]["checked_at"].endswith("Z")


def test_a_tampered_credential_fails_verification_with_a_reason(client, master, user, issuer):
    vc = issuer.sign(issuer.credential(user["did"]))
    vc["credentialSubject"]["lastName"] = "Byron"
    response = _store(client, master.headers, json.dumps(vc))
    assert response.status_code == 201
    record = wait_for_verification(client, master.headers, response.json["data"]["cid"])
    assert record["verification"]["state"] == "failed"
    assert record["verification"]["reason"] == "invalid_signature"


def _mutations():
    def drop(member):
        return lambda vc: vc.pop(member)

    def setter(path, value):
        def apply(vc):
            target = vc
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value

        return apply

    return [
        ("vc.@context", drop("@context")),
        ("vc.@context", setter(["@context"], ["https://www.w3.org/2018/credentials/v1"])),
        ("vc.@context", setter(["@context"], "https://www.w3.org/ns/credentials/v2")),
        ("vc.type", setter(["type"], ["VerifiableCredential"])),
        ("vc.type", setter(["type"], ["SomethingCredential", "Other"])),
        ("vc.type", setter(["type"], "VerifiableCredential")),
        ("vc.issuer", setter(["issuer"], "https://issuer.example")),
        ("vc.issuer", drop("issuer")),
        ("vc.validFrom", setter(["validFrom"], "yesterday")),
        ("vc.validUntil", setter(["validUntil"], "2024-13-01T00:00:00Z")),
        ("vc.credentialSubject", setter(["credentialSubject"], "did:example:x")),
        ("vc.credentialSubject.id", setter(["credentialSubject", "id"], "not-a-did")),
        ("vc.proof", drop("proof")),
        ("vc.proof.cryptosuite", setter(["proof", "cryptosuite"], "")),
        ("vc.proof.proofValue", setter(["proof", "proofValue"], 12)),
        ("vc.proof.verificationMethod", lambda vc: vc["proof"].pop("verificationMethod")),
        ("vc.proof.proofPurpose", lambda vc: vc["proof"].pop("proofPurpose")),
        ("vc.proof.type", lambda vc: vc["proof"].pop("type")),
    ]


@pytest.mark.parametrize(("field", "mutate"), _mutations(), ids=[f"{m[0]}-{i}" for i, m in enumerate(_mutations())])
def test_malformed_vc_is_refused_naming_the_field_and_nothing_is_stored(client, master, user, issuer, field, mutate):
    vc = issuer.sign(issuer.credential(user["did"]))
    mutate(vc)
    response = _store(client, master.headers, json.dumps(vc))
    assert response.status_code == 422, response.get_data(as_text=True)
    assert response.headers["Content-Type"] == "application/problem+json"
    assert field in response.json["errors"], response.json["errors"]
    cid = cid_for(rfc8785.dumps(vc))
    assert client.get(f"/v1/vc/issuer/credentials/{cid}", headers=master.headers).status_code == 404


def test_empty_valid_until_is_accepted(client, master, user, issuer):
    vc = issuer.credential(user["did"])
    assert vc["validUntil"] == ""
    assert _store(client, master.headers, json.dumps(issuer.sign(vc))).status_code == 201


def test_subject_must_be_a_user_of_the_callers_tree(app, client, master, issuer):
    unknown = issuer.sign(issuer.credential("did:tessera:" + "ab" * 20))
    response = _store(client, master.headers, json.dumps(unknown))
    assert response.status_code == 422
    assert "vc.credentialSubject.id" in response.json["errors"]

    other_tree = make_master(app, "Other organisation")
    stranger = create_user(client, other_tree.headers)
    response = _store(client, master.headers, json.dumps(issuer.sign(issuer.credential(stranger["did"]))))
    assert response.status_code == 422
    assert "vc.credentialSubject.id" in response.json["errors"]


def _assert_refused_naming(response, field: str) -> None:
    assert response.status_code == 422, response.get_data(as_text=True)
    assert response.headers["Content-Type"] == "application/problem+json"
    assert response.json["code"] == "validation_failed"
    assert field in response.json["errors"], response.json["errors"]


def test_duplicate_member_names_and_non_json_numbers_are_refused(client, master, user, issuer):
    vc_text = json.dumps(issuer.sign(issuer.credential(user["did"])))
    duplicated = vc_text[:-1] + ', "issuer": "did:example:other"}'
    _assert_refused_naming(_store(client, master.headers, duplicated), "vc")
    _assert_refused_naming(_store(client, master.headers, vc_text[:-1] + ', "score": NaN}'), "vc.score")
    _assert_refused_naming(_store(client, master.headers, vc_text[:-1] + ', "score": -Infinity}'), "vc.score")


@pytest.mark.parametrize(
    ("number", "accepted"),
    [(2**53 - 1, True), (-(2**53 - 1), True), (2**53, False), (-(2**53), False), (2**80, False)],
)
def test_numbers_without_an_rfc8785_form_are_refused_naming_the_member(
    app, client, master, user, issuer, number, accepted
):
    from sqlalchemy import func, select

    from app.credentials.models import StoredCredential
    from app.extensions import db

    vc = issuer.sign(issuer.credential(user["did"]))
    vc["credentialSubject"]["achievements"] = [{"points": 1}, {"points": number}]
    response = _store(client, master.headers, json.dumps(vc))
    if accepted:
        assert response.status_code == 201, response.get_data(as_text=True)
        assert response.json["data"]["cid"] == cid_for(rfc8785.dumps(vc))
        return
    _assert_refused_naming(response, "vc.credentialSubject.achievements.1.points")
    assert "RFC 8785" in response.json["errors"]["vc.credentialSubject.achievements.1.points"][0]
    with app.app_context():
        stored = db.session.scalar(
            select(func.count()).select_from(StoredCredential).where(StoredCredential.user_id == user["user_id"])
        )
    assert stored == 0


def test_store_needs_an_api_token(client, user, issuer):
    response = client.post("/v1/vc/issuer/store", json={"vc": issuer.sign(issuer.credential(user["did"]))})
    assert response.status_code == 401
    assert "WWW-Authenticate" in response.headers


def test_another_tree_cannot_read_the_credential(app, client, master, user, issuer):
    response = _store(client, master.headers, json.dumps(issuer.sign(issuer.credential(user["did"]))))
    cid = response.json["data"]["cid"]
    tree_b = make_master(app, "Tree B")
    answer = client.get(f"/v1/vc/issuer/credentials/{cid}", headers=tree_b.headers)
    assert answer.status_code == 404
    assert answer.json["code"] == "credential_not_found"
    assert client.get(f"/v1/vc/issuer/credentials/{cid}", headers=master.headers).status_code == 200


def test_unknown_cid_is_not_found(client, master):
    response = client.get("/v1/vc/issuer/credentials/bafkunknown", headers=master.headers)
    assert response.status_code == 404


def test_sub_clients_see_their_own_subtree_only(client, master, issuer):
    from tests.support.tenancy import create_sub_client, token_for

    branch_a = create_sub_client(client, master.headers, name="Branch A")["client_id"]
    branch_b = create_sub_client(client, master.headers, name="Branch B")["client_id"]
    a_headers = {"x-api-token": token_for(client, master.headers, branch_a)}
    b_headers = {"x-api-token": token_for(client, master.headers, branch_b)}
    user_a = create_user(client, a_headers)

    vc_text = json.dumps(issuer.sign(issuer.credential(user_a["did"])))
    # Branch B cannot store for a user of branch A, the master (an ancestor) can act in branch A.
    refused = _store(client, b_headers, vc_text)
    assert refused.status_code == 422
    assert "vc.credentialSubject.id" in refused.json["errors"]
    stored = _store(client, master.headers, vc_text, **{"x-api-subclient-id": str(branch_a)})
    assert stored.status_code == 201
    cid = stored.json["data"]["cid"]

    assert client.get(f"/v1/vc/issuer/credentials/{cid}", headers=a_headers).status_code == 200
    assert client.get(f"/v1/vc/issuer/credentials/{cid}", headers=master.headers).status_code == 200
    assert client.get(f"/v1/vc/issuer/credentials/{cid}", headers=b_headers).status_code == 404
    # Stored while acting in branch A, the record belongs to branch A: storing again there finds it.
    assert _store(client, a_headers, vc_text).status_code == 200


def _deep(levels: int) -> dict:
    node: dict = {"leaf": "x"}
    for _ in range(levels):
        node = {"nested": node}
    return node


def _hostile_cases():
    def foreign_context(vc, issuer):
        signed = issuer.sign(vc)
        signed["@context"].append("https://evil.example/context.jsonld")
        return signed

    def bomb(vc, issuer):
        signed = issuer.sign(vc)
        signed["credentialSubject"]["bomb"] = _deep(200)
        return signed

    def short_proof_value(vc, issuer):
        signed = issuer.sign(vc)
        signed["proof"]["proofValue"] = signed["proof"]["proofValue"][:40]
        return signed

    def unknown_suite(vc, issuer):
        signed = issuer.sign(vc)
        signed["proof"]["cryptosuite"] = "rot13-2024"
        return signed

    def did_web_loopback(vc, issuer):
        vc["issuer"] = "did:web:127.0.0.1%3A9"
        signed = issuer.sign(vc)
        signed["proof"]["verificationMethod"] = "did:web:127.0.0.1%3A9#key-1"
        return signed

    return [
        ("context_not_allowed", foreign_context),
        ("canonicalization_limit", bomb),
        ("malformed_proof_value", short_proof_value),
        ("unknown_cryptosuite", unknown_suite),
        ("did_resolution_failed", did_web_loopback),
    ]


@pytest.mark.parametrize(("reason", "make"), _hostile_cases(), ids=[case[0] for case in _hostile_cases()])
def test_hostile_credential_is_stored_and_fails_verification_with_a_clear_reason(
    client, master, user, issuer, reason, make
):
    vc = make(issuer.credential(user["did"]), issuer)
    response = _store(client, master.headers, json.dumps(vc))
    assert response.status_code == 201, response.get_data(as_text=True)
    verification = wait_for_verification(client, master.headers, response.json["data"]["cid"])["verification"]
    assert verification["state"] == "failed"
    assert verification["reason"] == reason, verification
