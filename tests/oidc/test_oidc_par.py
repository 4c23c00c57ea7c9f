"""Pushed authorization requests (RFC 9126): /par, single-use short-lived request_uri, per-client requirement."""

from __future__ import annotations

import threading
from datetime import timedelta
from urllib.parse import urlencode

import requests
from sqlalchemy import select

from app.db import as_utc, transaction, utcnow
from app.extensions import db
from app.oidc.models import PushedRequest
from tests.support.config import change_settings
from tests.support.oidc import (
    authorize_query,
    exchange,
    form_fields,
    latest_code,
    make_tenant,
    path_of,
    pkce_pair,
    query_of,
)


def _push(http, tenant, **overrides):
    body = {
        "response_type": "code",
        "redirect_uri": tenant.redirect_uri,
        "scope": "openid profile",
        "state": "pushed-state",
        "nonce": "pushed-nonce",
        **overrides,
    }
    body = {key: value for key, value in body.items() if value is not None}
    return http.post("/v1/openidc/par", data=body, auth=(str(tenant.client_id), tenant.client_secret))


def _authorize_url(tenant, request_uri: str) -> str:
    return "/v1/openidc/authorize?" + urlencode({"client_id": str(tenant.client_id), "request_uri": request_uri})


def _sign_in_from(http, tenant, url: str) -> dict[str, str]:
    response = http.get(url)
    assert response.status_code == 302, response.get_data(as_text=True)
    location = response.headers["Location"]
    if location.startswith(tenant.redirect_uri):
        return query_of(location)
    page = http.get(path_of(location))
    fields = form_fields(page.get_data(as_text=True))
    page = http.post("/v1/openidc/login", data={**fields, "email": tenant.email})
    fields = form_fields(page.get_data(as_text=True))
    response = http.post("/v1/openidc/login/code", data={**fields, "code": latest_code(http, tenant.email)})
    location = response.headers["Location"]
    if not location.startswith(tenant.redirect_uri):
        page = http.get(path_of(location))
        fields = form_fields(page.get_data(as_text=True))
        response = http.post("/v1/openidc/consent", data={**fields, "decision": "allow"})
        location = response.headers["Location"]
    return query_of(location)


def test_pushed_request_signs_in_and_its_request_uri_works_once(client, tenant):
    verifier, challenge = pkce_pair()
    pushed = _push(client, tenant, code_challenge=challenge, code_challenge_method="S256")
    assert pushed.status_code == 201, pushed.get_json()
    body = pushed.get_json()
    assert body["request_uri"].startswith("urn:ietf:params:oauth:request_uri:") and body["expires_in"] == 60
    assert pushed.headers["Cache-Control"] == "no-store"
    query = _sign_in_from(client, tenant, _authorize_url(tenant, body["request_uri"]))
    assert query["state"] == "pushed-state" and query["code"]
    token = exchange(client, tenant, query["code"], code_verifier=verifier)
    assert token.status_code == 200, token.get_json()

    again = client.get(_authorize_url(tenant, body["request_uri"]))
    assert again.status_code == 400 and "already used" in again.get_data(as_text=True)


def test_an_expired_request_uri_is_refused(app, client, tenant, monkeypatch):
    change_settings(monkeypatch, app, OIDC_PAR_TTL=15)
    pushed = _push(client, tenant).get_json()
    assert pushed["expires_in"] == 15
    with app.app_context(), transaction():
        stored = (
            db.session.execute(select(PushedRequest).where(PushedRequest.client_id == tenant.client_id)).scalars().one()
        )
        assert abs((as_utc(stored.expires_at) - utcnow()).total_seconds() - 15) < 5
        stored.expires_at = utcnow() - timedelta(seconds=1)
    expired = client.get(_authorize_url(tenant, pushed["request_uri"]))
    assert expired.status_code == 400 and "expired" in expired.get_data(as_text=True)


def test_the_request_uri_belongs_to_its_client(app, client, tenant):
    other = make_tenant(app, client, name="Another")
    request_uri = _push(client, tenant).get_json()["request_uri"]
    assert client.get(_authorize_url(other, request_uri)).status_code == 400


def test_concurrent_uses_of_one_request_uri_exactly_one_proceeds(app, client, live_server):
    tenant = make_tenant(app, client, name="Racing browsers")
    pushed = requests.post(
        live_server.url + "/v1/openidc/par",
        timeout=30,
        auth=(str(tenant.client_id), tenant.client_secret),
        data={"response_type": "code", "redirect_uri": tenant.redirect_uri, "scope": "openid", "state": "raced"},
    )
    assert pushed.status_code == 201, pushed.text
    url = live_server.url + _authorize_url(tenant, pushed.json()["request_uri"])
    count = 8
    barrier = threading.Barrier(count)
    answers: list[requests.Response] = []
    lock = threading.Lock()

    def attempt() -> None:
        barrier.wait()
        answer = requests.get(url, allow_redirects=False, timeout=30)  # each its own browser
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=attempt) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    proceeded = [answer for answer in answers if answer.status_code == 302]
    assert len(proceeded) == 1, [(answer.status_code, answer.text[:200]) for answer in answers]
    assert "/v1/openidc/login" in proceeded[0].headers["Location"]
    refused = [answer for answer in answers if answer.status_code != 302]
    assert len(refused) == count - 1
    assert all(answer.status_code == 400 and "already used" in answer.text for answer in refused)


