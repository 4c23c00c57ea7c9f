"""Hardening of tenancy found by fuzzing the HTTP surface: every answer it can give is documented."""

from __future__ import annotations

import pytest

from tests.support.tenancy import assert_problem, count_clients, undocumented_error_statuses


@pytest.fixture(scope="module")
def spec(app):
    return app.test_client().get("/openapi.json").get_json()


def test_every_view_honouring_the_acting_node_header_documents_its_404_and_422(spec):
    missing = {}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            names = {p["name"] for p in operation.get("parameters", []) if isinstance(p, dict)}
            if "x-api-subclient-id" in names and not {"404", "422"} <= set(operation["responses"]):
                missing[f"{method.upper()} {path}"] = set(operation["responses"])
    assert not missing, missing


def test_tenancy_operations_document_every_error_they_can_answer(spec):
    assert undocumented_error_statuses(spec, ("/v1/sub_client", "/v1/api_tokens")) == {}


@pytest.mark.parametrize("path", ["/v1/vc/issuer/credentials/bafy", "/v1/user/1", "/v1/sub_client"])
def test_a_malformed_acting_node_is_a_422_naming_the_header(client, master, path):
    response = client.get(path, headers={**master.headers, "x-api-subclient-id": "abc"})
    body = assert_problem(response, 422, "x-api-subclient-id")
    assert body["code"] == "validation_failed"


def test_an_acting_node_of_another_tree_is_a_404(client, master, other_master):
    response = client.get(
        "/v1/sub_client", headers={**master.headers, "x-api-subclient-id": str(other_master.client_id)}
    )
    assert assert_problem(response, 404)["code"] == "not_found"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"subdomain": "mail\n", "domain": "example.org"}, "subdomain"),
        ({"id_token_claims": {"edu_username\n": "user_name"}}, "id_token_claims"),
    ],
)
def test_a_trailing_newline_is_refused_and_nothing_is_created(app, client, master, fields, field):
    before = count_clients(app, master.client_id)
    response = client.post("/v1/sub_client", json={"name": "Newline", **fields}, headers=master.headers)
    assert_problem(response, 422, field)
    assert count_clients(app, master.client_id) == before


def test_a_path_id_with_a_trailing_newline_is_a_422(client, master):
    response = client.get(f"/v1/sub_client/{master.client_id}%0A", headers=master.headers)
    assert_problem(response, 422, "subclient_id")


def test_a_token_expiry_beyond_year_9999_in_utc_is_a_422_and_no_token_is_issued(client, master):
    listed = client.get("/v1/api_tokens", headers=master.headers).get_json()["data"]
    response = client.post(
        "/v1/api_tokens", json={"name": "far", "expires_at": "9999-12-31T23:59:59-05:00"}, headers=master.headers
    )
    assert_problem(response, 422, "expires_at")
    assert client.get("/v1/api_tokens", headers=master.headers).get_json()["data"] == listed
