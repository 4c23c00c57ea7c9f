"""The device page in a real headless Chromium: the user types the code a device shows (as a person
would, in lower case with a space), signs in on the hosted pages and allows; the device's polls then
get its tokens."""

from __future__ import annotations

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import page_left
from tests.support.config import set_settings
from tests.support.oidc import latest_code_over_http, make_tenant

pytestmark = pytest.mark.browser

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def _wait_for(driver, element_id: str):
    return WebDriverWait(driver, 15).until(expected_conditions.presence_of_element_located((By.ID, element_id)))


def _type_and_submit(driver, field_id: str, text: str, button_id: str) -> None:
    field = _wait_for(driver, field_id)
    field.clear()
    field.send_keys(text)
    page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.ID, button_id).click()
    WebDriverWait(driver, 15).until(page_left(page))


@pytest.fixture
def generous_user_code_limit(live_server):
    """Every test enters user codes from 127.0.0.1; the limit is tested on its own."""
    set_settings(live_server.app, OIDC_DEVICE_USER_CODE_ATTEMPTS=100000)
    yield
    set_settings(live_server.app, OIDC_DEVICE_USER_CODE_ATTEMPTS=10)


def test_a_device_is_connected_from_a_real_browser(app, client, live_server, chromium, generous_user_code_limit):
    tenant = make_tenant(app, client, name="Living Room TV")
    enabled = client.put(
        f"/v1/sub_client/{tenant.client_id}", headers=tenant.headers, json={"grant_types": [DEVICE_GRANT]}
    )
    assert enabled.status_code == 200
    auth = (str(tenant.client_id), tenant.client_secret)
    started = requests.post(
        live_server.url + "/v1/openidc/device_authorization", data={"scope": "openid email"}, auth=auth, timeout=10
    ).json()

    chromium.get(started["verification_uri"])
    assert _wait_for(chromium, "user_code").get_attribute("value") == ""
    _type_and_submit(chromium, "user_code", started["user_code"].lower().replace("-", " "), "continue")
    _type_and_submit(chromium, "email", tenant.email, "send-code")
    code = latest_code_over_http(requests.Session(), live_server.url, tenant.email)
    _type_and_submit(chromium, "code", code, "verify-code")
    assert "Allowing connects the device" in _wait_for(chromium, "device-notice").text
    assert "Living Room TV" in chromium.find_element(By.ID, "client-name").text
    page = chromium.find_element(By.TAG_NAME, "html")
    chromium.find_element(By.ID, "allow").click()
    WebDriverWait(chromium, 15).until(page_left(page))
    assert "return to your device" in _wait_for(chromium, "message").text

    polled = requests.post(
        live_server.url + "/v1/openidc/token",
        data={"grant_type": DEVICE_GRANT, "device_code": started["device_code"]},
        auth=auth,
        timeout=10,
    )
    assert polled.status_code == 200, polled.text
    assert polled.json()["scope"] == "openid email" and polled.json()["id_token"]
