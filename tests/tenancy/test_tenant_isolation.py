"""x-api-subclient-id tree semantics (design 3) and isolation between tenant trees."""

from __future__ import annotations

import pytest

from tests.support.tenancy import assert_problem, count_clients, create_sub_client, load_client_row, token_for


@pytest.fixture
def tree(client, master):
    """master → s1 → s11, master → s2; with an API token for s1."""
    s1 = create_sub_client(client, master.headers, name="s1")
    s2 = create_sub_client(client, master.headers, name="s2")
    s11 = create_sub_client(client, {**master.headers, "x-api-subclient-id": str(s1["client_id"])}, name="s11")
    return {
        "s1": s1["client_id"],
        "s2": s2["client_id"],
        "s11": s11["client_id"],
        "s1_headers": {"x-api-token": token_for(client, master.headers, s1["client_id"])},
    }


def _ids(response) -> list[int]:
    assert response.status_code == 200, response.get_json()
    return [item["client_id"] for item in response.get_json()["data"]]


def test_create_makes_a_child_of_the_acting_node(client, master, tree):
    assert (
        client.get(f"/v1/sub_client/{tree['s11']}", headers=master.headers).get_json()["data"]["parent_client_id"]
        == tree["s1"]
    )
    made = create_sub_client(client, tree["s1_headers"], name="made by s1")
    assert made["parent_client_id"] == tree["s1"]


def test_list_shows_direct_children_of_the_acting_node_only(client, master, tree):
    assert _ids(client.get("/v1/sub_client", headers=master.headers)) == [tree["s1"], tree["s2"]]
    with_header = {**master.headers, "x-api-subclient-id": str(tree["s1"])}
    assert _ids(client.get("/v1/sub_client", headers=with_header)) == [tree["s11"]]
    assert _ids(client.get("/v1/sub_client", headers=tree["s1_headers"])) == [tree["s11"]]
    leaf = {**master.headers, "x-api-subclient-id": str(tree["s11"])}
    assert _ids(client.get("/v1/sub_client", headers=leaf)) == []


def test_read_finds_clients_only_within_the_acting_subtree(client, master, tree):
    for node in (master.client_id, tree["s1"], tree["s2"], tree["s11"]):
        assert client.get(f"/v1/sub_client/{node}", headers=master.headers).status_code == 200
    with_header = {**master.headers, "x-api-subclient-id": str(tree["s1"])}
    assert client.get(f"/v1/sub_client/{tree['s11']}", headers=with_header).status_code == 200
    assert_problem(client.get(f"/v1/sub_client/{tree['s2']}", headers=with_header), 404)
    assert_problem(client.get(f"/v1/sub_client/{master.client_id}", headers=with_header), 404)


def test_a_sub_client_token_sees_only_its_own_subtree(client, app, master, tree):
    h = tree["s1_headers"]
    assert client.get(f"/v1/sub_client/{tree['s1']}", headers=h).status_code == 200
    assert client.get(f"/v1/sub_client/{tree['s11']}", headers=h).status_code == 200
    assert_problem(client.get(f"/v1/sub_client/{master.client_id}", headers=h), 404)
    assert_problem(client.get(f"/v1/sub_client/{tree['s2']}", headers=h), 404)
    before = count_clients(app, master.client_id)
    for node in (master.client_id, tree["s2"]):
        outside = {**h, "x-api-subclient-id": str(node)}
        assert_problem(client.get("/v1/sub_client", headers=outside), 404)
        assert_problem(client.post("/v1/sub_client", json={"name": "x"}, headers=outside), 404)
        assert_problem(
            client.post("/v1/user/create", json={"profile": {"email_address": "x@ex.org"}}, headers=outside), 404
        )
        assert_problem(client.get("/v1/api_tokens", headers=outside), 404)
        assert_problem(client.post(f"/v1/sub_client/{node}/client_secret", headers=h), 404)
    assert count_clients(app, master.client_id) == before


def test_update_is_for_master_clients_only(client, app, master, tree):
    h = tree["s1_headers"]
    for node in (tree["s1"], tree["s11"]):
        before = load_client_row(app, node)
        problem = assert_problem(client.put(f"/v1/sub_client/{node}", json={"name": "renamed"}, headers=h), 403)
        assert problem["code"] == "master_client_required"
        assert load_client_row(app, node) == before
    response = client.put(f"/v1/sub_client/{tree['s11']}", json={"name": "renamed"}, headers=master.headers)
    assert response.status_code == 200
    assert response.get_json()["data"]["name"] == "renamed"


def test_master_update_is_limited_to_the_acting_subtree(client, app, master, tree):
    with_header = {**master.headers, "x-api-subclient-id": str(tree["s1"])}
    before = load_client_row(app, tree["s2"])
    assert_problem(client.put(f"/v1/sub_client/{tree['s2']}", json={"name": "n"}, headers=with_header), 404)
    assert load_client_row(app, tree["s2"]) == before


def test_users_created_while_acting_in_a_node_belong_to_it(client, app, master, tree):
    with_header = {**master.headers, "x-api-subclient-id": str(tree["s11"])}
    response = client.post("/v1/user/create", json={"profile": {"email_address": "n@ex.org"}}, headers=with_header)
    assert response.status_code == 201
    from app.users.models import User

    with app.app_context():
        from app.extensions import db

        assert db.session.get(User, response.get_json()["data"]["user_id"]).client_id == tree["s11"]
        db.session.rollback()


def test_another_tree_is_invisible_and_untouched(client, app, master, other_master):
    """Every endpoint with tree A's token on tree B's resources answers 404 and changes nothing."""
    b1 = create_sub_client(client, other_master.headers, name="b1")["client_id"]
    b_token_response = client.post("/v1/api_tokens", json={"name": "b"}, headers=other_master.headers)
    b_token_id = b_token_response.get_json()["data"]["id"]
    a = master.headers
    b_rows = {node: load_client_row(app, node) for node in (other_master.client_id, b1)}
    b_count = count_clients(app, other_master.client_id)

    for node in (other_master.client_id, b1):
        assert_problem(client.get(f"/v1/sub_client/{node}", headers=a), 404)
        assert_problem(client.put(f"/v1/sub_client/{node}", json={"name": "stolen"}, headers=a), 404)
        assert_problem(client.post(f"/v1/sub_client/{node}/client_secret", headers=a), 404)
        in_b = {**a, "x-api-subclient-id": str(node)}
        assert_problem(client.get("/v1/sub_client", headers=in_b), 404)
        assert_problem(client.get(f"/v1/sub_client/{node}", headers=in_b), 404)
        assert_problem(client.post("/v1/sub_client", json={"name": "planted"}, headers=in_b), 404)
        assert_problem(
            client.post("/v1/user/create", json={"profile": {"email_address": "p@ex.org"}}, headers=in_b), 404
        )
        assert_problem(client.post("/v1/api_tokens", json={"name": "x"}, headers=in_b), 404)
        assert_problem(client.get("/v1/api_tokens", headers=in_b), 404)
        assert_problem(client.delete(f"/v1/api_tokens/{b_token_id}", headers=in_b), 404)
    assert_problem(client.delete(f"/v1/api_tokens/{b_token_id}", headers=a), 404)

    assert {node: load_client_row(app, node) for node in b_rows} == b_rows
    assert count_clients(app, other_master.client_id) == b_count
    # B's token still works and B's listing is as before.
    listing = client.get("/v1/api_tokens", headers=other_master.headers).get_json()["data"]
    assert all(token["revoked_at"] is None for token in listing)
    assert _ids(client.get("/v1/sub_client", headers=other_master.headers)) == [b1]
