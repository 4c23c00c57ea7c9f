"""The `claims` request parameter (OpenID Connect Core 5.5): standard claims asked for one by one in
the id_token and at userinfo, listed on the consent page, released only once the user allows them,
kept across refresh; the operator's switch."""

from __future__ import annotations

import base64
import json
import re

from app.db import transaction
from app.tenancy import service as tenancy_service
from tests.support.config import change_settings
from tests.support.oidc import authorize_query, exchange, form_fields, path_of, query_of, sign_in

ASKED = {"id_token": {"email": {"essential": True}}, "userinfo": {"given_name": None, "family_name": None}}


def _claims_of(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _consent_page(http, tenant, **params) -> str:
    sign_in(http, tenant, scope="openid")
    response = http.get(authorize_query(tenant, prompt="consent", **params))
    assert "/v1/openidc/consent" in response.headers["Location"], response.headers["Location"]
    page = http.get(path_of(response.headers["Location"]))
    assert page.status_code == 200
    return page.get_data(as_text=True)


def _tokens(http, tenant, **params) -> dict:
    response = exchange(http, tenant, sign_in(http, tenant, **params)["code"])
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def test_claims_asked_for_are_listed_and_released_where_asked(client, tenant):
    page = _consent_page(client, tenant, scope="openid", claims=json.dumps(ASKED))
    listed = set(re.findall(r'data-scope="([^"]+)"', page))
    assert {"claim:email", "claim:given_name", "claim:family_name"} <= listed
    assert "Your e-mail address (required by the application)" in page and "Your first name" in page

    tokens = _tokens(client, tenant, scope="openid", claims=json.dumps(ASKED))
    id_token = _claims_of(tokens["id_token"])
    assert id_token["email"] == tenant.email and "given_name" not in id_token
    assert tokens["scope"] == "openid"
    info = client.get("/v1/openidc/user", headers={"Authorization": f"Bearer {tokens['access_token']}"}).get_json()
    assert info["given_name"] == "Ada" and info["family_name"] == "Lovelace"
    assert "email" not in info  # asked for in the id_token only


def test_nothing_asked_for_is_released_without_consent(client, tenant):
    sign_in(client, tenant, scope="openid")
    denied = sign_in(client, tenant, scope="openid", claims=json.dumps(ASKED), consent="deny")
    assert denied["error"] == "access_denied"
    # A claim not yet allowed needs the user again: prompt=none cannot go on.
    response = client.get(authorize_query(tenant, scope="openid", prompt="none", claims=json.dumps(ASKED)))
    assert query_of(response.headers["Location"])["error"] == "consent_required"


def test_allowed_claims_are_remembered_and_a_new_one_asks_again(client, tenant):
    asked = {"id_token": {"name": None}}
    _tokens(client, tenant, scope="openid", claims=json.dumps(asked))
    again = client.get(authorize_query(tenant, scope="openid", prompt="none", claims=json.dumps(asked)))
    query = query_of(again.headers["Location"])
    assert "code" in query, query
    token = exchange(client, tenant, query["code"]).get_json()
    assert _claims_of(token["id_token"])["name"] == "Ada Lovelace"
    more = client.get(
        authorize_query(tenant, scope="openid", prompt="none", claims=json.dumps({"id_token": {"gender": None}}))
    )
    assert query_of(more.headers["Location"])["error"] == "consent_required"


def test_claims_survive_refresh(client, tenant):
    tokens = _tokens(client, tenant, scope="openid offline_access", claims=json.dumps(ASKED))
    refreshed = client.post(
        "/v1/openidc/token",
        data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]},
        auth=(str(tenant.client_id), tenant.client_secret),
    )
    assert refreshed.status_code == 200, refreshed.get_json()
    body = refreshed.get_json()
    assert _claims_of(body["id_token"])["email"] == tenant.email
    info = client.get("/v1/openidc/user", headers={"Authorization": f"Bearer {body['access_token']}"}).get_json()
    assert info["given_name"] == "Ada"


def test_a_malformed_claims_parameter_is_refused(client, tenant):
    for malformed in ("not json", "[]", json.dumps({"id_token": []}), json.dumps({"userinfo": {"email": 1}}),
                      json.dumps({"id_token": {"email": {"essential": "yes"}}})):  # fmt: skip
        response = client.get(authorize_query(tenant, scope="openid", claims=malformed))
        query = query_of(response.headers["Location"])
        assert query["error"] == "invalid_request", (malformed, query)


