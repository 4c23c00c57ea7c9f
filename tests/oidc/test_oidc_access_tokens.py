"""Bearer tokens at the resource endpoints: what is accepted and everything that must be refused;
keys, rotation, revocation and introspection."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import timedelta

import pytest
from joserfc import jwt

from app import create_app
from app.db import transaction, utcnow
from app.extensions import celery, db
from app.oidc import keys
from app.oidc import keys as signing_keys
from app.oidc.keys import generate_key, invalidate_key_cache
from app.oidc.models import KEY_ACTIVE, SigningKey
from tests.support.config import setting_of
from tests.support.oidc import authorize_query, exchange, make_tenant, sign_in


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _segment(value: dict) -> str:
    return _b64(json.dumps(value, separators=(",", ":")).encode())


def _tokens(client, tenant, **authorize_params) -> dict:
    response = exchange(client, tenant, sign_in(client, tenant, **authorize_params)["code"])
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def _claims_of(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _userinfo(client, token: str):
    return client.get("/v1/openidc/user", headers={"Authorization": f"Bearer {token}"})


def _active_key(app, alg: str = "RS256"):
    with app.app_context(), transaction():
        return keys.signing_key(alg)


def _sign(app, claims: dict, *, alg: str = "RS256", key=None, typ: str = "at+jwt") -> str:
    key = key or _active_key(app, alg)
    return jwt.encode({"alg": alg, "kid": key.kid, "typ": typ}, claims, key, algorithms=[alg])


def _good_claims(app, tenant, **changes) -> dict:
    now = int(time.time())
    claims = {
        "iss": setting_of(app, "OIDC_ISSUER"),
        "sub": str(tenant.user_id),
        "aud": str(tenant.client_id),
        "client_id": str(tenant.client_id),
        "exp": now + 600,
        "iat": now,
        "jti": f"test-{now}-{time.monotonic_ns()}",
        "scope": "openid",
        "user_id": tenant.user_id,
    }
    claims.update(changes)
    return claims


def _refused(client, token: str, reason: str | None = None) -> None:
    response = _userinfo(client, token)
    assert response.status_code == 401, response.get_json()
    assert response.headers["Content-Type"].startswith("application/problem+json")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    if reason:
        assert reason in response.get_json()["detail"]


def test_a_token_we_signed_is_accepted(app, client, tenant):
    assert _userinfo(client, _sign(app, _good_claims(app, tenant))).status_code == 200


def test_missing_token_is_a_bearer_challenge(client):
    response = client.get("/v1/openidc/user")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="tessera"'


def test_alg_none_is_refused(app, client, tenant):
    unsigned = f"{_segment({'alg': 'none', 'typ': 'at+jwt'})}.{_segment(_good_claims(app, tenant))}."
    _refused(client, unsigned, "algorithm is not accepted")


def test_header_nested_too_deeply_is_refused(client):
    header = _b64(b"[" * 3000 + b"]" * 3000)
    _refused(client, f"{header}.{_segment({'sub': '1'})}.c2ln", "header is malformed")


def test_hs256_signed_with_the_public_key_is_refused(app, client, tenant):
    key = _active_key(app)
    public_pem = key.as_pem(private=False)
    signing_input = (
        f"{_segment({'alg': 'HS256', 'kid': key.kid, 'typ': 'at+jwt'})}.{_segment(_good_claims(app, tenant))}"
    )
    signature = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    _refused(client, f"{signing_input}.{_b64(signature)}", "algorithm is not accepted")


def test_key_of_the_other_algorithm_named_by_kid_is_refused(app, client, tenant):
    es_key = _active_key(app, "ES256")
    forged_header = {"alg": "RS256", "kid": es_key.kid, "typ": "at+jwt"}
    rs_token = _sign(app, _good_claims(app, tenant))
    _, payload, signature = rs_token.split(".")
    _refused(client, f"{_segment(forged_header)}.{payload}.{signature}", "does not match its key")


def test_tampered_payload_is_refused(app, client, tenant):
    header, _, signature = _sign(app, _good_claims(app, tenant)).split(".")
    other = _segment(_good_claims(app, tenant, user_id=tenant.user_id + 1, sub=str(tenant.user_id + 1)))
    _refused(client, f"{header}.{other}.{signature}", "signature is invalid")


def test_wrong_audience_is_refused(app, client, tenant):
    _refused(client, _sign(app, _good_claims(app, tenant, aud="999999")), "audience")


def test_wrong_issuer_is_refused(app, client, tenant):
    _refused(client, _sign(app, _good_claims(app, tenant, iss="https://evil.example")), "issued by someone else")


def test_expired_token_is_refused(app, client, tenant):
    now = int(time.time())
    _refused(client, _sign(app, _good_claims(app, tenant, iat=now - 7200, exp=now - 3600)), "expired")


def test_id_token_is_not_an_access_token(client, tenant):
    _refused(client, _tokens(client, tenant)["id_token"], "not of the expected type")


def test_unknown_kid_is_refused(app, client, tenant):
    kid, stranger = generate_key("RS256")
    token = jwt.encode(
        {"alg": "RS256", "kid": kid, "typ": "at+jwt"}, _good_claims(app, tenant), stranger, algorithms=["RS256"]
    )
    _refused(client, token, "unknown or retired key")


def test_revoked_token_is_refused_everywhere(client, tenant):
    issued = _tokens(client, tenant, scope="openid credentials")
    access_token = issued["access_token"]
    bearer = {"Authorization": f"Bearer {access_token}"}
    assert _userinfo(client, access_token).status_code == 200
    assert client.get("/v1/openidc/credentials", headers=bearer).status_code == 200
    response = client.post(
        "/v1/openidc/revoke",
        data={
            "token": access_token,
            "client_id": str(tenant.client_id),
            "client_secret": tenant.client_secret,
        },
    )
    assert response.status_code == 200
    _refused(client, access_token, "revoked")
    credentials = client.get("/v1/openidc/credentials", headers=bearer)
    assert credentials.status_code == 401 and "revoked" in credentials.get_json()["detail"]
    assert credentials.headers["WWW-Authenticate"].startswith("Bearer")
    introspection = client.post(
        "/v1/openidc/introspect",
        data={
            "token": access_token,
            "client_id": str(tenant.client_id),
            "client_secret": tenant.client_secret,
        },
    )
    assert introspection.get_json() == {"active": False}


def test_revocation_by_another_client_has_no_effect(app, client, tenant):
    other = make_tenant(app, client)
    access_token = _tokens(client, tenant)["access_token"]
    response = client.post(
        "/v1/openidc/revoke",
        data={
            "token": access_token,
            "client_id": str(other.client_id),
            "client_secret": other.client_secret,
        },
    )
    assert response.status_code == 200
    assert _userinfo(client, access_token).status_code == 200
    unauthenticated = client.post("/v1/openidc/revoke", data={"token": access_token, "client_id": "1"})
    assert unauthenticated.status_code == 401 and unauthenticated.get_json()["error"] == "invalid_client"


def test_introspection_of_an_active_token(client, tenant):
    access_token = _tokens(client, tenant)["access_token"]
    response = client.post(
        "/v1/openidc/introspect",
        data={
            "token": access_token,
            "client_id": str(tenant.client_id),
            "client_secret": tenant.client_secret,
        },
    )
    body = response.get_json()
    assert response.status_code == 200 and body["active"] is True
    assert body["client_id"] == str(tenant.client_id) and body["user_id"] == tenant.user_id
    assert body["scope"] == "openid profile email" and body["token_type"] == "Bearer"


def test_userinfo_releases_claims_by_scope(app, client):
    tenant = make_tenant(app, client)
    body = exchange(client, tenant, sign_in(client, tenant, scope="openid")["code"]).get_json()
    info = _userinfo(client, body["access_token"]).get_json()
    # scope=openid: the subject and the client's mapped claim (design 6), consented on the way.
    assert info == {
        "sub": str(tenant.user_id),
        "user_id": tenant.user_id,
        "did": tenant.did,
        "edu_username": tenant.profile["user_name"],
    }
    body = exchange(client, tenant, sign_in(client, tenant, scope="openid profile")["code"]).get_json()
    info = _userinfo(client, body["access_token"]).get_json()
    assert info["given_name"] == "Ada" and info["edu_username"] == tenant.profile["user_name"]
    assert "email" not in info


def test_access_token_and_id_token_claims(app, client, tenant):
    issued = _tokens(client, tenant, scope="openid profile email app_claims")
    access = _claims_of(issued["access_token"])
    assert set(access) == {"iss", "sub", "aud", "client_id", "exp", "iat", "jti", "scope", "user_id"}
    assert access["aud"] == access["client_id"] == str(tenant.client_id)
    assert access["exp"] - access["iat"] == 3600
    identity = _claims_of(issued["id_token"])
    assert identity["sub"] == str(tenant.user_id) and identity["user_id"] == tenant.user_id
    assert identity["did"] == tenant.did and identity["edu_username"] == tenant.profile["user_name"]
    assert {"iss", "aud", "exp", "iat", "auth_time", "nonce", "at_hash"} <= set(identity)


def test_es256_client_gets_es256_tokens(app, client):
    tenant = make_tenant(app, client, signing_alg="ES256")
    issued = _tokens(client, tenant)
    header = json.loads(base64.urlsafe_b64decode(issued["id_token"].split(".")[0] + "=="))
    assert header["alg"] == "ES256"
    assert _userinfo(client, issued["access_token"]).status_code == 200


def test_jwks_publishes_active_and_next_keys_without_private_parts(client):
    response = client.get("/certs/jwks.json")
    assert response.status_code == 200
    keys = response.get_json()["keys"]
    assert {key["alg"] for key in keys} == {"RS256", "ES256", "EdDSA"}
    assert len(keys) >= 6
    for key in keys:
        assert key["use"] == "sig" and key["kid"]
        assert not {"d", "p", "q", "dp", "dq", "qi"} & set(key)


def test_discovery_document(client, app):
    meta = client.get("/.well-known/openid-configuration").get_json()
    issuer = setting_of(app, "OIDC_ISSUER")
    assert meta["issuer"] == issuer
    assert meta["token_endpoint"] == issuer + "/v1/openidc/token"
    assert meta["userinfo_endpoint"] == issuer + "/v1/openidc/user"
    assert meta["jwks_uri"] == issuer + "/certs/jwks.json"
    assert meta["response_types_supported"] == ["code"]
    assert meta["subject_types_supported"] == ["public", "pairwise"]
    assert "RS256" in meta["id_token_signing_alg_values_supported"]


def test_signing_keys_are_encrypted_at_rest(app):
    _active_key(app)
    with app.app_context():
        for row in db.session.query(SigningKey).all():
            assert "PRIVATE KEY" not in row.private_key_encrypted
            assert row.private_key_encrypted.startswith("v1.")
        db.session.rollback()


def _run_cli(app, *args: str):
    result = app.test_cli_runner().invoke(args=list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _age_retired_keys(app, kids: set[str]) -> None:
    with app.app_context(), transaction():
        for kid in kids:
            db.session.get(SigningKey, kid).publish_until = utcnow() - timedelta(seconds=1)
        invalidate_key_cache()


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
def test_rotation_keeps_live_tokens_valid_until_their_key_retires(app, client, alg):
    tenant = make_tenant(app, client, signing_alg=alg)
    before = _tokens(client, tenant)["access_token"]
    old_kid = json.loads(base64.urlsafe_b64decode(before.split(".")[0] + "=="))["kid"]
    next_kids = {key["kid"] for key in client.get("/certs/jwks.json").get_json()["keys"]}

    output = _run_cli(app, "keys", "rotate", "--alg", alg)
    new_kid = output.split("active: ")[1].strip()
    assert new_kid in next_kids, "the new active key was published before it signed anything"

    published = {key["kid"] for key in client.get("/certs/jwks.json").get_json()["keys"]}
    assert old_kid in published and new_kid in published
    assert _userinfo(client, before).status_code == 200, "a token of the retired key still verifies"
    after = _tokens(client, tenant)["access_token"]
    assert json.loads(base64.urlsafe_b64decode(after.split(".")[0] + "=="))["kid"] == new_kid

    # Once every token of the retired key has expired, the key leaves the set and is refused.
    _age_retired_keys(app, {old_kid})
    assert old_kid not in {key["kid"] for key in client.get("/certs/jwks.json").get_json()["keys"]}
    _refused(client, before, "unknown or retired key")
    assert _userinfo(client, after).status_code == 200
    assert "deleted" in _run_cli(app, "keys", "purge")


def test_retired_key_after_its_retention_is_refused_even_for_an_unexpired_token(app, client, tenant):
    with app.app_context():
        old_kid = db.session.query(SigningKey).filter_by(alg="RS256", state=KEY_ACTIVE).one().kid
        db.session.rollback()
    _run_cli(app, "keys", "rotate", "--alg", "RS256")
    with app.app_context():
        retired = signing_keys.private_key(old_kid)
        db.session.rollback()
    forged = _sign(app, _good_claims(app, tenant), key=retired)
    assert _userinfo(client, forged).status_code == 200  # still within its retention
    _age_retired_keys(app, {old_kid})
    _refused(client, forged, "unknown or retired key")


def test_scheduled_rotation_rotates_only_due_keys(app):
    with app.app_context():
        with transaction():
            signing_keys.ensure_keys()
            assert signing_keys.rotate_keys_if_due() == []
            row = db.session.query(SigningKey).filter_by(alg="ES256", state=KEY_ACTIVE).one()
            row.activated_at = utcnow() - timedelta(seconds=setting_of(app, "OIDC_KEY_ROTATION_INTERVAL") + 1)
        with transaction():
            activated = signing_keys.rotate_keys_if_due()
            assert len(activated) == 1
            assert db.session.get(SigningKey, activated[0]).alg == "ES256"


def test_https_issuer_with_a_path_discovery_and_secure_cookies(app, tenant):
    tenant_issuer = "https://id.example.test/tenant-a"
    other = create_app({"TESTING": True, "OIDC_ISSUER": tenant_issuer + "/"})
    celery.flask_app = app
    browser = other.test_client()
    meta = browser.get("/tenant-a/.well-known/openid-configuration").get_json()
    assert meta["issuer"] == tenant_issuer
    assert meta["authorization_endpoint"] == "https://id.example.test/v1/openidc/authorize"
    cookie = browser.get(authorize_query(tenant)).headers["Set-Cookie"]
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie


def test_openapi_documents_every_provider_endpoint(client):
    paths = client.get("/openapi.json").get_json()["paths"]
    for path in (
        "/v1/openidc/authorize",
        "/v1/openidc/token",
        "/v1/openidc/user",
        "/v1/openidc/revoke",
        "/v1/openidc/introspect",
        "/v1/openidc/logout",
        "/certs/jwks.json",
        "/.well-known/openid-configuration",
    ):
        assert path in paths, path
    token = paths["/v1/openidc/token"]["post"]
    assert {"application/json", "application/x-www-form-urlencoded"} <= set(token["requestBody"]["content"])


def test_verification_uses_public_keys_and_retired_private_keys_leave_memory(app, client, tenant):
    token = exchange(client, tenant, sign_in(client, tenant)["code"]).get_json()["access_token"]
    with app.app_context():
        old_kid = db.session.query(SigningKey).filter_by(alg="RS256", state=KEY_ACTIVE).one().kid
        signing_keys.signing_key("RS256")
        db.session.rollback()
    _run_cli(app, "keys", "rotate", "--alg", "RS256")
    assert _userinfo(client, token).status_code == 200
    with app.app_context():
        signing_keys.invalidate_key_cache()
        published, key = signing_keys.verification_key(old_kid)
        assert published.state == "retired" and not key.is_private
        caches = app.extensions["oidc_keys"]
        assert caches.signing.get(old_kid) is None and caches.verifying.get(old_kid) is key
        db.session.rollback()
