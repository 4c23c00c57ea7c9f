"""Passkeys on the hosted login, server side: registration on the account page, sign-in with a
passkey alone or after the e-mail code, the tenant's sign-in policy, acr/amr in the id_token.

A software authenticator (tests/support/passkeys.py) answers the pages' real ceremony options."""

from __future__ import annotations

import html
import json
import logging
import re

import pytest

from app.db import transaction
from app.oidc.tokens import b64_json
from app.passkeys.settings import PasskeySettings
from app.settings import current
from app.tenancy import service as tenancy_service
from tests.support.oidc import (
    add_sub_client,
    authorize_query,
    exchange,
    form_fields,
    latest_code,
    make_tenant,
    path_of,
    query_of,
    sign_in,
)
from tests.support.passkeys import SoftAuthenticator

EMAIL_CODE, PASSKEY, MFA = "urn:tessera:acr:email-code", "urn:tessera:acr:passkey", "urn:tessera:acr:mfa"


def _set_policy(app, tenant, policy: str) -> None:
    with app.app_context(), transaction():
        tenancy_service.set_sign_in_policy(tenant.client_id, policy)


def _authenticator(app, **options) -> SoftAuthenticator:
    with app.app_context():
        settings = current(PasskeySettings)
        return SoftAuthenticator(origin=settings.origins.split()[0], rp_id=settings.rp_id, **options)


def _options(page: str, kind: str) -> dict:
    found = re.search(rf'data-passkey-{kind}="([^"]*)"', page)
    assert found, f"no passkey {kind} options on the page"
    return json.loads(html.unescape(found.group(1)))


def _id_token(http, tenant, query: dict) -> dict:
    response = exchange(http, tenant, query["code"])
    assert response.status_code == 200, response.get_data(as_text=True)
    return b64_json(response.get_json()["id_token"].split(".")[1])


def _register(http, authenticator: SoftAuthenticator, name: str = "Laptop") -> str:
    """Add a passkey on the account page of the signed-in browser; returns the page after it."""
    page = http.get("/v1/openidc/account")
    assert page.status_code == 200, page.get_data(as_text=True)
    text = page.get_data(as_text=True)
    credential = authenticator.create(_options(text, "create"))
    fields = form_fields(text)
    answer = http.post(
        "/v1/openidc/account/passkeys",
        data={"csrf_token": fields["csrf_token"], "credential": credential, "name": name},
    )
    assert answer.status_code == 200
    return answer.get_data(as_text=True)


def _send_code(http, tenant, **params):
    """Start an authorization and get through the e-mail code; returns the response to the code."""
    response = http.get(authorize_query(tenant, **params))
    assert response.status_code == 302, response.get_data(as_text=True)
    page = http.get(path_of(response.headers["Location"]))
    fields = form_fields(page.get_data(as_text=True))
    page = http.post("/v1/openidc/login", data={**fields, "email": tenant.email})
    fields = form_fields(page.get_data(as_text=True))
    return http.post("/v1/openidc/login/code", data={**fields, "code": latest_code(http, tenant.email)})


def _login_page(http, tenant, **params) -> str:
    response = http.get(authorize_query(tenant, **params))
    assert response.status_code == 302 and "/login" in response.headers["Location"], response.headers
    page = http.get(path_of(response.headers["Location"]))
    assert page.status_code == 200
    return page.get_data(as_text=True)


def _post_passkey(http, page: str, credential: str):
    fields = form_fields(page)
    return http.post(
        "/v1/openidc/login/passkey",
        data={"csrf_token": fields["csrf_token"], "request": fields["request"], "credential": credential},
    )


def _finish(http, response) -> dict:
    """Follow the consent page (allowing) to the redirect back to the client; its query."""
    assert response.status_code == 303, response.get_data(as_text=True)
    location = response.headers["Location"]
    if "/v1/openidc/consent" in location:
        page = http.get(path_of(location))
        response = http.post(
            "/v1/openidc/consent", data={**form_fields(page.get_data(as_text=True)), "decision": "allow"}
        )
        location = response.headers["Location"]
    return query_of(location)


@pytest.fixture
def http(app):
    return app.test_client()


def test_by_default_the_login_page_offers_a_passkey_beside_the_e_mail_code(app, http):
    tenant = make_tenant(app, http)
    page = _login_page(http, tenant)
    assert 'autocomplete="username webauthn"' in page and 'id="passkey-form"' in page
    assert "Sign in with a passkey" in page and 'action="/v1/openidc/login"' in page
    identity = _id_token(http, tenant, sign_in(http, tenant))
    assert identity["amr"] == ["otp"] and identity["acr"] == EMAIL_CODE


