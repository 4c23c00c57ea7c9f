"""The account page found from home: the home page shows "Sign in", the account page's own sign-in
(the e-mail code for every account of an address, or a passkey) under each tree's policy, and, once
signed in, the home page links to the account pages. Driven over HTTP with Flask test clients; a
software authenticator answers the pages' real ceremony options."""

from __future__ import annotations

import html
import json
import re

import pytest

from app.db import transaction
from app.passkeys.settings import PasskeySettings
from app.settings import current
from app.tenancy import service as tenancy_service
from tests.support.oidc import form_fields, latest_code, make_tenant, path_of, query_of, sign_in
from tests.support.passkeys import SoftAuthenticator

SIGN_IN = "/v1/openidc/account/sign-in"
ACCOUNT = "/v1/openidc/account"


def _set_policy(app, tenant, policy: str) -> None:
    with app.app_context(), transaction():
        tenancy_service.set_sign_in_policy(tenant.client_id, policy)


def _authenticator(app) -> SoftAuthenticator:
    with app.app_context():
        settings = current(PasskeySettings)
        return SoftAuthenticator(origin=settings.origins.split()[0], rp_id=settings.rp_id)


def _options(page: str, kind: str) -> dict:
    found = re.search(rf'data-passkey-{kind}="([^"]*)"', page)
    assert found, f"no passkey {kind} options on the page"
    return json.loads(html.unescape(found.group(1)))


def _links(page: str) -> dict[str, str]:
    return {link_id: href for href, link_id in re.findall(r'<a [^>]*href="([^"]+)"[^>]*id="([a-z0-9-]+)"', page)}


def _register(http, authenticator: SoftAuthenticator) -> None:
    text = http.get(ACCOUNT).get_data(as_text=True)
    answer = http.post(
        ACCOUNT + "/passkeys",
        data={
            "csrf_token": form_fields(text)["csrf_token"],
            "credential": authenticator.create(_options(text, "create")),
        },
    )
    assert "Your passkey was added." in answer.get_data(as_text=True)


def _code_sign_in(http, email: str):
    """The account sign-in by e-mail code; the answer to the code."""
    page = http.get(SIGN_IN)
    assert page.status_code == 200
    sent = http.post(SIGN_IN, data={**form_fields(page.get_data(as_text=True)), "email": email})
    assert sent.status_code == 200 and f"If an account exists for {email}" in sent.get_data(as_text=True)
    return http.post(
        SIGN_IN + "/code", data={**form_fields(sent.get_data(as_text=True)), "code": latest_code(http, email)}
    )


def _add_user(http, tenant, email: str) -> None:
    created = http.post("/v1/user/create", json={"profile": {"email_address": email}}, headers=tenant.headers)
    assert created.status_code == 201, created.get_data(as_text=True)


@pytest.fixture
def http(app):
    return app.test_client()


def test_home_shows_sign_in_then_links_to_the_account(app, http):
    tenant = make_tenant(app, http, name="Home University")
    home = http.get("/").get_data(as_text=True)
    assert _links(home)["sign-in-link"] == SIGN_IN and "account-page-1" not in _links(home)
    assert http.get(ACCOUNT).headers["Location"].endswith(SIGN_IN), "the account page asks to sign in first"

    signed_in = _code_sign_in(http, tenant.email)
    assert signed_in.status_code == 303 and signed_in.headers["Location"] == ACCOUNT
    cookies = signed_in.headers.getlist("Set-Cookie")
    assert any(c.startswith("tessera_sso=") and "Path=/;" in c and "HttpOnly" in c for c in cookies), cookies
    assert any(c.startswith("tessera_sso=;") and "Path=/v1/openidc" in c for c in cookies), "an older cookie is gone"
    account = http.get(ACCOUNT).get_data(as_text=True)
    assert tenant.email in account and "Signed in to Home University" in account

    home = http.get("/")
    assert home.headers["Cache-Control"] == "no-store"
    text = home.get_data(as_text=True)
    assert f'<strong id="signed-in-as">{tenant.email}</strong>' in text
    assert _links(text)["account-page-1"] == ACCOUNT and "sign-in-link" not in _links(text)

    signed_out = http.post("/v1/openidc/logout", data={**form_fields(account), "confirm": "yes"})
    assert signed_out.status_code == 200 and "sign-in-link" in _links(http.get("/").get_data(as_text=True))


