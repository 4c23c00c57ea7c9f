"""Answers a client written against the interface can rely on: 401 challenges, 413 limits, OAuth 415."""

from __future__ import annotations

import logging
import re

import pytest


def _api_token_operations(spec: dict) -> list[tuple[str, str]]:
    """Operations whose only authentication is x-api-token."""
    operations = []
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            # Operations that also take a Bearer access token (e.g. /credentials/derive) answer it as one.
            if method in {"get", "post", "put", "patch", "delete"} and operation.get("security") == [{"ApiToken": []}]:
                operations.append((method, re.sub(r"\{[^}]+\}", "1", path)))
    return operations


def test_a_bearer_token_on_an_x_api_token_route_gets_a_challenge(app, client):
    operations = _api_token_operations(client.get("/openapi.json").get_json())
    assert len(operations) > 10
    for method, path in operations:
        answer = client.open(path, method=method.upper(), json={}, headers={"Authorization": "Bearer abc.def.ghi"})
        assert answer.status_code == 401, (method, path, answer.status_code)
        assert answer.headers["WWW-Authenticate"] == 'ApiToken realm="tessera"', (method, path)
        assert answer.mimetype == "application/problem+json"
        assert "x-api-token" in answer.get_json()["detail"]
        assert "bearer" in answer.get_json()["detail"].lower(), "it says why the bearer token was not taken"


def test_413_states_the_limit(app, client, master):
    limit = app.config["MAX_CONTENT_LENGTH"]
    answer = client.post(
        "/v1/sub_client",
        data=b'{"name": "' + b"x" * limit + b'"}',
        headers={**master.headers, "Content-Type": "application/json"},
    )
    assert answer.status_code == 413
    problem = answer.get_json()
    assert problem["limit"] == limit
    assert f"{limit} bytes" in problem["detail"]


@pytest.mark.parametrize("path", ["/v1/openidc/token", "/v1/openidc/revoke", "/v1/openidc/introspect"])
def test_token_endpoint_415_is_an_oauth_error(client, path):
    answer = client.post(path, data="grant_type=authorization_code", headers={"Content-Type": "text/plain"})
    assert answer.status_code == 415
    assert answer.mimetype == "application/json"
    body = answer.get_json()
    assert body["error"] == "invalid_request"
    assert "application/x-www-form-urlencoded" in body["error_description"]
    assert answer.headers["Cache-Control"] == "no-store"


def test_token_endpoint_413_is_an_oauth_error_stating_the_limit(app, client, caplog):
    limit = app.config["MAX_CONTENT_LENGTH"]
    with caplog.at_level(logging.ERROR):
        answer = client.post(
            "/v1/openidc/token",
            data="code=" + "x" * limit,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
    assert answer.status_code == 413
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]  # the limiter's key too
    body = answer.get_json()
    assert body["error"] == "invalid_request" and f"{limit} bytes" in body["error_description"]
