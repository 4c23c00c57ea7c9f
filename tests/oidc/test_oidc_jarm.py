"""JARM (JWT Secured Authorization Response Mode) through the hosted pages: `response_mode` `jwt`,
`query.jwt` and `fragment.jwt` carry the code (or an error) as one JWT signed for the client with its
`authorization_signed_response_alg` (RS256 until `clients set-authorization-signing`), verifiable
with the published keys; the operator may turn JARM off, and discovery says what is on."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, urlsplit

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from tests.support.config import change_settings
from tests.support.oidc import authorize_query, exchange, query_of, sign_in


def _response_claims(http, response: str, alg: str = "RS256") -> dict:
    header = json.loads(base64.urlsafe_b64decode(response.split(".")[0] + "=="))
    assert header["alg"] == alg
    keys = KeySet.import_key_set(http.get("/certs/jwks.json").get_json())
    return jwt.decode(response, keys, algorithms=[alg]).claims


def _issuer(http) -> str:
    return http.get("/.well-known/openid-configuration").get_json()["issuer"]


@pytest.mark.parametrize("mode", ["jwt", "query.jwt"])
def test_a_code_comes_back_as_a_signed_response_in_the_query(client, tenant, mode):
    returned = sign_in(client, tenant, response_mode=mode, state="s-1")
    assert set(returned) == {"response"}
    claims = _response_claims(client, returned["response"])
    assert claims["iss"] == _issuer(client) and claims["aud"] == str(tenant.client_id)
    assert claims["state"] == "s-1" and claims["exp"] > claims["iat"]
    assert exchange(client, tenant, claims["code"]).status_code == 200


def test_fragment_jwt_puts_the_response_in_the_fragment(client, tenant):
    sign_in(client, tenant)  # signed in and consented: the next request comes straight back
    answer = client.get(authorize_query(tenant, response_mode="fragment.jwt", state="s-2"))
    assert answer.status_code == 302
    location = urlsplit(answer.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == tenant.redirect_uri and not location.query
    claims = _response_claims(client, parse_qs(location.fragment)["response"][0])
    assert claims["state"] == "s-2" and claims["aud"] == str(tenant.client_id)
    assert exchange(client, tenant, claims["code"]).status_code == 200


def test_errors_are_wrapped_too(client, tenant):
    refused = client.get(authorize_query(tenant, response_mode="query.jwt", prompt="create", state="s-3"))
    assert refused.status_code == 302
    claims = _response_claims(client, query_of(refused.headers["Location"])["response"])
    assert claims["error"] == "invalid_request" and claims["state"] == "s-3"
    assert claims["aud"] == str(tenant.client_id)
    denied = sign_in(client, tenant, consent="deny", response_mode="jwt")
    assert _response_claims(client, denied["response"])["error"] == "access_denied"


def test_the_client_chooses_the_algorithm(app, client, tenant):
    result = app.test_cli_runner().invoke(
        args=["clients", "set-authorization-signing", str(tenant.client_id), "--alg", "ES256"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"client_id": tenant.client_id, "authorization_signed_response_alg": "ES256"}
    claims = _response_claims(client, sign_in(client, tenant, response_mode="jwt")["response"], alg="ES256")
    assert exchange(client, tenant, claims["code"]).status_code == 200


def test_the_operator_turns_jarm_off_and_discovery_says_so(app, client, tenant, monkeypatch):
    document = client.get("/.well-known/openid-configuration").get_json()
    assert document["response_modes_supported"] == ["query", "jwt", "query.jwt", "fragment.jwt"]
    assert document["authorization_signing_alg_values_supported"] == ["RS256", "ES256", "EdDSA"]
    change_settings(monkeypatch, app, OIDC_JARM_ENABLED=False)
    document = client.get("/.well-known/openid-configuration").get_json()
    assert document["response_modes_supported"] == ["query"]
    assert "authorization_signing_alg_values_supported" not in document
    refused = client.get(authorize_query(tenant, response_mode="jwt"))
    assert query_of(refused.headers["Location"])["error"] == "invalid_request"
