"""Request objects (RFC 9101): authorization parameters in a JWT signed with the client's registered
keys, at the authorization endpoint and inside a pushed request; every refusal; the per-client
requirement; the operator's switch."""

from __future__ import annotations

import json
import time
import uuid
from urllib.parse import urlencode

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, OKPKey, RSAKey

from tests.support.config import change_settings, setting_of
from tests.support.oidc import exchange, form_fields, latest_code, make_tenant, path_of, query_of
from tests.support.servers import serve_on_loopback


@pytest.fixture
def issuer(app) -> str:
    return setting_of(app, "OIDC_ISSUER")


@pytest.fixture
def signer(client, tenant):
    """The tenant registers an ES256 key in its `jwks`; returns that private key."""
    key = ECKey.generate_key("P-256", private=True)
    _configure(client, tenant, jwks={"keys": [{**key.as_dict(private=False), "kid": "rp-1"}]})
    return key


def _configure(http, tenant, **members) -> None:
    response = http.put(f"/v1/sub_client/{tenant.client_id}", json=members, headers=tenant.headers)
    assert response.status_code == 200, response.get_json()


def _object(tenant, issuer: str, key, *, alg: str = "ES256", kid: str | None = "rp-1", **overrides) -> str:
    now = int(time.time())
    claims = {
        "iss": str(tenant.client_id),
        "aud": issuer,
        "iat": now,
        "exp": now + 300,
        "nbf": now - 5,
        "jti": f"jti-{uuid.uuid4()}",
        "client_id": str(tenant.client_id),
        "response_type": "code",
        "redirect_uri": tenant.redirect_uri,
        "scope": "openid profile",
        "state": "state-in-object",
        "nonce": "nonce-in-object",
    }
    claims.update(overrides)
    claims = {name: value for name, value in claims.items() if value is not None}
    header = {"alg": alg, **({"kid": kid} if kid else {})}
    return jwt.encode(header, claims, key, algorithms=[alg])


def _authorize(http, tenant, request_object: str, **outside):
    params = {"client_id": str(tenant.client_id), "response_type": "code", "request": request_object, **outside}
    return http.get("/v1/openidc/authorize?" + urlencode(params))


def _finish_sign_in(http, tenant, response) -> dict[str, str]:
    assert response.status_code == 302, response.get_data(as_text=True)
    location = response.headers["Location"]
    if location.startswith(tenant.redirect_uri):
        return query_of(location)
    page = http.get(path_of(location))
    if "/login" in location:
        page = http.post("/v1/openidc/login", data={**form_fields(page.get_data(as_text=True)), "email": tenant.email})
        fields = form_fields(page.get_data(as_text=True))
        response = http.post("/v1/openidc/login/code", data={**fields, "code": latest_code(http, tenant.email)})
        location = response.headers["Location"]
        if location.startswith(tenant.redirect_uri):
            return query_of(location)
        page = http.get(path_of(location))
    response = http.post("/v1/openidc/consent", data={**form_fields(page.get_data(as_text=True)), "decision": "allow"})
    return query_of(response.headers["Location"])


def _refusal(response) -> dict[str, str]:
    assert response.status_code == 302, response.get_data(as_text=True)
    return query_of(response.headers["Location"])


def test_a_signed_request_object_signs_in_and_its_parameters_win(client, tenant, signer, issuer):
    request_object = _object(tenant, issuer, signer, scope="openid email", state="inside")
    query = _finish_sign_in(client, tenant, _authorize(client, tenant, request_object, scope="openid", state="out"))
    assert query["state"] == "inside" and query["code"]
    tokens = exchange(client, tenant, query["code"])
    assert tokens.status_code == 200, tokens.get_json()
    assert "email" in tokens.get_json()["scope"].split()


@pytest.mark.parametrize(
    ("alg", "key_of"),
    [
        ("RS256", lambda: RSAKey.generate_key(2048, private=True)),
        ("PS256", lambda: RSAKey.generate_key(2048, private=True)),
        ("EdDSA", lambda: OKPKey.generate_key("Ed25519", private=True)),
    ],
)
def test_rsa_and_eddsa_request_objects(client, tenant, issuer, alg, key_of):
    key = key_of()
    _configure(client, tenant, jwks={"keys": [{**key.as_dict(private=False), "kid": "rp-1"}]})
    query = _finish_sign_in(client, tenant, _authorize(client, tenant, _object(tenant, issuer, key, alg=alg)))
    assert query["state"] == "state-in-object" and query["code"]


def _unsigned(claims: dict) -> str:
    import base64

    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."


