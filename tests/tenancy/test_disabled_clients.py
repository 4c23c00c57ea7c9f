"""A disabled client (or one under a disabled ancestor) is absent to the API: 404 to act in, 401 to its tokens."""

from __future__ import annotations

from sqlalchemy import func, select

from tests.support.tenancy import assert_problem, count_clients, create_sub_client, token_for

SUBCLIENT = "x-api-subclient-id"


def _rows(app, root_id: int) -> dict[str, int]:
    """How many clients, API tokens and users the tree rooted at `root_id` holds."""
    from app.extensions import db
    from app.tenancy.models import ApiToken, Client
    from app.users.models import User

    with app.app_context():
        in_tree = select(Client.id).where(Client.root_id == root_id)
        tokens = select(func.count()).select_from(ApiToken).where(ApiToken.client_id.in_(in_tree))
        users = select(func.count()).select_from(User).where(User.root_client_id == root_id)
        counts = {"tokens": db.session.scalar(tokens), "users": db.session.scalar(users)}
        db.session.rollback()
    return {"clients": count_clients(app, root_id), **counts}


def _disable(app, client_id: int) -> None:
    result = app.test_cli_runner().invoke(args=["clients", "disable", str(client_id)])
    assert result.exit_code == 0, result.output


def _acting_requests(client, headers: dict, node_id: int) -> dict:
    """Every management request acting in `node_id`, with the master's token."""
    acting = {**headers, SUBCLIENT: str(node_id)}
    return {
        "create sub-client": client.post("/v1/sub_client", json={"name": "Grandchild"}, headers=acting),
        "issue token": client.post("/v1/api_tokens", json={"name": "sneaky"}, headers=acting),
        "create user": client.post(
            "/v1/user/create", json={"profile": {"email_address": "late@example.org"}}, headers=acting
        ),
        "list children": client.get("/v1/sub_client", headers=acting),
        "list tokens": client.get("/v1/api_tokens", headers=acting),
        "read": client.get(f"/v1/sub_client/{node_id}", headers=headers),
        "update": client.put(f"/v1/sub_client/{node_id}", json={"name": "Renamed"}, headers=headers),
        "rotate secret": client.post(f"/v1/sub_client/{node_id}/client_secret", headers=headers),
    }


def test_a_disabled_sub_client_is_absent_to_its_master_and_its_tokens_fail(app, client, master):
    child = create_sub_client(client, master.headers, name="Child")["client_id"]
    sibling = create_sub_client(client, master.headers, name="Sibling")["client_id"]
    child_token = token_for(client, master.headers, child)
    _disable(app, child)
    before = _rows(app, master.client_id)

    for name, response in _acting_requests(client, master.headers, child).items():
        assert response.status_code == 404, (name, response.get_data(as_text=True))
        assert_problem(response, 404)
    assert _rows(app, master.client_id) == before

    assert_problem(client.get("/v1/sub_client", headers={"x-api-token": child_token}), 401)
    listed = client.get("/v1/sub_client", headers=master.headers)
    assert listed.status_code == 200
    assert [row["client_id"] for row in listed.get_json()["data"]] == [sibling]
    assert client.get(f"/v1/sub_client/{sibling}", headers=master.headers).status_code == 200


def test_a_node_under_a_disabled_ancestor_is_absent_too(app, client, master):
    from app.db import transaction, utcnow
    from app.extensions import db
    from app.tenancy.models import Client

    child = create_sub_client(client, master.headers, name="Child")["client_id"]
    grandchild = create_sub_client(client, {**master.headers, SUBCLIENT: str(child)}, name="Grandchild")
    grandchild_token = token_for(client, master.headers, grandchild["client_id"])
    assert client.get("/v1/sub_client", headers={"x-api-token": grandchild_token}).status_code == 200
    # Only the child's row is marked, as rows made under a disabled node before it was refused are.
    with app.app_context(), transaction():
        db.session.get(Client, child).disabled_at = utcnow()
    before = _rows(app, master.client_id)

    for name, response in _acting_requests(client, master.headers, grandchild["client_id"]).items():
        assert response.status_code == 404, (name, response.get_data(as_text=True))
    assert _rows(app, master.client_id) == before
    assert_problem(client.get("/v1/sub_client", headers={"x-api-token": grandchild_token}), 401)
