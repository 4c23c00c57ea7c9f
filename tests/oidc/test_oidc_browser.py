"""The hosted login in a real headless Chromium, through the actual HTML pages (no JavaScript needed)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from app.db import transaction, utcnow
from app.extensions import db
from app.oidc.models import AuthorizationRequest
from tests.support.browser import headless_chromium, page_left
from tests.support.oidc import add_sub_client, authorize_query, latest_code_over_http, make_tenant, query_of

pytestmark = pytest.mark.browser


@pytest.fixture
def browser():
    driver = headless_chromium()
    yield driver
    driver.quit()


def _wait_for(driver, element_id: str):
    return WebDriverWait(driver, 15).until(expected_conditions.presence_of_element_located((By.ID, element_id)))


def _wait_for_url(driver, prefix: str) -> str:
    WebDriverWait(driver, 15).until(lambda current: current.current_url.startswith(prefix))
    return driver.current_url


def _click_and_wait_for_next_page(driver, element_id: str) -> None:
    """Click and wait until the browser has left the current page (its elements went stale)."""
    page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.ID, element_id).click()
    WebDriverWait(driver, 15).until(page_left(page))


def _message(driver) -> str:
    return driver.find_element(By.ID, "message").text


def _send_code(driver, email: str) -> None:
    field = _wait_for(driver, "email")
    field.clear()
    field.send_keys(email)
    _click_and_wait_for_next_page(driver, "send-code")
    _wait_for(driver, "code-form")


def _enter_code(driver, code: str) -> None:
    field = _wait_for(driver, "code")
    field.clear()
    field.send_keys(code)
    _click_and_wait_for_next_page(driver, "verify-code")


def _exchange(live_server, client_id, secret, redirect_uri, code) -> requests.Response:
    return requests.post(
        live_server.url + "/v1/openidc/token",
        timeout=10,
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "client_id": str(client_id),
            "client_secret": secret,
        },
    )


def test_login_with_a_wrong_code_then_the_right_one(app, client, live_server, callback_server, browser):
    redirect_uri = callback_server.url + "/cb"
    tenant = make_tenant(app, client, redirect_uris=[redirect_uri], name="Chromium University")
    browser.get(live_server.url + authorize_query(tenant, state="browser-state"))
    assert "Chromium University" in browser.find_element(By.ID, "client-name").text
    assert f"/privacy/{tenant.client_id}" in browser.find_element(By.ID, "privacy-link").get_attribute("href")

    _send_code(browser, tenant.email)
    assert "If an account exists" in _message(browser)
    code = latest_code_over_http(requests.Session(), live_server.url, tenant.email)
    _enter_code(browser, f"{(int(code) + 7) % 1_000_000:06d}")
    _wait_for(browser, "message")
    assert "not right" in _message(browser) and "4 attempts left" in _message(browser)

    _enter_code(browser, code)
    _wait_for(browser, "consent-form")
    scopes = {item.get_attribute("data-scope") for item in browser.find_elements(By.CSS_SELECTOR, "#scopes > li")}
    # The scopes asked for, then what the client's registration adds: its mapped claims and the credential list.
    assert scopes == {"openid", "profile", "email", "app_claims", "credentials"}
    browser.find_element(By.ID, "allow").click()
    landed = _wait_for_url(browser, redirect_uri)
    assert browser.find_element(By.ID, "rp").text == "callback received"
    query = query_of(landed)
    assert query["state"] == "browser-state"
    tokens = _exchange(live_server, tenant.client_id, tenant.client_secret, redirect_uri, query["code"])
    assert tokens.status_code == 200
    info = requests.get(
        live_server.url + "/v1/openidc/user",
        timeout=10,
        headers={"Authorization": f"Bearer {tokens.json()['access_token']}"},
    )
    assert info.json()["email"] == tenant.email


def test_expired_code_then_a_new_code(app, client, live_server, callback_server, browser):
    redirect_uri = callback_server.url + "/cb"
    tenant = make_tenant(app, client, redirect_uris=[redirect_uri])
    browser.get(live_server.url + authorize_query(tenant, login_hint=tenant.email))
    assert _wait_for(browser, "email").get_attribute("value") == tenant.email
    _send_code(browser, tenant.email)
    expired_code = latest_code_over_http(requests.Session(), live_server.url, tenant.email)
    with app.app_context(), transaction():
        row = db.session.query(AuthorizationRequest).filter_by(email=tenant.email).one()
        row.login_code_expires_at = utcnow() - timedelta(seconds=1)
    _enter_code(browser, expired_code)
    _wait_for(browser, "message")
    assert "expired" in _message(browser)

    _click_and_wait_for_next_page(browser, "resend")
    _wait_for(browser, "code-form")
    fresh_code = latest_code_over_http(requests.Session(), live_server.url, tenant.email)
    _enter_code(browser, fresh_code)
    _wait_for(browser, "consent-form")
    browser.find_element(By.ID, "allow").click()
    assert query_of(_wait_for_url(browser, redirect_uri)).get("code")


def test_single_sign_on_on_a_second_client(app, client, live_server, callback_server, browser):
    first_uri, second_uri = callback_server.url + "/first", callback_server.url + "/second"
    tenant = make_tenant(app, client, redirect_uris=[first_uri])
    second_id, second_secret = add_sub_client(client, tenant, redirect_uris=[second_uri], name="Second Campus App")

    browser.get(live_server.url + authorize_query(tenant))
    _send_code(browser, tenant.email)
    _enter_code(browser, latest_code_over_http(requests.Session(), live_server.url, tenant.email))
    _wait_for(browser, "consent-form")
    browser.find_element(By.ID, "allow").click()
    _wait_for_url(browser, first_uri)

    # The second client of the same tree: no login page, only its own consent.
    browser.get(live_server.url + authorize_query(tenant, client_id=str(second_id), redirect_uri=second_uri))
    _wait_for(browser, "consent-form")
    assert "Second Campus App" in browser.find_element(By.ID, "client-name").text
    assert not browser.find_elements(By.ID, "email")
    browser.find_element(By.ID, "allow").click()
    code = query_of(_wait_for_url(browser, second_uri))["code"]
    tokens = _exchange(live_server, second_id, second_secret, second_uri, code)
    assert tokens.status_code == 200

    # Consent remembered for both: straight back with a code.
    browser.get(live_server.url + authorize_query(tenant))
    assert query_of(_wait_for_url(browser, first_uri)).get("code")
