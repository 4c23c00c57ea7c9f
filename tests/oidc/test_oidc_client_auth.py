"""client_credentials grant and client authentication methods (RFC 7523 assertions, per-client method)."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey

from tests.support.config import set_settings, setting_of
from tests.support.oidc import make_tenant
from tests.support.servers import serve_on_loopback

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
KEYS_UNAVAILABLE = "The client's keys could not be obtained from its jwks_uri."


@pytest.fixture
def configure(client, tenant):
    """Change the tenant's own OpenID settings through the sub-client API (a master may update itself)."""

    def put(**members):
        response = client.put(f"/v1/sub_client/{tenant.client_id}", json=members, headers=tenant.headers)
        assert response.status_code == 200, response.get_json()
        return response.get_json()["data"]

    return put


def _claims(token: str) -> dict:
    import base64

    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


@pytest.fixture
def issuer(app) -> str:
    return setting_of(app, "OIDC_ISSUER")


def _assertion(
    audience: str, client_id: int, key, alg: str, *, jti: str | None = None, lifetime: int = 60, kid: str | None = None
) -> str:
    now = int(time.time())
    header = {"alg": alg, **({"kid": kid} if kid else {})}
    claims = {
        "iss": str(client_id),
        "sub": str(client_id),
        "aud": audience,
        "iat": now,
        "exp": now + lifetime,
        "jti": jti or uuid.uuid4().hex,
    }
    return jwt.encode(header, claims, key, algorithms=[alg])


def _with_assertion(http, assertion: str, **extra):
    return http.post(
        "/v1/openidc/token",
        data={
            "grant_type": "client_credentials",
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": assertion,
            **extra,
        },
    )


def _client_credentials(http, tenant, **extra):
    return http.post(
        "/v1/openidc/token",
        data={"grant_type": "client_credentials", **extra},
        auth=(str(tenant.client_id), tenant.client_secret),
    )