def test_the_account_sign_in_tells_nothing_about_an_unknown_address(app, http):
    unknown = "nobody-here@example.org"
    page = http.get(SIGN_IN).get_data(as_text=True)
    sent = http.post(SIGN_IN, data={**form_fields(page), "email": unknown})
    assert sent.status_code == 200 and f"If an account exists for {unknown}, we sent a code to it." in sent.get_data(
        as_text=True
    )
    assert http.get("/dev/outbox", query_string={"to": unknown}).get_json()["data"] == []
    wrong = http.post(SIGN_IN + "/code", data={**form_fields(sent.get_data(as_text=True)), "code": "123456"})
    assert wrong.status_code == 200 and "That code is not right. 4 attempts left." in wrong.get_data(as_text=True)
    malformed = http.post(SIGN_IN, data={**form_fields(page), "email": "not an address"})
    assert malformed.status_code == 400 and "Enter a valid e-mail address." in malformed.get_data(as_text=True)


def test_codes_and_passkeys_count_against_the_sign_in_attempts(app, http):
    tenant = make_tenant(app, http)
    page = http.get(SIGN_IN).get_data(as_text=True)
    sent = http.post(SIGN_IN, data={**form_fields(page), "email": tenant.email}).get_data(as_text=True)
    statuses = []
    for _ in range(6):
        answer = http.post(SIGN_IN + "/code", data={**form_fields(sent), "code": "000000"})
        statuses.append(answer.status_code)
    assert statuses == [200] * 5 + [429]
    right = http.post(SIGN_IN + "/code", data={**form_fields(sent), "code": latest_code(http, tenant.email)})
    assert right.status_code == 429 and http.get(ACCOUNT).status_code == 303


def test_a_sign_in_page_of_another_browser_is_refused(app, http):
    page = http.get(SIGN_IN).get_data(as_text=True)
    other = app.test_client()
    other.get(SIGN_IN)  # a browser cookie of its own
    refused = other.post(SIGN_IN, data={**form_fields(page), "email": "someone@example.org"})
    assert refused.status_code == 403  # its CSRF token is the first browser's
    fields = {**form_fields(page), "csrf_token": form_fields(other.get(SIGN_IN).get_data(as_text=True))["csrf_token"]}
    expired = other.post(SIGN_IN, data={**fields, "email": "someone@example.org"})
    assert expired.status_code == 400 and "request_expired" in expired.get_data(as_text=True)


def test_an_address_with_accounts_in_two_trees_picks_one(app, http):
    first = make_tenant(app, http, name="First Tree")
    second = make_tenant(app, http, name="Second Tree")
    _add_user(http, second, first.email)
    answer = _code_sign_in(http, first.email)
    mail = http.get("/dev/outbox", query_string={"to": first.email}).get_json()["data"][0]["text"]
    assert "First Tree" in mail and "Second Tree" in mail
    page = answer.get_data(as_text=True)
    assert answer.status_code == 200 and "Choose your account" in page
    choices = dict(re.findall(r'value="(\d+)" class="secondary" id="account-\d+">([^<]+)</button>', page))
    assert sorted(choices.values()) == ["First Tree", "Second Tree"]
    chosen = next(user_id for user_id, name in choices.items() if name == "Second Tree")
    refused = http.post(SIGN_IN + "/account", data={**form_fields(page), "account": str(first.user_id + 10**6)})
    assert "Choose one of your accounts." in refused.get_data(as_text=True)
    went_on = http.post(SIGN_IN + "/account", data={**form_fields(page), "account": chosen})
    assert went_on.status_code == 303 and went_on.headers["Location"] == ACCOUNT
    assert "Signed in to Second Tree" in http.get(ACCOUNT).get_data(as_text=True)


