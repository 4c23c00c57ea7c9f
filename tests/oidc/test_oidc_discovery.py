"""Discovery advertises exactly what the service supports: the whole document compared with a
hand-written expectation, and each advertised (or unadvertised) capability checked at its endpoint."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.support.oidc import authorize_query, query_of

STANDARD_CLAIMS = [
    "address",
    "at_hash",
    "aud",
    "auth_time",
    "birthdate",
    "did",
    "email",
    "email_verified",
    "exp",
    "family_name",
    "gender",
    "given_name",
    "iat",
    "iss",
    "locale",
    "middle_name",
    "name",
    "nonce",
    "phone_number",
    "phone_number_verified",
    "picture",
    "preferred_username",
    "sid",
    "sub",
    "user_id",
]
CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "client_secret_jwt", "private_key_jwt"]
CLIENT_AUTH_ALGS = ["HS256", "RS256", "PS256", "ES256"]


@pytest.fixture
def metadata(client) -> dict:
    response = client.get("/.well-known/openid-configuration")
    assert response.status_code == 200
    return response.get_json()


def test_the_whole_document_is_exactly_what_is_supported(metadata):
    issuer = metadata["issuer"]
    base = f"{urlsplit(issuer).scheme}://{urlsplit(issuer).netloc}"
    assert metadata == {
        "issuer": issuer,
        "authorization_endpoint": f"{base}/v1/openidc/authorize",
        "token_endpoint": f"{base}/v1/openidc/token",
        "userinfo_endpoint": f"{base}/v1/openidc/user",
        "jwks_uri": f"{base}/certs/jwks.json",
        "end_session_endpoint": f"{base}/v1/openidc/logout",
        "revocation_endpoint": f"{base}/v1/openidc/revoke",
        "introspection_endpoint": f"{base}/v1/openidc/introspect",
        "pushed_authorization_request_endpoint": f"{base}/v1/openidc/par",
        "require_pushed_authorization_requests": False,
        "scopes_supported": [
            "openid",
            "profile",
            "email",
            "phone",
            "address",
            "app_claims",
            "credentials",
            "offline_access",
        ],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query", "jwt", "query.jwt", "fragment.jwt"],
        "grant_types_supported": [
            "authorization_code",
            "refresh_token",
            "client_credentials",
            "urn:ietf:params:oauth:grant-type:device_code",
        ],
        "device_authorization_endpoint": f"{base}/v1/openidc/device_authorization",
        "subject_types_supported": ["public", "pairwise"],
        "id_token_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"],
        "token_endpoint_auth_methods_supported": CLIENT_AUTH_METHODS,
        "token_endpoint_auth_signing_alg_values_supported": CLIENT_AUTH_ALGS,
        "revocation_endpoint_auth_methods_supported": CLIENT_AUTH_METHODS,
        "revocation_endpoint_auth_signing_alg_values_supported": CLIENT_AUTH_ALGS,
        "introspection_endpoint_auth_methods_supported": CLIENT_AUTH_METHODS,
        "introspection_endpoint_auth_signing_alg_values_supported": CLIENT_AUTH_ALGS,
        "code_challenge_methods_supported": ["S256"],
        "prompt_values_supported": ["none", "login", "consent", "select_account"],
        "claims_supported": STANDARD_CLAIMS,
        "claims_parameter_supported": True,
        "acr_values_supported": [
            "urn:tessera:acr:email-code",
            "urn:tessera:acr:passkey",
            "urn:tessera:acr:mfa",
            "urn:tessera:acr:linked-account",
        ],
        "backchannel_logout_supported": True,
        "backchannel_logout_session_supported": True,
        "request_parameter_supported": True,
        "request_uri_parameter_supported": False,
        "request_object_signing_alg_values_supported": ["RS256", "PS256", "ES256", "EdDSA"],
        "require_signed_request_object": False,
        "registration_endpoint": f"{base}/v1/openidc/register",
        "authorization_response_iss_parameter_supported": True,
        "ui_locales_supported": ["en"],
        "dpop_signing_alg_values_supported": ["ES256", "ES384", "PS256", "RS256", "EdDSA"],
        "userinfo_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"],
        "authorization_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"],
    }


@pytest.mark.parametrize(
    "grant_type",
    [
        "password",
        "implicit",
        "urn:ietf:params:oauth:grant-type:token-exchange",
    ],
)
def test_grants_not_advertised_are_unsupported(client, tenant, grant_type):
    response = client.post(
        "/v1/openidc/token", data={"grant_type": grant_type}, auth=(str(tenant.client_id), tenant.client_secret)
    )
    assert response.status_code == 400 and response.get_json()["error"] == "unsupported_grant_type"


def test_every_advertised_grant_is_served(client, tenant, metadata):
    for grant_type in metadata["grant_types_supported"]:
        response = client.post(
            "/v1/openidc/token", data={"grant_type": grant_type}, auth=(str(tenant.client_id), tenant.client_secret)
        )
        assert response.get_json().get("error") != "unsupported_grant_type", grant_type


def test_a_client_may_choose_exactly_the_advertised_auth_methods(client, tenant, metadata):
    jwks = {
        "keys": [
            {
                "kty": "EC",
                "crv": "P-256",
                "kid": "k1",
                "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
                "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0",
            }
        ]
    }
    for method in metadata["token_endpoint_auth_methods_supported"]:
        extra = {"jwks": jwks} if method == "private_key_jwt" else {}
        response = client.put(
            f"/v1/sub_client/{tenant.client_id}",
            headers=tenant.headers,
            json={"token_endpoint_auth_method": method, **extra},
        )
        assert response.status_code == 200, (method, response.get_json())
    for method in ("none", "tls_client_auth", "self_signed_tls_client_auth"):
        response = client.put(
            f"/v1/sub_client/{tenant.client_id}", headers=tenant.headers, json={"token_endpoint_auth_method": method}
        )
        assert response.status_code == 422, method


@pytest.mark.parametrize(
    ("parameters", "error"),
    [
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"response_type": "code id_token"}, "unsupported_response_type"),
        ({"response_mode": "fragment"}, "invalid_request"),
        ({"response_mode": "form_post"}, "invalid_request"),
        ({"code_challenge": "x" * 43, "code_challenge_method": "plain"}, "invalid_request"),
        ({"request": "e30.e30."}, "invalid_request_object"),  # an unsigned request object
        ({"prompt": "create"}, "invalid_request"),
    ],
)
def test_authorization_options_not_advertised_are_refused(client, tenant, parameters, error):
    response = client.get(authorize_query(tenant, **parameters))
    assert response.status_code == 302
    assert query_of(response.headers["Location"])["error"] == error


def test_advertised_endpoints_answer(client, metadata):
    for name in ("jwks_uri", "end_session_endpoint"):
        assert client.get(urlsplit(metadata[name]).path).status_code == 200, name
    for name in (
        "token_endpoint",
        "revocation_endpoint",
        "introspection_endpoint",
        "pushed_authorization_request_endpoint",
    ):
        response = client.post(urlsplit(metadata[name]).path, data={"token": "x", "grant_type": "client_credentials"})
        assert response.status_code == 401 and response.get_json()["error"] == "invalid_client", name
    assert client.get(urlsplit(metadata["userinfo_endpoint"]).path).status_code == 401
