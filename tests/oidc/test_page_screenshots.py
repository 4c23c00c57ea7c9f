"""Screenshots of every hosted sign-in page: desktop and phone, light and dark, with layout checks."""

from __future__ import annotations

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.common.virtual_authenticator import Protocol, Transport, VirtualAuthenticatorOptions
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from app.db import transaction
from app.extensions import db
from app.tenancy import service as tenancy_service
from app.tenancy.models import Client
from tests.support.browser import page_left
from tests.support.config import config_changed
from tests.support.oidc import authorize_query, latest_code_over_http, make_tenant, path_of
from tests.support.screenshots import SCHEMES, VIEWPORTS, shoot_everywhere

pytestmark = pytest.mark.browser


def _wait_for(driver, element_id: str):
    return WebDriverWait(driver, 15).until(expected_conditions.presence_of_element_located((By.ID, element_id)))


def _submit(driver, element_id: str, next_id: str) -> None:
    page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.ID, element_id).click()
    WebDriverWait(driver, 15).until(page_left(page))
    _wait_for(driver, next_id)


def _type(driver, element_id: str, text: str) -> None:
    field = _wait_for(driver, element_id)
    field.clear()
    field.send_keys(text)


def test_every_sign_in_page_in_every_view(app, client, live_server, callback_server, chromium):
    tenant = make_tenant(app, client, redirect_uris=[callback_server.url + "/cb"], name="Screenshot University")
    with app.app_context(), transaction():
        db.session.get(Client, tenant.client_id).accent_color = "#7a1fa2"
    base = live_server.url
    outbox = requests.Session()

    def login_page() -> None:
        chromium.get(base + authorize_query(tenant))
        _wait_for(chromium, "email-form")

    def code_page_with_error() -> None:
        login_page()
        _type(chromium, "email", tenant.email)
        _submit(chromium, "send-code", "code-form")
        code = latest_code_over_http(outbox, base, tenant.email)
        _type(chromium, "code", f"{(int(code) + 7) % 1_000_000:06d}")
        _submit(chromium, "verify-code", "message")
        assert "error" in chromium.find_element(By.ID, "message").get_attribute("class")

    shots = shoot_everywhere(chromium, "oidc-sign-in", login_page)
    shots += shoot_everywhere(chromium, "oidc-code-error", code_page_with_error)

    # Sign in once; the consent page then shows on every authorization until the user decides.
    login_page()
    _type(chromium, "email", tenant.email)
    _submit(chromium, "send-code", "code-form")
    _type(chromium, "code", latest_code_over_http(outbox, base, tenant.email))
    _submit(chromium, "verify-code", "consent-form")

    def consent_page() -> None:
        chromium.get(base + authorize_query(tenant))
        _wait_for(chromium, "consent-form")
        allow = chromium.find_element(By.ID, "allow")
        deny = chromium.find_element(By.ID, "deny")
        assert allow.value_of_css_property("background-color") != deny.value_of_css_property("background-color")
        assert allow.value_of_css_property("background-color") == "rgba(122, 31, 162, 1)", "the client's accent"

    def error_page() -> None:
        chromium.get(base + authorize_query(tenant, redirect_uri="https://elsewhere.example/cb"))
        _wait_for(chromium, "error-code")

    # The privacy page as its link on the consent page names it (the keyed reference, the way back).
    consent_page()
    privacy_path = path_of(chromium.find_element(By.ID, "privacy-link").get_attribute("href"))

    def privacy_page() -> None:
        chromium.get(base + privacy_path)
        _wait_for(chromium, "back-link")
        assert chromium.find_element(By.TAG_NAME, "h1").text == "Privacy notice"
        assert not chromium.find_elements(By.ID, "error-code"), "the privacy page itself, not an error page"

    def not_found_page() -> None:
        chromium.get(f"{base}/no/such/page")
        _wait_for(chromium, "error-code")

    shots += shoot_everywhere(chromium, "oidc-consent", consent_page)
    shots += shoot_everywhere(chromium, "oidc-error", error_page)
    shots += shoot_everywhere(chromium, "oidc-privacy", privacy_page)
    shots += shoot_everywhere(chromium, "html-404", not_found_page)
    assert len(shots) == 6 * len(VIEWPORTS) * len(SCHEMES)