def test_the_e_mail_code_policy_offers_and_accepts_no_passkey(app, http):
    tenant = make_tenant(app, http)
    authenticator = _authenticator(app)
    sign_in(http, tenant)
    _register(http, authenticator)
    _set_policy(app, tenant, "email_code")
    page = _login_page(http, tenant, prompt="login")
    assert "passkey" not in page and 'autocomplete="email"' in page
    options = {"rpId": authenticator.rp_id, "challenge": "AAAA"}
    refused = _post_passkey(http, page, authenticator.get(options))
    assert "Passkeys are not used to sign in here." in refused.get_data(as_text=True)
    identity = _id_token(http, tenant, sign_in(http, tenant, prompt="login"))
    assert identity["amr"] == ["otp"] and identity["acr"] == EMAIL_CODE


def test_a_passkey_added_after_an_e_mail_sign_in_signs_in_alone(app, http):
    tenant = make_tenant(app, http)
    _set_policy(app, tenant, "passkey_alone")
    authenticator = _authenticator(app)
    assert _id_token(http, tenant, sign_in(http, tenant))["amr"] == ["otp"]
    listed = _register(http, authenticator, name="My laptop")
    assert "Your passkey was added." in listed and "My laptop" in listed

    page = _login_page(http, tenant, prompt="login")
    assert 'autocomplete="username webauthn"' in page
    options = _options(page, "get")
    assert options["userVerification"] == "required" and not options.get("allowCredentials")
    query = _finish(http, _post_passkey(http, page, authenticator.get(options)))
    identity = _id_token(http, tenant, query)
    assert identity["amr"] == ["hwk", "user"] and identity["acr"] == PASSKEY
    assert identity["sub"] == str(tenant.user_id) and identity["sid"]


def test_a_synced_passkey_is_a_software_key(app, http):
    tenant = make_tenant(app, http)
    _set_policy(app, tenant, "passkey_alone")
    authenticator = _authenticator(app, backup_eligible=True)
    sign_in(http, tenant)
    _register(http, authenticator)
    page = _login_page(http, tenant, prompt="login")
    answer = _post_passkey(http, page, authenticator.get(_options(page, "get")))
    identity = _id_token(http, tenant, _finish(http, answer))
    assert identity["amr"] == ["swk", "user"]


def test_registration_requires_user_verification_and_a_fresh_challenge(app, http):
    tenant = make_tenant(app, http)
    sign_in(http, tenant)
    refused = _register(http, _authenticator(app, user_verified=False))
    assert "could not be verified" in refused and 'id="no-passkeys"' in refused
    text = http.get("/v1/openidc/account").get_data(as_text=True)
    options = _options(text, "create")
    http.get("/v1/openidc/account")  # a newer ceremony replaces this one
    answer = http.post(
        "/v1/openidc/account/passkeys",
        data={"csrf_token": form_fields(text)["csrf_token"], "credential": _authenticator(app).create(options)},
    )
    text = answer.get_data(as_text=True)
    assert "could not be verified" in text and 'id="no-passkeys"' in text


def test_the_account_page_needs_a_sign_in(app, http):
    response = http.get("/v1/openidc/account")
    assert response.status_code == 303 and response.headers["Location"] == "/v1/openidc/account/sign-in"
    csrf = form_fields(http.get(response.headers["Location"]).get_data(as_text=True))["csrf_token"]
    refused = http.post("/v1/openidc/account/passkeys/remove", data={"csrf_token": csrf, "passkey_id": "1"})
    assert refused.status_code == 401 and "Sign in first" in refused.get_data(as_text=True)


def test_an_unverified_user_a_wrong_origin_and_a_foreign_passkey_are_refused(app, http):
    tenant = make_tenant(app, http)
    other = make_tenant(app, http, name="Other Tree")
    for each in (tenant, other):
        _set_policy(app, each, "passkey_alone")
    authenticator = _authenticator(app)
    sign_in(http, other)
    _register(http, authenticator)  # the passkey belongs to the user of the other tree

    page = _login_page(http, tenant, prompt="login")
    refused = _post_passkey(http, page, authenticator.get(_options(page, "get")))
    assert refused.status_code == 200 and "not accepted" in refused.get_data(as_text=True)

    page = refused.get_data(as_text=True)
    response = _post_passkey(http, page, authenticator.get(_options(page, "get"), origin="https://evil.example"))
    assert "not accepted" in response.get_data(as_text=True)

    own = _login_page(http, other, prompt="login")
    authenticator.user_verified = False
    response = _post_passkey(http, own, authenticator.get(_options(own, "get")))
    assert "not accepted" in response.get_data(as_text=True)


