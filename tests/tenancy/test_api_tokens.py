"""x-api-token authentication and POST/GET/DELETE /v1/api_tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from tests.support.tenancy import assert_problem


def _token_row(app, token_id: int):
    from app.extensions import db
    from app.tenancy.models import ApiToken

    with app.app_context():
        row = db.session.get(ApiToken, token_id)
        db.session.expunge(row)
        db.session.rollback()
        return row


@pytest.mark.parametrize(
    "headers",
    [{}, {"x-api-token": ""}, {"x-api-token": "tsk_not-a-real-token"}, {"Authorization": "Bearer x"}],
)
def test_management_endpoints_need_a_valid_token(client, headers):
    for method, path in [("get", "/v1/sub_client"), ("post", "/v1/sub_client"), ("get", "/v1/sub_client/1"),
                         ("put", "/v1/sub_client/1"), ("post", "/v1/sub_client/1/client_secret"),
                         ("get", "/v1/api_tokens"), ("post", "/v1/api_tokens"), ("delete", "/v1/api_tokens/1"),
                         ("post", "/v1/user/create")]:  # fmt: skip
        response = getattr(client, method)(path, json={"name": "x"} if method in {"post", "put"} else None,
                                           headers=headers)  # fmt: skip
        assert_problem(response, 401)
        assert response.headers["WWW-Authenticate"].startswith("ApiToken")


def test_issue_shows_the_token_once_and_stores_only_a_hash(client, app, master):
    response = client.post("/v1/api_tokens", json={"name": "ci"}, headers=master.headers)
    assert response.status_code == 201
    assert response.headers["Cache-Control"] == "no-store"
    data = response.get_json()["data"]
    assert data["token"].startswith("tsk_") and len(data["token"]) >= 40
    assert data["token"].startswith(data["prefix"]) and data["client_id"] == master.client_id
    row = _token_row(app, data["id"])
    assert data["token"] not in (row.token_hash, row.prefix)
    listing = client.get("/v1/api_tokens", headers=master.headers).get_json()
    assert all("token" not in item for item in listing["data"])
    assert data["id"] in [item["id"] for item in listing["data"]]
    assert client.get("/v1/sub_client", headers={"x-api-token": data["token"]}).status_code == 200


def test_last_use_is_recorded(client, app, master):
    data = client.post("/v1/api_tokens", json={}, headers=master.headers).get_json()["data"]
    assert data["last_used_at"] is None and data["name"] == ""
    client.get("/v1/sub_client", headers={"x-api-token": data["token"]})
    assert _token_row(app, data["id"]).last_used_at is not None


def test_revoked_token_is_refused_and_revoking_again_is_harmless(client, master):
    data = client.post("/v1/api_tokens", json={"name": "tmp"}, headers=master.headers).get_json()["data"]
    own = {"x-api-token": data["token"]}
    assert client.delete(f"/v1/api_tokens/{data['id']}", headers=master.headers).status_code == 204
    assert_problem(client.get("/v1/sub_client", headers=own), 401)
    assert client.delete(f"/v1/api_tokens/{data['id']}", headers=master.headers).status_code == 204
    listed = {item["id"]: item for item in client.get("/v1/api_tokens", headers=master.headers).get_json()["data"]}
    assert listed[data["id"]]["revoked_at"].endswith("Z")


def test_a_token_can_revoke_itself(client, master):
    data = client.post("/v1/api_tokens", json={}, headers=master.headers).get_json()["data"]
    own = {"x-api-token": data["token"]}
    assert client.delete(f"/v1/api_tokens/{data['id']}", headers=own).status_code == 204
    assert_problem(client.get("/v1/api_tokens", headers=own), 401)


def test_expiry_is_honoured(client, app, master):
    soon = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    data = client.post("/v1/api_tokens", json={"expires_at": soon}, headers=master.headers).get_json()["data"]
    assert data["expires_at"].endswith("Z")
    own = {"x-api-token": data["token"]}
    assert client.get("/v1/sub_client", headers=own).status_code == 200
    from app.db import transaction
    from app.extensions import db
    from app.tenancy.models import ApiToken

    with app.app_context(), transaction():
        db.session.get(ApiToken, data["id"]).expires_at = datetime.now(UTC) - timedelta(seconds=1)
    assert_problem(client.get("/v1/sub_client", headers=own), 401)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"expires_at": "2999-01-01T00:00:00"}, "expires_at"),
        ({"expires_at": "tomorrow"}, "expires_at"),
        ({"name": "n" * 101}, "name"),
        ({"name": 5}, "name"),
        ({"token": "mine"}, "token"),
    ],
)
def test_issue_refuses_bad_members(client, app, master, body, field):
    before = len(client.get("/v1/api_tokens?per_page=99", headers=master.headers).get_json()["data"])
    assert_problem(client.post("/v1/api_tokens", json=body, headers=master.headers), 422, field)
    assert len(client.get("/v1/api_tokens?per_page=99", headers=master.headers).get_json()["data"]) == before


def test_tokens_are_per_acting_client(client, master):
    child = client.post("/v1/sub_client", json={"name": "c"}, headers=master.headers).get_json()["data"]
    in_child = {**master.headers, "x-api-subclient-id": str(child["client_id"])}
    issued = client.post("/v1/api_tokens", json={"name": "child"}, headers=in_child).get_json()["data"]
    assert issued["client_id"] == child["client_id"]
    child_headers = {"x-api-token": issued["token"]}
    assert [t["id"] for t in client.get("/v1/api_tokens", headers=child_headers).get_json()["data"]] == [issued["id"]]
    master_ids = [t["id"] for t in client.get("/v1/api_tokens", headers=master.headers).get_json()["data"]]
    assert issued["id"] not in master_ids
    # The child cannot revoke its master's tokens.
    assert_problem(client.delete(f"/v1/api_tokens/{master_ids[0]}", headers=child_headers), 404)
    assert client.get("/v1/sub_client", headers=master.headers).status_code == 200


def test_token_listing_is_paginated_newest_first(client, master):
    for i in range(3):
        client.post("/v1/api_tokens", json={"name": f"t{i}"}, headers=master.headers)
    body = client.get("/v1/api_tokens?per_page=2", headers=master.headers).get_json()
    assert body["total_pages"] == 2 and body["per_page"] == 2 and body["current_page"] == 1
    assert [item["name"] for item in body["data"]] == ["t2", "t1"]


def test_active_tokens_are_capped(client, app, master, monkeypatch):
    from app.tenancy import service

    monkeypatch.setattr(service, "MAX_ACTIVE_TOKENS_PER_CLIENT", 2)
    assert client.post("/v1/api_tokens", json={}, headers=master.headers).status_code == 201  # 2 with the fixture's
    problem = assert_problem(client.post("/v1/api_tokens", json={}, headers=master.headers), 409)
    assert problem["code"] == "too_many_api_tokens"


def test_plaintext_tokens_never_reach_the_database(client, app, master):
    headers = {**master.headers, "Idempotency-Key": "token-key-1"}
    issued = client.post("/v1/api_tokens", json={"name": "secret"}, headers=headers).get_json()["data"]
    from app.extensions import db
    from app.idempotency.models import IdempotencyRecord

    with app.app_context():
        bodies = db.session.execute(select(IdempotencyRecord.body)).scalars().all()
        db.session.rollback()
    assert not any(issued["token"] in body for body in bodies)


def test_last_use_is_recorded_by_a_read_only_view(client, app, master):
    # GET /v1/sub_client/{id} commits only when something changed: the stamp is such a change.
    data = client.post("/v1/api_tokens", json={}, headers=master.headers).get_json()["data"]
    read = client.get(f"/v1/sub_client/{master.client_id}", headers={"x-api-token": data["token"]})
    assert read.status_code == 200
    assert _token_row(app, data["id"]).last_used_at is not None
