"""Idempotency-Key on sub-client creation: a replay returns the first sub-client and writes nothing."""

from __future__ import annotations

from tests.support.tenancy import assert_problem, count_clients


def test_same_key_same_body_replays_the_first_response(client, app, master):
    headers = {**master.headers, "Idempotency-Key": "create-sub-1"}
    before = count_clients(app, master.client_id)
    first = client.post("/v1/sub_client", json={"name": "Once"}, headers=headers)
    again = client.post("/v1/sub_client", json={"name": "Once"}, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert first.get_json() == again.get_json()
    assert count_clients(app, master.client_id) == before + 1


def test_same_key_different_body_is_refused(client, app, master):
    headers = {**master.headers, "Idempotency-Key": "create-sub-2"}
    assert client.post("/v1/sub_client", json={"name": "First"}, headers=headers).status_code == 201
    before = count_clients(app, master.client_id)
    assert_problem(client.post("/v1/sub_client", json={"name": "Second"}, headers=headers), 422)
    assert count_clients(app, master.client_id) == before


def test_keys_are_per_client(client, app, master, other_master):
    key = {"Idempotency-Key": "shared-key"}
    mine = client.post("/v1/sub_client", json={"name": "Mine"}, headers={**master.headers, **key}).get_json()
    theirs = client.post("/v1/sub_client", json={"name": "Mine"}, headers={**other_master.headers, **key}).get_json()
    assert mine["data"]["client_id"] != theirs["data"]["client_id"]
    assert theirs["data"]["parent_client_id"] == other_master.client_id


def test_created_resources_have_a_location(client, master):
    created = client.post("/v1/sub_client", json={"name": "Located"}, headers=master.headers)
    location = created.headers["Location"]
    assert location.endswith(f"/v1/sub_client/{created.get_json()['data']['client_id']}")
    assert client.get(location, headers=master.headers).get_json() == created.get_json()
    user = client.post("/v1/user/create", json={"profile": {"email_address": "loc@ex.org"}}, headers=master.headers)
    assert client.get(user.headers["Location"], headers=master.headers).get_json() == user.get_json()
