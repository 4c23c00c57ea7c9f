"""The JWS algorithms of a client's tokens: RS256 unless it chose ES256 or EdDSA (Ed25519), for its
id_tokens (`signing_alg`) and, apart, its access tokens (`access_token_signed_response_alg`); every
token verifies with the published key set, at the resource endpoints and by a relying party."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet
from sqlalchemy import delete, select

from app import create_app
from app.db import transaction
from app.extensions import db
from app.oidc.keys import invalidate_key_cache
from app.oidc.models import SigningKey
from tests.support.oidc import exchange, make_tenant, sign_in

AT_HASH_DIGESTS = {"RS256": "sha256", "ES256": "sha256", "EdDSA": "sha512"}
KEY_TYPES = {"RS256": ("RSA", None), "ES256": ("EC", "P-256"), "EdDSA": ("OKP", "Ed25519")}


def _header(token: str) -> dict:
    segment = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


def _verified(http, token: str, alg: str) -> dict:
    """The claims of `token` as a relying party sees them: verified with the key set at `/certs/jwks.json`."""
    key_set = KeySet.import_key_set(http.get("/certs/jwks.json").get_json())
    header = _header(token)
    assert header["alg"] == alg
    key = key_set.get_by_kid(header["kid"])
    assert (key.key_type, key.as_dict().get("crv")) == KEY_TYPES[alg] and key.as_dict()["alg"] == alg
    return jwt.decode(token, key, algorithms=[alg]).claims


def _at_hash(access_token: str, alg: str) -> str:
    digest = hashlib.new(AT_HASH_DIGESTS[alg], access_token.encode()).digest()
    return base64.urlsafe_b64encode(digest[: len(digest) // 2]).rstrip(b"=").decode()


def _issued(http, tenant) -> dict:
    response = exchange(http, tenant, sign_in(http, tenant)["code"])
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def _set_signing(app, client_id: int, *options: str) -> dict:
    result = app.test_cli_runner().invoke(args=["clients", "set-signing", str(client_id), *options])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _accepted_at_the_resource_endpoints(http, tenant, access_token: str) -> None:
    userinfo = http.get("/v1/openidc/user", headers={"Authorization": f"Bearer {access_token}"})
    assert userinfo.status_code == 200 and userinfo.get_json()["user_id"] == tenant.user_id
    introspected = http.post(
        "/v1/openidc/introspect",
        data={"token": access_token},
        auth=(str(tenant.client_id), tenant.client_secret),
    ).get_json()
    assert introspected["active"] is True and introspected["user_id"] == tenant.user_id


def test_a_client_left_at_the_default_gets_rs256_tokens(app, client):
    tenant = make_tenant(app, client)
    for _ in range(2):  # the first exchange of a process is the view's, later ones the hot route's
        issued = _issued(client, tenant)
        assert _header(issued["access_token"])["alg"] == _header(issued["id_token"])["alg"] == "RS256"
        _verified(client, issued["access_token"], "RS256")
        assert _verified(client, issued["id_token"], "RS256")["at_hash"] == _at_hash(issued["access_token"], "RS256")
    answer = client.get(f"/v1/sub_client/{tenant.client_id}", headers=tenant.headers).get_json()["data"]
    assert answer["signing_alg"] == "RS256" and "access_token_signed_response_alg" not in answer


@pytest.mark.parametrize(
    ("signing_alg", "access_token_alg"),
    [("ES256", None), ("EdDSA", None), ("RS256", "ES256"), ("RS256", "EdDSA"), ("EdDSA", "ES256")],
)
def test_tokens_are_signed_with_the_clients_algorithms_and_verify_with_the_jwks(
    app, client, signing_alg, access_token_alg
):
    tenant = make_tenant(app, client)
    options = ["--signing-alg", signing_alg]
    if access_token_alg:
        options += ["--access-token-alg", access_token_alg]
    settings = _set_signing(app, tenant.client_id, *options)
    assert settings["access_token_signed_response_alg"] == access_token_alg
    expected_access_alg = access_token_alg or signing_alg
    for _ in range(2):
        issued = _issued(client, tenant)
        access = _verified(client, issued["access_token"], expected_access_alg)
        assert access["client_id"] == str(tenant.client_id) and access["user_id"] == tenant.user_id
        identity = _verified(client, issued["id_token"], signing_alg)
        assert identity["at_hash"] == _at_hash(issued["access_token"], signing_alg)
        _accepted_at_the_resource_endpoints(client, tenant, issued["access_token"])


def test_a_client_credentials_token_is_signed_with_the_access_token_algorithm(app, client):
    tenant = make_tenant(app, client)
    settings = client.put(
        f"/v1/sub_client/{tenant.client_id}",
        json={
            "grant_types": ["client_credentials"],
            "client_credentials_scopes": ["reports:read"],
            "access_token_signed_response_alg": "EdDSA",
        },
        headers=tenant.headers,
    )
    assert settings.status_code == 200, settings.get_json()
    assert settings.get_json()["data"]["access_token_signed_response_alg"] == "EdDSA"
    response = client.post(
        "/v1/openidc/token",
        data={"grant_type": "client_credentials"},
        auth=(str(tenant.client_id), tenant.client_secret),
    )
    assert response.status_code == 200, response.get_json()
    token = response.get_json()["access_token"]
    assert _verified(client, token, "EdDSA")["sub"] == f"client:{tenant.client_id}"
    introspected = client.post(
        "/v1/openidc/introspect", data={"token": token}, auth=(str(tenant.client_id), tenant.client_secret)
    ).get_json()
    assert introspected["active"] is True


def test_the_access_token_algorithm_is_set_and_cleared_through_the_sub_client_api(app, client):
    tenant = make_tenant(app, client)
    path, headers = f"/v1/sub_client/{tenant.client_id}", tenant.headers
    refused = client.put(path, json={"access_token_signed_response_alg": "HS256"}, headers=headers)
    assert refused.status_code == 422 and "access_token_signed_response_alg" in refused.get_json()["errors"]
    changed = client.put(path, json={"access_token_signed_response_alg": "ES256"}, headers=headers)
    assert changed.get_json()["data"]["access_token_signed_response_alg"] == "ES256"
    assert _header(_issued(client, tenant)["access_token"])["alg"] == "ES256"
    cleared = client.put(path, json={"access_token_signed_response_alg": None}, headers=headers).get_json()["data"]
    assert "access_token_signed_response_alg" not in cleared and cleared["signing_alg"] == "RS256"
    assert _header(_issued(client, tenant)["access_token"])["alg"] == "RS256"
    assert _set_signing(app, tenant.client_id, "--access-token-alg", "EdDSA")["access_token_signed_response_alg"] == (
        "EdDSA"
    )
    assert (
        _set_signing(app, tenant.client_id, "--access-token-alg", "as-id-token")["access_token_signed_response_alg"]
        is None
    )


def test_discovery_and_the_jwks_offer_every_algorithm(client):
    meta = client.get("/.well-known/openid-configuration").get_json()
    assert meta["id_token_signing_alg_values_supported"] == ["RS256", "ES256", "EdDSA"]
    keys = client.get("/certs/jwks.json").get_json()["keys"]
    for alg, (key_type, curve) in KEY_TYPES.items():
        published = [key for key in keys if key["alg"] == alg]
        assert len(published) >= 2, f"an active and a next {alg} key"
        for key in published:
            assert key["kty"] == key_type and key.get("crv") == curve and key["use"] == "sig" and key["kid"]
            assert "d" not in key


def test_keys_of_an_algorithm_added_since_are_made_by_the_first_exchange(app, client):
    tenant = make_tenant(app, client)
    with app.app_context(), transaction():
        db.session.execute(delete(SigningKey).where(SigningKey.alg == "EdDSA"))
        invalidate_key_cache()
    # A process started after the upgrade (it has read no key yet): its hot route hands the
    # exchange to the view, whose signing makes the missing keys.
    upgraded = create_app({"TESTING": True})
    issued = exchange(upgraded.test_client(), tenant, sign_in(client, tenant)["code"])
    assert issued.status_code == 200 and _header(issued.get_json()["access_token"])["alg"] == "RS256"
    with app.app_context():
        states = db.session.execute(select(SigningKey.state).where(SigningKey.alg == "EdDSA")).scalars().all()
        db.session.rollback()
    assert sorted(states) == ["active", "next"]
    assert any(key["alg"] == "EdDSA" for key in client.get("/certs/jwks.json").get_json()["keys"])
