"""Helpers for tenancy tests: master clients, HTTP shortcuts and direct row counts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask

from tests.support import problems
from tests.support.rows import row_count


@dataclass
class MasterClient:
    client_id: int
    client_secret: str
    api_token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"x-api-token": self.api_token}


def make_master(app: Flask, name: str = "Test organisation", **kwargs: Any) -> MasterClient:
    """A new master client (the root of a tenant tree) with an API token, made through the service."""
    from app.db import transaction
    from app.tenancy import service

    with app.app_context(), transaction():
        created, secret = service.create_master_client(name, **kwargs)
        issued = service.issue_api_token(created.id, name="test")
        return MasterClient(created.id, secret, issued.plaintext)


def create_sub_client(client, headers: dict, expect: int = 201, **fields: Any) -> dict:
    """POST /v1/sub_client and return the sub-client (asserting the status)."""
    body = {"name": "Sub-client", **fields}
    response = client.post("/v1/sub_client", json=body, headers=headers)
    assert response.status_code == expect, response.get_json()
    return response.get_json().get("data", response.get_json())


def token_for(client, master_headers: dict, client_id: int) -> str:
    """Issue an API token for a node of the master's tree through the API."""
    response = client.post(
        "/v1/api_tokens", json={"name": "node token"}, headers={**master_headers, "x-api-subclient-id": str(client_id)}
    )
    assert response.status_code == 201, response.get_json()
    return response.get_json()["data"]["token"]


def count_clients(app, root_id: int) -> int:
    from app.tenancy.models import Client

    return row_count(app, Client, Client.root_id == root_id)


def count_users(app, root_id: int) -> int:
    """How many users the client tree rooted at `root_id` holds."""
    from app.users.models import User

    return row_count(app, User, User.root_client_id == root_id)


def load_client_row(app, client_id: int) -> dict:
    """Every column of a client row, to compare before and after a refused request."""
    from app.extensions import db
    from app.tenancy.models import Client

    with app.app_context():
        row = db.session.get(Client, client_id)
        values = {column.name: getattr(row, column.key) for column in Client.__table__.columns}
        db.session.rollback()
        return values


def assert_problem(response, status: int, field: str | None = None) -> dict:
    """`tests.support.problems.assert_problem` with the field as third argument (tenancy's habit)."""
    return problems.assert_problem(response, status, field=field)


def expected_error_statuses(spec: dict, path: str, method: str) -> set[str]:
    """Problem statuses an operation can answer by what it takes, whatever its own rules.

    A request body can be malformed (400), too large (413), of another media type (415) or
    invalid (422); a security requirement can fail (401); the x-api-subclient-id header can be
    malformed (422) or name a node outside the caller's subtree (404).
    """
    operation = spec["paths"][path][method]
    expected: set[str] = set()
    if "requestBody" in operation:
        expected |= {"400", "413", "415", "422"}
    if any(requirement for requirement in operation.get("security", [])):
        expected.add("401")
    headers = {parameter["name"] for parameter in operation.get("parameters", []) if parameter["in"] == "header"}
    if "x-api-subclient-id" in headers:
        expected |= {"404", "422"}
    return expected


def undocumented_error_statuses(spec: dict, path_prefixes: tuple[str, ...]) -> dict[str, set[str]]:
    """`{"METHOD path": statuses}` of the operations under `path_prefixes` missing expected statuses."""
    missing: dict[str, set[str]] = {}
    for path, operations in spec["paths"].items():
        if not path.startswith(path_prefixes):
            continue
        for method, operation in operations.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            absent = expected_error_statuses(spec, path, method) - set(operation["responses"])
            if absent:
                missing[f"{method.upper()} {path}"] = absent
    return missing
