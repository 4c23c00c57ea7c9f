"""`/docs` renders in a real headless Chromium with every address but loopback unreachable."""

from __future__ import annotations

import os
import re
import threading

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from werkzeug.serving import make_server

CHROMIUM = os.environ.get("CHROMIUM_BINARY", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")


@pytest.fixture
def served(app, real_worker):
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="docs-server", daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(timeout=10)


@pytest.fixture
def offline_browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless", "--no-sandbox", "--disable-background-networking", "--disable-dev-shm-usage",
        "--disable-gpu", "--window-size=1280,900",
        # No network but loopback: every other host name fails to resolve, and any request that
        # would still leave goes to a proxy that is not there.
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        "--proxy-server=http://127.0.0.1:9",
    ):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.mark.browser
def test_docs_show_the_operation_list_with_the_network_blocked(served, offline_browser):
    offline_browser.get(f"{served}/docs")
    WebDriverWait(offline_browser, 30).until(
        lambda driver: driver.find_elements(By.CSS_SELECTOR, ".opblock .opblock-summary-path")
    )
    paths = {
        element.text.replace("\u200b", "")
        for element in offline_browser.find_elements(By.CSS_SELECTOR, ".opblock .opblock-summary-path")
    }
    assert "/v1/jobs/canary" in paths
    assert "/v1/sub_client" in paths


def test_docs_page_names_no_other_host(client):
    page = client.get("/docs").get_data(as_text=True)
    assert re.findall(r"""(?:src|href)=["']([^"']+)""", page) == [
        "/docs/assets/swagger-ui.css",
        "/docs/assets/swagger-ui-standalone-preset.js",
        "/docs/assets/swagger-ui-bundle.js",
    ]
    for asset in ("swagger-ui.css", "swagger-ui-standalone-preset.js", "swagger-ui-bundle.js"):
        response = client.get(f"/docs/assets/{asset}")
        assert response.status_code == 200 and len(response.data) > 1000
    assert client.get("/docs/assets/../../../pyproject.toml").status_code == 404
