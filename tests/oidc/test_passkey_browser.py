"""Passkeys in a real headless Chromium with a virtual authenticator (CTAP2, internal, resident
keys, user verification), at desktop and phone widths, on the README's form of address
(`http://localhost:<port>`): add a passkey after an e-mail sign-in, be offered it and sign in with
it (to an application, and to the account page from home), the second factor that the e-mail code
alone cannot pass, and the refusal where the tenant requires a passkey the user does not have."""

from __future__ import annotations

import contextlib

import pytest
import requests
from selenium.common.exceptions import ElementNotInteractableException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.virtual_authenticator import Protocol, Transport, VirtualAuthenticatorOptions
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from app.db import transaction
from app.oidc.tokens import b64_json
from app.tenancy import service as tenancy_service
from tests.support.browser import application_served, headless_chromium, page_left
from tests.support.oidc import authorize_query, latest_code_over_http, make_tenant, query_of

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": "1024,900", "phone": "390,844"}


@pytest.fixture(scope="module")
def localhost_server(app, real_worker):
    """The application on 127.0.0.1 with `BASE_URL` http://localhost:<port>: WebAuthn takes no IP
    address as RP id, and http://localhost is a secure context."""
    with application_served(app) as url:
        yield url


@pytest.fixture(params=sorted(WIDTHS))
def browser(request):
    driver = headless_chromium(WIDTHS[request.param])
    driver.add_virtual_authenticator(
        VirtualAuthenticatorOptions(
            protocol=Protocol.CTAP2,
            transport=Transport.INTERNAL,
            has_resident_key=True,
            has_user_verification=True,
            is_user_verified=True,
        )
    )
    yield driver
    driver.quit()


def _wait_for(driver, element_id: str):
    return WebDriverWait(driver, 15).until(expected_conditions.presence_of_element_located((By.ID, element_id)))


def _click_and_wait_for_next_page(driver, element_id: str) -> None:
    page = driver.find_element(By.TAG_NAME, "html")
    WebDriverWait(driver, 15).until(expected_conditions.element_to_be_clickable((By.ID, element_id))).click()
    WebDriverWait(driver, 15).until(page_left(page))


def _sign_in_by_code(driver, base_url: str, email: str) -> None:
    field = _wait_for(driver, "email")
    field.clear()
    field.send_keys(email)
    _click_and_wait_for_next_page(driver, "send-code")
    code = latest_code_over_http(requests.Session(), base_url, email)
    _wait_for(driver, "code").send_keys(code)
    _click_and_wait_for_next_page(driver, "verify-code")


def _use_passkey_on_login_page(driver, redirect_uri: str) -> None:
    """Sign in with the passkey: Chromium's virtual authenticator may answer the e-mail field's
    conditional request on its own (as autofill would after the user picks the passkey); otherwise
    the user presses "Sign in with a passkey"."""
    WebDriverWait(driver, 15).until(
        lambda current: (
            current.current_url.startswith(redirect_uri)
            or any(button.is_displayed() for button in current.find_elements(By.ID, "passkey-sign-in"))
        )
    )
    if not driver.current_url.startswith(redirect_uri):
        # The conditional request may have answered meanwhile.
        with contextlib.suppress(StaleElementReferenceException, ElementNotInteractableException):
            driver.find_element(By.ID, "passkey-sign-in").click()


def _landed(driver, prefix: str) -> dict:
    WebDriverWait(driver, 15).until(lambda current: current.current_url.startswith(prefix))
    return query_of(driver.current_url)


def _id_token(base_url: str, tenant, redirect_uri: str, code: str) -> dict:
    response = requests.post(
        base_url + "/v1/openidc/token",
        timeout=10,
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "client_id": str(tenant.client_id),
            "client_secret": tenant.client_secret,
        },
    )
    assert response.status_code == 200, response.text
    return b64_json(response.json()["id_token"].split(".")[1])


def _tenant(app, client, redirect_uri: str, policy: str):
    tenant = make_tenant(app, client, redirect_uris=[redirect_uri], name="Passkey University")
    with app.app_context(), transaction():
        tenancy_service.set_sign_in_policy(tenant.client_id, policy)
    return tenant