def test_a_passkey_signs_in_to_the_account_on_its_own_where_the_tree_allows_it(app, http):
    tenant = make_tenant(app, http)
    key = _authenticator(app)
    sign_in(http, tenant)
    _register(http, key)

    browser = app.test_client()
    page = browser.get(SIGN_IN).get_data(as_text=True)
    assert 'autocomplete="username webauthn"' in page and "Sign in with a passkey" in page
    options = _options(page, "get")
    assert not options.get("allowCredentials"), "any of the browser's passkeys"
    fields = form_fields(page)
    answer = browser.post(
        SIGN_IN + "/passkey",
        data={"csrf_token": fields["csrf_token"], "request": fields["request"], "credential": key.get(options)},
    )
    assert answer.status_code == 303 and answer.headers["Location"] == ACCOUNT
    assert tenant.email in browser.get(ACCOUNT).get_data(as_text=True)

    _set_policy(app, tenant, "email_code")
    other = app.test_client()
    page = other.get(SIGN_IN).get_data(as_text=True)
    fields = form_fields(page)
    refused = other.post(
        SIGN_IN + "/passkey",
        data={
            "csrf_token": fields["csrf_token"],
            "request": fields["request"],
            "credential": key.get(_options(page, "get")),
        },
    )
    assert refused.status_code == 200 and "asks you to sign in with your e-mail address." in refused.get_data(
        as_text=True
    )
    assert other.get(ACCOUNT).status_code == 303


def test_under_the_second_factor_the_code_leads_to_the_passkey_step_and_only_then_the_account(app, http):
    tenant = make_tenant(app, http)
    key = _authenticator(app)
    sign_in(http, tenant)
    _register(http, key)
    _set_policy(app, tenant, "passkey_second_factor")

    browser = app.test_client()
    page = browser.get(SIGN_IN).get_data(as_text=True)
    fields = form_fields(page)
    alone = browser.post(
        SIGN_IN + "/passkey",
        data={
            "csrf_token": fields["csrf_token"],
            "request": fields["request"],
            "credential": key.get(_options(page, "get")),
        },
    )
    assert "asks you to sign in with your e-mail address first." in alone.get_data(as_text=True)

    answer = _code_sign_in(browser, tenant.email)
    assert answer.status_code == 303 and "/v1/openidc/login/passkey" in answer.headers["Location"]
    assert "tessera_sso" not in " ".join(answer.headers.getlist("Set-Cookie"))
    assert browser.get(ACCOUNT).status_code == 303, "no account before the passkey step"
    step = browser.get(path_of(answer.headers["Location"])).get_data(as_text=True)
    fields = form_fields(step)
    done = browser.post(
        "/v1/openidc/login/passkey",
        data={
            "csrf_token": fields["csrf_token"],
            "request": fields["request"],
            "credential": key.get(_options(step, "get")),
        },
    )
    assert done.status_code == 303 and done.headers["Location"] == ACCOUNT
    assert tenant.email in browser.get(ACCOUNT).get_data(as_text=True)


def test_a_user_without_a_passkey_under_the_second_factor_goes_back_to_the_sign_in(app, http):
    tenant = make_tenant(app, http)
    _set_policy(app, tenant, "passkey_second_factor")
    answer = _code_sign_in(http, tenant.email)
    step = http.get(path_of(answer.headers["Location"])).get_data(as_text=True)
    assert 'id="passkey-refusal"' in step and 'id="account-link"' not in step
    cancelled = http.post("/v1/openidc/login/cancel", data=form_fields(step))
    assert cancelled.status_code == 303 and cancelled.headers["Location"] == SIGN_IN
    assert not query_of(cancelled.headers["Location"])
    assert http.get(ACCOUNT).status_code == 303
