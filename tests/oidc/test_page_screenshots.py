"""Screenshots of every hosted sign-in page: desktop and phone, light and dark, with layout checks."""

from __future__ import annotations

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from app.db import transaction
from app.extensions import db
from app.tenancy.models import Client
from tests.support.browser import page_left
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
