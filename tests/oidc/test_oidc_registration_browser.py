"""In a real headless Chromium: an application registers itself (RFC 7591), sends the user with a
signed request object (RFC 9101) asking for claims one by one (`claims`), the consent page lists
them, and the tokens carry what the user allowed."""

from __future__ import annotations

import base64
import json
import time
from urllib.parse import urlencode

import pytest
import requests
from joserfc import jwt
from joserfc.jwk import ECKey
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import headless_chromium, page_left
from tests.support.oidc import latest_code_over_http, make_tenant, query_of

pytestmark = pytest.mark.browser


@pytest.fixture
def browser():
    driver = headless_chromium()
    yield driver
    driver.quit()


def _wait_for(driver, element_id: str):
    return WebDriverWait(driver, 15).until(expected_conditions.presence_of_element_located((By.ID, element_id)))


def _click_and_wait_for_next_page(driver, element_id: str) -> None:
    page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.ID, element_id).click()
    WebDriverWait(driver, 15).until(page_left(page))


def _payload(token: str) -> dict:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def test_a_registered_application_asks_for_claims_in_a_request_object(
    app, client, live_server, callback_server, browser
):
    tenant = make_tenant(app, client, name="Registrar University")
    initial = client.post("/v1/openidc/initial_access_tokens", json={}, headers=tenant.headers)
    key = ECKey.generate_key("P-256", private=True)
    redirect_uri = callback_server.url + "/registered"
    registered = requests.post(
        live_server.url + "/v1/openidc/register",
        timeout=10,
        headers={"Authorization": f"Bearer {initial.get_json()['data']['token']}"},
        json={
            "client_name": "Self-registered App",
            "application_type": "native",
            "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": "client_secret_post",
            "jwks": {"keys": [{**key.as_dict(private=False), "kid": "app-1"}]},
            "require_signed_request_object": True,
        },
    )
    assert registered.status_code == 201, registered.text
    app_client = registered.json()

    now = int(time.time())
    asked = {"id_token": {"email": {"essential": True}}, "userinfo": {"given_name": None}}
    request_object = jwt.encode(
        {"alg": "ES256", "kid": "app-1"},
        {
            "iss": app_client["client_id"],
            "aud": live_server.url,
            "iat": now,
            "exp": now + 300,
            "client_id": app_client["client_id"],
            "response_type": "code",
            "redirect_uri": redirect_uri,
            "scope": "openid",
            "state": "browser-jar",
            "claims": asked,
        },  # fmt: skip
        key,
        algorithms=["ES256"],
    )
    query = urlencode({"client_id": app_client["client_id"], "response_type": "code", "request": request_object})
    browser.get(f"{live_server.url}/v1/openidc/authorize?{query}")
    assert "Self-registered App" in _wait_for(browser, "client-name").text

    field = _wait_for(browser, "email")
    field.send_keys(tenant.email)
    _click_and_wait_for_next_page(browser, "send-code")
    _wait_for(browser, "code").send_keys(latest_code_over_http(requests.Session(), live_server.url, tenant.email))
    _click_and_wait_for_next_page(browser, "verify-code")
    _wait_for(browser, "consent-form")
    listed = {
        item.get_attribute("data-scope"): item.text for item in browser.find_elements(By.CSS_SELECTOR, "#scopes > li")
    }
    assert "claim:email" in listed and "required by the application" in listed["claim:email"]
    assert "claim:given_name" in listed
    browser.find_element(By.ID, "allow").click()
    WebDriverWait(browser, 15).until(lambda current: current.current_url.startswith(redirect_uri))
    answer = query_of(browser.current_url)
    assert answer["state"] == "browser-jar"

    tokens = requests.post(
        live_server.url + "/v1/openidc/token",
        timeout=10,
        data={
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": redirect_uri,
            "client_id": app_client["client_id"],
            "client_secret": app_client["client_secret"],
        },  # fmt: skip
    )
    assert tokens.status_code == 200, tokens.text
    assert _payload(tokens.json()["id_token"])["email"] == tenant.email
    info = requests.get(
        live_server.url + "/v1/openidc/user",
        timeout=10,
        headers={"Authorization": f"Bearer {tokens.json()['access_token']}"},
    )
    assert info.json()["given_name"] == "Ada" and "email" not in info.json()