def test_client_credentials_token_has_the_client_as_subject(client, tenant, configure):
    settings = configure(
        grant_types=["client_credentials"], client_credentials_scopes=["reports:read", "reports:write"]
    )
    assert settings["client_credentials_scopes"] == ["reports:read", "reports:write"]
    response = _client_credentials(client, tenant, scope="reports:read")
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["scope"] == "reports:read" and "id_token" not in body and "refresh_token" not in body
    claims = _claims(body["access_token"])
    # RFC 9068 §2.2: a client's own token has a subject no user's id can equal.
    assert claims["sub"] == f"client:{tenant.client_id}" and claims["client_id"] == str(tenant.client_id)
    assert "user_id" not in claims
    introspected = client.post(
        "/v1/openidc/introspect",
        data={"token": body["access_token"]},
        auth=(str(tenant.client_id), tenant.client_secret),
    ).get_json()
    assert introspected["active"] is True and introspected["sub"] == f"client:{tenant.client_id}"
    assert introspected["subject_type"] == "client" and "user_id" not in introspected
    # A machine token serves no user.
    userinfo = client.get("/v1/openidc/user", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert userinfo.status_code == 401
    everything = _client_credentials(client, tenant).get_json()
    assert everything["scope"] == "reports:read reports:write"
    refused = _client_credentials(client, tenant, scope="reports:delete")
    assert refused.status_code == 400 and refused.get_json()["error"] == "invalid_scope"


def test_client_credentials_needs_client_authentication(client, tenant):
    response = client.post(
        "/v1/openidc/token", data={"grant_type": "client_credentials", "client_id": str(tenant.client_id)}
    )
    assert response.status_code == 401 and response.get_json()["error"] == "invalid_client"


def test_client_secret_jwt_once_per_jti_and_only_that_method(client, tenant, configure, issuer):
    configure(
        token_endpoint_auth_method="client_secret_jwt",
        grant_types=["client_credentials"],
        client_credentials_scopes=["reports:read"],
    )
    key = OctKey.import_key(tenant.client_secret.encode())
    assertion = _assertion(issuer, tenant.client_id, key, "HS256")
    first = _with_assertion(client, assertion)
    assert first.status_code == 200, first.get_json()
    replay = _with_assertion(client, assertion)
    assert replay.status_code == 401 and replay.get_json()["error"] == "invalid_client"
    assert "already used" in replay.get_json()["error_description"]
    # The client chose client_secret_jwt: the bare secret no longer authenticates it.
    assert _client_credentials(client, tenant).status_code == 401
    wrong = _assertion(issuer, tenant.client_id, OctKey.import_key(b"not-the-secret-" * 3), "HS256")
    assert _with_assertion(client, wrong).status_code == 401
    stranger = _assertion("https://elsewhere.example", tenant.client_id, key, "HS256")
    assert _with_assertion(client, stranger).status_code == 401
    long_lived = _assertion(issuer, tenant.client_id, key, "HS256", lifetime=3600)
    assert _with_assertion(client, long_lived).status_code == 401


def test_private_key_jwt_with_registered_jwks(client, tenant, configure, issuer):
    key = ECKey.generate_key("P-256", private=True)
    kid = key.thumbprint()
    public = {**key.as_dict(private=False), "kid": kid, "alg": "ES256", "use": "sig"}
    private_member = client.put(
        f"/v1/sub_client/{tenant.client_id}",
        headers=tenant.headers,
        json={"jwks": {"keys": [{**key.as_dict(private=True), "kid": kid}]}},
    )
    assert private_member.status_code == 422
    configure(
        token_endpoint_auth_method="private_key_jwt",
        jwks={"keys": [public]},
        grant_types=["client_credentials"],
        client_credentials_scopes=["reports:read"],
    )
    assertion = _assertion(issuer, tenant.client_id, key, "ES256", kid=kid)
    response = _with_assertion(client, assertion)
    assert response.status_code == 200, response.get_json()
    assert _with_assertion(client, assertion).status_code == 401  # jti replay
    other = ECKey.generate_key("P-256", private=True)
    forged = _assertion(issuer, tenant.client_id, other, "ES256", kid=kid)
    assert _with_assertion(client, forged).status_code == 401
    # The assertion names the client; a different client_id alongside it is refused.
    mismatched = _with_assertion(client, _assertion(issuer, tenant.client_id, key, "ES256", kid=kid), client_id="999")
    assert mismatched.status_code == 401


@pytest.fixture
def jwks_server():
    """A client's jwks_uri on loopback."""
    served: dict = {"keys": []}
    hits: list[str] = []

    def answer(_method: str, path: str, _body: bytes) -> tuple[str, bytes]:
        hits.append(path)
        return "application/json", json.dumps(served).encode()

    server = serve_on_loopback(answer)
    yield server.server_port, served, hits
    server.shutdown()


def test_private_key_jwt_with_jwks_uri_through_the_outbound_guard(app, client, jwks_server, issuer):
    port, served, hits = jwks_server
    tenant = make_tenant(app, client, name="Keys by URI")
    key = ECKey.generate_key("P-256", private=True)
    kid = key.thumbprint()
    served["keys"] = [{**key.as_dict(private=False), "kid": kid, "alg": "ES256"}]
    uri = f"http://127.0.0.1:{port}/jwks.json"
    response = client.put(
        f"/v1/sub_client/{tenant.client_id}",
        headers=tenant.headers,
        json={
            "token_endpoint_auth_method": "private_key_jwt",
            "jwks_uri": uri,
            "grant_types": ["client_credentials"],
            "client_credentials_scopes": ["a"],
        },
    )
    assert response.status_code == 200, response.get_json()

    # Loopback is not a public address: the guard refuses it unless allow-listed.
    refused = _with_assertion(client, _assertion(issuer, tenant.client_id, key, "ES256", kid=kid))
    assert refused.get_json() == {"error": "invalid_client", "error_description": KEYS_UNAVAILABLE}
    assert refused.status_code == 401 and hits == []

    set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS=f"127.0.0.1:{port}")
    try:
        accepted = _with_assertion(client, _assertion(issuer, tenant.client_id, key, "ES256", kid=kid))
        assert accepted.status_code == 200, accepted.get_json()
        assert hits == ["/jwks.json"]
        again = _with_assertion(client, _assertion(issuer, tenant.client_id, key, "ES256", kid=kid))
        assert again.status_code == 200 and hits == ["/jwks.json"]  # cached
    finally:
        set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS="")


