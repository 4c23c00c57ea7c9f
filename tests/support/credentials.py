"""HTTP helpers of the credential tests shared across features (credentials, issuer)."""

from __future__ import annotations

import time

from tests.support.oidc import exchange, sign_in


def wait_for_verification(client, headers, cid: str, timeout: float = 20.0) -> dict:
    """The record once its verification is no longer pending."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(f"/v1/vc/issuer/credentials/{cid}", headers=headers)
        assert response.status_code == 200, response.get_data(as_text=True)
        data = response.json["data"]
        if data["verification"]["state"] != "pending":
            return data
        assert time.monotonic() < deadline, f"verification of {cid} still pending"
        time.sleep(0.05)


def to_the_view(client, path: str, **kwargs):
    """The view's answer to a POST: sent with a cookie, which the paths answered before dispatch leave alone."""
    client.set_cookie("unrelated", "1")
    try:
        return client.post(path, **kwargs)
    finally:
        client.delete_cookie("unrelated")


def access_token(client, tenant, scope: str = "openid") -> str:
    """An OpenID access token for a user of `tenant`, as a client of the interface asks for it
    (`scope=openid`: after consent it reads the user's credentials)."""
    code = sign_in(client, tenant, scope=scope)["code"]
    response = exchange(client, tenant, code)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.json["access_token"]


def listed_credentials(client, token: str) -> list[dict]:
    """The credentials the access token's user sees (`/v1/openidc/credentials`)."""
    response = client.get("/v1/openidc/credentials", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers["Cache-Control"] == "no-store"
    return response.json["data"]


def wait_for_state(client, headers, cid: str, state: str, timeout: float = 20.0) -> dict:
    """The stored credential once its verification reached `state`."""
    deadline = time.monotonic() + timeout
    while True:
        record = wait_for_verification(client, headers, cid, timeout)
        if record["verification"]["state"] == state:
            return record
        assert time.monotonic() < deadline, record
        time.sleep(0.05)
