"""Screenshots of the agent network's pages (claim, key shown once, expired form, consent link)."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from app.client.library import TesseraClient
from tests.support.agents import claim_key_over_http
from tests.support.browser import page_left
from tests.support.screenshots import shoot_everywhere

pytestmark = pytest.mark.browser


def _wait_for(driver, element_id: str):
    return WebDriverWait(driver, 15).until(expected_conditions.presence_of_element_located((By.ID, element_id)))


def _claim(driver, url: str, *, forget_form: bool = False) -> None:
    driver.get(f"{url}/claim")
    _wait_for(driver, "claim")
    if forget_form:
        driver.delete_all_cookies()
    page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.ID, "claim").click()
    WebDriverWait(driver, 15).until(page_left(page))
    _wait_for(driver, "message")


def test_agent_pages_in_every_view(live_server, agent_client, chromium):
    url = live_server.url

    def claim_page() -> None:
        chromium.get(f"{url}/claim")
        _wait_for(chromium, "claim")

    def key_page() -> None:
        _claim(chromium, url)
        key = chromium.find_element(By.ID, "agent-key").text
        copy = chromium.find_element(By.ID, "copy-key")
        assert copy.is_displayed(), "the copy button shows where the clipboard API works"
        copy.click()
        WebDriverWait(chromium, 5).until(lambda driver: copy.text in {"Copied", "Select and copy"})
        assert key.startswith("0x") and len(key) == 66

    def expired_form_page() -> None:
        _claim(chromium, url, forget_form=True)
        assert "error" in chromium.find_element(By.ID, "message").get_attribute("class")

    with TesseraClient(url, api_key=claim_key_over_http(live_server, kind="organisation")) as org:
        org.authenticate()
        consent_url = org.consent_request(org.did, agent_client.did)["consent_url"]

    def consent_link_page() -> None:
        chromium.get(consent_url)
        _wait_for(chromium, "consent-owner")

    shots = shoot_everywhere(chromium, "agents-claim", claim_page)
    shots += shoot_everywhere(chromium, "agents-key", key_page)
    shots += shoot_everywhere(chromium, "agents-claim-expired", expired_form_page)
    shots += shoot_everywhere(chromium, "agents-consent-link", consent_link_page)
    assert len(shots) == 16
