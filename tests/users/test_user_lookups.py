"""The users service used by other features: lookups, visibility and the DID document."""

from __future__ import annotations

import pytest

from tests.support.tenancy import assert_problem, create_sub_client, token_for


@pytest.fixture
def tree_with_users(client, master):
    left = create_sub_client(client, master.headers, name="left")["client_id"]
    right = create_sub_client(client, master.headers, name="right")["client_id"]
    users = {}
    for name, node in [("root", master.client_id), ("left", left), ("right", right)]:
        headers = {"x-api-token": token_for(client, master.headers, node)}
        response = client.post(
            "/v1/user/create", json={"profile": {"email_address": f"{name}@ex.org"}}, headers=headers
        )
        assert response.status_code == 201
        users[name] = response.get_json()["data"]
    return {"left": left, "right": right, "users": users}


def _paths(app, *client_ids):
    from app.extensions import db
    from app.tenancy.models import Client

    with app.app_context():
        return [db.session.get(Client, client_id).path for client_id in client_ids]


def test_require_user_visible_follows_the_subtree(app, master, tree_with_users):
    from app.errors import NotFound
    from app.users import service

    users = tree_with_users["users"]
    root_path, left_path, right_path = _paths(app, master.client_id, tree_with_users["left"], tree_with_users["right"])
    with app.app_context():
        for user in users.values():
            assert service.require_user_visible(user["user_id"], root_path).did == user["did"]
        assert service.require_user_visible(users["left"]["user_id"], left_path).id == users["left"]["user_id"]
        for name, path in [("left", right_path), ("right", left_path), ("root", left_path)]:
            with pytest.raises(NotFound):
                service.require_user_visible(users[name]["user_id"], path)
        with pytest.raises(NotFound):
            service.require_user_visible(2_000_000_000, root_path)


def test_lookups_stay_within_the_tree(app, master, other_master, tree_with_users):
    from app.users import service

    left_user = tree_with_users["users"]["left"]
    with app.app_context():
        assert service.get_user_in_tree(left_user["user_id"], master.client_id).did == left_user["did"]
        assert service.get_user_in_tree(left_user["user_id"], other_master.client_id) is None
        assert service.find_user_by_email(master.client_id, " LEFT@ex.org ").id == left_user["user_id"]
        assert service.find_user_by_email(other_master.client_id, "left@ex.org") is None
        assert service.find_user_by_did(left_user["did"]).id == left_user["user_id"]
        assert service.find_user_by_did("did:tessera:" + "0" * 40) is None


def test_user_did_document(app, tree_with_users):
    from app.users import service

    did = tree_with_users["users"]["root"]["did"]
    with app.app_context():
        assert service.user_did_document(did) == {"@context": ["https://www.w3.org/ns/did/v1"], "id": did}
        assert service.user_did_document("did:tessera:" + "f" * 40) is None


def test_read_a_user_over_http_within_the_acting_subtree(client, master, other_master, tree_with_users):
    users = tree_with_users["users"]
    left_user = users["left"]
    response = client.get(f"/v1/user/{left_user['user_id']}", headers=master.headers)
    assert response.status_code == 200
    assert response.get_json() == {"data": left_user}
    in_right = {**master.headers, "x-api-subclient-id": str(tree_with_users["right"])}
    assert_problem(client.get(f"/v1/user/{left_user['user_id']}", headers=in_right), 404)
    assert_problem(client.get(f"/v1/user/{users['root']['user_id']}", headers=in_right), 404)
    assert_problem(client.get(f"/v1/user/{left_user['user_id']}", headers=other_master.headers), 404)
    for bad in ("0", "-1", "abc", "2147483648"):
        assert_problem(client.get(f"/v1/user/{bad}", headers=master.headers), 422, "user_id")
    assert_problem(client.get("/v1/user/2147483647", headers=master.headers), 404)
