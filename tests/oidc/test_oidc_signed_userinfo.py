"""Signed userinfo (OpenID Core §5.3.2): a client registered with `userinfo_signed_response_alg`
(set by the operator's `clients set-userinfo-signing`) gets its userinfo as a JWT signed with it,
verifiable with the published keys, with `iss` and `aud`; others get JSON; the operator may turn it
off, and discovery says what is on."""

from __future__ import annotations

import json

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from tests.support.config import change_settings
from tests.support.oidc import exchange, sign_in


def _set_userinfo_signing(app, client_id: int, alg: str):
    return app.test_cli_runner().invoke(args=["clients", "set-userinfo-signing", str(client_id), "--alg", alg])


def _access_token(client, tenant) -> str:
    response = exchange(client, tenant, sign_in(client, tenant, scope="openid email")["code"])
    assert response.status_code == 200, response.get_json()
    return response.get_json()["access_token"]


def _userinfo(client, token: str):
    return client.get("/v1/openidc/user", headers={"Authorization": f"Bearer {token}"})


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
def test_a_client_with_a_registered_alg_gets_signed_userinfo(app, client, tenant, alg):
    result = _set_userinfo_signing(app, tenant.client_id, alg)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"client_id": tenant.client_id, "userinfo_signed_response_alg": alg}
    token = _access_token(client, tenant)
    answer = _userinfo(client, token)
    assert answer.status_code == 200
    assert answer.mimetype == "application/jwt" and answer.headers["Cache-Control"] == "no-store"
    keys = KeySet.import_key_set(client.get("/certs/jwks.json").get_json())
    claims = jwt.decode(answer.get_data(as_text=True), keys, algorithms=[alg]).claims
    issuer = client.get("/.well-known/openid-configuration").get_json()["issuer"]
    assert claims["iss"] == issuer and claims["aud"] == str(tenant.client_id)
    assert claims["sub"] == str(tenant.user_id) and claims["user_id"] == tenant.user_id
    assert claims["email"] == tenant.email
    unsigned = _set_userinfo_signing(app, tenant.client_id, "json")
    assert json.loads(unsigned.output)["userinfo_signed_response_alg"] is None
    plain = _userinfo(client, token)
    assert plain.mimetype == "application/json" and plain.get_json()["user_id"] == tenant.user_id


def test_an_unknown_alg_or_client_is_refused_by_the_command(app, tenant):
    assert _set_userinfo_signing(app, tenant.client_id, "HS256").exit_code == 2
    assert _set_userinfo_signing(app, 999999999, "RS256").exit_code != 0


def test_a_client_without_one_gets_json(client, tenant):
    answer = _userinfo(client, _access_token(client, tenant))
    assert answer.mimetype == "application/json" and answer.get_json()["sub"] == str(tenant.user_id)


def test_the_operator_turns_signed_userinfo_off_and_discovery_says_so(app, client, tenant, monkeypatch):
    document = client.get("/.well-known/openid-configuration").get_json()
    assert document["userinfo_signing_alg_values_supported"] == ["RS256", "ES256", "EdDSA"]
    _set_userinfo_signing(app, tenant.client_id, "ES256")
    change_settings(monkeypatch, app, OIDC_SIGNED_USERINFO_ENABLED=False)
    assert "userinfo_signing_alg_values_supported" not in client.get("/.well-known/openid-configuration").get_json()
    answer = _userinfo(client, _access_token(client, tenant))
    assert answer.mimetype == "application/json" and answer.get_json()["user_id"] == tenant.user_id