def test_every_account_page_in_every_view(app, client, live_server, chromium):
    """Home signed out and in, the account page's sign-in (address, code, a choice of accounts), the
    account page with a passkey (added with Chromium's virtual authenticator) and the passkey step."""
    # Each view mails a code to the one address: more than an hour's worth for one address.
    with config_changed(live_server.app, OIDC_LOGIN_CODE_SENDS_PER_ADDRESS=100):
        _shoot_the_account_pages(app, client, live_server, chromium)


def _shoot_the_account_pages(app, client, live_server, chromium) -> None:
    chromium.add_virtual_authenticator(
        VirtualAuthenticatorOptions(
            protocol=Protocol.CTAP2,
            transport=Transport.INTERNAL,
            has_resident_key=True,
            has_user_verification=True,
            is_user_verified=True,
        )
    )
    tenant = make_tenant(app, client, name="Screenshot University")
    other = make_tenant(app, client, name="Second Organisation")
    created = client.post("/v1/user/create", json={"profile": {"email_address": tenant.email}}, headers=other.headers)
    assert created.status_code == 201
    base = live_server.url
    outbox = requests.Session()

    def sign_in_page() -> None:
        chromium.delete_all_cookies()
        chromium.get(base + "/")
        _wait_for(chromium, "sign-in-link")
        _submit(chromium, "sign-in-link", "email-form")
        assert chromium.find_element(By.ID, "email").get_attribute("autocomplete") == "username webauthn"

    def code_page() -> None:
        sign_in_page()
        _type(chromium, "email", tenant.email)
        _submit(chromium, "send-code", "code-form")

    def choice_page() -> None:
        code_page()
        _type(chromium, "code", latest_code_over_http(outbox, base, tenant.email))
        _submit(chromium, "verify-code", "choose-form")

    shots = shoot_everywhere(
        chromium, "home-signed-out", lambda: (chromium.get(base + "/"), _wait_for(chromium, "sign-in-link"))
    )
    shots += shoot_everywhere(chromium, "account-sign-in", sign_in_page)
    shots += shoot_everywhere(chromium, "account-code", code_page)
    shots += shoot_everywhere(chromium, "account-choice", choice_page)

    choice_page()
    chosen = next(
        button
        for button in chromium.find_elements(By.CSS_SELECTOR, "#accounts button")
        if button.text == "Screenshot University"
    )
    page = chromium.find_element(By.TAG_NAME, "html")
    chosen.click()
    WebDriverWait(chromium, 15).until(page_left(page))
    _type(chromium, "passkey-name", "Screenshot laptop")
    _submit(chromium, "add-passkey", "message")
    assert "Your passkey was added." in chromium.find_element(By.ID, "message").text

    def account_page() -> None:
        chromium.get(base + "/v1/openidc/account")
        _wait_for(chromium, "passkeys")
        assert "Screenshot laptop" in chromium.find_element(By.ID, "passkeys").text

    def home_signed_in() -> None:
        chromium.get(base + "/")
        _wait_for(chromium, "signed-in-as")

    shots += shoot_everywhere(chromium, "account", account_page)
    shots += shoot_everywhere(chromium, "home-signed-in", home_signed_in)

    with app.app_context(), transaction():
        tenancy_service.set_sign_in_policy(tenant.client_id, "passkey_second_factor")
    # Without a credential the authenticator cannot answer the sign-in page's conditional request on its own.
    chromium.remove_all_credentials()

    def passkey_step_page() -> None:
        code_page()
        _type(chromium, "code", latest_code_over_http(outbox, base, tenant.email))
        _submit(chromium, "verify-code", "choose-form")
        chosen = next(
            b for b in chromium.find_elements(By.CSS_SELECTOR, "#accounts button") if b.text == "Screenshot University"
        )
        page = chromium.find_element(By.TAG_NAME, "html")
        chosen.click()
        WebDriverWait(chromium, 15).until(page_left(page))
        _wait_for(chromium, "passkey-form")

    shots += shoot_everywhere(chromium, "oidc-passkey-step", passkey_step_page)
    assert len(shots) == 7 * len(VIEWPORTS) * len(SCHEMES)