def test_discovery_advertises_the_grants_and_methods(client):
    meta = client.get("/.well-known/openid-configuration").get_json()
    assert meta["grant_types_supported"] == [
        "authorization_code",
        "refresh_token",
        "client_credentials",
        "urn:ietf:params:oauth:grant-type:device_code",
    ]
    assert meta["token_endpoint_auth_methods_supported"] == [
        "client_secret_basic",
        "client_secret_post",
        "client_secret_jwt",
        "private_key_jwt",
    ]
    assert "offline_access" in meta["scopes_supported"]
    assert "sid" in meta["claims_supported"]


def test_an_oversized_jwks_document_is_refused(app, client, jwks_server, issuer):
    port, served, hits = jwks_server
    tenant = make_tenant(app, client, name="Huge keys")
    key = ECKey.generate_key("P-256", private=True)
    served.update({"keys": [{**key.as_dict(private=False), "kid": "k", "alg": "ES256"}], "pad": "x" * 300_000})
    response = client.put(
        f"/v1/sub_client/{tenant.client_id}",
        headers=tenant.headers,
        json={
            "token_endpoint_auth_method": "private_key_jwt",
            "jwks_uri": f"http://127.0.0.1:{port}/big.json",
        },
    )
    assert response.status_code == 200
    set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS=f"127.0.0.1:{port}")
    try:
        refused = _with_assertion(client, _assertion(issuer, tenant.client_id, key, "ES256", kid="k"))
    finally:
        set_settings(app, OIDC_OUTBOUND_ALLOW_HOSTS="")
    # The caller learns nothing about what the remote answered (its size, status or body): the log does.
    assert refused.get_json() == {"error": "invalid_client", "error_description": KEYS_UNAVAILABLE}
    assert refused.status_code == 401 and hits == ["/big.json"]


@pytest.mark.parametrize("alg", ["RS256", "PS256"])
def test_private_key_jwt_with_an_rsa_key(client, tenant, configure, issuer, alg):
    from joserfc.jwk import RSAKey

    key = RSAKey.generate_key(2048, private=True)
    public = {**key.as_dict(private=False), "kid": "rsa-1"}
    configure(
        token_endpoint_auth_method="private_key_jwt",
        jwks={"keys": [public]},
        grant_types=["client_credentials"],
        client_credentials_scopes=["reports:read"],
    )
    response = _with_assertion(client, _assertion(issuer, tenant.client_id, key, alg, kid="rsa-1"))
    assert response.status_code == 200, response.get_json()


def test_concurrent_uses_of_one_assertion_exactly_one_wins(app, client, live_server):
    import requests

    tenant = make_tenant(app, client, name="Racing assertions")
    response = client.put(
        f"/v1/sub_client/{tenant.client_id}",
        headers=tenant.headers,
        json={
            "token_endpoint_auth_method": "client_secret_jwt",
            "grant_types": ["client_credentials"],
            "client_credentials_scopes": ["a"],
        },
    )
    assert response.status_code == 200
    assertion = _assertion(live_server.url, tenant.client_id, OctKey.import_key(tenant.client_secret.encode()), "HS256")
    count = 8
    barrier = threading.Barrier(count)
    statuses: list[int] = []

    def attempt() -> None:
        barrier.wait()
        answer = requests.post(
            live_server.url + "/v1/openidc/token",
            timeout=30,
            data={
                "grant_type": "client_credentials",
                "client_assertion_type": ASSERTION_TYPE,
                "client_assertion": assertion,
            },
        )
        statuses.append(answer.status_code)

    threads = [threading.Thread(target=attempt) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] + [401] * (count - 1)
