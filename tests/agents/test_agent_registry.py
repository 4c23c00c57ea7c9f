"""The registry (app.agents.registry): records, the contract, agents' DIDs and their resolution."""

from __future__ import annotations

import uuid

import pytest


def test_pricing_and_contract_version_are_public(live_server):
    with live_server.http() as http:
        pricing = http.get("/api/pricing").json()["data"]
        contract = http.get("/api/contracts/current", params={"name": "agent-registry"})
        unknown = http.get("/api/contracts/current", params={"name": "other"})
    assert pricing["prices"] == {"host-card": 10, "set-card": 5, "card-unpublish": 1, "deregister": 0}
    assert contract.json()["data"] == {"name": "agent-registry", "version": "1.7.0"}
    assert unknown.status_code == 404
    assert unknown.json()["code"] == "not_found" and "'other'" in unknown.json()["detail"]


@pytest.mark.parametrize(
    ("did", "status", "error"),
    [
        ("not-a-did", 400, "INVALID_DID"),
        ("did:web:example.com", 400, "INVALID_DID"),
        ("did:tessera:" + "AB" * 20, 400, "INVALID_DID"),
        ("did:tessera:" + "ab" * 19, 400, "INVALID_DID"),
        ("did:tessera:" + "0" * 40, 404, "NOT_FOUND"),
    ],
)
def test_did_resolution_errors(live_server, did, status, error):
    with live_server.http() as http:
        answer = http.get(f"/api/did/{did}")
    assert answer.status_code == status
    result = answer.json()
    assert result["didDocument"] is None
    assert result["didResolutionMetadata"]["error"]["type"] == f"https://www.w3.org/ns/did#{error}"


def test_resolve_network_did_for_other_features(app, agent_client):
    from app.dids.resolution import resolve_network_did

    with app.test_request_context():
        document = resolve_network_did(agent_client.did)
        assert document["id"] == agent_client.did
        assert resolve_network_did("did:tessera:" + "0" * 40) is None
        assert resolve_network_did("did:key:z6Mk") is None


def test_user_dids_resolve_in_the_network_method(client, master):
    created = client.post(
        "/v1/user/create",
        json={"profile": {"email_address": f"{uuid.uuid4().hex}@example.com"}},
        headers=master.headers,
    )
    assert created.status_code == 201, created.get_data(as_text=True)
    did = created.get_json()["data"]["did"]
    resolved = client.get(f"/api/did/{did}")
    assert resolved.status_code == 200
    assert resolved.get_json()["id"] == did