def test_tokens_of_requests_without_claims_keep_their_claims(client, tenant):
    tokens = _tokens(client, tenant, scope="openid")
    access = _claims_of(tokens["access_token"])
    assert set(access) == {"iss", "sub", "aud", "client_id", "exp", "iat", "jti", "scope", "user_id"}
    assert "email" not in _claims_of(tokens["id_token"])


def test_the_operator_may_turn_the_claims_parameter_off(app, client, tenant, monkeypatch):
    change_settings(monkeypatch, app, OIDC_CLAIMS_PARAMETER=False)
    assert client.get("/.well-known/openid-configuration").get_json()["claims_parameter_supported"] is False
    tokens = _tokens(client, tenant, scope="openid", claims=json.dumps(ASKED))
    assert "email" not in _claims_of(tokens["id_token"])
    info = client.get("/v1/openidc/user", headers={"Authorization": f"Bearer {tokens['access_token']}"}).get_json()
    assert "given_name" not in info


def test_consent_form_fields_are_bound_to_what_was_shown(client, tenant):
    page = _consent_page(client, tenant, scope="openid", claims=json.dumps({"id_token": {"picture": None}}))
    assert "claim:picture" in set(re.findall(r'data-scope="([^"]+)"', page))
    assert form_fields(page)["shown"]


def test_acr_and_standard_claims_in_one_claims_parameter(app, client, tenant):
    asked = {"id_token": {"acr": {"essential": True, "value": "urn:tessera:acr:email-code"}, "email": None}}
    id_token = _claims_of(_tokens(client, tenant, scope="openid", claims=json.dumps(asked))["id_token"])
    assert id_token["acr"] == "urn:tessera:acr:email-code" and id_token["email"] == tenant.email
    with app.app_context(), transaction():
        tenancy_service.set_sign_in_policy(tenant.client_id, "email_code")
    unreachable = {"id_token": {"acr": {"essential": True, "values": ["urn:tessera:acr:mfa"]}, "email": None}}
    response = client.get(authorize_query(tenant, scope="openid", claims=json.dumps(unreachable)))
    assert query_of(response.headers["Location"])["error"] == "unmet_authentication_requirements"


def _naming(sub: object, *, essential: bool = True) -> str:
    return json.dumps({"id_token": {"sub": {"value": sub, "essential": essential}}})


def test_a_request_naming_another_sub_gets_no_code_for_the_user_who_signs_in(app, tenant):
    """OpenID Connect Core 5.5.1: a positive answer only for the user the `sub` value names."""
    browser = app.test_client()
    query = sign_in(browser, tenant, scope="openid", claims=_naming("999999"))
    assert "code" not in query
    assert query["error"] == "login_required" and "claims sub" in query["error_description"], query
    assert query["state"]


def test_a_session_of_another_user_is_not_used_for_a_request_naming_a_sub(app, client, tenant):
    sign_in(client, tenant, scope="openid")  # the browser has a session of the tenant's user
    silent = query_of(client.get(authorize_query(tenant, scope="openid", prompt="none", claims=_naming("999999")))
                      .headers["Location"])  # fmt: skip
    assert "code" not in silent and silent["error"] == "login_required", silent
    assert silent["error_description"] == "The user signed in is not the one the request names (claims sub)."
    interactive = client.get(authorize_query(tenant, scope="openid", claims=_naming("999999", essential=False)))
    assert "/v1/openidc/login" in interactive.headers["Location"]  # sign in again: never the session's user


def test_a_request_naming_the_signed_in_users_sub_is_answered(client, tenant):
    sign_in(client, tenant, scope="openid")
    named = client.get(authorize_query(tenant, scope="openid", prompt="none", claims=_naming(str(tenant.user_id))))
    query = query_of(named.headers["Location"])
    assert "code" in query, query
    tokens = exchange(client, tenant, query["code"]).get_json()
    assert _claims_of(tokens["id_token"])["sub"] == str(tenant.user_id)
    among = {"id_token": {"sub": {"values": ["1", str(tenant.user_id)]}}}
    assert "code" in sign_in(client, tenant, scope="openid", prompt="none", claims=json.dumps(among))


def test_a_sub_value_that_is_not_a_string_is_an_invalid_request(client, tenant):
    for sub in ({"value": 999999}, {"values": []}, {"values": [1]}):
        response = client.get(authorize_query(tenant, scope="openid", claims=json.dumps({"id_token": {"sub": sub}})))
        query = query_of(response.headers["Location"])
        assert query["error"] == "invalid_request" and "claims.id_token.sub" in query["error_description"], sub