def test_a_signature_counter_that_goes_backwards_is_refused_and_logged(app, http, caplog):
    tenant = make_tenant(app, http)
    _set_policy(app, tenant, "passkey_alone")
    authenticator = _authenticator(app)
    sign_in(http, tenant)
    _register(http, authenticator)
    page = _login_page(http, tenant, prompt="login")
    _finish(http, _post_passkey(http, page, authenticator.get(_options(page, "get"), counter_step=5)))

    page = _login_page(http, tenant, prompt="login")
    with caplog.at_level(logging.WARNING, logger="app.passkeys.service"):
        cloned = _post_passkey(http, page, authenticator.get(_options(page, "get"), counter_step=-2))
    assert "not accepted" in cloned.get_data(as_text=True)
    assert any("cloned" in record.getMessage() for record in caplog.records)


def test_passkey_answers_count_against_the_sign_in_attempts(app, http):
    tenant = make_tenant(app, http)
    _set_policy(app, tenant, "passkey_alone")
    authenticator = _authenticator(app, user_verified=False)
    sign_in(http, tenant)
    _register(http, _authenticator(app))
    authenticator.credentials = []
    page = _login_page(http, tenant, prompt="login")
    statuses = []
    for _ in range(6):
        response = _post_passkey(http, page, "{}")
        statuses.append(response.status_code)
        page = response.get_data(as_text=True)
    assert statuses == [200] * 5 + [429]
    assert "Too many sign-in attempts" in page


def test_the_second_factor_policy_asks_the_passkey_after_the_code(app, http):
    tenant = make_tenant(app, http)
    authenticator = _authenticator(app)
    sign_in(http, tenant)
    _register(http, authenticator)
    _set_policy(app, tenant, "passkey_second_factor")

    page = _login_page(http, tenant, prompt="login")
    assert "passkey-form" not in page  # a passkey alone is not enough here
    response = _send_code(http, tenant, prompt="login")
    assert response.status_code == 303 and "/v1/openidc/login/passkey" in response.headers["Location"]
    step = http.get(path_of(response.headers["Location"])).get_data(as_text=True)
    options = _options(step, "get")
    assert [item["id"] for item in options["allowCredentials"]]
    identity = _id_token(http, tenant, _finish(http, _post_passkey(http, step, authenticator.get(options))))
    assert identity["amr"] == ["otp", "hwk", "user", "mfa"] and identity["acr"] == MFA


def test_the_second_factor_policy_refuses_a_user_without_a_passkey(app, http):
    tenant = make_tenant(app, http)
    _set_policy(app, tenant, "passkey_second_factor")
    response = _send_code(http, tenant, state="s1")
    assert "/v1/openidc/login/passkey" in response.headers["Location"]
    step = http.get(path_of(response.headers["Location"])).get_data(as_text=True)
    assert 'id="passkey-refusal"' in step and "requires a passkey" in step
    assert 'id="account-link"' not in step, "the account page needs a finished sign-in"
    assert http.get(authorize_query(tenant, prompt="none")).headers["Location"].count("error=login_required")
    cancelled = http.post("/v1/openidc/login/cancel", data=form_fields(step))
    query = query_of(cancelled.headers["Location"])
    assert query["error"] == "unmet_authentication_requirements" and query["state"] == "s1"
    # The e-mail code alone is no sign-in here: it opens no account page where a passkey could be added.
    assert http.get("/v1/openidc/account").status_code == 303


def test_a_sub_client_inherits_the_policy(app, http):
    tenant = make_tenant(app, http)
    _set_policy(app, tenant, "passkey_second_factor")
    sub_id, sub_secret = add_sub_client(http, tenant, redirect_uris=[tenant.redirect_uri])
    sub = type(tenant)(sub_id, sub_secret, tenant.api_token, tenant.redirect_uri, tenant.user_id, tenant.email, "")
    response = _send_code(http, sub)
    assert "/v1/openidc/login/passkey" in response.headers["Location"]


