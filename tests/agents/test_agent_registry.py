"""The registry (app.agents.registry): records, the contract, agents' DIDs and their resolution."""

from __future__ import annotations

import uuid

import pytest

from app.client.library import ApiError
from tests.support.agents import registration_card

DID_CONTEXTS = ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/suites/secp256k1recovery-2020/v2"]


def test_contract_version_is_public(live_server):
    with live_server.http() as http:
        contract = http.get("/api/contracts/current", params={"name": "agent-registry"})
        unknown = http.get("/api/contracts/current", params={"name": "other"})
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


def test_registry_views_did_document_and_deregistration_name_every_field(live_server, agent_client):
    with pytest.raises(ApiError) as raised:
        agent_client.registry()
    assert raised.value.status == 404
    body = registration_card("Registered")
    hosted = agent_client.host_card(body)
    etag = hosted["result"]["etag"]
    public_url = f"{live_server.url}/api/agent-card/{agent_client.did}"
    plain = agent_client.registry()
    assert plain == {"did": agent_client.did, "owner": None, "card_uri": None, "updated_at": plain["updated_at"]}
    full = agent_client.registry(full=True)
    address = agent_client.whoami()["address"]
    assert full == {
        **plain,
        "address": address,
        "blockchain_account_id": f"eip155:1:{address}",
        "kind": "agent",
        "created_at": full["created_at"],
        "did_bound_at": full["did_bound_at"],
        "card": {
            "hosted": True,
            "published": True,
            "size": len(body),
            "etag": etag,
            "hosted_by": agent_client.did,
            "public_url": public_url,
        },
        "contract": {"name": "agent-registry", "version": "1.7.0"},
        "identity": None,  # an ERC-8004 identity exists only on a chain
        "history": [
            {
                "operation": "host-card",
                "at": full["history"][0]["at"],
                "by": agent_client.did,
                "job": hosted["id"],
                "charged": 10,
                "owner": None,
                "transactions": [],
            }
        ],
    }
    agent_client.set_card(public_url)
    with live_server.http() as http:
        document = http.get(f"/api/did/{agent_client.did}")
        result = http.get(f"/api/did/{agent_client.did}", headers={"Accept": "application/did-resolution"})
    assert document.headers["Content-Type"] == "application/did+json"
    assert list(document.json()) == [
        "@context", "id", "verificationMethod", "authentication", "assertionMethod", "service"
    ]  # fmt: skip
    assert document.json()["service"] == [
        {"id": f"{agent_client.did}#agent", "type": "AgentService", "serviceEndpoint": public_url}
    ]
    assert list(result.json()) == ["@context", "didDocument", "didResolutionMetadata", "didDocumentMetadata"]
    assert list(result.json()["didDocumentMetadata"]) == ["created", "updated"]
    agent_client.card_unpublish()
    assert "service" not in agent_client.get_did(agent_client.did)
    deregistered = agent_client.deregister_agent()["result"]
    assert deregistered == {"did": agent_client.did, "deactivated": True, "charged": 0, "released_agents": 0}
    with live_server.http() as http:
        gone = http.get(f"/api/did/{agent_client.did}")
    assert gone.status_code == 410
    assert gone.json()["didDocument"] == {"@context": DID_CONTEXTS, "id": agent_client.did}
    assert list(gone.json()["didDocumentMetadata"]) == ["created", "deactivated", "updated"]


def test_writes_need_no_signature_on_the_database_registry(live_server, agent_client):
    token = agent_client.authenticate()["token"]
    with live_server.http() as http:
        answers = [
            http.post(
                f"/api/agents/{agent_client.did}/registry/typed-data",
                json=body,
                headers={"Authorization": f"Bearer {token}"},
            )
            for body in (
                {"operation": "set-card", "uri": "https://agent.example/card.json"},
                {"operation": "deregister"},
            )
        ]
        refused = http.post(
            f"/api/agents/{agent_client.did}/registry/typed-data",
            json={"operation": "set-card", "uri": "javascript:alert(1)"},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert [answer.json()["data"] for answer in answers] == [
        {"operation": "set-card", "typed_data": None, "signer": None},
        {"operation": "deregister", "typed_data": None, "signer": None},
    ]
    assert refused.status_code == 422  # the write's own checks come first