@pytest.mark.parametrize(
    "change",
    [
        {"iss": "999"},
        {"aud": "https://another.example"},
        {"exp": 1000},
        {"exp": None},
        {"nbf": 4102444800},
        {"client_id": "999"},
        {"response_type": "token"},
        {"request_uri": "urn:ietf:params:oauth:request_uri:x"},
        {"max_age": [1]},
    ],
)
def test_a_request_object_that_does_not_hold_is_refused_at_the_redirect_uri(client, tenant, signer, issuer, change):
    query = _refusal(_authorize(client, tenant, _object(tenant, issuer, signer, **change), state="outside",
                                redirect_uri=tenant.redirect_uri))  # fmt: skip
    assert query["error"] == "invalid_request_object", query
    assert query["state"] == "outside"


@pytest.mark.parametrize(
    "lifetime",
    [
        {"exp": "ten years", "nbf": "now"},
        {"exp": "61 minutes", "nbf": "now", "iat": None},
        {"exp": "61 minutes", "nbf": None, "iat": "now"},
        {"exp": "61 minutes", "nbf": None, "iat": None},
        {"exp": "10 minutes", "nbf": "an hour ago"},
    ],
    ids=["ten-years", "past-nbf", "past-iat", "past-now", "old-nbf"],
)
def test_a_request_object_living_longer_than_an_hour_is_refused(client, tenant, signer, issuer, lifetime):
    now = int(time.time())
    at = {"now": now, "ten years": now + 10 * 365 * 86400, "61 minutes": now + 61 * 60, "10 minutes": now + 600,
          "an hour ago": now - 3601, None: None}  # fmt: skip
    request_object = _object(tenant, issuer, signer, **{name: at[when] for name, when in lifetime.items()})
    query = _refusal(_authorize(client, tenant, request_object, redirect_uri=tenant.redirect_uri))
    assert query["error"] == "invalid_request_object", query
    assert "lives longer than 3600 seconds" in query["error_description"]


def test_a_request_object_lives_as_long_as_the_setting_allows(app, client, tenant, signer, issuer, monkeypatch):
    change_settings(monkeypatch, app, OIDC_REQUEST_OBJECT_MAX_LIFETIME=120)
    now = int(time.time())
    longer = _object(tenant, issuer, signer, nbf=now, exp=now + 180)
    refused = _refusal(_authorize(client, tenant, longer, redirect_uri=tenant.redirect_uri))
    assert "lives longer than 120 seconds" in refused["error_description"]
    shorter = _object(tenant, issuer, signer, nbf=now, exp=now + 110)
    assert _finish_sign_in(client, tenant, _authorize(client, tenant, shorter))["code"]


@pytest.mark.parametrize("jti", [None, "the-one-jti"], ids=["without-jti", "with-jti"])
def test_a_request_object_is_used_once(client, tenant, signer, issuer, jti):
    request_object = _object(tenant, issuer, signer, jti=jti or None)
    first = _finish_sign_in(client, tenant, _authorize(client, tenant, request_object))
    assert first["code"]

    replayed = _refusal(_authorize(client, tenant, request_object, redirect_uri=tenant.redirect_uri))
    assert replayed["error"] == "invalid_request_object"
    assert "used before" in replayed["error_description"]
    if jti is not None:  # another object with the same jti is the same request
        again = _object(tenant, issuer, signer, jti=jti, state="another")
        assert _refusal(_authorize(client, tenant, again, redirect_uri=tenant.redirect_uri))["error"] == (
            "invalid_request_object"
        )


def test_a_pushed_request_object_is_used_once(client, tenant, signer, issuer):
    request_object = _object(tenant, issuer, signer)
    assert _push(client, tenant, request=request_object).status_code == 201
    replayed = _push(client, tenant, request=request_object)
    assert replayed.status_code == 400 and replayed.get_json()["error"] == "invalid_request_object"
    assert _refusal(_authorize(client, tenant, request_object, redirect_uri=tenant.redirect_uri))["error"] == (
        "invalid_request_object"
    )


def test_unsigned_foreign_and_keyless_objects_are_refused(app, client, tenant, signer, issuer):
    outside = {"redirect_uri": tenant.redirect_uri}
    now = int(time.time())
    unsigned = _unsigned({"iss": str(tenant.client_id), "aud": issuer, "exp": now + 60, "state": "s"})
    assert _refusal(_authorize(client, tenant, unsigned, **outside))["error"] == "invalid_request_object"
    stranger = ECKey.generate_key("P-256", private=True)
    foreign = _object(tenant, issuer, stranger)
    assert _refusal(_authorize(client, tenant, foreign, **outside))["error"] == "invalid_request_object"
    keyless = make_tenant(app, client, name="No keys")
    response = _authorize(client, keyless, _object(keyless, issuer, signer), redirect_uri=keyless.redirect_uri)
    assert _refusal(response)["error"] == "invalid_request_object"
    # Without a registered redirect_uri beside it, a refusal cannot be redirected: an error page.
    page = _authorize(client, tenant, foreign)
    assert page.status_code == 400 and "invalid_request_object" in page.get_data(as_text=True)