def test_push_needs_client_authentication_and_a_valid_request(client, tenant):
    anonymous = client.post(
        "/v1/openidc/par",
        data={
            "response_type": "code",
            "client_id": str(tenant.client_id),
            "redirect_uri": tenant.redirect_uri,
            "scope": "openid",
        },
    )
    assert anonymous.status_code == 401 and anonymous.get_json()["error"] == "invalid_client"
    no_openid = _push(client, tenant, scope="profile")
    assert no_openid.status_code == 400 and no_openid.get_json()["error"] == "invalid_scope"
    foreign = _push(client, tenant, redirect_uri="https://evil.example/callback")
    assert foreign.status_code == 400 and foreign.get_json()["error"] == "invalid_request"
    nested = _push(client, tenant, request_uri="urn:ietf:params:oauth:request_uri:x")
    assert nested.status_code == 400


def test_a_client_may_require_pushed_requests(client, tenant):
    response = client.put(
        f"/v1/sub_client/{tenant.client_id}",
        headers=tenant.headers,
        json={"require_pushed_authorization_requests": True},
    )
    assert response.status_code == 200 and response.get_json()["data"]["require_pushed_authorization_requests"]
    direct = client.get(authorize_query(tenant))
    assert direct.status_code == 302
    assert query_of(direct.headers["Location"])["error"] == "invalid_request"
    request_uri = _push(client, tenant).get_json()["request_uri"]
    assert "code" in _sign_in_from(client, tenant, _authorize_url(tenant, request_uri))


def test_discovery_names_the_par_endpoint(client):
    meta = client.get("/.well-known/openid-configuration").get_json()
    assert meta["pushed_authorization_request_endpoint"].endswith("/v1/openidc/par")
    assert meta["require_pushed_authorization_requests"] is False


def test_openapi_documents_par_and_the_new_grants(client):
    spec = client.get("/openapi.json").get_json()
    par = spec["paths"]["/v1/openidc/par"]["post"]
    assert set(par["responses"]) >= {"201", "400", "401", "429"}
    assert "request_uri" in spec["components"]["schemas"]["PushedAuthorizationOut"]["required"]
    authorize = {parameter["name"] for parameter in spec["paths"]["/v1/openidc/authorize"]["get"]["parameters"]}
    assert "request_uri" in authorize
    schemas = spec["components"]["schemas"]
    assert schemas["TokenRequest"]["properties"]["grant_type"]["enum"] == [
        "authorization_code",
        "refresh_token",
        "client_credentials",
        "urn:ietf:params:oauth:grant-type:device_code",
    ]
    assert {"refresh_token", "client_assertion", "client_assertion_type", "scope"} <= set(
        schemas["TokenRequest"]["properties"]
    )
    assert "refresh_token" in schemas["TokenOut"]["properties"]
    assert "id_token" not in schemas["TokenOut"].get("required", [])
    settings = {
        "token_endpoint_auth_method",
        "jwks",
        "jwks_uri",
        "client_credentials_scopes",
        "issue_refresh_tokens",
        "refresh_token_ttl",
        "refresh_token_idle_ttl",
        "require_pushed_authorization_requests",
        "backchannel_logout_uri",
    }
    assert settings <= set(schemas["SubClientOut"]["properties"])
    assert settings <= set(schemas["SubClientUpdateIn"]["properties"])
    assert "secret_encrypted" not in schemas["SubClientOut"]["properties"]
    assert schemas["SubClientUpdateIn"]["properties"]["token_endpoint_auth_method"]["enum"] == [
        "client_secret_basic",
        "client_secret_post",
        "client_secret_jwt",
        "private_key_jwt",
        None,
    ]


def test_openapi_documents_logout_and_the_back_channel(client):
    spec = client.get("/openapi.json").get_json()
    logout = spec["paths"]["/v1/openidc/logout"]
    assert {parameter["name"] for parameter in logout["get"]["parameters"]} == {
        "id_token_hint",
        "client_id",
        "post_logout_redirect_uri",
        "state",
    }
    form = logout["post"]["requestBody"]["content"]["application/x-www-form-urlencoded"]["schema"]
    assert {"id_token_hint", "confirm", "csrf_token"} <= set(form["properties"])
    assert set(logout["post"]["responses"]) == {"200", "303", "403"}
    for operation in logout.values():
        assert "backchannel_logout_uri" in operation["description"] and "logout_token" in operation["description"]
    schemas = spec["components"]["schemas"]
    assert schemas["BackchannelLogoutRequest"]["required"] == ["logout_token"]
    assert {"sid", "sub", "events", "jti"} <= set(schemas["LogoutTokenClaims"]["required"])
