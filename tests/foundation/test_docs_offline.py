"""`/docs` renders in a real headless Chromium with every address but loopback unreachable, and at a
phone's width; the site's icon is served by the service itself."""

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
        "/static/docs.css",
        "/docs/assets/swagger-ui-standalone-preset.js",
        "/docs/assets/swagger-ui-bundle.js",
    ]
    for asset in ("swagger-ui.css", "swagger-ui-standalone-preset.js", "swagger-ui-bundle.js"):
        response = client.get(f"/docs/assets/{asset}")
        assert response.status_code == 200 and len(response.data) > 1000
    assert client.get("/docs/assets/../../../pyproject.toml").status_code == 404


@pytest.fixture
def phone_browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless", "--no-sandbox", "--disable-background-networking", "--disable-dev-shm-usage",
                     "--disable-gpu"):  # fmt: skip
        options.add_argument(argument)
    options.add_experimental_option(
        "mobileEmulation", {"deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 3}}
    )
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.mark.browser
def test_docs_fit_a_phones_width(served, phone_browser):
    phone_browser.get(f"{served}/docs")
    WebDriverWait(phone_browser, 30).until(
        lambda driver: driver.find_elements(By.CSS_SELECTOR, ".opblock .opblock-summary-path")
    )
    # The page lays itself out for the phone's 390 CSS pixels (not a zoomed-out desktop page) and
    # nothing is wider than the screen.
    assert phone_browser.execute_script("return window.innerWidth") == 390
    assert phone_browser.execute_script("return document.documentElement.scrollWidth") <= 390
    # An operation's path reads on one line, not a column a few letters wide.
    path = phone_browser.find_element(By.CSS_SELECTOR, ".opblock .opblock-summary-path")
    height, line = phone_browser.execute_script(
        "const e = arguments[0], s = getComputedStyle(e);"
        "return [e.getBoundingClientRect().height, parseFloat(s.lineHeight) || 1.2 * parseFloat(s.fontSize)];",
        path,
    )
    assert height < 1.5 * line, (path.text, height, line)


def test_the_site_icon_is_served(client):
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.mimetype == "image/vnd.microsoft.icon"
    assert icon.data[:4] == b"\x00\x00\x01\x00" and b"PNG" in icon.data[:64]  # an ICO holding a PNG image
    assert "max-age=" in icon.headers["Cache-Control"]