def test_a_client_may_require_signed_request_objects(client, tenant, signer, issuer):
    _configure(client, tenant, require_signed_request_object=True)
    plain = client.get(
        "/v1/openidc/authorize?"
        + urlencode(
            {
                "client_id": str(tenant.client_id),
                "response_type": "code",
                "scope": "openid",
                "redirect_uri": tenant.redirect_uri,
                "state": "plain",
            }
        )  # fmt: skip
    )
    query = _refusal(plain)
    assert query["error"] == "invalid_request" and "request object" in query["error_description"]
    signed = _finish_sign_in(client, tenant, _authorize(client, tenant, _object(tenant, issuer, signer)))
    assert signed["code"]


def _push(http, tenant, **body):
    return http.post("/v1/openidc/par", data=body, auth=(str(tenant.client_id), tenant.client_secret))


def test_a_request_object_inside_a_pushed_request(client, tenant, signer, issuer):
    _configure(client, tenant, require_signed_request_object=True)
    pushed = _push(client, tenant, request=_object(tenant, issuer, signer, state="pushed-inside"))
    assert pushed.status_code == 201, pushed.get_json()
    url = "/v1/openidc/authorize?" + urlencode(
        {"client_id": str(tenant.client_id), "request_uri": pushed.get_json()["request_uri"]}
    )
    query = _finish_sign_in(client, tenant, client.get(url))
    assert query["state"] == "pushed-inside" and query["code"]

    # A plain pushed request does not satisfy the requirement.
    plain = _push(client, tenant, response_type="code", redirect_uri=tenant.redirect_uri, scope="openid")
    assert plain.status_code == 400 and plain.get_json()["error"] == "invalid_request"
    bad = _push(client, tenant, request=_object(tenant, issuer, signer, aud="https://elsewhere.example"))
    assert bad.status_code == 400 and bad.get_json()["error"] == "invalid_request_object"


@pytest.fixture
def jwks_server():
    served: dict = {"keys": []}
    hits: list[str] = []

    def answer(_method: str, path: str, _body: bytes) -> tuple[str, bytes]:
        hits.append(path)
        return "application/json", json.dumps(served).encode()

    server = serve_on_loopback(answer)
    yield server.server_port, served, hits
    server.shutdown()


def test_keys_of_a_jwks_uri_are_fetched_before_the_request_is_handled(app, client, issuer, jwks_server, monkeypatch):
    port, served, hits = jwks_server
    tenant = make_tenant(app, client, name="Keys by URI")
    key = RSAKey.generate_key(2048, private=True)
    served["keys"] = [{**key.as_dict(private=False), "kid": "uri-1"}]
    _configure(client, tenant, jwks_uri=f"http://127.0.0.1:{port}/jwks.json")
    change_settings(monkeypatch, app, OIDC_OUTBOUND_ALLOW_HOSTS=f"127.0.0.1:{port}")
    request_object = _object(tenant, issuer, key, alg="RS256", kid="uri-1")
    query = _finish_sign_in(client, tenant, _authorize(client, tenant, request_object))
    assert query["code"] and hits == ["/jwks.json"]


def test_discovery_advertises_request_objects_and_the_operator_may_turn_them_off(
    app, client, tenant, signer, issuer, monkeypatch
):
    metadata = client.get("/.well-known/openid-configuration").get_json()
    assert metadata["request_parameter_supported"] is True
    assert metadata["request_uri_parameter_supported"] is False  # only the request_uri of a pushed request
    assert metadata["request_object_signing_alg_values_supported"] == ["RS256", "PS256", "ES256", "EdDSA"]
    assert metadata["require_signed_request_object"] is False

    change_settings(monkeypatch, app, OIDC_REQUEST_OBJECTS=False)
    metadata = client.get("/.well-known/openid-configuration").get_json()
    assert metadata["request_parameter_supported"] is False
    assert "request_object_signing_alg_values_supported" not in metadata
    query = _refusal(_authorize(client, tenant, _object(tenant, issuer, signer), redirect_uri=tenant.redirect_uri))
    assert query["error"] == "request_not_supported"
