"""A standard OpenID client library (Authlib) as relying party, over real HTTP to a live server."""

from __future__ import annotations

import base64
import json
import time
import warnings

import pytest
import requests
from authlib.common.security import generate_token
from authlib.deprecate import AuthlibDeprecationWarning
from authlib.integrations.requests_client import OAuth2Session
from authlib.oidc.core import CodeIDToken

from tests.support.oidc import make_tenant, sign_in_over_http

# authlib.deprecate adds an "always" filter for its warning when first imported (above, so outside
# this block); the filter set here comes first and silences it.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", AuthlibDeprecationWarning)
    from authlib.jose import JsonWebKey, jwt


def _discover(base_url: str) -> dict:
    response = requests.get(base_url + "/.well-known/openid-configuration", timeout=10)
    assert response.status_code == 200
    return response.json()


def _validate_id_token(id_token: str, *, meta: dict, client_id: str, nonce: str, access_token: str) -> dict:
    jwks = requests.get(meta["jwks_uri"], timeout=10).json()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        claims = jwt.decode(
            id_token,
            JsonWebKey.import_key_set(jwks),
            claims_cls=CodeIDToken,
            claims_options={
                "iss": {"essential": True, "value": meta["issuer"]},
                "aud": {"essential": True, "value": client_id},
            },
            claims_params={"nonce": nonce, "client_id": client_id, "access_token": access_token},
        )
        claims.validate(leeway=5)  # iss, aud, exp, iat, nonce, at_hash, auth_time
    assert claims.header["kid"] in {key["kid"] for key in jwks["keys"]}
    return dict(claims)


@pytest.mark.parametrize("signing_alg", ["RS256", "ES256", "EdDSA"])
def test_authlib_relying_party_full_flow(app, client, live_server, callback_server, signing_alg):
    redirect_uri = callback_server.url + "/callback"
    tenant = make_tenant(app, client, redirect_uris=[redirect_uri], signing_alg=signing_alg)
    meta = _discover(live_server.url)
    assert meta["issuer"] == live_server.url
    assert "S256" in meta["code_challenge_methods_supported"]
    assert {"RS256", "ES256"} <= set(meta["id_token_signing_alg_values_supported"])

    rp = OAuth2Session(
        str(tenant.client_id),
        tenant.client_secret,
        scope="openid profile email app_claims",
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
        token_endpoint_auth_method="client_secret_basic",
    )
    nonce, verifier = generate_token(20), generate_token(48)
    authorization_url, state = rp.create_authorization_url(
        meta["authorization_endpoint"], nonce=nonce, code_verifier=verifier
    )
    browser = requests.Session()
    callback = sign_in_over_http(browser, live_server.url, authorization_url, tenant.email)
    assert callback.startswith(redirect_uri)

    token = rp.fetch_token(meta["token_endpoint"], authorization_response=callback, code_verifier=verifier, state=state)
    assert token["token_type"] == "Bearer"
    assert token["expire_in"] == token["expires_in"] == 3600
    assert token["scope"] == "openid profile email app_claims"

    claims = _validate_id_token(
        token["id_token"], meta=meta, client_id=str(tenant.client_id), nonce=nonce, access_token=token["access_token"]
    )
    assert claims["sub"] == str(tenant.user_id)
    assert claims["user_id"] == tenant.user_id
    assert claims["did"] == tenant.did
    assert claims["edu_username"] == tenant.profile["user_name"]
    assert abs(claims["auth_time"] - time.time()) < 120
    header = jwt_header(token["id_token"])
    assert header["alg"] == signing_alg

    access_header = jwt_header(token["access_token"])
    assert access_header["typ"] == "at+jwt" and access_header["alg"] == signing_alg

    info = rp.get(meta["userinfo_endpoint"])
    assert info.status_code == 200
    document = info.json()
    assert document["sub"] == str(tenant.user_id)
    assert document["email"] == tenant.email and document["email_verified"] is True
    assert document["given_name"] == "Ada" and document["family_name"] == "Lovelace"
    assert document["did"] == tenant.did

    posted = requests.post(
        meta["userinfo_endpoint"], headers={"Authorization": f"Bearer {token['access_token']}"}, timeout=10
    )
    assert posted.status_code == 200 and posted.json()["sub"] == str(tenant.user_id)


def test_authlib_client_secret_post_and_single_sign_on(app, client, live_server, callback_server):
    redirect_uri = callback_server.url + "/callback"
    tenant = make_tenant(app, client, redirect_uris=[redirect_uri])
    meta = _discover(live_server.url)
    rp = OAuth2Session(
        str(tenant.client_id),
        tenant.client_secret,
        scope="openid",
        redirect_uri=redirect_uri,
        token_endpoint_auth_method="client_secret_post",
    )
    browser = requests.Session()
    nonce = generate_token(20)
    url, _ = rp.create_authorization_url(meta["authorization_endpoint"], nonce=nonce)
    token = rp.fetch_token(
        meta["token_endpoint"], authorization_response=sign_in_over_http(browser, live_server.url, url, tenant.email)
    )
    _validate_id_token(
        token["id_token"], meta=meta, client_id=str(tenant.client_id), nonce=nonce, access_token=token["access_token"]
    )
    assert token["scope"] == "openid"

    # Signed in and consented: the next authorization goes straight back with a code.
    url, _ = rp.create_authorization_url(meta["authorization_endpoint"], nonce=generate_token(20))
    response = browser.get(url, allow_redirects=False, timeout=10)
    assert response.status_code == 302 and response.headers["Location"].startswith(redirect_uri + "?code=")
    assert rp.fetch_token(meta["token_endpoint"], authorization_response=response.headers["Location"])["id_token"]


def jwt_header(token: str) -> dict:
    segment = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