def test_add_a_passkey_after_an_e_mail_sign_in_then_sign_in_with_it(
    app, client, localhost_server, callback_server, browser
):
    """Under the default policy, which lets a passkey sign in on its own."""
    redirect_uri = callback_server.url + "/cb"
    tenant = make_tenant(app, client, redirect_uris=[redirect_uri], name="Passkey University")
    browser.get(localhost_server + authorize_query(tenant))
    email_field = _wait_for(browser, "email")
    assert email_field.get_attribute("autocomplete") == "username webauthn"
    assert _wait_for(browser, "passkey-sign-in").is_displayed()
    _sign_in_by_code(browser, localhost_server, tenant.email)
    _click_and_wait_for_next_page(browser, "allow")
    assert _id_token(localhost_server, tenant, redirect_uri, _landed(browser, redirect_uri)["code"])["amr"] == ["otp"]

    browser.get(localhost_server + "/v1/openidc/account")
    _wait_for(browser, "no-passkeys")
    _wait_for(browser, "passkey-name").send_keys("Virtual key")
    _click_and_wait_for_next_page(browser, "add-passkey")
    assert "Your passkey was added." in _wait_for(browser, "message").text
    assert "Virtual key" in browser.find_element(By.ID, "passkeys").text

    browser.get(localhost_server + authorize_query(tenant, prompt="login"))
    _use_passkey_on_login_page(browser, redirect_uri)
    identity = _id_token(localhost_server, tenant, redirect_uri, _landed(browser, redirect_uri)["code"])
    assert identity["amr"] == ["hwk", "user"] and identity["acr"] == "urn:tessera:acr:passkey"
    assert identity["sub"] == str(tenant.user_id)


def test_a_tenant_that_requires_a_passkey_refuses_a_user_without_one(
    app, client, localhost_server, callback_server, browser
):
    redirect_uri = callback_server.url + "/cb"
    tenant = _tenant(app, client, redirect_uri, "passkey_second_factor")
    browser.get(localhost_server + authorize_query(tenant, state="needs-passkey"))
    assert not browser.find_elements(By.ID, "passkey-form")
    _sign_in_by_code(browser, localhost_server, tenant.email)
    assert "requires a passkey" in _wait_for(browser, "passkey-refusal").text
    _click_and_wait_for_next_page(browser, "cancel")
    query = _landed(browser, redirect_uri)
    assert query["error"] == "unmet_authentication_requirements" and query["state"] == "needs-passkey"


def test_a_tenant_that_requires_a_passkey_asks_it_after_the_code(
    app, client, localhost_server, callback_server, browser
):
    redirect_uri = callback_server.url + "/cb"
    tenant = _tenant(app, client, redirect_uri, "passkey_alone")
    browser.get(localhost_server + authorize_query(tenant))
    _sign_in_by_code(browser, localhost_server, tenant.email)
    _click_and_wait_for_next_page(browser, "allow")
    _landed(browser, redirect_uri)
    browser.get(localhost_server + "/v1/openidc/account")
    _click_and_wait_for_next_page(browser, "add-passkey")
    assert "Your passkey was added." in _wait_for(browser, "message").text
    with app.app_context(), transaction():
        tenancy_service.set_sign_in_policy(tenant.client_id, "passkey_second_factor")

    browser.get(localhost_server + authorize_query(tenant, prompt="login"))
    _sign_in_by_code(browser, localhost_server, tenant.email)
    _click_and_wait_for_next_page(browser, "passkey-sign-in")
    identity = _id_token(localhost_server, tenant, redirect_uri, _landed(browser, redirect_uri)["code"])
    assert identity["amr"] == ["otp", "hwk", "user", "mfa"] and identity["acr"] == "urn:tessera:acr:mfa"


def test_openid_client_asks_for_mfa_and_sees_it(app, client, localhost_server, callback_server, browser, node_rp):
    """An OpenID Certified RP library (openid-client) asks for the mfa class with max_age; the user
    signs in by code, steps up with the passkey, and the id_token openid-client validates claims
    what was asked."""
    redirect_uri = callback_server.url + "/cb"
    tenant = _tenant(app, client, redirect_uri, "passkey_alone")
    browser.get(localhost_server + authorize_query(tenant))
    _sign_in_by_code(browser, localhost_server, tenant.email)
    _click_and_wait_for_next_page(browser, "allow")
    _landed(browser, redirect_uri)
    browser.get(localhost_server + "/v1/openidc/account")
    _click_and_wait_for_next_page(browser, "add-passkey")
    assert "Your passkey was added." in _wait_for(browser, "message").text

    auth = {"method": "client_secret_post", "secret": tenant.client_secret}
    common = {"issuer": localhost_server, "clientId": str(tenant.client_id), "auth": auth, "redirectUri": redirect_uri}
    extra = {"acr_values": "urn:tessera:acr:mfa", "max_age": "300", "prompt": "login"}
    started = node_rp("start", {**common, "scope": "openid profile email", "par": False, "extra": extra})
    assert started["ok"], started
    browser.get(started["url"])
    _sign_in_by_code(browser, localhost_server, tenant.email)
    _click_and_wait_for_next_page(browser, "passkey-sign-in")
    _landed(browser, redirect_uri)
    checks = {"verifier": started["verifier"], "state": started["state"], "nonce": started["nonce"], "maxAge": 300}
    result = node_rp("finish", {**common, "callbackUrl": browser.current_url, **checks})
    assert result["ok"], result
    assert result["claims"]["acr"] == "urn:tessera:acr:mfa"
    assert result["claims"]["amr"] == ["otp", "hwk", "user", "mfa"]


