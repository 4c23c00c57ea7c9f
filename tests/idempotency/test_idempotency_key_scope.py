"""Hardening of Idempotency-Key found by reviewing it against design section 2."""

from __future__ import annotations

from tests.support.tenancy import assert_problem, create_sub_client


def test_every_view_taking_the_key_documents_its_409_and_422(app):
    spec = app.test_client().get("/openapi.json").get_json()
    missing = {}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            names = {parameter["name"] for parameter in operation.get("parameters", [])}
            if "Idempotency-Key" in names and not {"409", "422"} <= set(operation["responses"]):
                missing[f"{method.upper()} {path}"] = set(operation["responses"])
    assert not missing, missing


def test_the_same_key_and_body_acting_in_another_node_is_refused_not_replayed(client, master):
    first_node = create_sub_client(client, master.headers, name="First node")
    second_node = create_sub_client(client, master.headers, name="Second node")
    body = {"profile": {"email_address": "same-key@example.org"}}
    headers = {**master.headers, "Idempotency-Key": "create-user-once"}

    in_first = {**headers, "x-api-subclient-id": str(first_node["client_id"])}
    created = client.post("/v1/user/create", json=body, headers=in_first)
    assert created.status_code == 201, created.get_json()
    replayed = client.post("/v1/user/create", json=body, headers=in_first)
    assert replayed.status_code == 201
    assert replayed.headers["Idempotent-Replayed"] == "true"
    assert replayed.get_json() == created.get_json()

    elsewhere = client.post(
        "/v1/user/create", json=body, headers={**headers, "x-api-subclient-id": str(second_node["client_id"])}
    )
    assert assert_problem(elsewhere, 422)["code"] == "idempotency_key_reused"
    user_id = created.get_json()["data"]["user_id"]
    in_second = client.get(
        f"/v1/user/{user_id}", headers={**master.headers, "x-api-subclient-id": str(second_node["client_id"])}
    )
    assert in_second.status_code == 404
