"""Hardening of the credentials API found by fuzzing its HTTP surface (SQLite and PostgreSQL)."""

from __future__ import annotations

import json

import pytest

from tests.support.credentials import wait_for_verification
from tests.support.issuing import Issuer, allocate_status, create_user
from tests.support.rows import row_count
from tests.support.tenancy import assert_problem, undocumented_error_statuses


@pytest.fixture(scope="module")
def spec(app):
    return app.test_client().get("/openapi.json").get_json()


@pytest.fixture
def user(client, master):
    return create_user(client, master.headers)


def _stored_count(app, client_id: int) -> int:
    from app.credentials.models import StoredCredential

    return row_count(app, StoredCredential, StoredCredential.client_id == client_id)


def test_credential_operations_document_every_error_they_can_answer(spec):
    assert undocumented_error_statuses(spec, ("/v1/vc/", "/credentials/", "/status/lists/")) == {}


@pytest.mark.parametrize("path", ["/v1/vc/verify", "/credentials/verify"])
def test_verify_documents_both_shapes_of_its_400(spec, path):
    content = spec["paths"][path]["post"]["responses"]["400"]["content"]
    assert set(content) == {"application/json", "application/problem+json"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/v1/vc/issuer/credentials/b%00aaa"),
        ("get", "/v1/vc/issuer/credentials/not-a-cid"),
        ("get", "/v1/vc/issuer/status_entries/a%00b"),
        ("patch", "/v1/vc/issuer/status_entries/a%00b"),
        ("get", "/status/lists/a%00b"),
        ("get", "/status/lists/" + "f" * 37),
    ],
)
def test_ids_that_cannot_exist_are_404_problems(client, master, method, path):
    response = getattr(client, method)(path, headers=master.headers, json={"status": "revoked"})
    assert assert_problem(response, 404)["code"].endswith("not_found")


@pytest.mark.parametrize(
    ("member", "value", "status"),
    [("credentialSubject.id", "did:tessera:\u0000", 422), ("credentialSubject.note", "a\ud800b", 400)],
)
def test_nul_or_lone_surrogate_in_a_vc_is_refused_naming_it_and_nothing_is_stored(
    app, client, master, user, member, value, status
):
    vc = Issuer().credential(user["did"])
    name = member.split(".")[1]
    vc["credentialSubject"][name] = value
    body = json.dumps({"vc": vc}, ensure_ascii=True)
    response = client.post("/v1/vc/issuer/store", data=body, content_type="application/json", headers=master.headers)
    if status == 422:  # NUL is JSON, but no column stores it
        problem = assert_problem(response, 422, "vc")
        assert f"vc.{member}" in problem["errors"], problem
    else:  # an unpaired surrogate is no text at all: malformed JSON where the body is parsed
        problem = assert_problem(response, 400)
        assert problem["code"] == "malformed_json"
        assert f"/vc/{member.replace('.', '/')} holds an unpaired surrogate" in problem["detail"], problem
    assert _stored_count(app, master.client_id) == 0


@pytest.mark.parametrize("index", ["\u00b2", "9999999999"])
def test_an_impossible_hosted_status_index_is_stored_and_fails_verification(client, master, user, index):
    entry = allocate_status(client, master.headers)
    status = {**entry["credentialStatus"], "statusListIndex": index}
    issuer = Issuer()
    vc = issuer.sign(issuer.credential(user["did"], status=status))
    response = client.post("/v1/vc/issuer/store", json={"vc": vc}, headers=master.headers)
    assert response.status_code == 201, response.get_data(as_text=True)
    record = wait_for_verification(client, master.headers, response.json["data"]["cid"])
    assert record["verification"]["state"] == "failed"
    assert record["verification"]["reason"] == "status_check_failed"

    verified = client.post("/v1/vc/verify", json={"verifiableCredential": vc}, headers=master.headers)
    assert verified.status_code == 400
    assert verified.json["errors"][0]["code"] == "status_check_failed"


@pytest.mark.parametrize(
    ("member", "value"), [("validUntil", "9999-12-31T23:59:59-05:00"), ("validFrom", "0001-01-01T00:00:00+05:00")]
)
def test_a_validity_time_outside_years_1_to_9999_in_utc_is_a_422(app, client, master, user, member, value):
    issuer = Issuer()
    vc = issuer.sign({**issuer.credential(user["did"]), member: value})
    response = client.post("/v1/vc/issuer/store", json={"vc": vc}, headers=master.headers)
    problem = assert_problem(response, 422, "vc")
    assert f"vc.{member}" in problem["errors"], problem
    assert _stored_count(app, master.client_id) == 0