def test_a_code_holder_gets_no_account_and_only_the_user_finishes_the_passkey_step(
    app, client, localhost_server, callback_server, browser
):
    """Under `passkey_second_factor`, another browser holding only the user's e-mail code reaches the
    passkey step and nothing more: the account page neither names the user nor offers a registration.
    The user's own browser then finishes the same step with their passkey."""
    redirect_uri = callback_server.url + "/cb"
    tenant = _tenant(app, client, redirect_uri, "passkey_alone")
    browser.get(localhost_server + authorize_query(tenant))
    _sign_in_by_code(browser, localhost_server, tenant.email)
    _click_and_wait_for_next_page(browser, "allow")
    _landed(browser, redirect_uri)
    browser.get(localhost_server + "/v1/openidc/account")
    _wait_for(browser, "passkey-name").send_keys("Own laptop")
    _click_and_wait_for_next_page(browser, "add-passkey")
    assert "Your passkey was added." in _wait_for(browser, "message").text
    with app.app_context(), transaction():
        tenancy_service.set_sign_in_policy(tenant.client_id, "passkey_second_factor")

    other = headless_chromium(WIDTHS["phone"])
    try:
        other.get(localhost_server + authorize_query(tenant))
        _sign_in_by_code(other, localhost_server, tenant.email)
        _wait_for(other, "passkey-form")
        other.get(localhost_server + "/v1/openidc/account")
        _wait_for(other, "email-form")
        assert other.current_url == localhost_server + "/v1/openidc/account/sign-in", "asked to sign in"
        body = other.find_element(By.TAG_NAME, "body").text
        assert tenant.email not in body and "Own laptop" not in body
        assert not other.find_elements(By.ID, "register-form")
    finally:
        other.quit()

    browser.get(localhost_server + authorize_query(tenant, prompt="login"))
    _sign_in_by_code(browser, localhost_server, tenant.email)
    _click_and_wait_for_next_page(browser, "passkey-sign-in")
    identity = _id_token(localhost_server, tenant, redirect_uri, _landed(browser, redirect_uri)["code"])
    assert identity["amr"] == ["otp", "hwk", "user", "mfa"] and identity["acr"] == "urn:tessera:acr:mfa"


def test_from_home_sign_in_add_a_passkey_and_be_offered_it_next_time(app, client, localhost_server, browser):
    """The README's address (`http://localhost:<port>`): "Sign in" on the home page, the e-mail code,
    a passkey added on the account page; after signing out, the same "Sign in" offers the passkey
    (the e-mail field's autofill, or the button) and it opens the account page."""
    tenant = make_tenant(app, client, name="Home Page University")
    browser.get(localhost_server + "/")
    _click_and_wait_for_next_page(browser, "sign-in-link")
    assert _wait_for(browser, "email").get_attribute("autocomplete") == "username webauthn"
    _sign_in_by_code(browser, localhost_server, tenant.email)
    assert browser.current_url == localhost_server + "/v1/openidc/account"
    _wait_for(browser, "passkey-name").send_keys("Home laptop")
    _click_and_wait_for_next_page(browser, "add-passkey")
    assert "Your passkey was added." in _wait_for(browser, "message").text

    browser.get(localhost_server + "/")
    assert _wait_for(browser, "signed-in-as").text == tenant.email
    _click_and_wait_for_next_page(browser, "account-page-1")
    _click_and_wait_for_next_page(browser, "sign-out")
    browser.get(localhost_server + "/")
    _click_and_wait_for_next_page(browser, "sign-in-link")
    WebDriverWait(browser, 15).until(
        lambda current: (
            current.find_elements(By.ID, "account-email")
            or any(button.is_displayed() for button in current.find_elements(By.ID, "passkey-sign-in"))
        )
    )
    if not browser.find_elements(By.ID, "account-email"):
        # The conditional request may have answered meanwhile.
        with contextlib.suppress(StaleElementReferenceException, ElementNotInteractableException):
            browser.find_element(By.ID, "passkey-sign-in").click()
    assert _wait_for(browser, "account-email").text == tenant.email
    assert browser.current_url == localhost_server + "/v1/openidc/account"
