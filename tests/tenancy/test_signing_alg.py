"""A client chooses the JWS algorithm of its tokens: RS256 (default) or ES256."""

from __future__ import annotations


def test_signing_alg_defaults_to_rs256_and_can_be_changed(client, master):
    created = client.post("/v1/sub_client", json={"name": "Signer"}, headers=master.headers)
    assert created.status_code == 201, created.get_json()
    sub_client = created.get_json()["data"]
    assert sub_client["signing_alg"] == "RS256"

    updated = client.put(
        f"/v1/sub_client/{sub_client['client_id']}", json={"signing_alg": "ES256"}, headers=master.headers
    )
    assert updated.get_json()["data"]["signing_alg"] == "ES256"
    cleared = client.put(
        f"/v1/sub_client/{sub_client['client_id']}", json={"signing_alg": None}, headers=master.headers
    )
    assert cleared.get_json()["data"]["signing_alg"] == "RS256"


def test_unknown_signing_alg_is_422_and_nothing_written(client, master):
    refused = client.post("/v1/sub_client", json={"name": "Bad", "signing_alg": "HS256"}, headers=master.headers)
    assert refused.status_code == 422
    assert "signing_alg" in refused.get_json()["errors"]
    listed = client.get("/v1/sub_client", headers=master.headers).get_json()
    assert all(item["name"] != "Bad" for item in listed["data"])