def test_the_last_passkey_cannot_be_removed_where_one_is_required(app, http):
    tenant = make_tenant(app, http)
    authenticator = _authenticator(app)
    sign_in(http, tenant)
    _register(http, authenticator, name="First")
    _register(http, authenticator, name="Second")
    _set_policy(app, tenant, "passkey_second_factor")
    assert http.get("/v1/openidc/account").status_code == 303, "the e-mail sign-in no longer meets the policy"
    step = http.get(path_of(_send_code(http, tenant, prompt="login").headers["Location"])).get_data(as_text=True)
    _finish(http, _post_passkey(http, step, authenticator.get(_options(step, "get"))))
    page = http.get("/v1/openidc/account").get_data(as_text=True)
    ids = re.findall(r'data-passkey-id="(\d+)"', page)
    csrf = form_fields(page)["csrf_token"]
    removed = http.post("/v1/openidc/account/passkeys/remove", data={"csrf_token": csrf, "passkey_id": ids[0]})
    assert "The passkey was removed." in removed.get_data(as_text=True)
    refused = http.post("/v1/openidc/account/passkeys/remove", data={"csrf_token": csrf, "passkey_id": ids[1]})
    text = refused.get_data(as_text=True)
    assert "last passkey" in text and f'data-passkey-id="{ids[1]}"' in text
    _set_policy(app, tenant, "passkey_alone")
    allowed = http.post("/v1/openidc/account/passkeys/remove", data={"csrf_token": csrf, "passkey_id": ids[1]})
    assert 'id="no-passkeys"' in allowed.get_data(as_text=True)


def test_voluntary_acr_values_never_claim_an_unmet_acr(app, http):
    tenant = make_tenant(app, http)
    identity = _id_token(http, tenant, sign_in(http, tenant, acr_values=f"{MFA} {PASSKEY}"))
    assert identity["acr"] == EMAIL_CODE and identity["amr"] == ["otp"]


def test_an_essential_acr_that_cannot_be_met_is_refused(app, http):
    tenant = make_tenant(app, http)
    _set_policy(app, tenant, "email_code")
    claims = json.dumps({"id_token": {"acr": {"essential": True, "values": [PASSKEY]}}})
    response = http.get(authorize_query(tenant, claims=claims, state="s2"))
    query = query_of(response.headers["Location"])
    assert query["error"] == "unmet_authentication_requirements" and query["state"] == "s2"
    malformed = query_of(http.get(authorize_query(tenant, claims="[1]")).headers["Location"])
    assert malformed["error"] == "invalid_request"


def test_acr_values_select_the_passkey_step_and_an_essential_one_is_claimed_as_asked(app, http):
    tenant = make_tenant(app, http)
    _set_policy(app, tenant, "passkey_alone")
    authenticator = _authenticator(app)
    sign_in(http, tenant)
    _register(http, authenticator)

    # The e-mail session meets the e-mail code; mfa asked for, the signed-in user steps up with a passkey.
    response = http.get(authorize_query(tenant, acr_values=MFA))
    assert "/v1/openidc/login/passkey" in response.headers["Location"]
    step = http.get(path_of(response.headers["Location"])).get_data(as_text=True)
    answer = _post_passkey(http, step, authenticator.get(_options(step, "get")))
    identity = _id_token(http, tenant, _finish(http, answer))
    assert identity["acr"] == MFA and "mfa" in identity["amr"]

    # The session now meets everything: single sign-on claims the acr the client named.
    claims = json.dumps({"id_token": {"acr": {"essential": True, "value": PASSKEY}}})
    identity = _id_token(http, tenant, sign_in(http, tenant, claims=claims))
    assert identity["acr"] == PASSKEY


def test_the_login_page_offers_no_passkey_alone_when_mfa_is_wanted(app, http):
    tenant = make_tenant(app, http)
    _set_policy(app, tenant, "passkey_alone")
    assert "passkey-form" in _login_page(http, tenant)
    assert "passkey-form" not in _login_page(http, tenant, acr_values=MFA)


def test_refresh_tokens_keep_how_the_user_signed_in(app, http):
    tenant = make_tenant(app, http)
    query = sign_in(http, tenant, scope="openid offline_access")
    first = exchange(http, tenant, query["code"]).get_json()
    refreshed = http.post(
        "/v1/openidc/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": first["refresh_token"],
            "client_id": str(tenant.client_id),
            "client_secret": tenant.client_secret,
        },
    )
    assert refreshed.status_code == 200, refreshed.get_data(as_text=True)
    identity = b64_json(refreshed.get_json()["id_token"].split(".")[1])
    assert identity["amr"] == ["otp"] and identity["acr"] == EMAIL_CODE
