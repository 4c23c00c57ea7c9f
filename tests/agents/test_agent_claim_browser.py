"""The claim page in a real headless Chromium: claim a key, then use it."""

from __future__ import annotations

import shutil

import pytest

from app.agents.ethereum import address_from_private_key
from app.client.library import TesseraClient

pytestmark = pytest.mark.browser


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ("--headless", "--no-sandbox", "--disable-background-networking", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    driver = webdriver.Chrome(
        service=Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options
    )
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def test_claim_page_issues_a_working_key_with_credits(browser, live_server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(f"{live_server.url}/claim")
    assert "Claim a testnet agent key" in browser.title
    Select(browser.find_element(By.ID, "kind")).select_by_value("agent")
    browser.find_element(By.ID, "claim").click()
    WebDriverWait(browser, 15).until(expected_conditions.presence_of_element_located((By.ID, "agent-key")))

    key = browser.find_element(By.ID, "agent-key").text
    address = browser.find_element(By.ID, "agent-address").text
    assert address == address_from_private_key(key)
    assert browser.find_element(By.ID, "agent-credits").text == "1000"

    with TesseraClient(live_server.url, api_key=key) as client:
        account = client.whoami()
    assert account["address"] == address and account["balance"] == 1000

    browser.get(f"{live_server.url}/claim")
    assert key not in browser.page_source, "the key is shown once, never again"


def test_claim_page_sends_protective_headers(live_server):
    with live_server.http() as http:
        page = http.get("/claim")
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["Cache-Control"] == "no-store"
    assert "<script" not in page.text
